package deployment

import (
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// machineCounts is what the planners know about the machines of one set.
// The controller counts them from its machine cache (countSets) instead of
// reading the set's status, which lags behind and follows the set's own
// minReadySeconds and annotations.
type machineCounts struct {
	// Machines counts the set's machines that are not being deleted.
	Machines int32
	// Deleting counts the set's machines that are being deleted.
	Deleting int32
	// Ready counts the machines in phase Running that are not being deleted.
	Ready int32
	// Available counts the machines that are available
	// (machinestate.Available with the deployment's minReadyOf).
	Available int32
	// AvailableAt is the earliest time a machine that is Running or
	// Available but has not been so for minReadyOf becomes available; zero
	// when no machine is waiting for that (always, unless the deployment
	// applies minReadySeconds). The controller syncs again then, because
	// no event will tell it.
	AvailableAt time.Time
}

// minReadyOf is how long a machine of the deployment must have been Running
// to count as available: 0, as in MCM, unless the deployment opts in to
// minReadySeconds with v1alpha1.MinReadySecondsAnnotation
// (machinestate.MinReady). The deployment copies the annotation to all its
// sets (withSetPolicy), so that they rank their machines by the same rule.
// An unknown value counts as 0; calculateStatus reports it.
func minReadyOf(d *v1alpha1.MachineDeployment) time.Duration {
	minReady, _ := machinestate.MinReady(d.Annotations, d.Spec.MinReadySeconds)
	return minReady
}

// countMachines counts the machines of one set at now; a machine must have
// been Running for minReady to count as available.
func countMachines(machines []*v1alpha1.Machine, minReady time.Duration, now time.Time) machineCounts {
	var c machineCounts
	for _, m := range machines {
		if machinestate.BeingDeleted(m) {
			c.Deleting++
			continue
		}
		c.Machines++
		if m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
			c.Ready++
		}
		if machinestate.Available(m, minReady, now) {
			c.Available++
			continue
		}
		if since, ok := machinestate.ReadySince(m); ok {
			if at := since.Add(minReady); c.AvailableAt.IsZero() || at.Before(c.AvailableAt) {
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
func countSets(sets []*v1alpha1.MachineSet, machines map[string][]*v1alpha1.Machine, minReady time.Duration, now time.Time) map[string]machineCounts {
	counts := make(map[string]machineCounts, len(sets))
	for _, s := range sets {
		if s != nil {
			counts[s.Name] = countMachines(machines[s.Name], minReady, now)
		}
	}
	return counts
}
