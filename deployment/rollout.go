package deployment

import (
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// rolloutPlan is one step of a rollout: the replicas the controller should
// give the deployment's sets.
type rolloutPlan struct {
	// New is what the new set's spec.replicas should be; when the new set
	// does not exist it is created with that many. nil leaves the new set as
	// it is, or not created yet.
	New *int32
	// Old maps the names of old sets to their new spec.replicas. Old sets not
	// listed keep theirs; nil when none changes.
	Old map[string]int32
}

// footprint is how many machines a set may have at the same time: what it is
// sized for, or the machines it still has when it has not caught up with a
// scale-down yet. Surge is measured in footprints, so a set that was scaled
// down only makes room once its surplus machines are being deleted.
func footprint(s *v1alpha1.MachineSet, c machineCounts) int32 {
	return max(s.Spec.Replicas, c.Machines)
}

// keptAvailable is how many of a set's available machines remain once it has
// reached replicas: the MachineSet controller deletes unavailable machines
// before available ones, so only a scale-down below the available count
// removes available machines.
func keptAvailable(replicas int32, c machineCounts) int32 {
	return min(max(c.Available, 0), max(replicas, 0))
}

// planRolling computes one step of a rolling update. newSet is nil when the
// new set must still be created; old holds the other sets, active or not;
// counts holds the machines of each set by name (a missing entry means the
// set has no machines).
//
// The new set grows first, and the old sets shrink on the state that
// results: doing both in one step is what two successive steps would do
// when no machine changes in between, and saves a sync. See growNewSet and
// shrinkOldSets for the rules.
func planRolling(d *v1alpha1.MachineDeployment, newSet *v1alpha1.MachineSet, old []*v1alpha1.MachineSet, counts map[string]machineCounts) (rolloutPlan, error) {
	surge, unavailable, err := rolloutBounds(d)
	if err != nil {
		return rolloutPlan{}, err
	}
	replicas := max(d.Spec.Replicas, 0)

	var total int64
	for _, s := range withNew(newSet, old) {
		total += int64(footprint(s, counts[s.Name]))
	}
	var current int32
	var newCounts machineCounts
	if newSet != nil {
		current, newCounts = newSet.Spec.Replicas, counts[newSet.Name]
	}
	want := growNewSet(replicas, surge, current, total)

	var plan rolloutPlan
	if newSet == nil || want != current {
		plan.New = &want
	}
	plan.Old = shrinkOldSets(replicas-unavailable, want, newCounts, old, counts)
	return plan, nil
}

// growNewSet returns the new set's replicas: as many more as fit under
// replicas + surge machines in total (footprints, see footprint), never
// more than replicas. A new set above replicas (the deployment was scaled
// down) goes back to replicas.
func growNewSet(replicas, surge, current int32, total int64) int32 {
	if current >= replicas {
		return replicas
	}
	room := int64(replicas) + int64(surge) - total
	if room <= 0 {
		return current
	}
	return current + int32(min(room, int64(replicas-current)))
}

// shrinkOldSets returns the new replicas of the old sets that shrink, or nil.
// minAvailable is replicas - maxUnavailable, newReplicas the new set's
// replicas after this step and newCounts its machines.
//
// Old sets shrink in two passes, oldest set first:
//
//  1. by their unavailable machines, which removes no capacity. This is
//     bounded by the machines all sets are sized for, less minAvailable,
//     less the new set's missing available machines: the machines that
//     remain must still be able to give minAvailable available ones once
//     the new set's are up. Without this pass unavailable old machines
//     would hold the rollout up for ever (Kubernetes' cleanupUnhealthyReplicas).
//  2. by available machines, only by as many as are available above
//     minAvailable across all sets.
//
// Availability is counted as what each set keeps at its planned replicas
// (keptAvailable), so machines of a scale-down that has not happened yet
// are not counted twice.
func shrinkOldSets(minAvailable, newReplicas int32, newCounts machineCounts, old []*v1alpha1.MachineSet, counts map[string]machineCounts) map[string]int32 {
	sorted := byAge(activeSets(old))
	if len(sorted) == 0 {
		return nil
	}
	sizes := make(map[string]int32, len(sorted))
	allReplicas := int64(max(newReplicas, 0))
	for _, s := range sorted {
		sizes[s.Name] = s.Spec.Replicas
		allReplicas += int64(s.Spec.Replicas)
	}
	newAvailable := keptAvailable(newReplicas, newCounts)
	newUnavailable := int64(max(newReplicas, 0) - newAvailable)

	// Pass 1: unavailable machines.
	budget := allReplicas - int64(minAvailable) - newUnavailable
	for _, s := range sorted {
		if budget <= 0 {
			break
		}
		unhealthy := sizes[s.Name] - keptAvailable(sizes[s.Name], counts[s.Name])
		cut := int32(min(int64(unhealthy), budget))
		sizes[s.Name] -= cut
		budget -= int64(cut)
	}

	// Pass 2: available machines above minAvailable.
	available := int64(newAvailable)
	for _, s := range sorted {
		available += int64(keptAvailable(sizes[s.Name], counts[s.Name]))
	}
	excess := available - int64(minAvailable)
	for _, s := range sorted {
		if excess <= 0 {
			break
		}
		cut := int32(min(int64(sizes[s.Name]), excess))
		sizes[s.Name] -= cut
		excess -= int64(cut)
	}

	var changed map[string]int32
	for _, s := range sorted {
		if sizes[s.Name] != s.Spec.Replicas {
			if changed == nil {
				changed = make(map[string]int32)
			}
			changed[s.Name] = sizes[s.Name]
		}
	}
	return changed
}

// planRecreate computes one step of a Recreate rollout: first every old set
// goes to 0; then, once no old machine exists any more (those being deleted
// included, and as long as an old set's status still reports machines), the
// new set is created or scaled with spec.replicas. Old and new machines thus
// never run side by side, which is what Recreate is chosen for.
func planRecreate(d *v1alpha1.MachineDeployment, newSet *v1alpha1.MachineSet, old []*v1alpha1.MachineSet, counts map[string]machineCounts) rolloutPlan {
	var plan rolloutPlan
	for _, s := range activeSets(old) {
		if plan.Old == nil {
			plan.Old = make(map[string]int32)
		}
		plan.Old[s.Name] = 0
	}
	if plan.Old != nil || oldMachinesExist(old, counts) {
		return plan
	}
	replicas := max(d.Spec.Replicas, 0)
	if newSet == nil || newSet.Spec.Replicas != replicas {
		plan.New = &replicas
	}
	return plan
}

// oldMachinesExist reports whether any old set still has a machine, or still
// reports one in its status (the cache may not have seen a machine yet that
// the set's controller has).
func oldMachinesExist(old []*v1alpha1.MachineSet, counts map[string]machineCounts) bool {
	for _, s := range old {
		c := counts[s.Name]
		if c.Machines > 0 || c.Deleting > 0 || s.Status.Replicas > 0 {
			return true
		}
	}
	return false
}
