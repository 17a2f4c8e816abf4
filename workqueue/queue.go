package workqueue

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	kworkqueue "k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Defaults for the zero values of Options.
const (
	// DefaultBaseDelay is the backoff after a key's first failure.
	DefaultBaseDelay = 5 * time.Millisecond
	// DefaultMaxDelay caps the per-key backoff.
	DefaultMaxDelay = 1000 * time.Second
	// DefaultUnreachableMaxDelay caps the backoff of a key whose last
	// failure was an unreachable API server.
	DefaultUnreachableMaxDelay = 2 * time.Second
)

// The overall token bucket of the default rate limiter, as in client-go's
// DefaultTypedControllerRateLimiter: it only matters when many keys fail at
// once, and then keeps the retries from hammering the API server or the
// cloud provider.
const (
	bucketQPS   = 10
	bucketBurst = 100
)

// Reconciler processes one key taken from a Queue.
//
// A key is never reconciled by two workers at the same time, but different
// keys are reconciled concurrently when Run starts more than one worker.
type Reconciler[K comparable] interface {
	// Reconcile brings the object identified by key to its desired state.
	//
	// A non-nil error means the attempt failed; the key is retried with
	// backoff and the worker logs the error, so Reconcile should wrap it with
	// context and return it rather than log it. Otherwise Result says whether
	// and when the key is processed again.
	//
	// ctx carries a logger (see logr.FromContext) that already has the queue
	// name and key as values, and is cancelled when Run's context ends.
	Reconcile(ctx context.Context, key K) (Result, error)
}

// ReconcilerFunc adapts a function to the Reconciler interface.
type ReconcilerFunc[K comparable] func(ctx context.Context, key K) (Result, error)

// Reconcile calls f(ctx, key).
func (f ReconcilerFunc[K]) Reconcile(ctx context.Context, key K) (Result, error) {
	return f(ctx, key)
}

// Result tells the worker what to do with a key after Reconcile. The zero
// value means done: the key is processed again only when it is added again,
// e.g. by an informer event.
type Result struct {
	// RequeueAfter, if positive, processes the key again after this delay,
	// e.g. to poll a VM that is still booting. Without an error it is not a
	// failure: the key's backoff is reset. It takes precedence over Requeue.
	//
	// With an error, RequeueAfter replaces the rate limiter's backoff: the
	// reconciler chose its own wait (say, by a cloud provider's error
	// code). The error is still logged and counted as a failed reconcile,
	// and MaxRetries does not apply, since the reconciler paces the key.
	RequeueAfter time.Duration

	// Requeue processes the key again after the rate limiter's backoff, for
	// waits of unknown length. It is not logged as an error and never gives
	// up, but it grows the same per-key backoff as errors do, and so also
	// counts toward Options.MaxRetries should the key fail later.
	Requeue bool
}

// Options configures a Queue. The zero value is ready to use.
type Options struct {
	// MaxRetries, if positive, is how many times a key whose Reconcile
	// fails is retried with backoff before the worker gives up: it logs the
	// last error, forgets the key and counts it in
	// mcm_workqueue_give_ups_total. The key is processed again when it is
	// next added. Retries are counted by the rate limiter (client-go's
	// NumRequeues) and reset whenever the key succeeds or asks for
	// RequeueAfter. Zero (or a negative value) means no limit: a failing
	// key is retried for as long as it fails, at most MaxDelay apart, which
	// is what a controller wants, since no informer event may come to bring
	// a dropped key back.
	MaxRetries int

	// BaseDelay and MaxDelay shape the per-key exponential backoff: a key's
	// first requeue waits BaseDelay, each consecutive one twice as long as
	// the one before, at most MaxDelay. On
	// top, all keys together are let back in at 10 per second with a burst
	// of 100, as with client-go's default controller rate limiter. Zero means
	// DefaultBaseDelay and DefaultMaxDelay.
	BaseDelay time.Duration
	MaxDelay  time.Duration

	// UnreachableMaxDelay caps the backoff of failures that say the API
	// server could not be reached or could not answer for now (connection
	// refused, reset or timed out; 503, 504, 429). They have a backoff of
	// their own, from BaseDelay up to this cap, outside the token bucket,
	// and do not count towards MaxRetries: the key is not at fault, it is
	// never given up on during an outage, and it is retried within this
	// delay once the server is back instead of after a backoff grown over
	// the whole outage. The client's own rate limit still paces the
	// attempts. Zero means DefaultUnreachableMaxDelay.
	UnreachableMaxDelay time.Duration

	// Registerer receives the queue's metrics (see the package
	// documentation). Nil means no metrics.
	Registerer prometheus.Registerer

	// Clock drives delays (AddAfter, RequeueAfter, backoff) and the queue's
	// latency metrics. Nil means the real clock; tests pass a fake clock to
	// step through delays without sleeping, the overall token bucket of the
	// rate limiter included.
	Clock clock.WithTicker

	// Logger is used when the context given to Run carries no logger (see
	// logr.NewContext). The zero value discards.
	Logger logr.Logger
}

