package workqueue_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/workqueue"
)

const queueName = "machine"

var errCloud = errors.New("cloud says no")

// step is what a scripted reconciler does on one call.
type step struct {
	res   workqueue.Result
	err   error
	panic any
	// readd adds the key again while it is being reconciled, standing in for
	// an informer event; the key is then reconciled once more.
	readd bool
}

var (
	succeed      = step{}
	fail         = step{err: fmt.Errorf("creating VM: %w", errCloud)}
	explode      = step{panic: "boom"}
	requeue      = step{res: workqueue.Result{Requeue: true}}
	requeueAfter = step{res: workqueue.Result{RequeueAfter: time.Millisecond}}
	// failPaced fails with the reconciler's own retry delay.
	failPaced = step{res: workqueue.Result{RequeueAfter: time.Millisecond}, err: fmt.Errorf("creating VM: %w", errCloud)}
	// conflict fails with 409 Conflicts only: two writes of a sync, both
	// beaten by another writer.
	conflict = step{err: errors.Join(
		fmt.Errorf("pruning annotation: %w", apierrors.NewConflict(schema.GroupResource{Resource: "machinedeployments"}, "pool", errors.New("the object has been modified"))),
		fmt.Errorf("marking machine: %w", apierrors.NewConflict(schema.GroupResource{Resource: "machines"}, "m", errors.New("the object has been modified"))))}
	// conflictAndFail has a conflict beside a real failure.
	conflictAndFail = step{err: errors.Join(
		fmt.Errorf("marking machine: %w", apierrors.NewConflict(schema.GroupResource{Resource: "machines"}, "m", errors.New("the object has been modified"))),
		fmt.Errorf("creating VM: %w", errCloud))}
)

func readd(s step) step { s.readd = true; return s }

func repeat(s step, n int) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// script is a Reconciler that plays steps in order, one per call. Calls
// beyond the script succeed and are counted, so tests notice them.
type script struct {
	steps []step
	queue *workqueue.Queue[string]

	mu    sync.Mutex
	calls int
}

func (s *script) Reconcile(_ context.Context, key string) (workqueue.Result, error) {
	s.mu.Lock()
	i := s.calls
	s.calls++
	s.mu.Unlock()
	if i >= len(s.steps) {
		return workqueue.Result{}, nil
	}
	st := s.steps[i]
	if st.readd {
		s.queue.Add(key)
	}
	if st.panic != nil {
		panic(st.panic)
	}
	return st.res, st.err
}

func (s *script) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// failure is the part of an error log entry the outcome tests check.
type failure struct {
	Msg     string
	Err     string
	Retries any
	Stack   bool // a stack trace was logged
	Queue   any
	Key     any
}

const (
	msgRetry      = "Reconcile failed; requeuing with backoff"
	msgRetryPaced = "Reconcile failed; requeuing after the reconciler's delay"
	msgGiveUp     = "Reconcile failed too often; giving up on key until it is added again"
)

func retry(err string, retries int) failure {
	return failure{Msg: msgRetry, Err: err, Retries: retries, Queue: queueName, Key: "m"}
}

func retryPaced(err string) failure {
	return failure{Msg: msgRetryPaced, Err: err, Retries: 0, Queue: queueName, Key: "m"}
}

func giveUp(err string, retries int) failure {
	return failure{Msg: msgGiveUp, Err: err, Retries: retries, Queue: queueName, Key: "m"}
}

func withStack(f failure) failure { f.Stack = true; return f }

const (
	errMsg   = "creating VM: cloud says no"
	panicMsg = "reconcile panicked: boom"
)

func reconciles(result string) string {
	return fmt.Sprintf("reconcile_total{name=%q,result=%q}", queueName, result)
}

func counter(metric string) string {
	return fmt.Sprintf("%s{name=%q}", metric, queueName)
}

