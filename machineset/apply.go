package machineset

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/ownership"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

// outcome is what apply did, for the status.
type outcome struct {
	// set is the set as last written (as cached when nothing was).
	set *v1alpha1.MachineSet
	// owned are the machines the set owns after the ownership changes,
	// foreign those of them it did not create.
	owned, foreign []*v1alpha1.Machine
	replicas       applied
	// requeueAt is the machines' next preservation expiry (zero if none).
	requeueAt time.Time
	// failure is why the set could not be brought to its replicas.
	failure replicaFailure
	// finished: the set is being deleted and has no machine left; it
	// gets no status.
	finished bool
	// err joins the writes that failed, but the creations and deletions,
	// which failure tells of.
	err error
}

// apply makes the plan's writes, in the plan's order, and tells by events
// what the plan decided and what became of it. An error means that the
// finalizer could not be added, and nothing else was written.
func (c *Controller) apply(ctx context.Context, s *scope, p syncPlan) (outcome, error) {
	set := s.set
	if s.invalid != "" {
		// Nothing is created from a set that cannot work; the set says why.
		if !reported(set, v1alpha1.MachineSetReplicaFailure, s.invalid) {
			c.event(set, corev1.EventTypeWarning, ReasonInvalid, s.invalid)
		}
		return outcome{set: set, owned: s.controlled}, nil
	}
	if p.AddFinalizer {
		var err error
		if set, err = c.setFinalizer(ctx, set, true); err != nil {
			return outcome{}, err
		}
	}
	m, written, err := c.applyOwnership(ctx, s, set, p)
	errs := []error{s.adoptErr, err, c.propagate(ctx, set, m.Propagate, written),
		c.applyAutoPreserve(ctx, set, m.AutoPreserve, written)}
	if s.policyErr != nil {
		c.event(set, corev1.EventTypeWarning, ReasonInvalid, s.policyErr.Error())
	}
	if s.capped != "" && !reported(set, ConditionReplicasCapped, s.capped) {
		c.event(set, corev1.EventTypeWarning, ReasonTooManyReplicas, s.capped)
	}
	set, err = c.recordForeign(ctx, set, m)
	errs = append(errs, err)
	out := outcome{set: set, owned: asWritten(m.Owned, written), foreign: m.Foreign, requeueAt: m.NextExpiry}
	c.tellPreservedScaleDown(s, set, m.Replicas)
	out.replicas = c.applyReplicas(ctx, s.key, set, m.Replicas)
	out.owned = afterReplicas(out.owned, out.replicas)
	out.failure = replicaFailure{NoClass: s.noClass, Create: out.replicas.CreateFailure, Delete: out.replicas.DeleteFailure}
	c.tellHeldBack(s, set, m.Replicas.HeldBack, out.failure)
	if m.Finish {
		out.finished = true
		if m.RemoveFinalizer {
			_, err := c.setFinalizer(ctx, set, false)
			errs = append(errs, err)
		}
	}
	out.err = errors.Join(errs...)
	return out, nil
}

// applyOwnership adopts and releases as planned. It returns the machine
// part of the plan, and the adopted machines as written, by the machine
// as planned. An adoption that fails leaves the machine an orphan: the
// machines are then planned again without it, by the same pure function,
// so that the set neither counts nor deletes a machine it does not
// control.
func (c *Controller) applyOwnership(ctx context.Context, s *scope, set *v1alpha1.MachineSet, p syncPlan) (machinePlan, map[*v1alpha1.Machine]*v1alpha1.Machine, error) {
	var errs []error
	adopted := make(map[*v1alpha1.Machine]*v1alpha1.Machine, len(p.Adopt))
	failed := map[*v1alpha1.Machine]bool{}
	for _, m := range p.Adopt {
		updated, err := ownership.Adopt(ctx, c.client.MachineV1alpha1().Machines(m.Namespace).Patch, m, controllerRef(set), c.opts.FieldManager)
		if err != nil {
			err = fmt.Errorf("setting owners of machine %s: %w", m.Name, err)
			c.event(set, corev1.EventTypeWarning, ReasonAdoptFailed, err.Error())
			errs = append(errs, err)
			failed[m] = true
			continue
		}
		adopted[m] = updated
	}
	for _, m := range p.Release {
		if _, err := ownership.Release(ctx, c.client.MachineV1alpha1().Machines(m.Namespace).Patch, m, set, c.opts.FieldManager); err != nil {
			err = fmt.Errorf("setting owners of machine %s: %w", m.Name, err)
			c.event(set, corev1.EventTypeWarning, ReasonReleaseFailed, err.Error())
			errs = append(errs, err)
		}
	}
	mp := p.machinePlan
	if len(failed) > 0 {
		notAdopted := func(m *v1alpha1.Machine) bool { return failed[m] }
		mp = planMachines(s, slices.DeleteFunc(slices.Clone(mp.Owned), notAdopted),
			slices.DeleteFunc(slices.Clone(s.foreign), notAdopted), c.opts.BurstReplicas)
	}
	return mp, adopted, errors.Join(errs...)
}

