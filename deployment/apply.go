package deployment

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/ownership"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

// applied is what apply did, for the status.
type applied struct {
	// d is the deployment as last written: its resourceVersion guards the
	// next write.
	d *v1alpha1.MachineDeployment
	// newSet is the set created now, or the deployment's set of that name
	// that the cache did not show yet; nil when none was created.
	newSet *v1alpha1.MachineSet
	// halted tells that a write the phase depends on failed (the
	// finalizer, an adoption or release, the autoscaler's request): the
	// phase was not applied, and no status is written.
	halted bool
	// collision tells that the new set's name is taken by a set of another
	// template: the status write of the raised collision count syncs the
	// deployment again, under a new name.
	collision bool
	// stepErr joins the errors of the step's set writes: the status does
	// not move observedGeneration then.
	stepErr error
	// err joins every error.
	err error
}

// apply makes the writes of p, in its order, and reports what it did. A
// write whose failure makes later ones wrong ends the sync there: the
// finalizer, adoptions and releases, the autoscaler's marks, the new set's
// creation, the sets' patches (for the revision and the cleanup).
func (c *Controller) apply(ctx context.Context, s scope, p syncPlan) applied {
	done := applied{d: s.d}
	err := c.applyClaims(ctx, &done, p)
	if err == nil {
		err = c.applyMarks(ctx, &done, p)
	}
	if err != nil {
		done.halted, done.err = true, err
		return done
	}
	switch p.phase {
	case phaseDelete:
		done.err = c.applyDeletion(ctx, &done, p)
	case phaseRollback:
		done.err = c.applyRollback(ctx, &done, p)
	case phaseStep:
		c.applyStep(ctx, &done, p)
		if !done.collision {
			c.queueNodeMarks(s) // the nodes' rollout marks, on their own queue
		}
	}
	return done
}

// applyClaims writes the finalizer, adoptions and releases, each sync's
// first writes.
func (c *Controller) applyClaims(ctx context.Context, done *applied, p syncPlan) error {
	if p.addFinalizer {
		d, err := c.setFinalizer(ctx, done.d, true)
		if err != nil {
			return err
		}
		done.d = d
	}
	return errors.Join(c.adopt(ctx, done.d, p.adopt), c.release(ctx, done.d, p.release))
}

// applyDeletion deletes the sets of a deployment being deleted (each set
// deletes its machines in ladder order), and lets the deployment go when
// none is left.
func (c *Controller) applyDeletion(ctx context.Context, done *applied, p syncPlan) error {
	if p.removeFinalizer {
		d, err := c.setFinalizer(ctx, done.d, false)
		done.d = d
		return err
	}
	var errs []error
	for _, s := range p.deleteSets {
		errs = append(errs, c.deleteSet(ctx, done.d, s))
	}
	return errors.Join(errs...)
}

// applyStep tells of the step's standing problems, creates the new set and
// patches the sets; when all of that succeeded, it records the revision and
// deletes old sets beyond the history limit.
func (c *Controller) applyStep(ctx context.Context, done *applied, p syncPlan) {
	c.tellStep(done.d, p)
	if p.create != nil {
		done.stepErr = c.createNewSet(ctx, done, p)
		if done.collision {
			return
		}
	}
	if done.stepErr == nil && p.inPlace != nil {
		done.stepErr = c.applyTransfers(ctx, done.d, p.inPlace)
	}
	if done.stepErr == nil {
		var errs []error
		for _, sp := range p.setPatches {
			errs = append(errs, c.patchSet(ctx, done.d, sp))
		}
		done.stepErr = errors.Join(errs...)
	}
	if p.inPlace != nil && done.stepErr == nil {
		// The nodes' marks follow the moves (their result label goes only
		// once the machine left its old set); the moved machines' label
		// goes once the new set counts them.
		done.stepErr = errors.Join(c.applyInPlaceNodes(ctx, p.inPlace), c.applyUnlabel(ctx, p.inPlace))
	}
	if done.err = done.stepErr; done.err != nil {
		return
	}
	if done.err = c.recordRevision(ctx, done, p.revision); done.err != nil {
		return
	}
	var errs []error
	for _, s := range p.cleanup {
		errs = append(errs, c.deleteSet(ctx, done.d, s))
	}
	done.err = errors.Join(errs...)
}

