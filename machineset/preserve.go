// Preservation, as the set sees it: the machine controller decides and
// records each machine's preservation (status.currentStatus.preserveExpiryTime),
// and the set reads it through machinestate. The set's own part is the
// auto-preserved mark, which it puts on at most spec.autoPreserveFailedMachineMax
// of its Failed machines.

package machineset

import (
	"cmp"
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
	"github.com/mcmkit/mcm/internal/patch"
)

// Event reasons of preservation.
const (
	// ReasonAutoPreserved: the set marked a Failed machine auto-preserved.
	ReasonAutoPreserved = "AutoPreserved"
	// ReasonAutoPreserveReleased: the set took the mark off a machine
	// because autoPreserveFailedMachineMax was lowered.
	ReasonAutoPreserveReleased = "AutoPreserveReleased"
	// ReasonPreservedDeleted: a scale-down deletes a preserved machine,
	// having no other left to delete.
	ReasonPreservedDeleted = "PreservedMachineDeleted"
	// ReasonScaleDownHeld: a scale-down stops short of a preserved machine
	// (Options.KeepPreservedOnScaleDown).
	ReasonScaleDownHeld = "ScaleDownHeldByPreservation"
)

// autoPreservePlan is what a sync writes of the auto-preserved marks.
type autoPreservePlan struct {
	// Mark are the Failed machines that get
	// PreserveAnnotation=auto-preserved, Unmark those that lose it: one
	// patch of that key each, guarded by the machine's resourceVersion.
	Mark, Unmark []*v1alpha1.Machine
}

// autoPreserveMax is the set's spec.autoPreserveFailedMachineMax, 0 when
// unset.
func autoPreserveMax(set *v1alpha1.MachineSet) int {
	if set.Spec.AutoPreserveFailedMachineMax == nil {
		return 0
	}
	return int(*set.Spec.AutoPreserveFailedMachineMax)
}

// planAutoPreserve decides the marks of a set that owns machines. The
// capacity is the maximum less the marks its machines not being deleted
// carry, counted from the machines rather than from the last status (MCM's
// way), which a sync that marks lags by one. Positive, it marks the newest
// candidates (machinestate.AutoPreserveCandidate; creationTimestamp, then
// name); negative, it takes the mark off the oldest marked machines. A set
// being deleted marks nothing: all its machines go. It is pure.
func planAutoPreserve(set *v1alpha1.MachineSet, machines []*v1alpha1.Machine) autoPreservePlan {
	if set.DeletionTimestamp != nil {
		return autoPreservePlan{}
	}
	var marked, candidates []*v1alpha1.Machine
	for _, m := range machines {
		switch {
		case machinestate.BeingDeleted(m):
		case machinestate.AutoPreserved(m):
			marked = append(marked, m)
		case machinestate.AutoPreserveCandidate(m):
			candidates = append(candidates, m)
		}
	}
	oldestFirst := func(a, b *v1alpha1.Machine) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	}
	switch capacity := autoPreserveMax(set) - len(marked); {
	case capacity > 0:
		slices.SortFunc(candidates, func(a, b *v1alpha1.Machine) int {
			return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
		})
		return autoPreservePlan{Mark: candidates[:min(capacity, len(candidates))]}
	case capacity < 0:
		slices.SortFunc(marked, oldestFirst)
		return autoPreservePlan{Unmark: marked[:-capacity]}
	}
	return autoPreservePlan{}
}

// withMarks returns machines as they are once the plan's marks are
// written: the marked and unmarked ones are copies with the key set or
// removed, the others the machines themselves. The set's deletions are
// planned against these, so that a machine marked in this sync is kept.
func withMarks(machines []*v1alpha1.Machine, p autoPreservePlan) []*v1alpha1.Machine {
	if len(p.Mark)+len(p.Unmark) == 0 {
		return machines
	}
	out := slices.Clone(machines)
	for i, m := range out {
		switch {
		case slices.Contains(p.Mark, m):
			out[i] = marked(m, true)
		case slices.Contains(p.Unmark, m):
			out[i] = marked(m, false)
		}
	}
	return out
}

// marked returns a copy of m with the auto-preserved mark on (want) or off.
func marked(m *v1alpha1.Machine, want bool) *v1alpha1.Machine {
	c := m.DeepCopy()
	c.Annotations = maps.Clone(c.Annotations)
	if want {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[v1alpha1.PreserveAnnotation] = string(v1alpha1.PreserveAutoPreserved)
	} else {
		delete(c.Annotations, v1alpha1.PreserveAnnotation)
	}
	return c
}

// preserveFields: of a machine's annotations, the set writes only
// PreserveAnnotation, and only to put on or take off its own mark.
func preserveFields(a map[string]string) patch.Fields {
	return patch.Fields{"metadata": patch.Fields{"annotations": patch.Keys(a, v1alpha1.PreserveAnnotation)}}
}