// afterReplicas is owned as the replica plan's writes left it: the
// machines deleted left out, those created added.
func afterReplicas(owned []*v1alpha1.Machine, done applied) []*v1alpha1.Machine {
	if len(done.Gone) > 0 {
		owned = slices.DeleteFunc(slices.Clone(owned), func(m *v1alpha1.Machine) bool { return done.Gone[m.UID] })
	}
	return append(slices.Clip(owned), done.New...)
}

// asWritten is machines with each one this sync wrote replaced by the
// machine as written (written), for the status.
func asWritten(machines []*v1alpha1.Machine, written map[*v1alpha1.Machine]*v1alpha1.Machine) []*v1alpha1.Machine {
	out := slices.Clone(machines)
	for i, m := range out {
		if w := written[m]; w != nil {
			out[i] = w
		}
	}
	return out
}

// propagate brings the in-place parts of the machines (node template,
// machine configuration, class kind) in line with the set's template: one
// patch each, guarded by the machine's resourceVersion, as its adoption
// left it for an adopted one. It records the machines it writes in
// written (by the machine as planned), so that a later write of the same
// sync is guarded by the new resourceVersion.
func (c *Controller) propagate(ctx context.Context, set *v1alpha1.MachineSet, machines []*v1alpha1.Machine, written map[*v1alpha1.Machine]*v1alpha1.Machine) error {
	var errs []error
	want := &set.Spec.Template.Spec
	for _, planned := range machines {
		m := planned
		if a := written[planned]; a != nil {
			m = a
		}
		data, err := patch.Diff(machinestate.MachineInPlaceFields, &m.Spec, want, m.ResourceVersion)
		if err == nil && data != nil {
			var updated *v1alpha1.Machine
			if updated, err = patch.Send(ctx, c.client.MachineV1alpha1().Machines(m.Namespace).Patch, m.Name, data, c.opts.FieldManager); err == nil {
				written[planned] = updated
			}
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("updating machine %s from the template: %w", m.Name, err))
		}
	}
	return errors.Join(errs...)
}

// foreignFields: of the set's annotations, the controller owns
// v1alpha1.ForeignMachinesAnnotation.
func foreignFields(a map[string]string) patch.Fields {
	return patch.Fields{"metadata": patch.Fields{"annotations": patch.Keys(a, v1alpha1.ForeignMachinesAnnotation)}}
}

// recordForeign tells of each foreign machine the set has not listed yet
// by a Warning event, and writes the set's
// v1alpha1.ForeignMachinesAnnotation when the plan says so. It returns the
// set as written.
func (c *Controller) recordForeign(ctx context.Context, set *v1alpha1.MachineSet, m machinePlan) (*v1alpha1.MachineSet, error) {
	listed := machinestate.ForeignMachines(set)
	for _, f := range m.Foreign {
		if !listed[f.UID] {
			c.event(set, corev1.EventTypeWarning, ReasonForeignMachine, fmt.Sprintf(
				"Machine %s carries this set's controller reference but was not created by it (adopted, or made by someone else); it is deleted before the set's own machines", f.Name))
		}
	}
	if !m.RecordForeign {
		return set, nil
	}
	want := maps.Clone(set.Annotations)
	if m.ForeignAnnotation != "" {
		if want == nil {
			want = map[string]string{}
		}
		want[v1alpha1.ForeignMachinesAnnotation] = m.ForeignAnnotation
	} else {
		delete(want, v1alpha1.ForeignMachinesAnnotation)
	}
	// Unguarded: the annotation is this controller's alone, and a sync
	// starts only once the cache shows its last write (Reconcile).
	data, err := patch.Diff(foreignFields, set.Annotations, want, "")
	if err != nil || data == nil {
		return set, err
	}
	updated, err := patch.Send(ctx, c.client.MachineV1alpha1().MachineSets(set.Namespace).Patch, set.Name, data, c.opts.FieldManager)
	if err != nil {
		return set, fmt.Errorf("listing the foreign machines of machine set %s: %w", set.Name, err)
	}
	c.writes.Wrote(workqueue.KeyOf(set), updated.ResourceVersion)
	return updated, nil
}

// tellHeldBack tells by a Warning event that the set holds back heldBack
// machines: once per freeze (the Frozen condition is the safety
// controller's), or once per problem with the class, which the status's
// ReplicaFailure condition then shows.
func (c *Controller) tellHeldBack(s *scope, set *v1alpha1.MachineSet, heldBack int, failure replicaFailure) {
	if s.frozen == "" || heldBack == 0 {
		c.toldFrozen.Forget(s.key)
	}
	switch {
	case heldBack == 0:
	case s.frozen != "":
		if c.toldFrozen.First(s.key, s.frozen) {
			c.event(set, corev1.EventTypeWarning, ReasonFrozen, fmt.Sprintf("not creating %d machine(s): %s", heldBack, s.frozen))
		}
	case !reported(set, v1alpha1.MachineSetReplicaFailure, failure.message()):
		c.event(set, corev1.EventTypeWarning, s.classReason, fmt.Sprintf("not creating %d machine(s): %s", heldBack, s.noClass))
	}
}

// setFinalizer adds or removes the set's finalizer, and returns the set as
// written.
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