// tellStep tells by events, once per situation, why the deployment runs
// fewer machines than asked, why its strategy is not rolled out, and that
// it holds back machines while frozen.
func (c *Controller) tellStep(d *v1alpha1.MachineDeployment, p syncPlan) {
	if p.capped != "" && !reported(d, ConditionReplicasCapped, p.capped) {
		c.warn(d, ReasonTooManyReplicas, p.capped)
	}
	if st := p.stall(); st.message != "" && !reported(d, v1alpha1.MachineDeploymentProgressing, st.message) {
		c.warn(d, st.reason, st.message)
	}
	key := workqueue.KeyOf(d)
	switch {
	case !p.step.HeldBack:
		c.toldFrozen.Forget(key)
	case c.toldFrozen.First(key, p.frozen):
		// The Frozen condition is the safety controller's; the deployment
		// tells by an event, once per situation, that it holds back.
		c.warn(d, ReasonFrozen, "not adding machines: "+p.frozen)
	}
}

// patchSet writes one set's patch. The patch carries no resourceVersion
// guard: the fields it writes are the deployment's alone, and a sync
// starts only once the cache shows the controller's last write to each set
// (observe), so a diff from the cached set loses nothing. Guarded, it
// failed with a conflict whenever the set had just written its status,
// which during a rollout is after every machine that becomes available,
// and the retries' backoff held the rollout up.
func (c *Controller) patchSet(ctx context.Context, d *v1alpha1.MachineDeployment, sp setPatch) error {
	s := sp.Set
	updated, err := patch.Send(ctx, c.client.MachineV1alpha1().MachineSets(s.Namespace).Patch, s.Name, sp.Data, c.opts.FieldManager)
	if err != nil {
		return fmt.Errorf("updating machine set %s: %w", s.Name, err)
	}
	c.writes.Wrote(workqueue.KeyOf(updated), updated.ResourceVersion)
	if sp.Want.Spec.Replicas != s.Spec.Replicas {
		c.event(d, corev1.EventTypeNormal, ReasonScaled,
			fmt.Sprintf("Scaled machine set %s from %d to %d", s.Name, s.Spec.Replicas, sp.Want.Spec.Replicas))
	}
	return nil
}

// createNewSet creates the deployment's new set. A set of that name that
// is the deployment's and has its template (the cache had not shown it
// yet) is taken as the new set; any other raises the collision count.
func (c *Controller) createNewSet(ctx context.Context, done *applied, p syncPlan) error {
	d, s := done.d, p.create
	sets := c.client.MachineV1alpha1().MachineSets(s.Namespace)
	created, err := sets.Create(ctx, s, metav1.CreateOptions{FieldManager: c.opts.FieldManager})
	if err == nil {
		c.writes.Wrote(workqueue.KeyOf(created), created.ResourceVersion)
		c.event(d, corev1.EventTypeNormal, ReasonCreatedSet, fmt.Sprintf("Created machine set %s with %d replicas", created.Name, s.Spec.Replicas))
		done.newSet = created
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		c.warn(d, ReasonCreateSetFailed, fmt.Sprintf("creating machine set %s: %v", s.Name, err))
		return fmt.Errorf("creating machine set %s: %w", s.Name, err)
	}
	existing, err := sets.Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading machine set %s after a name conflict: %w", s.Name, err)
	}
	if ref := metav1.GetControllerOfNoCopy(existing); ref != nil && ref.UID == d.UID && sameTemplate(&existing.Spec.Template, &p.d.Spec.Template) {
		done.newSet = existing
		return nil
	}
	st := *d.Status.DeepCopy()
	st.CollisionCount = new(p.collisionCount)
	if done.d, err = c.writeStatus(ctx, d, st); err != nil {
		return err
	}
	done.collision = true
	return nil
}

