package machineset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/api/machine/v1alpha1/validation"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/ownership"
	"github.com/mcmkit/mcm/internal/parallel"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

var everything = labels.Everything()

func labelsOf(m *v1alpha1.Machine) labels.Set { return labels.Set(m.Labels) }

// Reconcile syncs the set with the given key: observe (caches), plan
// (ownership.Decide, planReplicas, calculateStatus: pure), apply, status.
// Run calls it from the queue's workers.
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

func (c *Controller) sync(ctx context.Context, key string, cached *v1alpha1.MachineSet) (workqueue.Result, error) {
	now := c.opts.Clock.Now()
	set := cached
	if problem := invalid(set); problem != "" {
		// Nothing is created from a set that cannot work; the set says why.
		if !reported(set, v1alpha1.MachineSetReplicaFailure, problem) {
			c.event(set, corev1.EventTypeWarning, ReasonInvalid, problem)
		}
		// Without a usable selector the set's machines are those it
		// controls; the status keeps counting them.
		all, err := c.machines.Machines(set.Namespace).List(everything)
		if err != nil {
			return workqueue.Result{}, fmt.Errorf("listing machines: %w", err)
		}
		controlled := slices.DeleteFunc(all, func(m *v1alpha1.Machine) bool {
			ref := metav1.GetControllerOf(m)
			return ref == nil || ref.UID != set.UID
		})
		err = c.writeStatus(ctx, set, statusInput{Now: now, Set: set, Machines: controlled, Selector: set.Status.LabelSelector, ReplicaFailure: replicaFailure{Invalid: problem}})
		return workqueue.Result{}, errors.Join(fmt.Errorf("machine set %s is invalid: %s", key, problem), err)
	}
	selector, _ := metav1.LabelSelectorAsSelector(set.Spec.Selector) // validated above

	if set.DeletionTimestamp == nil && !slices.Contains(set.Finalizers, Finalizer) {
		var err error
		if set, err = c.setFinalizer(ctx, set, true); err != nil {
			return workqueue.Result{}, err
		}
	}
	all, err := c.machines.Machines(set.Namespace).List(everything)
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("listing machines: %w", err)
	}
	own := ownership.Decide(set, selector, all)
	var errs []error
	adopted, err := c.adopt(ctx, set, own.Adopt)
	errs = append(errs, err)
	own.Owned = append(own.Owned, adopted...)
	errs = append(errs, c.release(ctx, set, own.Release))
	errs = append(errs, c.propagate(ctx, set, own.Owned))

	frozen := machinestate.FrozenReason(ctx, "set", set.Labels, c.opts.SafetyGate)
	classReason, noClass, err := c.unusableClass(set)
	if err != nil {
		return workqueue.Result{}, err
	}
	policy, perr := policyOf(set, c.opts.DeletionPolicy)
	if perr != nil {
		c.event(set, corev1.EventTypeWarning, ReasonInvalid, perr.Error())
	}
	wanted, capped := wantedReplicas(set, c.opts.MaxReplicas)
	if capped != "" && !reported(set, ConditionReplicasCapped, capped) {
		c.event(set, corev1.EventTypeWarning, ReasonTooManyReplicas, capped)
	}
	foreign := c.prov.foreign(key, set, own.Owned, persistedForeign(set), now, c.exp.TTL())
	set, err = c.recordForeign(ctx, set, foreign)
	errs = append(errs, err)
	rankBy := ladderOf(set, policy, now)
	rankBy.Foreign = uidSet(foreign)
	plan := planReplicas(set, wanted, own.Owned, frozen != "" || noClass != "", c.opts.BurstReplicas, rankBy)
	done := c.apply(ctx, key, set, plan)
	failure := replicaFailure{NoClass: noClass, Create: done.CreateFailure, Delete: done.DeleteFailure}
	if frozen == "" || plan.HeldBack == 0 {
		c.toldFrozen.Forget(key)
	}
	switch {
	case plan.HeldBack == 0:
	case frozen != "":
		// The Frozen condition is the safety controller's; the set tells
		// by an event, once per situation, that it holds machines back.
		if c.toldFrozen.First(key, frozen) {
			c.event(set, corev1.EventTypeWarning, ReasonFrozen, fmt.Sprintf("not creating %d machine(s): %s", plan.HeldBack, frozen))
		}
	case !reported(set, v1alpha1.MachineSetReplicaFailure, failure.message()):
		c.event(set, corev1.EventTypeWarning, classReason, fmt.Sprintf("not creating %d machine(s): %s", plan.HeldBack, noClass))
	}
	if set.DeletionTimestamp != nil && len(own.Owned) == 0 && done.failed() == "" {
		_, err := c.setFinalizer(ctx, set, false)
		return workqueue.Result{}, err
	}
	syncErr := errors.Join(errs...)
	if msg := failure.message(); msg != "" {
		syncErr = errors.Join(syncErr, errors.New(msg))
	}
	err = c.writeStatus(ctx, set, statusInput{Now: now, Set: set, Machines: own.Owned, Selector: selector.String(),
		ReplicaFailure: failure, Capped: capped, Foreign: foreignMessage(foreign), Done: done, Synced: syncErr == nil})
	if err := errors.Join(syncErr, err); err != nil {
		return workqueue.Result{}, err
	}
	return workqueue.Result{RequeueAfter: c.opts.Resync}, nil
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

