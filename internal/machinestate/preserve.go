// Preservation: what a machine is asked to be kept for, and whether it is
// kept now. The machine controller decides and records a preservation
// (status.currentStatus.preserveExpiryTime); the MachineSet controller, the
// replacement budget and the counts read it through these functions, so
// that they agree on which machines are kept.

package machinestate

import (
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// PreserveRequest returns the preservation m is asked for: the value of its
// Node's v1alpha1.PreserveAnnotation as the machine controller last applied
// it (v1alpha1.LastAppliedNodePreserveValueAnnotation; the Node's value
// wins), else the machine's own PreserveAnnotation. ok is false when
// neither is set. The value may be one no controller knows (see
// ValidPreserveValue).
func PreserveRequest(m *v1alpha1.Machine) (value v1alpha1.PreserveValue, ok bool) {
	if v := m.Annotations[v1alpha1.LastAppliedNodePreserveValueAnnotation]; v != "" {
		return v1alpha1.PreserveValue(v), true
	}
	v, ok := m.Annotations[v1alpha1.PreserveAnnotation]
	return v1alpha1.PreserveValue(v), ok
}

// ValidPreserveValue tells whether v is one of MCM's values of
// v1alpha1.PreserveAnnotation.
func ValidPreserveValue(v v1alpha1.PreserveValue) bool {
	switch v {
	case v1alpha1.PreserveNow, v1alpha1.PreserveWhenFailed, v1alpha1.PreserveAutoPreserved, v1alpha1.PreserveFalse:
		return true
	}
	return false
}

// PreservedUntil returns when m's preservation ends, and whether m has
// been preserved at all (the time may be past: a Failed machine keeps the
// expiry of a preservation that ran out, so that it is not preserved again,
// and its MachineSet replaces it).
func PreservedUntil(m *v1alpha1.Machine) (time.Time, bool) {
	t := m.Status.CurrentStatus.PreserveExpiryTime
	if t == nil {
		return time.Time{}, false
	}
	return t.Time, true
}

// Preserved tells whether m's preservation holds at now: it was preserved,
// and the expiry has not passed.
func Preserved(m *v1alpha1.Machine, now time.Time) bool {
	until, ok := PreservedUntil(m)
	return ok && now.Before(until)
}

// PreservedFailed tells whether m is a Failed machine whose preservation
// holds at now: one its MachineSet neither deletes nor replaces, and
// counts in status.preservedFailedReplicas rather than failedMachines.
func PreservedFailed(m *v1alpha1.Machine, now time.Time) bool {
	return m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed && Preserved(m, now)
}

// KeepFailed tells whether the MachineSet controller must keep the Failed
// machine m at now rather than delete it: its preservation holds, or it has
// none yet and is asked to be preserved when Failed (now, when-failed or
// auto-preserved), which the machine controller is about to start. A
// preservation that ran out keeps nothing.
func KeepFailed(m *v1alpha1.Machine, now time.Time) bool {
	if _, ok := PreservedUntil(m); ok {
		return Preserved(m, now)
	}
	v, _ := PreserveRequest(m)
	switch v {
	case v1alpha1.PreserveNow, v1alpha1.PreserveWhenFailed, v1alpha1.PreserveAutoPreserved:
		return true
	}
	return false
}

// AutoPreserveCandidate tells whether the MachineSet controller may mark
// the Failed machine m auto-preserved: nobody asked anything of its
// preservation (false included), and it was never preserved (a machine
// whose preservation ran out is replaced, not preserved again).
func AutoPreserveCandidate(m *v1alpha1.Machine) bool {
	if m.Status.CurrentStatus.Phase != v1alpha1.MachineFailed || BeingDeleted(m) {
		return false
	}
	if _, asked := PreserveRequest(m); asked {
		return false
	}
	_, preserved := PreservedUntil(m)
	return !preserved
}

// AutoPreserved tells whether m carries the MachineSet controller's
// auto-preserved mark on itself (the mark the set counts in
// status.autoPreserveFailedMachineCount, as MCM does).
func AutoPreserved(m *v1alpha1.Machine) bool {
	return v1alpha1.PreserveValue(m.Annotations[v1alpha1.PreserveAnnotation]) == v1alpha1.PreserveAutoPreserved
}