// Queue is a rate-limited work queue of keys of type K together with the
// workers that reconcile them. Create it with New, add keys from event
// handlers, and call Run once to process them.
type Queue[K comparable] struct {
	name       string
	reconciler Reconciler[K]
	maxRetries int
	logger     logr.Logger
	metrics    *workerMetrics

	// running guards against a second Run: client-go's queue cannot be
	// restarted once shut down.
	running atomic.Bool

	// client-go's queue starts goroutines when it is built, so it is built
	// by the first Add or Run, never by New: a Queue that is constructed
	// and dropped (say, because a later step of a controller's constructor
	// failed) leaves nothing running.
	newQueue func() kworkqueue.TypedRateLimitingInterface[K]
	once     sync.Once
	q        kworkqueue.TypedRateLimitingInterface[K]
	// lanes orders the keys client-go's queue hands out (AddFirst).
	lanes *lanes[K]

	// unreachable is the backoff of failures that say the API server is out
	// of reach (see Options.UnreachableMaxDelay).
	unreachable kworkqueue.TypedRateLimiter[K]
}

// New returns a Queue that feeds the keys added to it to r.
//
// name identifies the queue in logs and in the name label of its metrics;
// it should be unique per Registerer. Client-go records no queue metrics
// for an empty name, and neither does New.
//
// New fails if opts.Registerer holds a collector under one of the metric
// names of this package that is not compatible with ours.
//
// New starts nothing. The first Add or Run starts the background goroutines
// of client-go's delaying queue; they end when Run returns, so a Queue that
// was given keys should be Run.
func New[K comparable](name string, r Reconciler[K], opts Options) (*Queue[K], error) {
	if r == nil {
		return nil, fmt.Errorf("workqueue %q: reconciler must not be nil", name)
	}
	q := &Queue[K]{
		name:       name,
		reconciler: r,
		maxRetries: opts.MaxRetries,
		logger:     opts.Logger,
	}
	baseDelay, maxDelay := opts.BaseDelay, opts.MaxDelay
	if baseDelay <= 0 {
		baseDelay = DefaultBaseDelay
	}
	if maxDelay <= 0 {
		maxDelay = DefaultMaxDelay
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	// The same composition as client-go's DefaultTypedControllerRateLimiter,
	// with the per-key part configurable and the bucket on the queue's clock.
	unreachableMax := opts.UnreachableMaxDelay
	if unreachableMax <= 0 {
		unreachableMax = DefaultUnreachableMaxDelay
	}
	q.unreachable = kworkqueue.NewTypedItemExponentialFailureRateLimiter[K](baseDelay, max(unreachableMax, baseDelay))
	limiter := kworkqueue.NewTypedMaxOfRateLimiter(
		kworkqueue.NewTypedItemExponentialFailureRateLimiter[K](baseDelay, maxDelay),
		newBucketLimiter[K](clk, bucketQPS, bucketBurst),
	)

	cfg := kworkqueue.TypedRateLimitingQueueConfig[K]{Clock: clk}
	if opts.Registerer != nil && name != "" {
		c, err := registerCollectors(opts.Registerer)
		if err != nil {
			return nil, fmt.Errorf("workqueue %q: %w", name, err)
		}
		// Name and MetricsProvider are only set together: an empty Name is
		// what keeps client-go from falling back to its global provider.
		cfg.Name = name
		cfg.MetricsProvider = metricsProvider{c: c}
		q.metrics = newWorkerMetrics(c, name)
		// client-go creates its series when the queue is built, which is
		// at the first Add or Run; export them from now on, as zeros.
		exportQueueSeries(cfg.MetricsProvider, name)
	}
	q.lanes = newLanes[K]()
	q.newQueue = func() kworkqueue.TypedRateLimitingInterface[K] {
		// client-go's three layers, built as its constructors build them
		// but around lanes, the order in which keys are handed out.
		inner := kworkqueue.NewTypedWithConfig(kworkqueue.TypedQueueConfig[K]{
			Name: cfg.Name, MetricsProvider: cfg.MetricsProvider, Clock: clk, Queue: q.lanes,
		})
		cfg.DelayingQueue = kworkqueue.NewTypedDelayingQueueWithConfig(kworkqueue.TypedDelayingQueueConfig[K]{
			Name: cfg.Name, MetricsProvider: cfg.MetricsProvider, Clock: clk, Queue: inner,
		})
		return kworkqueue.NewTypedRateLimitingQueueWithConfig(limiter, cfg)
	}
	return q, nil
}

// queue returns client-go's queue, building it on first use.
func (q *Queue[K]) queue() kworkqueue.TypedRateLimitingInterface[K] {
	q.once.Do(func() { q.q = q.newQueue() })
	return q.q
}

// Add queues key for processing. Adding a key that is already waiting is a
// no-op; adding a key that is being processed reconciles it once more
// afterwards. Keys added after Run has returned are ignored.
func (q *Queue[K]) Add(key K) { q.queue().Add(key) }

// AddFirst queues key like Add, but ahead of every key added otherwise: for
// the rare event that lets a sync finish something a user waits for, say a
// machine's node that became Ready, while hundreds of keys wait for work
// whose result comes later anyway. Keys added with AddFirst are handed out
// in the order they were added; a key being processed is reconciled once
// more afterwards, first. Keys added with AddFirst all the time would
// starve the others: it is for events that come once or twice in an
// object's life.
func (q *Queue[K]) AddFirst(key K) {
	inner := q.queue() // lanes is in use from here on
	q.lanes.mark(key)
	inner.Add(key)
}

// AddAfter queues key once d has passed on the queue's clock.
func (q *Queue[K]) AddAfter(key K, d time.Duration) { q.queue().AddAfter(key, d) }

// AddRateLimited queues key after its backoff from the rate limiter.
func (q *Queue[K]) AddRateLimited(key K) { q.queue().AddRateLimited(key) }

// Forget resets key's backoff and retry count. The workers do this
// themselves; callers need it only for keys they requeued with
// AddRateLimited on their own.
func (q *Queue[K]) Forget(key K) { q.forget(key) }

// Len returns the number of keys waiting to be processed, not counting keys
// being processed or waiting for a delay. It is meant for tests and
// diagnostics; do not base decisions on it.
func (q *Queue[K]) Len() int { return q.queue().Len() }

// Run processes keys with the given number of workers until ctx ends. It then
// shuts the queue down, lets the workers finish the keys they are
// reconciling (their context is cancelled too, so they can cut long calls
// short), drops the keys still waiting, and returns once every worker has
// exited.
//
// Run returns nil after a shutdown, and an error only when called with fewer
// than one worker or more than once.
func (q *Queue[K]) Run(ctx context.Context, workers int) error {
	if workers < 1 {
		return fmt.Errorf("workqueue %q: need at least one worker, got %d", q.name, workers)
	}
	if !q.running.CompareAndSwap(false, true) {
		return fmt.Errorf("workqueue %q: Run called more than once", q.name)
	}

	logger := q.loggerFrom(ctx).WithValues("queue", q.name)
	logger.Info("Starting workers", "workers", workers)

	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for q.processNextItem(ctx) {
			}
		})
	}

	<-ctx.Done()
	logger.Info("Shutting down workers")
	// ShutDownWithDrain blocks until every key handed out has been marked
	// Done, so in-flight reconciles complete; workers then see the shutdown
	// from Get and return.
	q.queue().ShutDownWithDrain()
	wg.Wait()
	// ShutDownWithDrain stops only the inner queue; ShutDown also stops the
	// delaying queue's goroutine and its heartbeat ticker.
	q.queue().ShutDown()
	logger.Info("Workers stopped")
	return nil
}

