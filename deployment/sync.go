package deployment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/api/machine/v1alpha1/validation"
	"github.com/mcmkit/mcm/workqueue"
)

// Reconcile syncs the deployment with the given key: observe (caches),
// plan (the pure planners), apply, status. Run calls it from the queue's
// workers.
func (c *Controller) Reconcile(ctx context.Context, key string) (workqueue.Result, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workqueue.Result{}, nil // malformed: retrying cannot help
	}
	d, err := c.deployments.MachineDeployments(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.writes.Forget(key)
		return workqueue.Result{}, nil
	}
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("getting machine deployment %s: %w", key, err)
	}
	if !c.writes.Observed(key, d.ResourceVersion) {
		return workqueue.Result{}, nil // the update event of our write requeues it
	}
	ctx = logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithValues("machineDeployment", key))
	return c.sync(ctx, d)
}

// sync is one reconcile of a deployment: observe reads (caches), plan
// decides every write from what was read (pure), apply makes the writes,
// and the status, computed from what was read and what apply did, is
// written when it changed.
func (c *Controller) sync(ctx context.Context, d *v1alpha1.MachineDeployment) (workqueue.Result, error) {
	s, wait, err := c.observe(ctx, d)
	if err != nil || wait {
		return workqueue.Result{}, err
	}
	p := plan(s, c.opts.MaxReplicas)
	done := c.apply(ctx, s, p)
	switch {
	case done.halted || done.collision:
		return workqueue.Result{}, done.err
	case p.phase == phaseInvalid:
		// Nothing is done for a deployment that cannot work; it says why.
		return workqueue.Result{}, errors.Join(done.err, c.reportInvalid(ctx, done.d, p.invalid, s.now))
	case p.phase != phaseStep:
		return workqueue.Result{}, done.err
	}
	st, err := c.updateStatus(ctx, s, p, done)
	if err := errors.Join(done.err, err); err != nil {
		return workqueue.Result{}, err
	}
	settled := *p.d
	settled.Status = st
	return workqueue.Result{RequeueAfter: c.requeueAfter(&settled, s.counts, s.now)}, nil
}

// invalid describes why a deployment that got past admission cannot work;
// "" if it can. A selector without a positive requirement (empty, or only
// NotIn and DoesNotExist) is among them (validation.ValidateMachineDeployment):
// it would claim nearly every set of the namespace.
func invalid(d *v1alpha1.MachineDeployment) string {
	if errs := validation.ValidateMachineDeployment(d); len(errs) > 0 {
		return errs.ToAggregate().Error()
	}
	if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err != nil || sel.Empty() {
		return "spec.selector is empty: it would select every machine set of the namespace"
	}
	return ""
}

// requeueAfter is when a deployment that changes no more must be looked at
// again: at its progress deadline (a stuck rollout sends no events), when
// a machine's minReadySeconds run out on a deployment that applies them (it
// becomes available without an event), or at the resync.
func (c *Controller) requeueAfter(d *v1alpha1.MachineDeployment, counts map[string]machineCounts, now time.Time) time.Duration {
	after := c.opts.Resync
	if check, ok := progressCheckAfter(d, d.Status, now); ok {
		after = min(after, check)
	}
	for _, cnt := range counts {
		if !cnt.AvailableAt.IsZero() && cnt.AvailableAt.After(now) {
			after = min(after, cnt.AvailableAt.Sub(now)+time.Second)
		}
	}
	return after
}