func TestOutcomes(t *testing.T) {
	tests := []struct {
		name       string
		maxRetries int
		steps      []step
		wantGiveUp bool
		wantLogs   []failure
		// wantMetrics holds the non-zero reconcile_total, give_ups_total,
		// retries_total and adds_total series.
		wantMetrics map[string]float64
	}{
		{
			name:  "success is done",
			steps: []step{succeed},
			wantMetrics: map[string]float64{
				reconciles("success"): 1,
				counter("adds_total"): 1,
			},
		},
		{
			name:       "error is retried until MaxRetries, then given up",
			maxRetries: 2,
			steps:      []step{fail, fail, fail},
			wantGiveUp: true,
			wantLogs:   []failure{retry(errMsg, 0), retry(errMsg, 1), giveUp(errMsg, 2)},
			wantMetrics: map[string]float64{
				reconciles("error"):       3,
				counter("give_ups_total"): 1,
				counter("retries_total"):  2,
				counter("adds_total"):     3,
			},
		},
		{
			name:     "error then success",
			steps:    []step{fail, succeed},
			wantLogs: []failure{retry(errMsg, 0)},
			wantMetrics: map[string]float64{
				reconciles("error"):      1,
				reconciles("success"):    1,
				counter("retries_total"): 1,
				counter("adds_total"):    2,
			},
		},
		{
			// Without Forget on success the third call would see one retry
			// and give up.
			name:       "success resets the retry count",
			maxRetries: 1,
			steps:      []step{fail, readd(succeed), fail, succeed},
			wantLogs:   []failure{retry(errMsg, 0), retry(errMsg, 0)},
			wantMetrics: map[string]float64{
				reconciles("error"):      2,
				reconciles("success"):    2,
				counter("retries_total"): 2,
				counter("adds_total"):    4,
			},
		},
		{
			name:       "RequeueAfter resets the retry count",
			maxRetries: 1,
			steps:      []step{fail, requeueAfter, fail, succeed},
			wantLogs:   []failure{retry(errMsg, 0), retry(errMsg, 0)},
			wantMetrics: map[string]float64{
				reconciles("error"):      2,
				reconciles("requeue"):    1,
				reconciles("success"):    1,
				counter("retries_total"): 3,
				counter("adds_total"):    4,
			},
		},
		{
			// The reconciler paces the key: every failure is logged and
			// counted as an error, and MaxRetries never drops the key.
			name:       "error with RequeueAfter is an error that never gives up",
			maxRetries: 1,
			steps:      []step{failPaced, failPaced, failPaced, succeed},
			wantLogs:   []failure{retryPaced(errMsg), retryPaced(errMsg), retryPaced(errMsg)},
			wantMetrics: map[string]float64{
				reconciles("error"):      3,
				reconciles("success"):    1,
				counter("retries_total"): 3,
				counter("adds_total"):    4,
			},
		},
		{
			name:  "Requeue is reconciled again without error",
			steps: []step{requeue, requeue, succeed},
			wantMetrics: map[string]float64{
				reconciles("requeue"):    2,
				reconciles("success"):    1,
				counter("retries_total"): 2,
				counter("adds_total"):    3,
			},
		},
		{
			name:       "Requeue shares the backoff with errors",
			maxRetries: 2,
			steps:      []step{requeue, requeue, fail},
			wantGiveUp: true,
			wantLogs:   []failure{giveUp(errMsg, 2)},
			wantMetrics: map[string]float64{
				reconciles("requeue"):     2,
				reconciles("error"):       1,
				counter("give_ups_total"): 1,
				counter("retries_total"):  2,
				counter("adds_total"):     3,
			},
		},
		{
			name:     "panic is recovered and retried",
			steps:    []step{explode, succeed},
			wantLogs: []failure{withStack(retry(panicMsg, 0))},
			wantMetrics: map[string]float64{
				reconciles("panic"):      1,
				reconciles("success"):    1,
				counter("retries_total"): 1,
				counter("adds_total"):    2,
			},
		},
		{
			name:       "panic counts toward MaxRetries",
			maxRetries: 1,
			steps:      []step{explode, explode},
			wantGiveUp: true,
			wantLogs:   []failure{withStack(retry(panicMsg, 0)), withStack(giveUp(panicMsg, 1))},
			wantMetrics: map[string]float64{
				reconciles("panic"):       2,
				counter("give_ups_total"): 1,
				counter("retries_total"):  1,
				counter("adds_total"):     2,
			},
		},
		{
			// An expected 409 is retried with backoff like any error, but is
			// not logged at error level, and is counted apart.
			name:  "conflicts only are retried without an error log",
			steps: []step{conflict, conflict, succeed},
			wantMetrics: map[string]float64{
				reconciles("conflict"):   2,
				reconciles("success"):    1,
				counter("retries_total"): 2,
				counter("adds_total"):    3,
			},
		},
		{
			name:       "conflicts that never resolve are given up as an error",
			maxRetries: 1,
			steps:      []step{conflict, conflict},
			wantGiveUp: true,
			wantLogs:   []failure{giveUp(conflict.err.Error(), 1)},
			wantMetrics: map[string]float64{
				reconciles("conflict"):    2,
				counter("give_ups_total"): 1,
				counter("retries_total"):  1,
				counter("adds_total"):     2,
			},
		},
		{
			name:     "a conflict beside a real failure is an error",
			steps:    []step{conflictAndFail, succeed},
			wantLogs: []failure{retry(conflictAndFail.err.Error(), 0)},
			wantMetrics: map[string]float64{
				reconciles("error"):      1,
				reconciles("success"):    1,
				counter("retries_total"): 1,
				counter("adds_total"):    2,
			},
		},
		{
			// More failures than any limit a queue had by default: the
			// zero value is what every controller asks for, since no
			// event may come to bring a dropped key back.
			name:  "zero MaxRetries retries forever",
			steps: append(repeat(fail, 20), succeed),
			wantLogs: func() []failure {
				var out []failure
				for i := range 20 {
					out = append(out, retry(errMsg, i))
				}
				return out
			}(),
			wantMetrics: map[string]float64{
				reconciles("error"):      20,
				reconciles("success"):    1,
				counter("retries_total"): 20,
				counter("adds_total"):    21,
			},
		},
		{
			name:       "negative MaxRetries retries forever",
			maxRetries: -1,
			steps:      append(repeat(fail, 20), succeed),
			wantLogs: func() []failure {
				var out []failure
				for i := range 20 {
					out = append(out, retry(errMsg, i))
				}
				return out
			}(),
			wantMetrics: map[string]float64{
				reconciles("error"):      20,
				reconciles("success"):    1,
				counter("retries_total"): 20,
				counter("adds_total"):    21,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logs := &logRecorder{}
			reg := prometheus.NewRegistry()
			s := &script{steps: tc.steps}
			s.queue = newQueue[string](t, queueName, s, workqueue.Options{
				MaxRetries: tc.maxRetries,
				// Fast backoff so retries take milliseconds.
				BaseDelay:  time.Millisecond,
				MaxDelay:   10 * time.Millisecond,
				Registerer: reg,
				Logger:     logs.logger(),
			})
			s.queue.Add("m")
			// One worker: a panic-then-success script shows the worker
			// survived the panic.
			stop := startRun(t, context.Background(), s.queue, 1)

			eventually(t, "all steps to run", func() bool { return s.count() >= len(tc.steps) })
			if tc.wantGiveUp {
				eventually(t, "the give-up", func() bool { return logs.has(msgGiveUp) })
			}
			// Run drains the last reconcile, so everything below is final.
			stop()

			if got := s.count(); got != len(tc.steps) {
				t.Errorf("Reconcile called %d times, want %d", got, len(tc.steps))
			}
			var gotLogs []failure
			for _, e := range logs.errorEntries() {
				st, _ := e.Values["stacktrace"].(string)
				gotLogs = append(gotLogs, failure{
					Msg: e.Msg, Err: e.Err, Retries: e.Values["retries"],
					Stack: strings.Contains(st, "panic"),
					Queue: e.Values["queue"], Key: e.Values["key"],
				})
			}
			if diff := cmp.Diff(tc.wantLogs, gotLogs); diff != "" {
				t.Errorf("error logs (-want +got):\n%s", diff)
			}
			got := pick(samples(t, reg), "reconcile_total", "give_ups_total", "retries_total", "adds_total")
			if diff := cmp.Diff(tc.wantMetrics, got); diff != "" {
				t.Errorf("metrics (-want +got):\n%s", diff)
			}
			if n := s.queue.Len(); n != 0 {
				t.Errorf("Len() = %d after the run, want 0", n)
			}
		})
	}
}