// processNextItem reconciles one key and reports whether the worker should
// continue.
func (q *Queue[K]) processNextItem(ctx context.Context) bool {
	key, shutdown := q.queue().Get()
	if shutdown {
		return false
	}
	// Done releases the key so it can be handed out again; without it the key
	// would be stuck and ShutDownWithDrain would wait forever.
	defer q.queue().Done(key)

	if ctx.Err() != nil {
		// Run is stopping: keys that were still waiting are not started, their
		// context would be cancelled anyway. They are picked up again by the
		// informers' initial list after a restart.
		return true
	}
	q.reconcile(ctx, key)
	return true
}

// reconcile runs the Reconciler for key and acts on its outcome.
func (q *Queue[K]) reconcile(ctx context.Context, key K) {
	logger := q.loggerFrom(ctx).WithValues("queue", q.name, "key", key)
	ctx = logr.NewContext(ctx, logger)

	res, err := q.safeReconcile(ctx, key)
	switch {
	case err != nil:
		q.handleError(ctx, logger, key, err, res.RequeueAfter)
	case res.RequeueAfter > 0:
		q.metrics.reconciled(resultRequeue)
		// A fixed delay is progress, not failure: reset the backoff.
		q.forget(key)
		q.queue().AddAfter(key, res.RequeueAfter)
		logger.V(4).Info("Requeuing after delay", "after", res.RequeueAfter)
	case res.Requeue:
		q.metrics.reconciled(resultRequeue)
		q.queue().AddRateLimited(key)
		logger.V(4).Info("Requeuing with backoff")
	default:
		q.metrics.reconciled(resultSuccess)
		q.forget(key)
	}
}

