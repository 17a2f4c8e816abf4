package workqueue_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcmkit/mcm/workqueue"
)

// timeout bounds every wait. It is generous because a loaded CI machine
// running with -race can be slow; tests pass in milliseconds normally.
const timeout = 30 * time.Second

// newQueue builds a queue, failing the test if New fails.
func newQueue[K comparable](t testing.TB, name string, r workqueue.Reconciler[K], opts workqueue.Options) *workqueue.Queue[K] {
	t.Helper()
	q, err := workqueue.New(name, r, opts)
	if err != nil {
		t.Fatalf("workqueue.New: %v", err)
	}
	return q
}

// eventually polls cond until it holds, failing the test after timeout.
// Polling replaces sleeping: the test moves on as soon as cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// receive waits for a value on ch, failing the test after timeout.
func receive[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// startRun calls q.Run in the background and returns a function that cancels
// its context and waits for Run to return, failing the test if it errors or
// hangs. The stop function is also registered as a cleanup, so a failing test
// does not leak workers; calling it twice is fine.
func startRun[K comparable](t *testing.T, ctx context.Context, q *workqueue.Queue[K], workers int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx, workers) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(timeout):
				t.Errorf("Run did not return within %v after cancel", timeout)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// logEntry is one recorded log call, flattened for comparison.
type logEntry struct {
	Error  bool // logged with Error rather than Info
	Level  int  // V level of Info calls
	Msg    string
	Err    string
	Values map[string]any
}

// logRecorder is a logr.LogSink that records every call. All levels are
// enabled so V(4) messages are visible to tests too.
type logRecorder struct {
	mu      sync.Mutex
	entries []logEntry
}

func (r *logRecorder) logger() logr.Logger {
	return logr.New(&recordingSink{rec: r})
}

// errorEntries returns the Error calls recorded so far.
func (r *logRecorder) errorEntries() []logEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []logEntry
	for _, e := range r.entries {
		if e.Error {
			out = append(out, e)
		}
	}
	return out
}

func (r *logRecorder) all() []logEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.entries)
}

func (r *logRecorder) has(msg string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.entries, func(e logEntry) bool { return e.Msg == msg })
}

type recordingSink struct {
	rec    *logRecorder
	values []any
}

func (s *recordingSink) Init(logr.RuntimeInfo) {}
func (s *recordingSink) Enabled(int) bool      { return true }

func (s *recordingSink) Info(level int, msg string, kvs ...any) {
	s.record(logEntry{Level: level, Msg: msg}, kvs)
}

func (s *recordingSink) Error(err error, msg string, kvs ...any) {
	s.record(logEntry{Error: true, Msg: msg, Err: fmt.Sprint(err)}, kvs)
}

func (s *recordingSink) record(e logEntry, kvs []any) {
	e.Values = map[string]any{}
	all := append(slices.Clone(s.values), kvs...)
	for i := 0; i+1 < len(all); i += 2 {
		e.Values[fmt.Sprint(all[i])] = all[i+1]
	}
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	s.rec.entries = append(s.rec.entries, e)
}

func (s *recordingSink) WithValues(kvs ...any) logr.LogSink {
	return &recordingSink{rec: s.rec, values: append(slices.Clone(s.values), kvs...)}
}

func (s *recordingSink) WithName(string) logr.LogSink { return s }

// samples returns the current non-zero values of the mcm_workqueue_* counters
// and gauges in reg (histograms as their sample count), keyed like
// `reconcile_total{name="q",result="error"}` without the common prefix.
// Leaving out zeros keeps the expectations in tests to what happened.
func samples(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		name := strings.TrimPrefix(f.GetName(), "mcm_workqueue_")
		for _, m := range f.GetMetric() {
			var v float64
			switch {
			case m.Counter != nil:
				v = m.GetCounter().GetValue()
			case m.Gauge != nil:
				v = m.GetGauge().GetValue()
			case m.Histogram != nil:
				v = float64(m.GetHistogram().GetSampleCount())
			}
			if v == 0 {
				continue
			}
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			out[name+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

// pick returns the entries of m whose key starts with one of prefixes.
func pick(m map[string]float64, prefixes ...string) map[string]float64 {
	out := map[string]float64{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				out[k] = m[k]
			}
		}
	}
	return out
}
