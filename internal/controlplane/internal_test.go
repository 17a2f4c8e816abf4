package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPKIServesLoopback checks that the generated serving certificate
// verifies against the generated CA for the addresses clients use.
func TestPKIServesLoopback(t *testing.T) {
	p, err := newPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(p.servingCert, p.servingKey)
	if err != nil {
		t.Fatalf("serving key pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(p.caPEM) {
		t.Fatal("CA PEM does not parse")
	}
	for _, host := range []string{"127.0.0.1", "localhost", "kubernetes.default.svc"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host}); err != nil {
			t.Errorf("serving certificate does not verify for %s: %v", host, err)
		}
	}
	for _, f := range []string{p.saKey, p.saPub, p.caKey} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if block, _ := pem.Decode(data); block == nil {
			t.Errorf("%s is not PEM", filepath.Base(f))
		}
	}
}

func TestTailSince(t *testing.T) {
	dir := t.TempDir()
	p := &process{name: "x", logPath: filepath.Join(dir, "x.log")}
	if err := os.WriteFile(p.logPath, []byte("before\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mark := p.logSize()
	f, err := os.OpenFile(p.logPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"one", "two", "three"} {
		_, _ = f.WriteString(l + "\n")
	}
	_ = f.Close()

	tests := []struct {
		name     string
		offset   int64
		maxLines int
		want     string
	}{
		{"since mark", mark, 10, "one\ntwo\nthree"},
		{"since mark, capped", mark, 2, "two\nthree"},
		{"whole log", 0, 10, "before\none\ntwo\nthree"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, p.tailSince(tc.offset, tc.maxLines)); diff != "" {
				t.Errorf("tail (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFreePortsDistinct(t *testing.T) {
	ports, err := freePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] || p <= 0 {
			t.Fatalf("ports not distinct and positive: %v", ports)
		}
		seen[p] = true
	}
}

// TestLostPort: a component that ended saying its address is in use lost
// its port to another process, and the cluster is started again; one that
// ended for another reason, or still runs, did not.
func TestLostPort(t *testing.T) {
	dir := t.TempDir()
	component := func(name, log string, ended bool) *process {
		p := &process{name: name, logPath: filepath.Join(dir, name+".log"), done: make(chan struct{})}
		if err := os.WriteFile(p.logPath, []byte(log), 0o600); err != nil {
			t.Fatal(err)
		}
		if ended {
			close(p.done)
		}
		return p
	}
	bind := `E1126 run.go:72] "command failed" err="failed to create listener: listen tcp 127.0.0.1:43467: bind: address already in use"`
	tests := []struct {
		name  string
		procs []*process
		want  bool
	}{
		{"none", nil, false},
		{"running", []*process{component("etcd", "serving", false)}, false},
		{"ended for another reason", []*process{component("kube-apiserver", "flag provided but not defined", true)}, false},
		{"still running, with the message in its log", []*process{component("kube-scheduler", bind, false)}, false},
		{"lost its port", []*process{component("etcd", "serving", false), component("kube-controller-manager", bind, true)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g processGroup
			for _, p := range tt.procs {
				g.add(p)
			}
			if got := g.lostPort(); got != tt.want {
				t.Errorf("lostPort() = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestBinDirNamesMissingBinary(t *testing.T) {
	t.Setenv(envDir, t.TempDir())
	_, missing := binDir()
	if !strings.Contains(missing, "etcd not found") {
		t.Fatalf("binDir() missing = %q, want it to name etcd", missing)
	}
}