// handleError retries key with backoff (or after the reconciler's own
// delay, when it gave one), or, with a positive MaxRetries, gives up once
// it has been retried that many times. Every failure is logged exactly once, here: reconcilers return
// errors instead of logging them. A failure that is nothing but conflicts
// (onlyConflicts) is retried the same way, but logged at V(1) and counted
// as result "conflict"; given up, it is an error.
func (q *Queue[K]) handleError(ctx context.Context, logger logr.Logger, key K, err error, after time.Duration) {
	retries := q.queue().NumRequeues(key)
	kvs := []any{"retries", retries}
	result := resultError
	if pe, ok := errors.AsType[*panicError](err); ok {
		result = resultPanic
		kvs = append(kvs, "stacktrace", string(pe.stack))
	}
	conflict := result == resultError && onlyConflicts(err)
	if conflict {
		result = resultConflict
	}
	q.metrics.reconciled(result)
	retrying := func(msg string, kvs ...any) {
		if conflict {
			logger.V(1).Info("Reconcile conflicted with a concurrent write"+msg, append(kvs, "err", err.Error())...)
			return
		}
		logger.Error(err, "Reconcile failed"+msg, kvs...)
	}

	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// Run is stopping and the reconciler gave up because of it; the queue
		// no longer takes keys, so there is nothing to retry or report.
		logger.V(1).Info("Reconcile interrupted by shutdown", "err", err)
		return
	}
	if after > 0 {
		retrying("; requeuing after the reconciler's delay", append(kvs, "after", after)...)
		q.forget(key)
		q.queue().AddAfter(key, after)
		return
	}
	if apiUnreachable(err) {
		after := q.unreachable.When(key)
		logger.Error(err, "Reconcile failed: the API server is out of reach; retrying without growing the key's backoff", append(kvs, "after", after)...)
		q.queue().AddAfter(key, after)
		return
	}
	if q.maxRetries <= 0 || retries < q.maxRetries {
		retrying("; requeuing with backoff", kvs...)
		q.queue().AddRateLimited(key)
		return
	}
	logger.Error(err, "Reconcile failed too often; giving up on key until it is added again", kvs...)
	q.metrics.gaveUp()
	q.forget(key)
}

// forget resets both of key's backoffs.
func (q *Queue[K]) forget(key K) {
	q.queue().Forget(key)
	q.unreachable.Forget(key)
}

// panicError is what a panicking Reconcile turns into, so that it takes the
// ordinary error path: logged, counted, retried with backoff.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string {
	return fmt.Sprintf("reconcile panicked: %v", e.value)
}

// safeReconcile calls the Reconciler and converts a panic into a
// *panicError, so one bad key cannot kill a worker (and with it, the
// process).
func (q *Queue[K]) safeReconcile(ctx context.Context, key K) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			// debug.Stack inside the deferred call still shows the frames of
			// the panic site, which is what makes the log useful.
			res, err = Result{}, &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return q.reconciler.Reconcile(ctx, key)
}

// loggerFrom returns the logger in ctx, or Options.Logger if there is none.
func (q *Queue[K]) loggerFrom(ctx context.Context) logr.Logger {
	if l, err := logr.FromContext(ctx); err == nil {
		return l
	}
	return q.logger
}
