// Package machinestate reads what the MachineSet and MachineDeployment
// controllers (and the safety controller's counts) need off a machine's
// status, by one rule for all of them: whether it is on its way out,
// whether and since when it is available, and since when the
// cluster-autoscaler wants it gone. A set's status, its deletion order and
// a rollout's arithmetic must agree on these, or a rollout that counts on
// a machine being available loses it to a set that does not.
//
// # Usage
//
//	if machinestate.BeingDeleted(m) { ... }
//	if machinestate.Available(m, minReady, now) { ... }
//	if at, ok := machinestate.MarkedForDeletionAt(m); ok { ... }
package machinestate

import (
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// BeingDeleted tells whether a machine is on its way out: it has a
// deletionTimestamp, or its phase says Terminating. MCM counts machines in
// phase Terminating as gone (#1086); agreeing with it keeps the counts the
// same when objects move between MCM and these controllers.
func BeingDeleted(m *v1alpha1.Machine) bool {
	return m.DeletionTimestamp != nil || m.Status.CurrentStatus.Phase == v1alpha1.MachineTerminating
}

// ReadySince returns when a machine became usable (phase Running, or
// Available when there is no target cluster) and whether it is usable at
// all; a machine being deleted is not.
func ReadySince(m *v1alpha1.Machine) (time.Time, bool) {
	switch m.Status.CurrentStatus.Phase {
	case v1alpha1.MachineRunning, v1alpha1.MachineAvailable:
		return m.Status.CurrentStatus.LastUpdateTime.Time, !BeingDeleted(m)
	}
	return time.Time{}, false
}

// Available tells whether a machine counts as available at now: usable for
// at least minReady (a set's or deployment's minReadySeconds; zero or less
// means at once).
func Available(m *v1alpha1.Machine, minReady time.Duration, now time.Time) bool {
	since, ok := ReadySince(m)
	// Without a minReady a usable machine is available, even if its time
	// is ahead of now (another controller's clock).
	return ok && (minReady <= 0 || !now.Before(since.Add(minReady)))
}

// MarkedForDeletionAt returns the machine's marked-for-deletion-time, the
// instant the cluster-autoscaler marked it, and whether it has one. An
// unparsable value counts as no mark: the cluster-autoscaler writes RFC
// 3339, so anything else did not come from it.
func MarkedForDeletionAt(m *v1alpha1.Machine) (time.Time, bool) {
	s, ok := m.Annotations[v1alpha1.MarkedForDeletionTimeAnnotation]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}
