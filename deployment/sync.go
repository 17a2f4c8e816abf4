package deployment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/api/machine/v1alpha1/validation"
	"github.com/mcmkit/mcm/internal/ownership"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/safety"
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

// observed is what a sync sees of a deployment's sets and machines.
type observed struct {
	newSet *v1alpha1.MachineSet
	old    []*v1alpha1.MachineSet
	// machines holds the machines of each owned set by set name.
	machines map[string][]*v1alpha1.Machine
	counts   map[string]machineCounts
}

func (o observed) all() []*v1alpha1.MachineSet { return withNew(o.newSet, o.old) }

func (c *Controller) sync(ctx context.Context, d *v1alpha1.MachineDeployment) (workqueue.Result, error) {
	now := c.opts.Clock.Now()
	if problem := invalid(d); problem != "" {
		// Nothing is done for a deployment that cannot work; it says why.
		return workqueue.Result{}, c.reportInvalid(ctx, d, problem)
	}
	selector, _ := metav1.LabelSelectorAsSelector(d.Spec.Selector) // validated above
	if d.DeletionTimestamp == nil && !slices.Contains(d.Finalizers, Finalizer) {
		var err error
		if d, err = c.setFinalizer(ctx, d, true); err != nil {
			return workqueue.Result{}, err
		}
	}
	obs, wait, err := c.observe(ctx, d, selector, now)
	if err != nil || wait {
		return workqueue.Result{}, err
	}
	if d.DeletionTimestamp != nil {
		return workqueue.Result{}, c.finish(ctx, d, obs)
	}
	if rev, asked := rollbackRequest(d); asked {
		// The rollback rewrites the template; its update event syncs the
		// deployment again, on the template it brought back.
		return workqueue.Result{}, c.rollback(ctx, d, obs.all(), rev)
	}
	d, marked, err := c.markForAutoscaler(ctx, d, obs, now)
	if marked || err != nil {
		// The marked machines' events sync the deployment again, once the
		// cache shows the marks; only then may their sets shrink.
		return workqueue.Result{}, err
	}
	var errs []error

	d, capped := withinCeiling(d, c.opts.MaxReplicas)
	if capped != "" && !reported(d, ConditionReplicasCapped, capped) {
		c.warn(d, ReasonTooManyReplicas, capped)
	}
	frozen := frozenReason(ctx, d, c.opts.SafetyGate)
	step, err := planStep(d, obs, frozen != "")
	if err != nil {
		return workqueue.Result{}, c.reportInvalid(ctx, d, err.Error())
	}
	if step.Unsupported != "" && !reported(d, v1alpha1.MachineDeploymentProgressing, step.Unsupported) {
		c.warn(d, ReasonUnsupported, step.Unsupported)
	}
	key := workqueue.KeyOf(d)
	switch {
	case !step.HeldBack:
		c.toldFrozen.Forget(key)
	case c.toldFrozen.First(key, frozen):
		// The Frozen condition is the safety controller's; the deployment
		// tells by an event, once per situation, that it holds back.
		c.warn(d, ReasonFrozen, "not adding machines: "+frozen)
	}
	created, err := c.applyStep(ctx, d, obs, step)
	if errors.Is(err, errCollision) {
		return workqueue.Result{}, nil // the status write of the new collision count syncs it again
	}
	errs = append(errs, err)
	if created != nil {
		obs.newSet = created
	}
	if c.nodeQueue != nil {
		c.nodeQueue.Add(key) // the nodes' rollout marks, on their own queue
	}

	syncErr := errors.Join(errs...)
	st, err := nextStatus(d, obs, selector.String(), step.Unsupported, now, syncErr == nil)
	st.Conditions = withCapped(st.Conditions, capped, now)
	if err == nil {
		d, err = c.writeStatus(ctx, d, st)
	}
	if err == nil {
		d, err = c.recordRevision(ctx, d, obs.newSet)
	}
	if err := errors.Join(syncErr, err); err != nil {
		return workqueue.Result{}, err
	}
	if deploymentComplete(d, st) {
		if err := c.cleanup(ctx, d, obs); err != nil {
			return workqueue.Result{}, err
		}
	}
	return workqueue.Result{RequeueAfter: c.requeueAfter(d, st, obs, now)}, nil
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

// reportInvalid tells once, by the ReplicaFailure condition and an event,
// why the deployment cannot work, and returns the error that retries it
// with backoff.
func (c *Controller) reportInvalid(ctx context.Context, d *v1alpha1.MachineDeployment, problem string) error {
	if !reported(d, v1alpha1.MachineDeploymentReplicaFailure, problem) {
		c.warn(d, ReasonInvalid, problem)
	}
	st := *d.Status.DeepCopy()
	st.Conditions = withCondition(st.Conditions, newCondition(v1alpha1.MachineDeploymentReplicaFailure, v1alpha1.ConditionTrue,
		ReasonInvalid, problem, c.opts.Clock.Now()))
	_, err := c.writeStatus(ctx, d, st)
	return errors.Join(fmt.Errorf("machine deployment %s/%s is invalid: %s", d.Namespace, d.Name, problem), err)
}

// frozenReason says why the deployment adds no machines now, or "".
func frozenReason(ctx context.Context, d *v1alpha1.MachineDeployment, gate safety.Gate) string {
	var why []string
	if d.Labels[v1alpha1.FreezeLabelKey] == v1alpha1.FreezeLabelValue {
		why = append(why, "the deployment is labelled "+v1alpha1.FreezeLabelKey+"="+v1alpha1.FreezeLabelValue)
	}
	if gate != nil && gate.Frozen(ctx) {
		why = append(why, "the safety controller froze machine creation")
	}
	return strings.Join(why, "; ")
}

// observe claims the deployment's sets and groups their machines. wait
// tells that the cache does not show one of the controller's own writes
// to a set yet: planning now would scale it twice; its event requeues the
// deployment.
func (c *Controller) observe(ctx context.Context, d *v1alpha1.MachineDeployment, selector labels.Selector, now time.Time) (observed, bool, error) {
	sets, err := c.sets.MachineSets(d.Namespace).List(everything)
	if err != nil {
		return observed{}, false, fmt.Errorf("listing machine sets: %w", err)
	}
	own := ownership.Decide(d, selector, sets)
	adopted, errAdopt := c.adopt(ctx, d, own.Adopt)
	owned := append(own.Owned, adopted...)
	if err := errors.Join(errAdopt, c.release(ctx, d, own.Release)); err != nil {
		return observed{}, false, err
	}
	for _, s := range owned {
		if !c.writes.Observed(workqueue.KeyOf(s), s.ResourceVersion) {
			return observed{}, true, nil
		}
	}
	machines, err := c.machines.Machines(d.Namespace).List(everything)
	if err != nil {
		return observed{}, false, fmt.Errorf("listing machines: %w", err)
	}
	obs := observed{machines: machinesBySet(owned, machines)}
	obs.newSet, obs.old = splitSets(d, owned)
	obs.counts = countSets(owned, obs.machines, minReadyOf(d), now)
	return obs, false, nil
}

// machinesBySet groups the machines controlled by sets by set name.
func machinesBySet(sets []*v1alpha1.MachineSet, machines []*v1alpha1.Machine) map[string][]*v1alpha1.Machine {
	byUID := make(map[string]string, len(sets))
	for _, s := range sets {
		byUID[string(s.UID)] = s.Name
	}
	out := make(map[string][]*v1alpha1.Machine, len(sets))
	for _, m := range machines {
		ref := metav1.GetControllerOfNoCopy(m)
		if ref == nil {
			continue
		}
		if name, ok := byUID[string(ref.UID)]; ok {
			out[name] = append(out[name], m)
		}
	}
	return out
}

// finish deletes the sets of a deployment being deleted (each set deletes
// its machines in ladder order) and lets the deployment go when none is
// left.
func (c *Controller) finish(ctx context.Context, d *v1alpha1.MachineDeployment, obs observed) error {
	sets := obs.all()
	if len(sets) == 0 {
		_, err := c.setFinalizer(ctx, d, false)
		return err
	}
	var errs []error
	for _, s := range sets {
		if s.DeletionTimestamp == nil {
			errs = append(errs, c.deleteSet(ctx, d, s))
		}
	}
	return errors.Join(errs...)
}

// requeueAfter is when a deployment that changes no more must be looked at
// again: at its progress deadline (a stuck rollout sends no events), when
// a machine's minReadySeconds run out on a deployment that applies them (it
// becomes available without an event), or at the resync.
func (c *Controller) requeueAfter(d *v1alpha1.MachineDeployment, st v1alpha1.MachineDeploymentStatus, obs observed, now time.Time) time.Duration {
	after := c.opts.Resync
	if check, ok := progressCheckAfter(d, st, now); ok {
		after = min(after, check)
	}
	for _, cnt := range obs.counts {
		if !cnt.AvailableAt.IsZero() && cnt.AvailableAt.After(now) {
			after = min(after, cnt.AvailableAt.Sub(now)+time.Second)
		}
	}
	return after
}

// setFinalizer adds or removes the deployment's finalizer.
func (c *Controller) setFinalizer(ctx context.Context, d *v1alpha1.MachineDeployment, want bool) (*v1alpha1.MachineDeployment, error) {
	data, err := patch.Finalizer(d.Finalizers, Finalizer, want, d.ResourceVersion)
	if err != nil || data == nil {
		return d, err
	}
	updated, err := patch.Send(ctx, c.client.MachineV1alpha1().MachineDeployments(d.Namespace).Patch, d.Name, data, c.opts.FieldManager)
	if apierrors.IsNotFound(err) && !want {
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("updating finalizer of machine deployment %s: %w", d.Name, err)
	}
	c.writes.Wrote(workqueue.KeyOf(d), updated.ResourceVersion)
	return updated, nil
}

// deploymentStatusFields: the controller owns a deployment's whole status
// (the safety controller's conditions are written against a fresh read).
func deploymentStatusFields(st v1alpha1.MachineDeploymentStatus) patch.Fields {
	return patch.Fields{"status": st}
}

// writeStatus writes st when it differs from the stored status, and
// returns the deployment as written.
func (c *Controller) writeStatus(ctx context.Context, d *v1alpha1.MachineDeployment, st v1alpha1.MachineDeploymentStatus) (*v1alpha1.MachineDeployment, error) {
	data, err := patch.Diff(deploymentStatusFields, d.Status, st, d.ResourceVersion)
	if err != nil || data == nil {
		return d, err
	}
	updated, err := patch.Send(ctx, c.client.MachineV1alpha1().MachineDeployments(d.Namespace).Patch, d.Name, data, c.opts.FieldManager, "status")
	if err != nil {
		return d, fmt.Errorf("writing status of machine deployment %s: %w", d.Name, err)
	}
	c.writes.Wrote(workqueue.KeyOf(d), updated.ResourceVersion)
	return updated, nil
}
