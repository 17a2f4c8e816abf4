package machine

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/nodebinding"
	"github.com/mcmkit/mcm/workqueue"
)

var everything = labels.Everything()

// ReconcileMachine syncs the machine with the given "namespace/name" key:
// observe, plan, apply, status. Run calls it from the machine queue's
// workers; tests and embedders may call it directly.
func (c *Controller) ReconcileMachine(ctx context.Context, key string) (workqueue.Result, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workqueue.Result{}, nil // malformed: retrying cannot help
	}
	cached, err := c.machines.Machines(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.writes.Forget(key)
		c.statusWrites.forget(key)
		c.finalized.Delete(key)
		c.failures.reset(key)
		return workqueue.Result{}, nil
	}
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("getting machine %s: %w", key, err)
	}
	if !c.finalized.Satisfied(key) {
		// Gone; the cache does not know yet. Its deletion event, or a new
		// machine of the same name after it, ends the wait.
		return workqueue.Result{}, nil
	}
	if !c.writes.Observed(key, cached.ResourceVersion) {
		// Our last write is not in the cache yet; its event requeues us,
		// a status write's too once it is awaited (see updateQueues). The
		// cache is read again after that: an event handled in between
		// found no sync waiting, but its version is in the cache by then.
		c.statusWrites.await(key)
		if cached, err = c.machines.Machines(namespace).Get(name); err != nil || !c.writes.Observed(key, cached.ResourceVersion) {
			return workqueue.Result{RequeueAfter: time.Second}, nil
		}
	}
	logger := logr.FromContextOrDiscard(ctx).WithValues("machine", key)
	ctx = logr.NewContext(ctx, logger)
	if cached.DeletionTimestamp != nil {
		return c.syncDeletion(ctx, cached)
	}
	return c.syncMachine(ctx, cached)
}

// syncMachine handles a machine that is not being deleted: observe
// (reads only), plan (pure, once: planMachine), apply, and the requeue
// from what was applied. A creation is one phase of apply (createPhase)
// whose outcome planCreation plans once; only the write-ahead it may need
// goes before it.
func (c *Controller) syncMachine(ctx context.Context, cached *v1alpha1.Machine) (workqueue.Result, error) {
	obs, secret, err := c.observe(ctx, cached)
	if err != nil {
		return workqueue.Result{}, err // the driver's word is asked for again with the queue's backoff
	}
	p := planMachine(obs, &c.opts)
	logr.FromContextOrDiscard(ctx).V(4).Info("Planned", "plan", p.Kind, "phase", cached.Status.CurrentStatus.Phase)
	if p.Kind == planCreate {
		// A failed creation runs again on its backoff only, whatever
		// queued the machine (see updates.go).
		if wait := c.failures.held(workqueue.KeyOf(cached), obs.Now); wait > 0 {
			logr.FromContextOrDiscard(ctx).V(4).Info("Creation waits for its backoff", "after", wait)
			return workqueue.Result{RequeueAfter: wait}, nil
		}
	}
	done, err := c.apply(ctx, obs, secret, p)
	if err != nil {
		return workqueue.Result{}, err
	}
	return c.requeue(ctx, done)
}

// applied is what apply did.
type applied struct {
	// Plan is the plan written: apply's, or for a creation the plan of
	// its outcome (planCreation).
	Plan machinePlan
	// Machine is the machine as written; nil when nothing was applied
	// because every creation slot was taken, and the machine waits for
	// one for at most Wait.
	Machine *v1alpha1.Machine
	Wait    time.Duration
	// TokenErr is the failure of the bootstrap token's cleanup after a
	// join, retried with the queue's backoff.
	TokenErr error
	// Backoff is the wait before the next creation, set when a creation
	// failed; it was held (see backOff) before anything was written.
	Backoff time.Duration
}

