package manager

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// The package's cluster starts without the machine CRDs: the test that
// needs them installs them itself.
func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

func testLogger(t *testing.T) Options {
	return Options{Logger: funcr.New(func(prefix, args string) { t.Log(prefix, args) }, funcr.Options{})}
}

// runManager runs m until the test ends and reports how Run returned.
func runManager(t *testing.T, m *Manager) (cancel func() error) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var result error
	stopped := false
	cancel = func() error {
		if !stopped {
			stopped = true
			stop()
			select {
			case result = <-done:
			case <-time.After(5 * time.Second):
				result = fmt.Errorf("Run did not return within 5s of cancellation")
			}
		}
		return result
	}
	t.Cleanup(func() { _ = cancel() })
	return cancel
}

func waitReady(t *testing.T, m *Manager, timeout time.Duration, want bool, contains string) {
	t.Helper()
	testenv.Eventually(t, timeout, func(context.Context) (bool, string) {
		ready, why := m.state.readiness()
		return ready == want && strings.Contains(why, contains), fmt.Sprintf("Ready() = %v, %q; want %v and %q", ready, why, want, contains)
	})
}

// An unreachable API server is waited for, with the reason in /readyz,
// and a shutdown while waiting is clean.
func TestWaitsForUnreachableAPIServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://%s"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ControlKubeconfig, cfg.TargetKubeconfig, cfg.Driver, cfg.Port = kc, NoTarget, "sim", 0
	m, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	stop := runManager(t, m)
	waitReady(t, m, 10*time.Second, false, "starting: control API server http://"+addr+" is not ready")

	rec := httpGet(t, m.handler(), "/readyz")
	if rec.code != http.StatusServiceUnavailable || !strings.Contains(rec.body, "is not ready") {
		t.Errorf("/readyz = %d %q, want 503 naming the API server", rec.code, rec.body)
	}
	if rec := httpGet(t, m.handler(), "/healthz"); rec.code != http.StatusOK {
		t.Errorf("/healthz = %d %q, want 200 while waiting", rec.code, rec.body)
	}
	if err := stop(); err != nil {
		t.Errorf("Run = %v, want nil after a shutdown while waiting", err)
	}
}

// Without the machine CRDs the manager waits, says so, and starts once
// they are installed.
func TestWaitsForCRDs(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	cfg := DefaultConfig()
	cfg.ControlKubeconfig, cfg.TargetKubeconfig, cfg.Driver, cfg.Port = env.Kubeconfig(), NoTarget, "sim", 0
	cfg.Namespace, cfg.LeaderElect = ns, false
	m, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	stop := runManager(t, m)
	waitReady(t, m, 30*time.Second, false, "install the machine CRDs")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := crds.Install(ctx, env.Config()); err != nil {
		t.Fatal(err)
	}
	waitReady(t, m, 30*time.Second, true, "running without leader election; caches synced")
	rec := httpGet(t, m.handler(), "/metrics")
	for _, metric := range []string{"mcm_manager_leader 1", "mcm_workqueue_depth", "go_goroutines", "process_start_time_seconds"} {
		if !strings.Contains(rec.body, metric) {
			t.Errorf("/metrics lacks %s", metric)
		}
	}
	start := time.Now()
	if err := stop(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	t.Logf("stopped in %v", time.Since(start))
}

type response struct {
	code int
	body string
}

func httpGet(t *testing.T, h http.Handler, path string) response {
	t.Helper()
	srv := &http.Server{Handler: h}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, string(body)}
}