// TestDelaysFollowClock checks that every kind of delay is measured on
// Options.Clock: the key comes back exactly when the fake clock reaches the
// delay, and not before.
func TestDelaysFollowClock(t *testing.T) {
	const delay = 5 * time.Second
	tests := []struct {
		name      string
		first     step
		baseDelay time.Duration
	}{
		{name: "RequeueAfter", first: step{res: workqueue.Result{RequeueAfter: delay}}},
		{name: "Requeue backs off by BaseDelay", first: requeue},
		{name: "error backs off by BaseDelay", first: fail},
		// The reconciler's own delay replaces the backoff, which would be a
		// millisecond here.
		{name: "error with RequeueAfter waits that long", first: step{res: workqueue.Result{RequeueAfter: delay}, err: errCloud}, baseDelay: time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
			calls := make(chan int, 10)
			var n int // only touched by the single worker
			r := workqueue.ReconcilerFunc[string](func(context.Context, string) (workqueue.Result, error) {
				n++
				calls <- n
				if n == 1 {
					return tc.first.res, tc.first.err
				}
				return workqueue.Result{}, nil
			})
			// BaseDelay equals delay: the first backoff is exactly BaseDelay.
			base := delay
			if tc.baseDelay > 0 {
				base = tc.baseDelay
			}
			q := newQueue(t, "delays", r, workqueue.Options{Clock: clk, BaseDelay: base})
			q.Add("m")
			stop := startRun(t, context.Background(), q, 1)

			receive(t, "first reconcile", calls)
			// The delaying queue always has its heartbeat ticker on the clock;
			// a second waiter is the timer for our key, so the delay has been
			// scheduled and stepping the clock now cannot be missed.
			eventually(t, "the delay timer", func() bool { return clk.Waiters() == 2 })

			clk.Step(delay - time.Second)
			select {
			case <-calls:
				t.Fatal("key reconciled before its delay passed")
			default:
			}
			clk.Step(time.Second)
			receive(t, "reconcile after the delay", calls)
			stop()
		})
	}

	t.Run("AddAfter", func(t *testing.T) {
		t.Parallel()
		clk := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
		calls := make(chan string, 10)
		r := workqueue.ReconcilerFunc[string](func(_ context.Context, key string) (workqueue.Result, error) {
			calls <- key
			return workqueue.Result{}, nil
		})
		q := newQueue(t, "delays", r, workqueue.Options{Clock: clk})
		stop := startRun(t, context.Background(), q, 1)
		q.AddAfter("m", delay)
		eventually(t, "the delay timer", func() bool { return clk.Waiters() == 2 })
		clk.Step(delay - time.Second)
		select {
		case <-calls:
			t.Fatal("key reconciled before its delay passed")
		default:
		}
		clk.Step(time.Second)
		if got := receive(t, "reconcile after the delay", calls); got != "m" {
			t.Errorf("reconciled %q, want m", got)
		}
		stop()
	})
}

