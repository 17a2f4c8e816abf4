package listwatch

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
)

func TestCollectionOf(t *testing.T) {
	tests := []struct {
		method, path, want string
	}{
		{"GET", "/apis/machine.sapcloud.io/v1alpha1/namespaces/shoot/machines", "machines"},
		{"GET", "/apis/machine.sapcloud.io/v1alpha1/machines", "machines"},
		{"GET", "/apis/machine.sapcloud.io/v1alpha1/namespaces/shoot/machines/m1", ""},
		{"GET", "/apis/machine.sapcloud.io/v1alpha1/namespaces/shoot/machines/m1/status", ""},
		{"PATCH", "/apis/machine.sapcloud.io/v1alpha1/namespaces/shoot/machines/m1", ""},
		{"POST", "/api/v1/namespaces/shoot/events", ""},
		{"GET", "/api/v1/nodes", "nodes"},
		{"GET", "/api/v1/nodes/n1", ""},
		{"GET", "/api/v1/namespaces/shoot/secrets", "secrets"},
		{"GET", "/api/v1/namespaces", "namespaces"},
		{"GET", "/api/v1/namespaces/shoot", ""},
		{"GET", "/apis/machine.sapcloud.io/v1alpha1", ""},
		{"GET", "/readyz", ""},
	}
	for _, tc := range tests {
		req := &http.Request{Method: tc.method, URL: &url.URL{Path: tc.path}}
		if got := collectionOf(req); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestHealth(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	h := NewHealth()
	h.now = func() time.Time { return now }

	h.observe("machines (control)", nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"))
	now = now.Add(10 * time.Second)
	h.observe("machines (control)", nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"))
	h.observe("nodes (target)", &http.Response{StatusCode: 403, Status: "403 Forbidden"}, nil)
	h.observe("pods (target)", &http.Response{StatusCode: 410, Status: "410 Gone"}, nil)
	h.observe("secrets (control)", &http.Response{StatusCode: 429, Status: "429 Too Many Requests"}, nil)
	want := []string{
		"machines (control): dial tcp 127.0.0.1:6443: connect: connection refused since 12:00:00",
		"nodes (target): 403 Forbidden since 12:00:10",
	}
	if diff := cmp.Diff(want, h.Failures()); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}

	// A success clears its resource; a failure not repeated for long is
	// forgotten.
	h.observe("machines (control)", &http.Response{StatusCode: 200}, nil)
	now = now.Add(failureMemory + time.Second)
	if got := h.Failures(); len(got) != 0 {
		t.Errorf("failures %v, want none", got)
	}
}

// TestRetriedWhileRefused: a list whose connection is refused is
// tried again until the server answers, instead of failing to the informer
// (whose backoff would grow to 30s), and /readyz hears of it meanwhile.
func TestRetriedWhileRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // refused until the server below starts

	h := NewHealth()
	cfg := Transport(&rest.Config{Host: "http://" + addr}, h, "control")
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		resp, err := client.Get("http://" + addr + "/api/v1/nodes")
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(h.Failures()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the refused list was not recorded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := h.Failures()[0]; !strings.HasPrefix(got, "nodes (control): ") || !strings.Contains(got, "connection refused") {
		t.Errorf("failure %q", got)
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	select {
	case code := <-done:
		if code != http.StatusOK {
			t.Fatalf("the list ended with %d, want it retried until the server answered 200", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the list was not retried once the server was up")
	}
	if got := h.Failures(); len(got) != 0 {
		t.Errorf("failures %v after the list succeeded", got)
	}
}
