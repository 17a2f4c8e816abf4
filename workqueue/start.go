package workqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/cache"
)

// cacheReportPeriod is how often WaitForCaches says it is still waiting.
const cacheReportPeriod = 15 * time.Second

// ControllerContext returns ctx with the logger a controller's Run logs
// with: the context's own when it carries one, else fallback (the
// controller's Options.Logger), named name.
func ControllerContext(ctx context.Context, fallback logr.Logger, name string) context.Context {
	logger, err := logr.FromContext(ctx)
	if err != nil {
		logger = fallback
	}
	return logr.NewContext(ctx, logger.WithName(name))
}

// WaitForCaches waits until every synced reports true, and says every 15
// seconds on the context's logger that it is still waiting, how many
// caches are pending and what usually causes it: a cache that never syncs
// (CRDs not installed, an API server out of reach) otherwise looks like a
// controller that does nothing. It returns false when ctx ended first.
func WaitForCaches(ctx context.Context, synced ...cache.InformerSynced) bool {
	logger := logr.FromContextOrDiscard(ctx)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for {
		pending := 0
		for _, s := range synced {
			if !s() {
				pending++
			}
		}
		if pending == 0 {
			return true
		}
		if time.Since(last) >= cacheReportPeriod {
			logger.Info("Waiting for informer caches; are the machine CRDs installed and the API servers reachable?",
				"pending", pending, "total", len(synced))
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// RunSynced is the Run of a controller with one queue: it checks workers,
// names the logger (ControllerContext, with fallback and name), waits for
// the caches (WaitForCaches) and runs q until ctx ends. It returns nil
// after ctx ended, also when that was before the caches synced, and an
// error only for bad arguments.
func (q *Queue[K]) RunSynced(ctx context.Context, workers int, fallback logr.Logger, name string, synced ...cache.InformerSynced) error {
	if workers < 1 {
		return fmt.Errorf("%s: need at least one worker, got %d", name, workers)
	}
	ctx = ControllerContext(ctx, fallback, name)
	if !WaitForCaches(ctx, synced...) {
		return nil
	}
	return q.Run(ctx, workers)
}

// ObjectOf is the object of an informer event: for a deletion the informer
// missed (a tombstone), the object's last known state.
func ObjectOf(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// KeyOf is the "namespace/name" key of an informer's object, tombstones
// included; "" for anything else.
func KeyOf(obj any) string {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return ""
	}
	return key
}

// Runner is q's Run with workers workers, for RunAll.
func (q *Queue[K]) Runner(workers int) func(context.Context) error {
	return func(ctx context.Context) error { return q.Run(ctx, workers) }
}

// RunAll runs each of runs in its own goroutine, waits until all returned
// and joins their errors: a controller with several queues runs them so.
func RunAll(ctx context.Context, runs ...func(context.Context) error) error {
	errs := make(chan error, len(runs))
	for _, run := range runs {
		go func() { errs <- run(ctx) }()
	}
	all := make([]error, 0, len(runs))
	for range runs {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}
