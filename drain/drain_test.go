package drain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
)

// drainAsync runs Drain in a goroutine. Whenever Drain waits on the fake
// clock, it calls tick (the kubelet and controllers of the test) and
// advances the clock by step, until Drain returns, within a generous
// real-time bound.
func drainAsync(t *testing.T, c *cluster, d *Drainer, step time.Duration, tick func()) (Result, error) {
	t.Helper()
	type ret struct {
		res Result
		err error
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan ret, 1)
	go func() {
		res, err := d.Drain(ctx, testNode)
		done <- ret{res, err}
	}()
	bound := time.NewTimer(30 * time.Second)
	defer bound.Stop()
	for {
		select {
		case r := <-done:
			return r.res, r.err
		case <-bound.C:
			cancel()
			r := <-done
			t.Fatalf("Drain did not finish: %v, %s", r.err, r.res.Message)
		default:
		}
		if c.clock.HasWaiters() {
			tick()
			c.clock.Step(step)
		} else {
			runtime.Gosched()
		}
	}
}

func TestDrainToCompletion(t *testing.T) {
	c := newCluster(t, newNode(testNode), newPDB("web", "web", 1, 2, 3, 3),
		newPod("a"), newPod("b"), newPod("c"), newPod("late", order(1)), newPod("ds", daemonSet()))
	var events []string
	d := c.drainer(Options{OnEvent: func(e Event) { events = append(events, string(e.Type)) }})
	replacing := false
	res, err := drainAsync(t, c, d, DefaultPollInterval, func() {
		if replacing {
			// The disruption controller, one tick after a pod went: its
			// replacement runs elsewhere, the budget allows one again.
			if err := c.client.Tracker().Update(pdbsGVR, newPDB("web", "web", 1, 2, 3, 3), "default"); err != nil {
				t.Error(err)
			}
			replacing = false
			return
		}
		replacing = len(c.kubelet()) > 0
	})
	if err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if !res.Done || len(c.pods()) != 1 {
		t.Fatalf("Done=%v, pods left %d, message %q", res.Done, len(c.pods()), res.Message)
	}
	joined := strings.Join(events, " ")
	if !strings.Contains(joined, string(EventEvictionBlocked)) {
		t.Errorf("expected a blocked eviction on the way, events: %v", events)
	}
}

func TestDrainContextDeadline(t *testing.T) {
	c := newCluster(t, newNode(testNode), newPDB("strict", "web", 0, 1, 1, 1), newPod("a"))
	d := c.drainer(Options{})
	// The fake clock never moves: only ctx can end the wait.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	var (
		res Result
		err error
	)
	go func() {
		defer close(done)
		res, err = d.Drain(ctx, testNode)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Drain ignored its context deadline")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain error = %v, want DeadlineExceeded", err)
	}
	for _, s := range []string{res.Message, err.Error()} {
		if !strings.Contains(s, "default/strict") {
			t.Errorf("%q does not name the blocking budget", s)
		}
	}
	if n := len(c.deletionCalls()); n != 0 {
		t.Errorf("%d deletions: the context deadline must not force anything", n)
	}
}

