package workqueue_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcmkit/mcm/workqueue"
)

// counting is a Reconciler that succeeds and counts its calls.
type counting struct{ calls atomic.Int64 }

func (c *counting) Reconcile(context.Context, string) (workqueue.Result, error) {
	c.calls.Add(1)
	return workqueue.Result{}, nil
}

// allFamilies are the metric families of a queue, sorted.
var allFamilies = []string{
	"mcm_workqueue_adds_total",
	"mcm_workqueue_depth",
	"mcm_workqueue_give_ups_total",
	"mcm_workqueue_longest_running_processor_seconds",
	"mcm_workqueue_queue_duration_seconds",
	"mcm_workqueue_reconcile_total",
	"mcm_workqueue_retries_total",
	"mcm_workqueue_unfinished_work_seconds",
	"mcm_workqueue_work_duration_seconds",
}

func TestMetricNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := &counting{}
	q := newQueue(t, queueName, r, workqueue.Options{Registerer: reg})
	// A queue that was built but not used (its client-go queue does not
	// exist yet) exports every series already, so dashboards and readiness
	// checks see it from the start.
	before, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var unused []string
	for _, f := range before {
		unused = append(unused, f.GetName())
	}
	if diff := cmp.Diff(allFamilies, unused); diff != "" {
		t.Errorf("metric families of an unused queue (-want +got):\n%s", diff)
	}

	q.Add("m")
	stop := startRun(t, context.Background(), q, 1)
	eventually(t, "the reconcile", func() bool { return r.calls.Load() == 1 })
	stop()

	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
		for _, m := range f.GetMetric() {
			named := false
			for _, l := range m.GetLabel() {
				named = named || (l.GetName() == "name" && l.GetValue() == queueName)
			}
			if !named {
				t.Errorf("%s has a series without name=%q: %v", f.GetName(), queueName, m.GetLabel())
			}
		}
	}
	want := allFamilies
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("metric families (-want +got):\n%s", diff)
	}
	// Every result is exported from the start, so alerts on rate() work
	// before the first error.
	if n := testutil.CollectAndCount(reg, "mcm_workqueue_reconcile_total"); n != 5 {
		t.Errorf("reconcile_total has %d series, want 5 (success, requeue, error, conflict, panic)", n)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

func TestDepthAndAddsBeforeRun(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := &counting{}
	q := newQueue(t, queueName, r, workqueue.Options{Registerer: reg})
	q.Add("a")
	q.Add("b")
	q.Add("a") // already waiting: not added twice
	if n := q.Len(); n != 2 {
		t.Errorf("Len() = %d, want 2", n)
	}
	want := map[string]float64{counter("depth"): 2, counter("adds_total"): 2}
	if diff := cmp.Diff(want, pick(samples(t, reg), "depth", "adds_total")); diff != "" {
		t.Errorf("metrics before Run (-want +got):\n%s", diff)
	}

	stop := startRun(t, context.Background(), q, 2)
	eventually(t, "both keys", func() bool { return r.calls.Load() == 2 })
	stop()
	want = map[string]float64{
		counter("adds_total"):             2,
		counter("queue_duration_seconds"): 2, // sample counts
		counter("work_duration_seconds"):  2,
		reconciles("success"):             2,
	}
	// unfinished_work_seconds and longest_running_processor_seconds are left
	// out: client-go samples them every 500ms of real time, so their value
	// depends on timing.
	got := pick(samples(t, reg), "depth", "adds_total", "queue_duration_seconds", "work_duration_seconds", "reconcile_total")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics after Run (-want +got):\n%s", diff)
	}
}

func TestQueuesShareRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	ra, rb := &counting{}, &counting{}
	a := newQueue(t, "a", ra, workqueue.Options{Registerer: reg})
	b := newQueue(t, "b", rb, workqueue.Options{Registerer: reg})
	// Building a queue under a registered name again (a controller re-created
	// in the same process) must not fail either.
	again := newQueue(t, "a", &counting{}, workqueue.Options{Registerer: reg})
	startRun(t, context.Background(), again, 1)()

	a.Add("x")
	b.Add("y")
	b.Add("z")
	stopA := startRun(t, context.Background(), a, 1)
	stopB := startRun(t, context.Background(), b, 1)
	eventually(t, "all keys", func() bool { return ra.calls.Load() == 1 && rb.calls.Load() == 2 })
	stopA()
	stopB()

	want := map[string]float64{
		`adds_total{name="a"}`:                       1,
		`adds_total{name="b"}`:                       2,
		`reconcile_total{name="a",result="success"}`: 1,
		`reconcile_total{name="b",result="success"}`: 2,
	}
	if diff := cmp.Diff(want, pick(samples(t, reg), "adds_total", "reconcile_total")); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

func TestIncompatibleCollectorFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	// Same name, different labels: not ours, and not something we can reuse.
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "mcm_workqueue_depth", Help: "Something else."}))
	q, err := workqueue.New(queueName, &counting{}, workqueue.Options{Registerer: reg})
	if err == nil {
		t.Fatal("New did not fail")
	}
	if q != nil {
		t.Error("New returned a queue along with its error")
	}
	if msg := err.Error(); !strings.Contains(msg, "mcm_workqueue_depth") {
		t.Errorf("error %q does not name the conflicting metric", msg)
	}
}
