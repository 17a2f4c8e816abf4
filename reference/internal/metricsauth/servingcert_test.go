package metricsauth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// writeCertPair writes a new self-signed certificate and its key as PEM
// files in dir, stamped with modification time mtime (file systems stamp
// writes in quick succession alike), and returns the certificate.
func writeCertPair(t *testing.T, certFile, keyFile string, mtime time.Time) *x509.Certificate {
	t.Helper()
	cert, err := selfSignedCertificate("", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path, kind string
		der        []byte
	}{{certFile, "CERTIFICATE", cert.Certificate[0]}, {keyFile, "PRIVATE KEY", key}} {
		if f.path == "" {
			continue
		}
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f.path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	return cert.Leaf
}

// serveTLS serves "ok" over TLS with cfg on loopback and returns the
// address.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }),
		ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// servedCert connects to addr, trusting nothing, and returns the
// certificate the server presents and the protocol it agreed to.
func servedCert(t *testing.T, addr string) (*x509.Certificate, string) {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) //nolint:gosec // looking at what is served
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	state := conn.ConnectionState()
	return state.PeerCertificates[0], state.NegotiatedProtocol
}

// Without files, a certificate is generated: a client that trusts it (as
// one pinning it would) verifies it for localhost, the loopback address
// and the given address, and only HTTP/1.1 is offered.
func TestServingTLSSelfSigned(t *testing.T) {
	cfg, about, err := TLSConfig("", "", "10.1.2.3", clock.RealClock{}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, cfg)
	cert, proto := servedCert(t, addr)
	if proto != "http/1.1" {
		t.Errorf("negotiated %q, want http/1.1", proto)
	}
	if diff := cmp.Diff([]any{"certificate", "self-signed", "sha256", fingerprint(cert)}, about); diff != "" {
		t.Errorf("logged (-want +got):\n%s", diff)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	for _, name := range []string{"localhost", "127.0.0.1", "10.1.2.3"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
			t.Errorf("verifying for %s: %v", name, err)
		}
	}
	client := http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "localhost"}}}
	resp, err := client.Get("https://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if body, _ := io.ReadAll(resp.Body); string(body) != "ok" {
		t.Errorf("body %q", body)
	}
	// Each start has a certificate of its own.
	other, err := selfSignedCertificate("", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if fingerprint(other.Leaf) == fingerprint(cert) {
		t.Error("two generated certificates are the same")
	}
}

// Given files are served, and a renewal is picked up at the first
// handshake after certCheckPeriod; a pair caught half-written keeps the
// previous certificate in service until the files change again.
func TestServingTLSFilesRenewed(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	stamp := time.Now().Add(-time.Hour)
	first := writeCertPair(t, certFile, keyFile, stamp)
	clk := clocktesting.NewFakeClock(time.Now())
	cfg, _, err := TLSConfig(certFile, keyFile, "", clk, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, cfg)
	wantServed := func(want *x509.Certificate, when string) {
		t.Helper()
		if got, _ := servedCert(t, addr); fingerprint(got) != fingerprint(want) {
			t.Errorf("%s: served %s, want %s", when, fingerprint(got), fingerprint(want))
		}
	}
	wantServed(first, "at start")

	second := writeCertPair(t, certFile, keyFile, stamp.Add(time.Minute))
	clk.Step(certCheckPeriod - time.Second)
	wantServed(first, "before the files are looked at again")
	clk.Step(time.Second)
	wantServed(second, "after a renewal")

	// A new certificate whose key is not written yet: the pair does not
	// match, the previous one stays.
	writeCertPair(t, certFile, "", stamp.Add(2*time.Minute))
	clk.Step(certCheckPeriod)
	wantServed(second, "with a mismatched pair")
	clk.Step(certCheckPeriod)
	wantServed(second, "with the same mismatched pair")
	// The key arrives: the pair loads.
	third := writeCertPair(t, certFile, keyFile, stamp.Add(3*time.Minute))
	clk.Step(certCheckPeriod)
	wantServed(third, "once the pair is whole")

	// Files gone: the loaded certificate is still served.
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	clk.Step(certCheckPeriod)
	wantServed(third, "with the key file gone")
}

func TestServingTLSFilesRefused(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeCertPair(t, certFile, "", time.Now())
	writeCertPair(t, "", keyFile, time.Now())
	_, _, err := TLSConfig(certFile, keyFile, "", clock.RealClock{}, logr.Discard())
	if want := "--metrics-cert-file and --metrics-key-file: tls: private key does not match public key"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}
