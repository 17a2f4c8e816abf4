package machineset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/api/machine/v1alpha1/validation"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

var everything = labels.Everything()

func labelsOf(m *v1alpha1.Machine) labels.Set { return labels.Set(m.Labels) }

// Reconcile syncs the set with the given key (sync). Run calls it from the
// queue's workers.
func (c *Controller) Reconcile(ctx context.Context, key string) (workqueue.Result, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workqueue.Result{}, nil // malformed: retrying cannot help
	}
	cached, err := c.sets.MachineSets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.exp.Delete(key)
		c.writes.Forget(key)
		return workqueue.Result{}, nil
	}
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("getting machine set %s: %w", key, err)
	}
	if !c.writes.Observed(key, cached.ResourceVersion) {
		return workqueue.Result{}, nil // the update event of our write requeues the set
	}
	if !c.exp.Satisfied(key) {
		// Machines this set created or deleted are not in the cache yet:
		// acting now could create or delete them twice. Their events
		// requeue the set; the expectations' TTL is the safety net.
		return workqueue.Result{RequeueAfter: c.exp.TTL()}, nil
	}
	ctx = logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithValues("machineSet", key))
	return c.sync(ctx, key, cached)
}

// sync is one pass over the set, in four phases: observe reads the caches
// (and, before an adoption, the set once more from the API server) and
// writes nothing; plan decides every write but the status, purely; apply
// makes them; status computes the set's status from what was seen and
// done (calculateStatus, pure) and writes it only when it changed.
func (c *Controller) sync(ctx context.Context, key string, cached *v1alpha1.MachineSet) (workqueue.Result, error) {
	s, err := c.observe(ctx, key, cached)
	if err != nil {
		return workqueue.Result{}, err
	}
	done, err := c.apply(ctx, s, plan(s, c.opts.BurstReplicas))
	if err != nil {
		return workqueue.Result{}, err
	}
	return c.status(ctx, s, done)
}

// status computes the set's status from what the sync saw and did, writes
// it when it changed, and returns the sync's result.
func (c *Controller) status(ctx context.Context, s *scope, out outcome) (workqueue.Result, error) {
	if s.invalid != "" {
		err := c.writeStatus(ctx, out.set, statusInput{Now: s.now, Set: out.set, Machines: out.owned,
			Selector: out.set.Status.LabelSelector, ReplicaFailure: replicaFailure{Invalid: s.invalid}})
		return workqueue.Result{}, errors.Join(fmt.Errorf("machine set %s is invalid: %s", s.key, s.invalid), err)
	}
	if out.finished {
		return workqueue.Result{}, out.err
	}
	syncErr := out.err
	if msg := out.failure.message(); msg != "" {
		syncErr = errors.Join(syncErr, errors.New(msg))
	}
	err := c.writeStatus(ctx, out.set, statusInput{Now: s.now, Set: out.set, Machines: out.owned, Selector: s.selector,
		ReplicaFailure: out.failure, Capped: s.capped, Foreign: foreignMessage(out.foreign), Done: out.replicas, Synced: syncErr == nil})
	if err := errors.Join(syncErr, err); err != nil {
		return workqueue.Result{}, err
	}
	return workqueue.Result{RequeueAfter: requeueAfter(s.now, out.requeueAt, c.opts.Resync)}, nil
}

// setConditions is the conditions list of a set's status, which
// patch.WriteStatus guards.
func setConditions(st v1alpha1.MachineSetStatus) any { return st.Conditions }

// writeStatus writes the computed status when it differs from the stored
// (patch.WriteStatus says when the write is guarded, and why).
func (c *Controller) writeStatus(ctx context.Context, set *v1alpha1.MachineSet, in statusInput) error {
	updated, err := patch.WriteStatus(ctx, c.client.MachineV1alpha1().MachineSets(set.Namespace).Patch, set,
		set.Status, calculateStatus(in), setConditions, c.opts.FieldManager)
	if err != nil {
		return fmt.Errorf("writing status of machine set %s: %w", set.Name, err)
	}
	if updated != set {
		c.writes.Wrote(workqueue.KeyOf(set), updated.ResourceVersion)
	}
	return nil
}

// invalid describes why a set that got past admission cannot work; "" if
// it can.
func invalid(set *v1alpha1.MachineSet) string {
	errs := validation.ValidateMachineSet(set)
	if len(errs) == 0 {
		return ""
	}
	return errs.ToAggregate().Error()
}

// unusableClass says why the set's template cannot make machines because
// its MachineClass does not exist or is being deleted (with the event
// reason), or "". Without a class lister it checks nothing.
func (c *Controller) unusableClass(set *v1alpha1.MachineSet) (reason, problem string, err error) {
	if c.classes == nil {
		return "", "", nil
	}
	name := set.Spec.Template.Spec.Class.Name
	class, err := c.classes.MachineClasses(set.Namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return ReasonClassNotFound, fmt.Sprintf("the template names MachineClass %q, which does not exist in namespace %s; no machine is created until it does", name, set.Namespace), nil
	case err != nil:
		return "", "", fmt.Errorf("getting machine class %s: %w", name, err)
	case class.DeletionTimestamp != nil:
		// The machine controller would refuse their VMs anyway.
		return ReasonClassDeleting, fmt.Sprintf("the template names MachineClass %q, which is being deleted; no machine is created from it", name), nil
	}
	return "", "", nil
}

// joinNonEmpty joins the non-empty problems with "; ".
func joinNonEmpty(problems ...string) string {
	return strings.Join(slices.DeleteFunc(problems, func(s string) bool { return s == "" }), "; ")
}

func (c *Controller) event(set *v1alpha1.MachineSet, typ, reason, msg string) {
	if c.opts.Recorder != nil {
		c.opts.Recorder.Eventf(set, typ, reason, "%s", msg)
	}
}
