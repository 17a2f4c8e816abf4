package drain

import (
	"context"
	"maps"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// budgetWatcher lets the Drain loop wake as soon as a budget it is blocked
// on allows a disruption again, instead of at NextCheck. It watches each
// blocking budget through the client, one watch per budget (a field
// selector on its name), for as long as the budget blocks. Its methods are
// called from the Drain goroutine only; the watch goroutines share nothing
// with it but the mutex-guarded latest state and the notify channel, and
// all of them have ended when stop returns.
type budgetWatcher struct {
	d      *Drainer
	logger logr.Logger
	wg     sync.WaitGroup

	watches map[string]*budgetWatch // by "namespace/name"
	failed  map[string]bool         // watches that could not start: not retried
	seen    map[string]uint64       // event that last woke a pass, by budget

	notify chan struct{} // signalled when allowed may have changed

	mu          sync.Mutex
	events      uint64            // numbers the events
	allowed     map[string]uint64 // budget → number of its latest event, if that allows a disruption
	startFailed map[string]bool   // budgets whose watch could not start
}

type budgetWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// newBudgetWatcher starts nothing.
func newBudgetWatcher(d *Drainer, logger logr.Logger) *budgetWatcher {
	return &budgetWatcher{
		d: d, logger: logger,
		watches: map[string]*budgetWatch{}, failed: map[string]bool{}, seen: map[string]uint64{},
		notify: make(chan struct{}, 1), allowed: map[string]uint64{}, startFailed: map[string]bool{},
	}
}

// watch makes the watched budgets those of keys: it starts watches for
// new ones (and for ones whose watch ended) and stops the others.
func (w *budgetWatcher) watch(ctx context.Context, keys []string) {
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	for k, bw := range w.watches {
		select {
		case <-bw.done:
			// Ended by the server: started again below, unless it could
			// not start at all (e.g. no permission to watch).
			delete(w.watches, k)
			w.mu.Lock()
			w.failed[k] = w.startFailed[k]
			w.mu.Unlock()
			continue
		default:
		}
		if !want[k] {
			bw.cancel()
			delete(w.watches, k)
			w.mu.Lock()
			delete(w.allowed, k)
			w.mu.Unlock()
		}
	}
	for _, k := range keys {
		if w.watches[k] != nil || w.failed[k] {
			continue
		}
		ns, name, ok := strings.Cut(k, "/")
		if !ok {
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		bw := &budgetWatch{cancel: cancel, done: make(chan struct{})}
		w.watches[k] = bw
		w.wg.Go(func() {
			defer close(bw.done)
			w.run(wctx, k, ns, name)
		})
	}
}

// run watches one budget until ctx ends or the server ends the watch.
func (w *budgetWatcher) run(ctx context.Context, key, ns, name string) {
	// Without a resourceVersion the watch starts with the budget's current
	// state, so a change between the last pass and now is not missed.
	wi, err := w.d.client.PolicyV1().PodDisruptionBudgets(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		if ctx.Err() == nil {
			w.logger.V(1).Info("Cannot watch PodDisruptionBudget; the next pass waits for NextCheck", "pdb", key, "err", err)
			w.mu.Lock()
			w.startFailed[key] = true
			w.mu.Unlock()
		}
		return
	}
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return
			}
			pdb, ok := ev.Object.(*policyv1.PodDisruptionBudget)
			if !ok || pdb.Namespace != ns || pdb.Name != name {
				continue
			}
			w.mu.Lock()
			if ev.Type != watch.Deleted && allowsDisruption(pdb) {
				w.events++
				w.allowed[key] = w.events
			} else {
				delete(w.allowed, key)
			}
			w.mu.Unlock()
			w.signal()
		}
	}
}

func (w *budgetWatcher) signal() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// woken reports whether a watched budget allows a disruption after an
// event that has not woken a pass yet, and remembers that it now has.
func (w *budgetWatcher) woken() (string, bool) {
	w.mu.Lock()
	allowed := maps.Clone(w.allowed)
	w.mu.Unlock()
	woke := ""
	for k, rv := range allowed {
		if w.watches[k] == nil {
			continue // no longer blocking; its goroutine saw one more event
		}
		if w.seen[k] != rv {
			w.seen[k] = rv
			woke = k
		}
	}
	return woke, woke != ""
}

// stop ends every watch and waits for their goroutines.
func (w *budgetWatcher) stop() {
	for _, bw := range w.watches {
		bw.cancel()
	}
	w.wg.Wait()
}

// allowsDisruption reports whether the budget's status, computed for its
// current generation, allows a disruption: what the eviction API checks.
func allowsDisruption(pdb *policyv1.PodDisruptionBudget) bool {
	return pdb.Status.ObservedGeneration >= pdb.Generation && pdb.Status.DisruptionsAllowed > 0
}