// applied is what apply did.
type applied struct {
	Created, Deleted int
	// CreateFailure and DeleteFailure describe the creations and the
	// deletions that failed; "" when none did.
	CreateFailure, DeleteFailure string
}

func (a applied) failed() string { return joinNonEmpty(a.DeleteFailure, a.CreateFailure) }

// apply issues the plan: deletions first, all at once, then creations in
// slow-start batches. Expectations are recorded before the requests, so
// that events that beat the answers are counted.
func (c *Controller) apply(ctx context.Context, key string, set *v1alpha1.MachineSet, plan replicaPlan) applied {
	uids := make([]types.UID, 0, len(plan.Delete))
	for _, m := range plan.Delete {
		uids = append(uids, m.UID)
	}
	c.exp.Set(key, plan.Create, uids...)
	var done applied
	done.Deleted, done.DeleteFailure = c.deleteMachines(ctx, key, set, plan.Delete)
	if plan.Create > 0 {
		run := newCreationRun(set, plan.Active, plan.Create)
		c.creating.start(key, run)
		// An update the cache got since this sync read the set has no
		// run to lower yet: look once more.
		if current, err := c.sets.MachineSets(set.Namespace).Get(set.Name); err == nil {
			run.lower(c.stillWanted(run, current))
		}
		t := c.slowStart(ctx, run, func(ctx context.Context) error { return c.createMachine(ctx, set) })
		c.creating.end(key, run)
		done.Created = t.Created
		// The failed, canceled and skipped creations will never be seen;
		// those canceled after they may have been sent may be.
		if unseen := plan.Create - t.Created - t.Unknown; unseen > 0 {
			c.exp.LowerExpectations(key, unseen)
		}
		if t.Canceled > 0 {
			c.event(set, corev1.EventTypeNormal, ReasonCreateCanceled,
				fmt.Sprintf("Canceled %d machine creation(s) not yet sent: %v", t.Canceled, errScaledDown))
		}
		if t.Err != nil {
			done.CreateFailure = fmt.Sprintf("created %d of %d machines: %v", t.Created, plan.Create, t.Err)
			c.event(set, corev1.EventTypeWarning, ReasonCreateFailed, done.CreateFailure)
		}
	}
	return done
}