// nextExpiry is the earliest preservation expiry after now among the
// machines not being deleted; zero when there is none. The set syncs again
// then, so that a preservation's end takes effect at once: the machine
// controller leaves the past expiry on a still-Failed machine, and nothing
// else would wake the set.
func nextExpiry(machines []*v1alpha1.Machine, now time.Time) time.Time {
	var next time.Time
	for _, m := range machines {
		until, ok := machinestate.PreservedUntil(m)
		if ok && !machinestate.BeingDeleted(m) && until.After(now) && (next.IsZero() || until.Before(next)) {
			next = until
		}
	}
	return next
}

// applyAutoPreserve writes the plan's marks, each patch guarded by the
// resourceVersion of the machine as this sync last wrote or read it
// (written maps a planned machine to the one written). It records the
// machines it writes in written, and tells of each by an event.
func (c *Controller) applyAutoPreserve(ctx context.Context, set *v1alpha1.MachineSet, p autoPreservePlan, written map[*v1alpha1.Machine]*v1alpha1.Machine) error {
	var errs []error
	write := func(planned *v1alpha1.Machine, want bool) {
		m := planned
		if w := written[planned]; w != nil {
			m = w
		}
		data, err := patch.Diff(preserveFields, m.Annotations, marked(m, want).Annotations, m.ResourceVersion)
		if err != nil || data == nil {
			errs = append(errs, err)
			return
		}
		updated, err := patch.Send(ctx, c.client.MachineV1alpha1().Machines(m.Namespace).Patch, m.Name, data, c.opts.FieldManager)
		switch {
		case apierrors.IsNotFound(err):
			return
		case err != nil:
			errs = append(errs, fmt.Errorf("marking machine %s %s=%s: %w", m.Name, v1alpha1.PreserveAnnotation, v1alpha1.PreserveAutoPreserved, err))
			return
		}
		written[planned] = updated
		if want {
			c.event(set, corev1.EventTypeNormal, ReasonAutoPreserved, fmt.Sprintf("Marked Failed machine %s %s=%s (autoPreserveFailedMachineMax %d): it is kept for inspection, not replaced, until its preservation ends",
				m.Name, v1alpha1.PreserveAnnotation, v1alpha1.PreserveAutoPreserved, autoPreserveMax(set)))
		} else {
			c.event(set, corev1.EventTypeNormal, ReasonAutoPreserveReleased, fmt.Sprintf("Took the %s=%s mark off machine %s: autoPreserveFailedMachineMax is %d",
				v1alpha1.PreserveAnnotation, v1alpha1.PreserveAutoPreserved, m.Name, autoPreserveMax(set)))
		}
	}
	for _, m := range p.Mark {
		write(m, true)
	}
	for _, m := range p.Unmark {
		write(m, false)
	}
	return errors.Join(errs...)
}

// tellPreservedScaleDown tells by Normal events of the preserved machines
// a scale-down deletes (it needed them: they rank last), and of the
// preserved machine a scale-down stopped short of
// (Options.KeepPreservedOnScaleDown), once per machine and expiry.
func (c *Controller) tellPreservedScaleDown(s *scope, set *v1alpha1.MachineSet, r replicaPlan) {
	if set.DeletionTimestamp == nil {
		for _, m := range r.Delete {
			if until, ok := machinestate.PreservedUntil(m); ok && machinestate.Preserved(m, s.now) {
				c.event(set, corev1.EventTypeNormal, ReasonPreservedDeleted, fmt.Sprintf(
					"Deleting preserved machine %s (preserved until %s): the scale-down to %d replicas has no other machine left to delete",
					m.Name, until.UTC().Format(time.RFC3339), s.wanted))
			}
		}
	}
	if r.HeldBy == nil {
		c.toldHeld.Forget(s.key)
		return
	}
	until, _ := machinestate.PreservedUntil(r.HeldBy)
	msg := fmt.Sprintf("The scale-down to %d replicas stops short of preserved machine %s, preserved until %s (KeepPreservedOnScaleDown): it resumes when the preservation ends",
		s.wanted, r.HeldBy.Name, until.UTC().Format(time.RFC3339))
	if c.toldHeld.First(s.key, msg) {
		c.event(set, corev1.EventTypeNormal, ReasonScaleDownHeld, msg)
	}
}

// requeueAfter is when a set synced at now is synced again: after resync,
// or at its machines' next preservation expiry if that is sooner.
func requeueAfter(now, expiry time.Time, resync time.Duration) time.Duration {
	if expiry.IsZero() {
		return resync
	}
	return min(resync, max(expiry.Sub(now), time.Millisecond))
}
