package drain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/mcmkit/mcm/internal/patch"
)

// Drainer drains nodes. It holds configuration only, no per-drain state,
// so one Drainer serves any number of nodes, concurrently. Create it with
// New.
type Drainer struct {
	client  kubernetes.Interface
	opts    Options
	metrics *metrics
}

// New returns a Drainer that works through client. It validates opts
// (negative durations and counts are errors; zero values take their
// defaults) and registers the metrics on opts.Registerer, if set. It starts
// no goroutines.
func New(client kubernetes.Interface, opts Options) (*Drainer, error) {
	if client == nil {
		return nil, errors.New("drain: client must not be nil")
	}
	o, err := opts.complete()
	if err != nil {
		return nil, fmt.Errorf("drain: invalid options: %w", err)
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("drain: %w", err)
	}
	return &Drainer{client: client, opts: o, metrics: m}, nil
}

// Plan reports what a drain of the node starting now would do with every
// pod on it, and why, without changing anything: the dry run.
func (d *Drainer) Plan(ctx context.Context, nodeName string) (Plan, error) {
	node, err := d.getNode(ctx, nodeName)
	if err != nil {
		return Plan{Node: nodeName}, err
	}
	snap, err := d.observe(ctx, node, State{})
	if err != nil {
		return Plan{Node: nodeName}, err
	}
	return Decide(snap, d.opts), nil
}

// Pass runs one bounded, non-blocking step of draining the node: it cordons
// the node (unless Options.SkipCordon), observes it, plans, and issues the
// evictions, force deletions and VolumeAttachment deletions the plan calls
// for, spending at most Options.PassTimeout on the evictions. It does not
// wait for pods to terminate.
//
// Hand it the State of the previous Result (the zero State for a new
// drain) and call it again at Result.NextCheck until Result.Done. Passes are
// idempotent: repeating one, or running one with an older state after a
// crash, evicts nothing twice and loses no pod.
//
// The error reports what went wrong besides the eviction outcomes the plan
// handles (429, 404, 409): failing reads, failing evictions, a cancelled
// context. Even with an error, Result.State reflects every request the
// pass made and must be persisted.
func (d *Drainer) Pass(ctx context.Context, nodeName string, state State) (Result, error) {
	logger := logr.FromContextOrDiscard(ctx).WithValues("node", nodeName)
	failed := Result{Plan: Plan{Node: nodeName, State: state}}
	if state.maxEvictRetries < 0 {
		return failed, fmt.Errorf("drain: State.MaxEvictRetries must not be negative, got %d", state.maxEvictRetries)
	}

	node, err := d.getNode(ctx, nodeName)
	if err != nil {
		return failed, err
	}
	if !d.opts.SkipCordon && !node.Spec.Unschedulable {
		if err := d.setUnschedulable(ctx, nodeName, true); err != nil {
			return failed, err
		}
		logger.Info("Cordoned node")
	}
	snap, err := d.observe(ctx, node, state)
	if err != nil {
		return failed, err
	}
	res := Result{Plan: Decide(snap, d.opts)}
	for _, e := range res.Events {
		d.emit(logger, e)
	}

	errs := d.apply(ctx, logger, &res)
	finish(&res.Plan, d.opts)

	if res.Done {
		d.metrics.forget(nodeName) // also after the pass that completed it
	} else {
		d.metrics.passDone(nodeName, res.RemainingPods())
	}
	if res.Done && res.State.completed.IsZero() {
		res.State.completed = res.Now
		d.metrics.drained(res.Now.Sub(res.State.start).Seconds())
		logger.Info("Drained node", "duration", res.Now.Sub(res.State.start).String())
	} else if !res.Done {
		logger.V(2).Info("Drain pass", "remaining", res.RemainingPods(), "nextCheck", res.NextCheck, "message", res.Message)
	}
	return res, errors.Join(errs...)
}

