package machineset

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/internal/testsupport/fakeapi"
)

// TestLowerCancelsOnlyUnsent: lowering a run cancels its waiting
// creations past the new limit that were not sent, and lets those that
// may have been sent, and those below the limit, finish; creations not
// handed out yet are refused.
func TestLowerCancelsOnlyUnsent(t *testing.T) {
	run := newCreationRun(testSet(10), 0, 10)
	release := make(chan struct{})
	var waiting sync.WaitGroup
	waiting.Add(6)
	// Calls 0-5 wait: 0 and 4 after their request left, the others
	// before (in a rate limiter, say).
	create := func(ctx context.Context) error {
		if sent := ctx.Value(sentKey{}); sent != nil {
			httptrace.ContextClientTrace(ctx).GetConn("api:443")
		}
		waiting.Done()
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	outcomes := make([]creationOutcome, 6)
	errs := make([]error, 6)
	var done sync.WaitGroup
	for i := range 6 {
		ctx := context.Background()
		if i == 0 || i == 4 {
			ctx = context.WithValue(ctx, sentKey{}, true)
		}
		// Handed out in order: call i is the run's i-th.
		for run.remaining() != 10-i {
			time.Sleep(time.Millisecond)
		}
		done.Go(func() { outcomes[i], errs[i] = run.do(ctx, create) })
		for run.remaining() != 10-i-1 {
			time.Sleep(time.Millisecond)
		}
	}
	waiting.Wait()
	run.lower(2)
	close(release)
	done.Wait()
	want := []creationOutcome{outcomeCreated, outcomeCreated, outcomeNotSent, outcomeNotSent, outcomeCreated, outcomeNotSent}
	if diff := cmp.Diff(want, outcomes); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s\nerrors: %v", diff, errs)
	}
	if run.remaining() != 0 {
		t.Errorf("%d creations may still be handed out, want 0", run.remaining())
	}
	if o, _ := run.do(context.Background(), create); o != outcomeNotSent {
		t.Errorf("a creation handed out past the limit: %v", o)
	}
	// The limit only goes down.
	run.lower(8)
	if run.remaining() != 0 {
		t.Errorf("raising the limit let %d more creations go", run.remaining())
	}
}

type sentKey struct{}

// TestScaleDownCancelsCreationsNotSent: a set scaled to 0 while one sync's
// creations wait for the client's rate limiter sends none of them; the
// one request in flight finishes, and the expectations wait for exactly
// that one machine.
func TestScaleDownCancelsCreationsNotSent(t *testing.T) {
	const planned = 20
	var creates atomic.Int32
	first, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/machines") {
			http.Error(w, "only creations expected", http.StatusBadRequest)
			return
		}
		var m v1alpha1.Machine
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		n := creates.Add(1)
		if n == 1 {
			close(first)
			<-release
		}
		m.Name, m.UID = fmt.Sprintf("%s%d", m.GenerateName, n), types.UID(fmt.Sprintf("uid-%d", n))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&m)
	}))
	t.Cleanup(srv.Close)
	// One request at once, the next long after the test: the others wait
	// in the rate limiter.
	client, err := versioned.NewForConfig(&rest.Config{Host: srv.URL, QPS: 0.001, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	set := testSet(planned)
	informed := fake.NewSimpleClientset(set)
	f := externalversions.NewSharedInformerFactory(informed, 0)
	rec := &fakeapi.Events{}
	c, err := NewController(client, Informers{MachineSets: f.Machine().V1alpha1().MachineSets(), Machines: f.Machine().V1alpha1().Machines()},
		Options{SlowStartInitialBatch: planned, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); f.Shutdown() })
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.handlers.Synced()...) {
		t.Fatal("caches did not sync")
	}

	go func() {
		<-first
		scaled := set.DeepCopy()
		scaled.Spec.Replicas = 0
		if _, err := informed.MachineV1alpha1().MachineSets("ns").Update(context.Background(), scaled, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
		// The first request is answered once the scale-down reached the
		// run, so that its answer cannot open the way for another.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if run := c.creating.get("ns/pool"); run == nil || run.remaining() == 0 {
				break
			}
		}
		close(release)
	}()
	// Without the cancellation the waiting creations would wait for
	// hours: a timer ends them, and the test fails. (A deadline would
	// end them at once: the rate limiter refuses a wait it cannot finish
	// before it.)
	applyCtx, stop := context.WithCancel(ctx)
	defer time.AfterFunc(20*time.Second, stop).Stop()
	done := c.applyReplicas(applyCtx, "ns/pool", set, replicaPlan{Create: planned})
	if n := creates.Load(); n != 1 || done.Created != 1 {
		t.Errorf("%d creation requests reached the API server, %d created; want the 1 in flight", n, done.Created)
	}
	if done.CreateFailure != "" {
		t.Errorf("canceled creations reported as a failure: %s", done.CreateFailure)
	}
	if c.exp.Satisfied("ns/pool") {
		t.Error("the created machine is not expected")
	}
	c.exp.CreationObserved("ns/pool")
	if !c.exp.Satisfied("ns/pool") {
		t.Error("canceled creations are still expected")
	}
	if n := rec.Count(ReasonCreateCanceled); n != 1 {
		t.Errorf("%d %s events, want 1", n, ReasonCreateCanceled)
	}
	if c.creating.get("ns/pool") != nil {
		t.Error("the run is still registered")
	}
}