func TestRunDrainsInFlightKey(t *testing.T) {
	reg := prometheus.NewRegistry()
	started := make(chan struct{})
	release := make(chan struct{})
	var (
		mu       sync.Mutex
		keys     []string
		ctxErr   error
		finished bool
	)
	r := workqueue.ReconcilerFunc[string](func(ctx context.Context, key string) (workqueue.Result, error) {
		mu.Lock()
		keys = append(keys, key)
		mu.Unlock()
		if key == "slow" {
			close(started)
			<-release
			mu.Lock()
			ctxErr, finished = ctx.Err(), true
			mu.Unlock()
		}
		return workqueue.Result{}, nil
	})
	q := newQueue(t, queueName, r, workqueue.Options{Registerer: reg})
	q.Add("slow")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx, 1) }()

	receive(t, "the slow reconcile to start", started)
	q.Add("waiting") // queued behind the in-flight key
	cancel()
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) while a key was still in flight", err)
	default:
	}
	close(release)
	if err := receive(t, "Run to return", done); err != nil {
		t.Fatalf("Run: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if !finished {
		t.Error("in-flight reconcile did not finish before Run returned")
	}
	if !errors.Is(ctxErr, context.Canceled) {
		t.Errorf("in-flight reconcile saw ctx.Err() = %v, want context.Canceled", ctxErr)
	}
	if diff := cmp.Diff([]string{"slow"}, keys); diff != "" {
		t.Errorf("reconciled keys (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{reconciles("success"): 1}, pick(samples(t, reg), "reconcile_total")); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}

	q.Add("late")
	if n := q.Len(); n != 0 {
		t.Errorf("Len() = %d after Add on a stopped queue, want 0", n)
	}
	if err := q.Run(context.Background(), 1); err == nil {
		t.Error("second Run returned nil, want an error")
	}
}

func TestRunRejectsNoWorkers(t *testing.T) {
	q := newQueue(t, "none", workqueue.ReconcilerFunc[string](func(context.Context, string) (workqueue.Result, error) {
		return workqueue.Result{}, nil
	}), workqueue.Options{})
	if err := q.Run(context.Background(), 0); err == nil {
		t.Error("Run with 0 workers returned nil, want an error")
	}
	// The queue was not started by the failed call and still works.
	startRun(t, context.Background(), q, 1)()
}

// A reconcile cut short by Run's cancellation is expected at shutdown and
// must not be reported as an error.
func TestShutdownInterruptionIsNotAnError(t *testing.T) {
	logs := &logRecorder{}
	started := make(chan struct{})
	r := workqueue.ReconcilerFunc[string](func(ctx context.Context, _ string) (workqueue.Result, error) {
		close(started)
		<-ctx.Done()
		return workqueue.Result{}, fmt.Errorf("waiting for VM: %w", ctx.Err())
	})
	q := newQueue(t, queueName, r, workqueue.Options{Logger: logs.logger()})
	q.Add("m")
	stop := startRun(t, context.Background(), q, 1)
	receive(t, "reconcile to start", started)
	stop()

	if e := logs.errorEntries(); len(e) != 0 {
		t.Errorf("error logs at shutdown: %+v", e)
	}
	if !logs.has("Reconcile interrupted by shutdown") {
		t.Error("interruption not logged")
	}
}

func TestLogger(t *testing.T) {
	tests := []struct {
		name                 string
		inContext, inOptions bool
		wantContext          bool // else Options.Logger is expected to get the logs
	}{
		{name: "context logger", inContext: true, wantContext: true},
		{name: "Options.Logger when the context has none", inOptions: true},
		{name: "context logger wins", inContext: true, inOptions: true, wantContext: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctxLogs, optLogs := &logRecorder{}, &logRecorder{}
			ctx := context.Background()
			if tc.inContext {
				ctx = logr.NewContext(ctx, ctxLogs.logger())
			}
			var opts workqueue.Options
			if tc.inOptions {
				opts.Logger = optLogs.logger()
			}
			done := make(chan struct{})
			r := workqueue.ReconcilerFunc[string](func(ctx context.Context, _ string) (workqueue.Result, error) {
				logr.FromContextOrDiscard(ctx).Info("inside")
				close(done)
				return workqueue.Result{}, nil
			})
			q := newQueue(t, queueName, r, opts)
			q.Add("m")
			stop := startRun(t, ctx, q, 1)
			receive(t, "reconcile", done)
			stop()

			want, other := optLogs, ctxLogs
			if tc.wantContext {
				want, other = ctxLogs, optLogs
			}
			if n := len(other.all()); n != 0 {
				t.Errorf("the other logger got %d entries, want none", n)
			}
			i := slices.IndexFunc(want.all(), func(e logEntry) bool { return e.Msg == "inside" })
			if i < 0 {
				t.Fatal("the reconciler's log line is missing")
			}
			got := want.all()[i].Values
			if diff := cmp.Diff(map[string]any{"queue": queueName, "key": "m"}, got); diff != "" {
				t.Errorf("values of the reconciler's logger (-want +got):\n%s", diff)
			}
			if !want.has("Starting workers") || !want.has("Workers stopped") {
				t.Error("Run's own log lines are missing")
			}
		})
	}
}

// TestNewStartsNothing checks that building queues, including ones whose
// construction fails, starts no goroutine; the first Add does.
func TestNewStartsNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	conflicting := prometheus.NewRegistry()
	conflicting.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "mcm_workqueue_adds_total", Help: "Something else."}))
	var queues []*workqueue.Queue[string]
	for i := range 10 {
		queues = append(queues, newQueue(t, fmt.Sprintf("q%d", i), &counting{}, workqueue.Options{Registerer: prometheus.NewRegistry()}))
		if _, err := workqueue.New("bad", &counting{}, workqueue.Options{Registerer: conflicting}); err == nil {
			t.Fatal("New with a conflicting registry did not fail")
		}
	}
	// Goroutines of earlier tests may still be ending, and one of them may
	// have started another after before was counted: fewer is fine, and
	// more is a failure only if it lasts. A goroutine the queues started
	// would, as none of them runs.
	after := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); after > before && time.Now().Before(deadline); after = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	if after > before {
		t.Fatalf("%d goroutines before building 20 queues, %d after", before, after)
	}
	// Keys added before Run are kept; Run then stops what Add started.
	r := &counting{}
	q := newQueue(t, "late", r, workqueue.Options{})
	q.Add("m")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- q.Run(ctx, 1) }()
	eventually(t, "the key added before Run reconciled", func() bool { return r.calls.Load() == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestUnreachableFailuresKeepBackoffShort: failures that say the API server
// is out of reach back off at most UnreachableMaxDelay and do not count
// towards MaxRetries, so a key outlives an outage of any length and is
// retried soon after it ends.
func TestUnreachableFailuresKeepBackoffShort(t *testing.T) {
	const maxDelay = 4 * time.Second
	refused := fmt.Errorf("patching machine m: %w", &url.Error{Op: "Patch", URL: "https://api:6443",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}})
	clk := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	calls := make(chan int, 20)
	var n int // only touched by the single worker
	const outage = 12
	r := workqueue.ReconcilerFunc[string](func(context.Context, string) (workqueue.Result, error) {
		n++
		calls <- n
		if n <= outage {
			return workqueue.Result{}, refused
		}
		return workqueue.Result{}, nil
	})
	q := newQueue(t, "unreachable", r, workqueue.Options{Clock: clk, BaseDelay: time.Second, UnreachableMaxDelay: maxDelay, MaxRetries: 2})
	q.Add("m")
	stop := startRun(t, context.Background(), q, 1)
	receive(t, "first reconcile", calls)
	for i := 2; i <= outage+1; i++ {
		eventually(t, "the retry timer", func() bool { return clk.Waiters() == 2 })
		clk.Step(maxDelay)
		if got := receive(t, "a retry within UnreachableMaxDelay", calls); got != i {
			t.Fatalf("reconcile %d, want %d", got, i)
		}
	}
	stop()
}

// TestConflictLoggedAtV1: a reconcile that failed with conflicts only is
// logged once, at V(1), with the error's text.
func TestConflictLoggedAtV1(t *testing.T) {
	logs := &logRecorder{}
	s := &script{steps: []step{conflict, succeed}}
	s.queue = newQueue[string](t, queueName, s, workqueue.Options{BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond,
		Registerer: prometheus.NewRegistry(), Logger: logs.logger()})
	s.queue.Add("m")
	stop := startRun(t, context.Background(), s.queue, 1)
	eventually(t, "both steps to run", func() bool { return s.count() >= 2 })
	stop()
	var got []logEntry
	for _, e := range logs.all() {
		if strings.Contains(e.Msg, "onflict") {
			got = append(got, logEntry{Error: e.Error, Level: e.Level, Msg: e.Msg, Err: fmt.Sprint(e.Values["err"])})
		}
	}
	want := []logEntry{{Level: 1, Msg: "Reconcile conflicted with a concurrent write; requeuing with backoff", Err: conflict.err.Error()}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conflict logs (-want +got):\n%s", diff)
	}
}

// TestAddFirstPassesWaitingKeys: with the only worker busy, keys added with
// AddFirst are reconciled before those added with Add, in the order they
// came; the depth metric counts each key once.
func TestAddFirstPassesWaitingKeys(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	r := workqueue.ReconcilerFunc[string](func(_ context.Context, key string) (workqueue.Result, error) {
		if key == "busy" {
			<-release
		}
		mu.Lock()
		defer mu.Unlock()
		order = append(order, key)
		return workqueue.Result{}, nil
	})
	reg := prometheus.NewRegistry()
	q := newQueue(t, queueName, r, workqueue.Options{Registerer: reg})
	q.Add("busy")
	stop := startRun(t, context.Background(), q, 1)
	eventually(t, "the worker to take the busy key", func() bool { return q.Len() == 0 })
	for _, k := range []string{"a", "b", "c"} {
		q.Add(k)
	}
	q.AddFirst("d")
	q.AddFirst("b") // waiting: moves ahead of a, behind d
	q.AddFirst("b") // once only
	if got := samples(t, reg)[counter("depth")]; got != 4 || q.Len() != 4 {
		t.Errorf("depth metric %v and Len() %d with a, b, c and d waiting, want 4", got, q.Len())
	}
	close(release)
	eventually(t, "every key reconciled", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 5 })
	stop()
	if diff := cmp.Diff([]string{"busy", "d", "b", "a", "c"}, order); diff != "" {
		t.Errorf("reconcile order (-want +got):\n%s", diff)
	}
}