// TestDrainWakesOnBudget: Drain is blocked by a budget with a backoff of an
// hour on a clock that never moves; the budget's update alone makes it run
// the next pass and evict.
func TestDrainWakesOnBudget(t *testing.T) {
	before := runtime.NumGoroutine()
	c := newCluster(t, newNode(testNode), newPDB("web", "web", 0, 3, 2, 3), newPod("a"), newPod("b"))
	d := c.drainer(Options{BackoffInitial: time.Hour, BackoffMax: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := d.Drain(ctx, testNode)
		done <- err
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		limit := time.Now().Add(30 * time.Second) // a hang guard, not a timing assertion
		for !cond() {
			if time.Now().After(limit) {
				t.Fatalf("never: %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	watching := func() bool {
		for _, a := range c.client.Actions() {
			if a.GetVerb() == "watch" && a.GetResource().Resource == "poddisruptionbudgets" {
				return true
			}
		}
		return false
	}
	// The probe is refused: the backoff is an hour, and Drain watches the
	// budget while it waits.
	waitFor("a refused probe and a watch of the budget", func() bool {
		calls := c.evictionCalls()
		return len(calls) == 1 && calls[0].Code == 429 && watching() && c.clock.HasWaiters()
	})

	// The disruption controller: a replacement is ready elsewhere.
	if err := c.client.Tracker().Update(pdbsGVR, newPDB("web", "web", 1, 2, 3, 3), "default"); err != nil {
		t.Fatal(err)
	}
	waitFor("an eviction after the budget's update", func() bool {
		calls := c.evictionCalls()
		return len(calls) == 2 && calls[1].Code == 201
	})
	if !c.clock.Now().Equal(epoch) {
		t.Fatalf("the clock moved to %v", c.clock.Now())
	}
	// An update that allows nothing wakes nothing.
	if err := c.client.Tracker().Update(pdbsGVR, newPDB("web", "web", 0, 2, 2, 3), "default"); err != nil {
		t.Fatal(err)
	}
	waitFor("Drain waiting again", c.clock.HasWaiters)
	cancel()
	expectCanceled(t, done)
	if n := len(c.evictionCalls()); n != 2 {
		t.Errorf("%d eviction requests, want 2", n)
	}
	expectNoLeak(t, before)
}

// drainGoroutines returns the stacks of goroutines running drain code,
// except the caller's.
func drainGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		s := string(g)
		if strings.Contains(s, "mcm/drain.(*Drainer)") && !strings.Contains(s, "drain.TestNoGoroutineLeak") {
			out = append(out, s)
		}
	}
	return out
}

// expectNoLeak waits (bounded) until no drain goroutine is left and the
// goroutine count is back to before.
func expectNoLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := drainGoroutines()
		if len(left) == 0 && runtime.NumGoroutine() <= before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left behind (%d now, %d before):\n%s", runtime.NumGoroutine(), before, strings.Join(left, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// expectCanceled waits (bounded) for the error of a cancelled Drain.
func expectCanceled(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Drain error = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Drain did not return after cancellation")
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	t.Run("cancelled during evictions", func(t *testing.T) {
		before := runtime.NumGoroutine()
		var pods []*corev1.Pod
		for i := range 30 {
			pods = append(pods, newPod(fmt.Sprintf("p%02d", i)))
		}
		c := newCluster(t, newNode(testNode))
		for _, p := range pods {
			c.add(p)
		}
		entered := make(chan struct{}, len(pods))
		release := make(chan struct{})
		c.evictErr = func(*corev1.Pod) error {
			entered <- struct{}{}
			<-release
			return nil
		}
		d := c.drainer(Options{EvictionConcurrency: 8})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := d.Drain(ctx, testNode)
			done <- err
		}()
		<-entered // an eviction is in flight, more workers are queued
		cancel()
		close(release)
		expectCanceled(t, done)
		expectNoLeak(t, before)
		if n := len(c.evictionCalls()); n >= len(pods) {
			t.Errorf("%d evictions after cancellation, want fewer than %d", n, len(pods))
		}
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		before := runtime.NumGoroutine()
		c := newCluster(t, newNode(testNode), newPDB("strict", "web", 0, 1, 1, 1), newPod("a"))
		d := c.drainer(Options{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := d.Drain(ctx, testNode)
			done <- err
		}()
		for !c.clock.HasWaiters() {
			runtime.Gosched()
		}
		cancel()
		expectCanceled(t, done)
		expectNoLeak(t, before)
		if c.clock.HasWaiters() {
			t.Error("timer left on the clock")
		}
	})
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c := newCluster(t, newNode(testNode), newPDB("web", "web", 1, 1, 2, 2), newPod("a"), newPod("b"),
		newPod("old", grace(5), app("legacy")))
	d := c.drainer(Options{Registerer: reg, Timeout: time.Minute})
	// A second drainer on the same registry shares the collectors.
	if _, err := New(c.client, Options{Registerer: reg}); err != nil {
		t.Fatalf("second New on the same registry: %v", err)
	}

	res := c.pass(d, State{})      // evicts a (the budget allows 1) and old (no budget)
	res = c.pass(d, res.State)     // the budget allows 0 now: one probe, 429
	c.clock.Step(55 * time.Second) // past deadline - 30s for the pods with the default grace
	c.removePod("default", "a")
	res = c.pass(d, res.State) // b is force-deleted; old is terminating within the deadline
	if got := res.ForceDeletions; got != 1 {
		t.Fatalf("ForceDeletions = %d, want 1: %s", got, res.Message)
	}

	want := `
# HELP mcm_drain_eviction_requests_total Eviction requests by HTTP status code of the answer ("error" when there was none).
# TYPE mcm_drain_eviction_requests_total counter
mcm_drain_eviction_requests_total{code="201"} 2
mcm_drain_eviction_requests_total{code="429"} 1
# HELP mcm_drain_force_deletions_total Pods deleted without the eviction API because the drain deadline came.
# TYPE mcm_drain_force_deletions_total counter
mcm_drain_force_deletions_total 1
# HELP mcm_drain_pods_remaining Pods that keep the drain of a node from being done, as of its last pass.
# TYPE mcm_drain_pods_remaining gauge
mcm_drain_pods_remaining{node="node-1"} 2
`
	names := []string{"mcm_drain_eviction_requests_total", "mcm_drain_force_deletions_total", "mcm_drain_pods_remaining"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	c.kubelet()
	c.clock.Step(time.Second)
	res = c.pass(d, res.State)
	if !res.Done {
		t.Fatalf("not done: %s", res.Message)
	}
	if n := testutil.CollectAndCount(d.metrics.remaining); n != 0 {
		t.Errorf("%d pods_remaining series after the drain, want 0", n)
	}
	wantDuration := `
# HELP mcm_drain_duration_seconds Time from the first pass of a drain to the pass that found it done.
# TYPE mcm_drain_duration_seconds histogram
mcm_drain_duration_seconds_bucket{le="1"} 0
mcm_drain_duration_seconds_bucket{le="2"} 0
mcm_drain_duration_seconds_bucket{le="4"} 0
mcm_drain_duration_seconds_bucket{le="8"} 0
mcm_drain_duration_seconds_bucket{le="16"} 0
mcm_drain_duration_seconds_bucket{le="32"} 0
mcm_drain_duration_seconds_bucket{le="64"} 1
mcm_drain_duration_seconds_bucket{le="128"} 1
mcm_drain_duration_seconds_bucket{le="256"} 1
mcm_drain_duration_seconds_bucket{le="512"} 1
mcm_drain_duration_seconds_bucket{le="1024"} 1
mcm_drain_duration_seconds_bucket{le="2048"} 1
mcm_drain_duration_seconds_bucket{le="4096"} 1
mcm_drain_duration_seconds_bucket{le="8192"} 1
mcm_drain_duration_seconds_bucket{le="16384"} 1
mcm_drain_duration_seconds_bucket{le="+Inf"} 1
mcm_drain_duration_seconds_sum 56
mcm_drain_duration_seconds_count 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantDuration), "mcm_drain_duration_seconds"); err != nil {
		t.Error(err)
	}
	// Passes after the end neither observe the duration again nor bring
	// the node's series back.
	c.clock.Step(time.Second)
	c.pass(d, res.State)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantDuration), "mcm_drain_duration_seconds"); err != nil {
		t.Errorf("after a pass on a drained node: %v", err)
	}
	if n := testutil.CollectAndCount(d.metrics.remaining); n != 0 {
		t.Errorf("%d pods_remaining series after a pass on a drained node, want 0", n)
	}

	// A foreign collector under one of our names is an error, not a panic.
	other := prometheus.NewPedanticRegistry()
	other.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "mcm_drain_force_deletions_total", Help: "not ours"}))
	if _, err := New(c.client, Options{Registerer: other}); err == nil {
		t.Error("New with a conflicting collector succeeded")
	}
}

func TestUncordonDropsMetrics(t *testing.T) {
	c := newCluster(t, newNode(testNode), newPDB("strict", "web", 0, 1, 1, 1), newPod("a"))
	d := c.drainer(Options{Registerer: prometheus.NewPedanticRegistry()})
	c.pass(d, State{})
	if got := testutil.ToFloat64(d.metrics.remaining.WithLabelValues(testNode)); got != 1 {
		t.Fatalf("pods_remaining = %v, want 1", got)
	}
	if err := d.Uncordon(context.Background(), testNode); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(d.metrics.remaining); n != 0 {
		t.Errorf("%d pods_remaining series after Uncordon, want 0", n)
	}
}

func TestNoMetricsWithoutRegisterer(t *testing.T) {
	c := newCluster(t, newNode(testNode), newPod("a"))
	d := c.drainer(Options{})
	if d.metrics != nil {
		t.Fatal("metrics without a Registerer")
	}
	c.pass(d, State{}) // must not panic
}