// apply makes the writes of plan p: for planCreate the creation phase
// first, which turns p into the plan of its outcome; then the machine
// (metadata, then status, each only if it changed), its events and
// metrics, the bootstrap token's cleanup after a join, and the node.
func (c *Controller) apply(ctx context.Context, obs observation, secret *corev1.Secret, p machinePlan) (applied, error) {
	c.reportClaim(ctx, obs.Machine, p.Claim)
	if p.Clamped != nil {
		logr.FromContextOrDiscard(ctx).Info("Timestamps in the future set to now", "message", p.Clamped.Message)
		c.recordEvent(obs.Machine, p.Clamped)
	}
	cur, node := obs.Machine, obs.Node
	var backoff time.Duration
	if p.Kind == planCreate {
		release, wait := c.takeCreationSlot(ctx, workqueue.KeyOf(cur))
		if release == nil {
			return applied{Plan: p, Wait: wait}, nil
		}
		defer release()
		var err error
		if cur, p, node, err = c.createPhase(ctx, obs, secret, p); err != nil {
			return applied{Plan: p}, err
		}
		c.reportClaim(ctx, cur, p.Claim)
		if p.Retry != retryNone {
			// The driver was called and the creation failed: its backoff
			// holds whether or not the write of the outcome lands, so
			// that a conflict or a server error on that write does not
			// call the driver again on the queue's short backoff.
			backoff = c.backOff(workqueue.KeyOf(cur), p)
		}
	}
	if p.Kind == planWaitForClass {
		c.classQueue.Add(classKeyOf(cur))
	}
	if p.PreserveDrain != nil {
		p = drainOnceRecorded(ctx, obs, p, PreserveDrainCondition, c.preserveDrainPass)
	}
	if p.InPlaceDrain != nil {
		p = drainOnceRecorded(ctx, obs, p, InPlaceDrainCondition, c.inPlaceDrainPass)
	}
	if p.Node != nil && nodebinding.Owner(node) != cur.UID {
		var err error
		if node, p, err = c.bindFirst(ctx, node, p); err != nil {
			return applied{Plan: p}, err
		}
	}
	written, err := c.writeMachine(ctx, cur, p.Machine)
	if p.MarkedFailed {
		c.gate.Replaced(ctx, obs.Machine, err == nil)
	}
	if err != nil {
		return applied{Plan: p, Backoff: backoff}, err
	}
	c.recordEvent(written, p.Event)
	for _, e := range append(p.InPlaceEvents, p.PreserveEvents...) {
		c.recordEvent(written, e)
	}
	c.recordInPlace(written, p.InPlaceOutcome)
	labels := c.metricLabels(written)
	if p.MarkedFailed {
		logr.FromContextOrDiscard(ctx).Info("Machine marked Failed by the health timeout")
	}
	if p.Joined {
		c.metrics.join.WithLabelValues(labels...).Observe(p.JoinTook.Seconds())
	}
	done := applied{Plan: p, Machine: written, Backoff: backoff}
	// After the join is written, so that a failure never holds it up.
	done.TokenErr = c.cleanUpBootstrapTokens(ctx, written, p.Joined)
	if p.FailedJoin {
		c.metrics.failedJoins.WithLabelValues(labels...).Inc()
	}
	if err := c.writeNode(ctx, node, p); err != nil {
		return done, err
	}
	return done, nil
}

// requeue says when the machine is synced again after apply: after the
// machine's own backoff when the plan reports a failure (the worker
// reports p.Err), else after p.RequeueAfter, or with the queue's backoff
// when only the bootstrap token's cleanup failed.
func (c *Controller) requeue(ctx context.Context, done applied) (workqueue.Result, error) {
	p, written := done.Plan, done.Machine
	if written == nil {
		return workqueue.Result{RequeueAfter: done.Wait}, nil
	}
	key := workqueue.KeyOf(written)
	if p.Retry != retryNone {
		delay := done.Backoff
		if delay == 0 {
			delay = c.backOff(key, p)
		}
		logr.FromContextOrDiscard(ctx).V(2).Info("Retrying after failure", "after", delay, "description", written.Status.LastOperation.Description)
		return workqueue.Result{RequeueAfter: delay}, p.Err
	}
	if p.Kind != planBadInput {
		c.failures.reset(key)
	}
	if done.TokenErr != nil {
		return workqueue.Result{}, done.TokenErr // retried with the queue's backoff
	}
	return workqueue.Result{RequeueAfter: p.RequeueAfter}, nil
}

// backOff counts a failure of the machine with key and holds its next
// creation for the backoff that follows (see failureCounter), never past
// the creation timeout (p.TimeoutIn); it returns that backoff.
func (c *Controller) backOff(key string, p machinePlan) time.Duration {
	delay := c.opts.retryDelay(p.Retry, c.failures.inc(key))
	if p.TimeoutIn > 0 {
		delay = min(delay, p.TimeoutIn)
	}
	c.failures.hold(key, c.opts.Clock.Now().Add(delay))
	return delay
}

// bindFirst binds node to the machine before anything else of p is
// written: a machine that loses its node to another (another manager's
// on a shared target) writes nothing that says it has it. It returns the
// node as written and p, whose node sync is dropped, to be planned again
// on the node as written, when the binding could not carry it.
func (c *Controller) bindFirst(ctx context.Context, node *corev1.Node, p machinePlan) (*corev1.Node, machinePlan, error) {
	node, synced, err := c.bindNode(ctx, node, p.Node, p.Machine)
	if err != nil || synced {
		return node, p, err
	}
	p.Node = nil
	if p.RequeueAfter == 0 || p.RequeueAfter > time.Second {
		p.RequeueAfter = time.Second
	}
	return node, p, nil
}

// writeNode makes p's writes to the machine's node, after the machine's:
// its sync, then its conditions.
func (c *Controller) writeNode(ctx context.Context, node *corev1.Node, p machinePlan) error {
	if p.Node != nil {
		if err := c.patchNode(ctx, node, p.Node); err != nil {
			return err
		}
	}
	// The machine's phase is written before the node's InPlaceUpdate
	// condition: the node agent acts on ReadyForUpdate only once the
	// machine is InPlaceUpdating, and the deployment controller moves a
	// machine to its new set only once it is no longer.
	for _, cond := range []*corev1.NodeCondition{p.NodeCondition, p.InPlaceCondition} {
		if cond != nil && node != nil {
			if err := c.patchNodeCondition(ctx, node.Name, *cond); err != nil {
				return err
			}
		}
	}
	return nil
}