// recordRevision sets the deployment's revision annotation to rev, the new
// set's revision ("" leaves it).
func (c *Controller) recordRevision(ctx context.Context, done *applied, rev string) error {
	if rev == "" {
		return nil
	}
	d := done.d
	owned := func(a map[string]string) patch.Fields {
		return patch.Fields{"metadata": patch.Fields{"annotations": patch.Keys(a, v1alpha1.RevisionAnnotation)}}
	}
	data, err := patch.Diff(owned, d.Annotations, withEntries(d.Annotations, map[string]string{v1alpha1.RevisionAnnotation: rev}),
		d.ResourceVersion)
	if err != nil || data == nil {
		return err
	}
	updated, err := patch.Send(ctx, c.client.MachineV1alpha1().MachineDeployments(d.Namespace).Patch, d.Name, data, c.opts.FieldManager)
	if err != nil {
		return fmt.Errorf("recording revision of machine deployment %s: %w", d.Name, err)
	}
	c.writes.Wrote(workqueue.KeyOf(updated), updated.ResourceVersion)
	done.d = updated
	return nil
}

// deleteSet deletes one set of the deployment, guarded by its UID.
func (c *Controller) deleteSet(ctx context.Context, d *v1alpha1.MachineDeployment, s *v1alpha1.MachineSet) error {
	uid := s.UID
	err := c.client.MachineV1alpha1().MachineSets(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case err == nil:
		c.event(d, corev1.EventTypeNormal, ReasonDeletedSet, "Deleted machine set "+s.Name)
		return nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return nil // gone, or replaced by another of that name
	default:
		return fmt.Errorf("deleting machine set %s: %w", s.Name, err)
	}
}

// adopt takes orphan sets into the deployment (observe confirmed the
// deployment).
func (c *Controller) adopt(ctx context.Context, d *v1alpha1.MachineDeployment, orphans []*v1alpha1.MachineSet) error {
	var errs []error
	for _, s := range orphans {
		updated, err := ownership.Adopt(ctx, c.client.MachineV1alpha1().MachineSets(s.Namespace).Patch, s, controllerRef(d), c.opts.FieldManager)
		if err != nil {
			err = fmt.Errorf("setting owners of machine set %s: %w", s.Name, err)
			c.warn(d, ReasonAdoptFailed, err.Error())
			errs = append(errs, err)
			continue
		}
		c.wroteSet(s, updated)
	}
	return errors.Join(errs...)
}

// release lets go of sets the deployment no longer selects.
func (c *Controller) release(ctx context.Context, d *v1alpha1.MachineDeployment, sets []*v1alpha1.MachineSet) error {
	var errs []error
	for _, s := range sets {
		updated, err := ownership.Release(ctx, c.client.MachineV1alpha1().MachineSets(s.Namespace).Patch, s, d, c.opts.FieldManager)
		if err != nil {
			err = fmt.Errorf("setting owners of machine set %s: %w", s.Name, err)
			c.warn(d, ReasonReleaseFailed, err.Error())
			errs = append(errs, err)
			continue
		}
		c.wroteSet(s, updated)
	}
	return errors.Join(errs...)
}

// wroteSet remembers the controller's write of a set, so that the next
// sync waits until the cache shows it; updated is s when nothing was
// written.
func (c *Controller) wroteSet(s, updated *v1alpha1.MachineSet) {
	if updated != s {
		c.writes.Wrote(workqueue.KeyOf(updated), updated.ResourceVersion)
	}
}

// setFinalizer adds or removes the deployment's finalizer.
func (c *Controller) setFinalizer(ctx context.Context, d *v1alpha1.MachineDeployment, want bool) (*v1alpha1.MachineDeployment, error) {
	updated, err := patch.SetFinalizer(ctx, c.client.MachineV1alpha1().MachineDeployments(d.Namespace).Patch, d, Finalizer, want, c.opts.FieldManager)
	if err != nil {
		return d, fmt.Errorf("updating finalizer of machine deployment %s: %w", d.Name, err)
	}
	if updated != d {
		c.writes.Wrote(workqueue.KeyOf(d), updated.ResourceVersion)
	}
	return updated, nil
}