// TestReplicasAboveTheCeiling: a set asking for 2147483647 machines keeps
// the ceiling's, says so in a condition and in one Warning event, and
// loses both once its replicas are within the ceiling.
func TestReplicasAboveTheCeiling(t *testing.T) {
	rec := &fakeapi.Events{}
	h := newHarness(t, Options{MaxReplicas: 3, Recorder: rec}, testSet(math.MaxInt32))
	// One sync creates the 3 (slow start 1, 2); the next ones, once the
	// cache shows its status and machines, must create nothing and tell
	// nothing again. (The fake API server has no resourceVersions, so a
	// sync would not wait for the cache by itself.)
	if _, err := h.c.Reconcile(context.Background(), "ns/pool"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		cached, _ := h.c.sets.MachineSets("ns").Get("pool")
		machines, _ := h.c.machines.Machines("ns").List(everything)
		if conditionOf(&cached.Status, ConditionReplicasCapped) != nil && len(machines) == 3 && h.c.exp.Satisfied("ns/pool") {
			break
		}
	}
	for range 3 {
		if _, err := h.c.Reconcile(context.Background(), "ns/pool"); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.creates.Load(); n != 3 {
		t.Errorf("%d machines created, want the ceiling's 3", n)
	}
	got, _ := h.client.MachineV1alpha1().MachineSets("ns").Get(context.Background(), "pool", metav1.GetOptions{})
	want := "spec.replicas asks for 2147483647 machines, more than the ceiling of 3 per machine set; the set keeps 3"
	if c := conditionOf(&got.Status, ConditionReplicasCapped); c == nil || c.Reason != ReasonTooManyReplicas || c.Message != want {
		t.Errorf("condition %+v, want %s %q", c, ReasonTooManyReplicas, want)
	}
	if n := rec.Count(ReasonTooManyReplicas); n != 1 {
		t.Errorf("%d %s events, want 1", n, ReasonTooManyReplicas)
	}
	got.Spec.Replicas = 2
	if _, err := h.client.MachineV1alpha1().MachineSets("ns").Update(context.Background(), got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.settle(t, 2)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		_, _ = h.c.Reconcile(context.Background(), "ns/pool")
		if got, _ = h.c.sets.MachineSets("ns").Get("pool"); conditionOf(&got.Status, ConditionReplicasCapped) == nil {
			return
		}
	}
	t.Errorf("condition left: %+v", conditionOf(&got.Status, ConditionReplicasCapped))
}