// Drain drains the node and returns when it is done, when a pod is refused
// (ErrRefused), on the first error of a pass, or when ctx ends — exactly
// then: every request and every wait is bound to ctx. It is Pass in a loop,
// waiting for NextCheck in between, with the state kept in memory. While
// the drain is blocked on PodDisruptionBudgets (State.BlockingBudgets) it
// watches them and runs the next pass as soon as one allows a disruption;
// NextCheck is the fallback. On failure it returns the last complete
// Result, whose Message names what blocks the drain, and an error that
// wraps ctx.Err() if ctx ended. No goroutine it starts outlives it.
//
// ctx's deadline bounds the call, not the drain: pods are force-deleted
// only under Options.Timeout (or UnreachableOptions.ForceAfter).
func (d *Drainer) Drain(ctx context.Context, nodeName string) (Result, error) {
	logger := logr.FromContextOrDiscard(ctx).WithValues("node", nodeName)
	budgets := newBudgetWatcher(d, logger)
	defer budgets.stop()
	var (
		state State
		last  Result
	)
	last.Node = nodeName
	for {
		res, err := d.Pass(ctx, nodeName, state)
		state = res.State
		if res.Decisions != nil {
			last = res
		} else {
			last.State = state
		}
		if err != nil {
			if ctx.Err() != nil {
				return last, d.notDrained(nodeName, last, ctx.Err())
			}
			return last, err
		}
		if res.Done {
			return res, nil
		}
		if res.Remaining[ActionRefuse] > 0 {
			return res, fmt.Errorf("node %s: %w: %s", nodeName, ErrRefused, res.Message)
		}
		budgets.watch(ctx, res.State.BlockingBudgets())
		if err := d.waitNext(ctx, logger, res.NextCheck, budgets); err != nil {
			return last, d.notDrained(nodeName, last, err)
		}
	}
}

// waitNext waits until next, or until a budget the drain is blocked on
// allows a disruption again. It returns ctx's error if ctx ends first.
func (d *Drainer) waitNext(ctx context.Context, logger logr.Logger, next time.Time, budgets *budgetWatcher) error {
	wait := next.Sub(d.opts.Clock.Now())
	if wait <= 0 {
		return ctx.Err()
	}
	timer := d.opts.Clock.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C():
			return nil
		case <-budgets.notify:
			if key, ok := budgets.woken(); ok {
				logger.V(1).Info("PodDisruptionBudget allows a disruption; next pass now", "pdb", key)
				return nil
			}
		}
	}
}

func (d *Drainer) notDrained(nodeName string, last Result, err error) error {
	if last.Message == "" {
		return fmt.Errorf("node %s not drained: %w", nodeName, err)
	}
	return fmt.Errorf("node %s not drained (%s): %w", nodeName, last.Message, err)
}

// Cordon marks the node unschedulable with a merge patch.
func (d *Drainer) Cordon(ctx context.Context, nodeName string) error {
	return d.setUnschedulable(ctx, nodeName, true)
}

// Uncordon marks the node schedulable again, e.g. when a drain is
// abandoned, and drops the node's drain metrics.
func (d *Drainer) Uncordon(ctx context.Context, nodeName string) error {
	if err := d.setUnschedulable(ctx, nodeName, false); err != nil {
		return err
	}
	d.metrics.forget(nodeName)
	return nil
}

func (d *Drainer) setUnschedulable(ctx context.Context, nodeName string, unschedulable bool) error {
	data := []byte(`{"spec":{"unschedulable":true}}`)
	verb := "cordoning"
	if !unschedulable {
		data = []byte(`{"spec":{"unschedulable":null}}`)
		verb = "uncordoning"
	}
	_, err := patch.Send(ctx, d.client.CoreV1().Nodes().Patch, nodeName, data, d.opts.FieldManager)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s node %q: %w", verb, nodeName, ErrNodeNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s node %q: %w", verb, nodeName, err)
	}
	return nil
}

// emit logs an event, hands it to Options.OnEvent and records it.
func (d *Drainer) emit(logger logr.Logger, e Event) {
	kv := []any{"pod", e.Pod.String(), "event", e.Type}
	if len(e.Volumes) > 0 {
		kv = append(kv, "volumes", e.Volumes)
	}
	// Failures are returned by Pass, and logged by whoever handles them;
	// here they are progress like the rest.
	switch e.Type {
	case EventEvictionBlocked:
		logger.V(2).Info(e.Message, kv...)
	default:
		logger.V(1).Info(e.Message, kv...)
	}
	if d.opts.OnEvent != nil {
		d.opts.OnEvent(e)
	}
}
