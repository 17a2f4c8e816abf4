package drain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/driver/sim"
)

// retryAfterProxy stands in front of the API server and answers every
// eviction as kube-apiserver does while a PodDisruptionBudget's status is
// not computed yet: 429 with Retry-After 10 and the DisruptionBudget cause.
// Everything else goes through to the API server.
type retryAfterProxy struct {
	mu        sync.Mutex
	evictions map[string]int // by pod name
}

func (p *retryAfterProxy) count(pod string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.evictions[pod]
}

// start serves the proxy and returns a config for a client that talks
// through it.
func (p *retryAfterProxy) start(t *testing.T, cfg *rest.Config) *rest.Config {
	t.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg) // the API server's TLS and the admin's credentials
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/") // api v1 namespaces <ns> pods <name> eviction
		if r.Method != http.MethodPost || len(parts) != 7 || parts[4] != "pods" || parts[6] != "eviction" {
			rp.ServeHTTP(w, r)
			return
		}
		p.mu.Lock()
		p.evictions[parts[5]]++
		p.mu.Unlock()
		status := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10).ErrStatus
		status.Details.Causes = append(status.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause,
			Message: fmt.Sprintf("The disruption budget %s is still being processed by the server.", parts[5])})
		status.Kind, status.APIVersion = "Status", "v1"
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "10")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(status)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL, QPS: -1}
}

// TestIntegrationEvictionRetryAfterBlocksAtOnce: an eviction answered 429
// with Retry-After is this pass's answer: the pass returns with the pod
// blocked after one request per pod, and the drain's backoff (which
// follows the server's hint) says when to ask again. client-go would
// otherwise retry inside the call, ten times ten seconds, while the pass
// and its worker wait.
func TestIntegrationEvictionRetryAfterBlocksAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, sim.KubeletOptions{})
	node := f.node(t, "retry")
	f.deployment(t, "retry", node, 2)
	f.waitRunning(t, "app=retry", 2)
	f.pdb(t, "retry", policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}, 2)

	proxy := &retryAfterProxy{evictions: map[string]int{}}
	client, err := kubernetes.NewForConfig(proxy.start(t, f.env.Config()))
	if err != nil {
		t.Fatal(err)
	}
	drainer, err := drain.New(client, drain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A bound on the test, not a speed: client-go's first retry comes
	// after the 10 s the server asks for, and a pass that waits for it
	// has waited inside the call.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := drainer.Pass(ctx, node, drain.State{})
	if err != nil {
		t.Fatalf("pass: %v", err)
	}
	var blocked []string
	for _, dec := range res.Decisions {
		if n := proxy.count(dec.Pod.Name); n > 1 {
			t.Errorf("pod %s: %d eviction requests in one pass, want 1 (a retry inside the call)", dec.Pod.Name, n)
		}
		if dec.Action != drain.ActionBlocked {
			continue
		}
		blocked = append(blocked, dec.Pod.Name)
		if dec.Cause != drain.CauseDisruptionBudget {
			t.Errorf("pod %s blocked with cause %q, want %q", dec.Pod.Name, dec.Cause, drain.CauseDisruptionBudget)
		}
		// The server's Retry-After is the budget's backoff now.
		if proxy.count(dec.Pod.Name) == 1 && dec.RetryAt.Before(res.Now.Add(10*time.Second)) {
			t.Errorf("pod %s, refused, retried at %v, before the 10 s the server asked for after %v", dec.Pod.Name, dec.RetryAt, res.Now)
		}
	}
	// The budget allows one disruption: one eviction is sent, and its
	// refusal stands for both pods.
	if len(blocked) != 2 || res.Done {
		t.Fatalf("pods %v blocked after the 429, want both (done %v): %+v", blocked, res.Done, res.Decisions)
	}
	if got := res.State.BlockingBudgets(); len(got) != 1 {
		t.Errorf("blocking budgets %v, want the one budget", got)
	}
	pods, err := f.client.CoreV1().Pods(f.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=retry"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s touched although every eviction was refused", p.Name)
		}
	}
}
