package deployment

import (
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// machineCounts is what the planners know about the machines of one set.
// The controller counts them from its machine cache (countSets) instead of
// reading the set's status, which lags behind and uses the set's own
// minReadySeconds.
type machineCounts struct {
	// Machines counts the set's machines that are not being deleted.
	Machines int32
	// Deleting counts the set's machines that are being deleted.
	Deleting int32
	// Ready counts the machines in phase Running that are not being deleted.
	Ready int32
	// Available counts the machines that are available (see isAvailable).
	Available int32
	// AvailableAt is the earliest time a machine that is Running or
	// Available but has not been so for minReadySeconds becomes available;
	// zero when no machine is waiting for that. The controller syncs again
	// then, because no event will tell it.
	AvailableAt time.Time
}

// beingDeleted tells whether a machine is on its way out. A machine in phase
// Terminating counts as gone even before its deletionTimestamp is seen, as
// MCM and the MachineSet controller count it (MCM #1086).
func beingDeleted(m *v1alpha1.Machine) bool {
	return m.DeletionTimestamp != nil || m.Status.CurrentStatus.Phase == v1alpha1.MachineTerminating
}

// readySince returns when a machine became usable (phase Running, or
// Available when there is no target cluster) and whether it is usable at all.
func readySince(m *v1alpha1.Machine) (time.Time, bool) {
	switch m.Status.CurrentStatus.Phase {
	case v1alpha1.MachineRunning, v1alpha1.MachineAvailable:
		return m.Status.CurrentStatus.LastUpdateTime.Time, !beingDeleted(m)
	}
	return time.Time{}, false
}

// isAvailable tells whether a machine counts as available at now: usable for
// at least minReadySeconds. Everything else (pending, unknown, failed,
// updating in place, being deleted) is unavailable, and unavailable machines
// are what rollouts remove first.
func isAvailable(m *v1alpha1.Machine, minReadySeconds int32, now time.Time) bool {
	since, ok := readySince(m)
	return ok && !now.Before(since.Add(minReady(minReadySeconds)))
}

// minReady is minReadySeconds as a duration; negative values count as 0.
func minReady(minReadySeconds int32) time.Duration {
	return time.Duration(max(minReadySeconds, 0)) * time.Second
}

// countMachines counts the machines of one set at now.
func countMachines(machines []*v1alpha1.Machine, minReadySeconds int32, now time.Time) machineCounts {
	var c machineCounts
	for _, m := range machines {
		if beingDeleted(m) {
			c.Deleting++
			continue
		}
		c.Machines++
		if m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
			c.Ready++
		}
		if isAvailable(m, minReadySeconds, now) {
			c.Available++
			continue
		}
		if since, ok := readySince(m); ok {
			if at := since.Add(minReady(minReadySeconds)); c.AvailableAt.IsZero() || at.Before(c.AvailableAt) {
				c.AvailableAt = at
			}
		}
	}
	return c
}

// countSets counts the machines of each set, by set name. machines holds the
// machines each set controls, by set name; the caller groups them by their
// controller reference (name and UID), so a machine belongs to one set only.
// Every set gets an entry, those without machines too.
func countSets(sets []*v1alpha1.MachineSet, machines map[string][]*v1alpha1.Machine, minReadySeconds int32, now time.Time) map[string]machineCounts {
	counts := make(map[string]machineCounts, len(sets))
	for _, s := range sets {
		if s != nil {
			counts[s.Name] = countMachines(machines[s.Name], minReadySeconds, now)
		}
	}
	return counts
}