// deleteMachines deletes the machines in parallel, one request each, as
// the ReplicaSet controller does: a deletion is not a bet on a template
// that may be broken, so it needs no slow start, and the plan holds at
// most BurstReplicas machines, which bounds the requests in flight as the
// creations' largest batch is bounded. Issued one after the other, a
// rolling update's scale-down of a hundred machines took seconds, and the
// rollout waited for it. It returns how many were deleted, and the
// failures other than a machine that is gone or was replaced already, in
// the order of the machines' names ("" if none): the plan's order follows
// the deletion ladder, which may change between syncs, and a message that
// changed only its order would be a status write.
func (c *Controller) deleteMachines(ctx context.Context, key string, set *v1alpha1.MachineSet, machines []*v1alpha1.Machine) (deleted int, failure string) {
	var done atomic.Int32
	work := make([]func(context.Context) error, 0, len(machines))
	for _, m := range machines {
		work = append(work, func(ctx context.Context) error {
			uid := m.UID
			err := c.client.MachineV1alpha1().Machines(m.Namespace).Delete(ctx, m.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			if err != nil {
				c.exp.DeletionFailed(key, uid)
			}
			switch {
			case err == nil:
				done.Add(1)
				c.event(set, corev1.EventTypeNormal, ReasonDeleted, "Deleted machine "+m.Name)
				if isStale(m) {
					c.metrics.staleMachines.Inc()
				}
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				return nil // gone (or replaced) already
			default:
				err = fmt.Errorf("deleting machine %s: %w", m.Name, err)
				c.event(set, corev1.EventTypeWarning, ReasonDeleteFailed, err.Error())
				return err
			}
			return nil
		})
	}
	var failures []string
	for _, err := range parallel.Run(ctx, len(work), work) {
		failures = append(failures, err.Error())
	}
	slices.Sort(failures)
	return int(done.Load()), strings.Join(failures, "; ")
}

// adopt takes orphans into the set after an uncached read confirms the
// set is the one the cache holds and not being deleted (the cache may be
// older than a delete and re-create of the same name).
func (c *Controller) adopt(ctx context.Context, set *v1alpha1.MachineSet, orphans []*v1alpha1.Machine) ([]*v1alpha1.Machine, error) {
	if len(orphans) == 0 {
		return nil, nil
	}
	if ok, err := ownership.CanAdopt(ctx, c.client.MachineV1alpha1().MachineSets(set.Namespace).Get, set); err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("confirming machine set before adoption: %w", err)
		}
		return nil, err
	}
	var adopted []*v1alpha1.Machine
	var errs []error
	for _, m := range orphans {
		updated, err := ownership.Adopt(ctx, c.client.MachineV1alpha1().Machines(m.Namespace).Patch, m, controllerRef(set), c.opts.FieldManager)
		if err != nil {
			err = fmt.Errorf("setting owners of machine %s: %w", m.Name, err)
			c.event(set, corev1.EventTypeWarning, ReasonAdoptFailed, err.Error())
			errs = append(errs, err)
			continue
		}
		adopted = append(adopted, updated)
	}
	return adopted, errors.Join(errs...)
}

// release lets go of machines the set no longer selects.
func (c *Controller) release(ctx context.Context, set *v1alpha1.MachineSet, machines []*v1alpha1.Machine) error {
	var errs []error
	for _, m := range machines {
		if _, err := ownership.Release(ctx, c.client.MachineV1alpha1().Machines(m.Namespace).Patch, m, set, c.opts.FieldManager); err != nil {
			err = fmt.Errorf("setting owners of machine %s: %w", m.Name, err)
			c.event(set, corev1.EventTypeWarning, ReasonReleaseFailed, err.Error())
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// propagate brings the node template, the machine configuration and the
// class kind of the set's machines in line with its template.
func (c *Controller) propagate(ctx context.Context, set *v1alpha1.MachineSet, machines []*v1alpha1.Machine) error {
	var errs []error
	want := &set.Spec.Template.Spec
	for _, m := range machines {
		// Every machine event syncs the set: compare cheaply first, and
		// build a patch only for a machine that lags behind.
		if machinestate.BeingDeleted(m) || machinestate.SameInPlace(&m.Spec, want) {
			continue
		}
		data, err := patch.Diff(machinestate.MachineInPlaceFields, &m.Spec, want, m.ResourceVersion)
		if err == nil && data != nil {
			_, err = patch.Send(ctx, c.client.MachineV1alpha1().Machines(m.Namespace).Patch, m.Name, data, c.opts.FieldManager)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("updating machine %s from the template: %w", m.Name, err))
		}
	}
	return errors.Join(errs...)
}

// setFinalizer adds or removes the set's finalizer.
func (c *Controller) setFinalizer(ctx context.Context, set *v1alpha1.MachineSet, want bool) (*v1alpha1.MachineSet, error) {
	updated, err := patch.SetFinalizer(ctx, c.client.MachineV1alpha1().MachineSets(set.Namespace).Patch, set, Finalizer, want, c.opts.FieldManager)
	if err != nil {
		return set, fmt.Errorf("updating finalizer of machine set %s: %w", set.Name, err)
	}
	if updated != set {
		c.writes.Wrote(workqueue.KeyOf(set), updated.ResourceVersion)
	}
	return updated, nil
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

func (c *Controller) event(set *v1alpha1.MachineSet, typ, reason, msg string) {
	if c.opts.Recorder != nil {
		c.opts.Recorder.Eventf(set, typ, reason, "%s", msg)
	}
}
