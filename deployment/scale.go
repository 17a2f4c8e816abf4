package deployment

import (
	"cmp"
	"slices"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// isScalingEvent reports whether the deployment's replicas changed since its
// sets were last sized, as opposed to its template: some active set's
// desired-replicas annotation differs from spec.replicas, or no set is
// active while spec.replicas is above 0 (scaling up from zero, which the
// cluster-autoscaler does). Without a new set there is a rollout to start
// first, which sizes the sets itself.
func isScalingEvent(d *v1alpha1.MachineDeployment, newSet *v1alpha1.MachineSet, old []*v1alpha1.MachineSet) bool {
	if newSet == nil {
		return false
	}
	active := activeSets(withNew(newSet, old))
	if len(active) == 0 {
		return d.Spec.Replicas > 0
	}
	for _, s := range active {
		if desired, ok := desiredReplicasOf(s); ok && desired != d.Spec.Replicas {
			return true
		}
	}
	return false
}

// planScale sizes the sets after spec.replicas changed (or while the
// deployment is paused). It returns the new spec.replicas of every set it
// touches, by name, unchanged ones included: the controller writes the
// desired-replicas and max-replicas annotations of each of them, which is
// what makes the next sync no scaling event. An empty result means nothing is
// to be done here: there is no set yet, or a Recreate or InPlaceUpdate
// deployment has several active sets, which are left to their rollout.
//
//   - One active set: it gets spec.replicas.
//   - No active set: the new set (the newest one without a new set) grows
//     towards spec.replicas as far as the rollout would let it
//     (sizeFromZero).
//   - The new set is saturated: the active old sets go to 0.
//   - A rolling update with several active sets: the sets are sized to
//     spec.replicas + maxSurge together (0 for 0 replicas). Shrinking is
//     proportional (shrinkProportionally); growth goes to the new set alone,
//     or to the newest active set while there is no new set, as MCM does
//     since its issues 754 and 802: growing old sets would only add machines
//     the rollout then replaces. Growth stops at spec.replicas for that set,
//     so that no machine is added only to be removed by the next step.
func planScale(d *v1alpha1.MachineDeployment, newSet *v1alpha1.MachineSet, old []*v1alpha1.MachineSet, counts map[string]machineCounts) (map[string]int32, error) {
	replicas := max(d.Spec.Replicas, 0)
	all := withNew(newSet, old)
	if s := findActiveOrLatest(newSet, old); s != nil {
		if len(activeSets(all)) > 0 {
			return map[string]int32{s.Name: replicas}, nil
		}
		size, err := sizeFromZero(d, s, all, counts)
		if err != nil {
			return nil, err
		}
		return map[string]int32{s.Name: size}, nil
	}
	if len(activeSets(all)) == 0 {
		// No set at all (a paused deployment before its first rollout):
		// there is nothing to size, and the rollout creates the new set.
		return nil, nil
	}
	if isSaturated(d, newSet, counts) {
		sizes := make(map[string]int32)
		for _, s := range activeSets(old) {
			sizes[s.Name] = 0
		}
		return sizes, nil
	}
	if !isRollingUpdate(d) {
		return nil, nil
	}
	surge, _, err := rolloutBounds(d)
	if err != nil {
		return nil, err
	}
	var allowed int32
	if replicas > 0 {
		allowed = replicas + surge
	}
	active := activeSets(withNew(newSet, old))
	sizes := make(map[string]int32, len(active)+1)
	for _, s := range active {
		sizes[s.Name] = s.Spec.Replicas
	}
	delta := int64(allowed) - int64(specReplicas(active))
	switch {
	case delta > 0:
		target := newSet
		if target == nil {
			target = newest(active)
		}
		grow := min(delta, int64(max(replicas-target.Spec.Replicas, 0)))
		sizes[target.Name] = target.Spec.Replicas + int32(grow)
	case delta < 0:
		sizes = shrinkProportionally(d, active, allowed, int32(-delta))
	}
	return sizes, nil
}

// sizeFromZero is the size a scaling event gives target, the set that
// scales the deployment up from no active set. That state is not only a
// scale from zero: a rollout passes through it when it has scaled the old
// sets to 0 before the new set (a maxUnavailable of all replicas, or a
// Recreate back to a set that still exists), and the old sets' machines may
// still be there. target therefore grows only as far as the rollout would
// let it, and the rollout takes over once it is active:
//
//   - RollingUpdate: as far as the footprints of all sets stay within
//     spec.replicas + maxSurge (see growNewSet);
//   - Recreate: not at all while a machine of another set exists (see
//     planRecreate);
//   - InPlaceUpdate: to spec.replicas, as this strategy is only scaled.
func sizeFromZero(d *v1alpha1.MachineDeployment, target *v1alpha1.MachineSet, all []*v1alpha1.MachineSet, counts map[string]machineCounts) (int32, error) {
	replicas := max(d.Spec.Replicas, 0)
	switch strategyType(d) {
	case v1alpha1.RollingUpdateMachineDeploymentStrategyType:
		surge, _, err := rolloutBounds(d)
		if err != nil {
			return 0, err
		}
		var total int64
		for _, s := range all {
			if s != nil {
				total += int64(footprint(s, counts[s.Name]))
			}
		}
		return growNewSet(replicas, surge, target.Spec.Replicas, total), nil
	case v1alpha1.RecreateMachineDeploymentStrategyType:
		others := slices.DeleteFunc(slices.Clone(all), func(s *v1alpha1.MachineSet) bool { return s == nil || s == target })
		if oldMachinesExist(others, counts) {
			return target.Spec.Replicas, nil
		}
	}
	return replicas, nil
}

// shrinkProportionally takes remove machines off the active sets and returns
// the new size of each, by name. Each set keeps its share of the
// max-replicas it was sized for, applied to the new maximum allowed
// (Kubernetes' proportional scaling, rounding to the nearest machine); what
// rounding leaves to remove is taken from the largest sets first. No set
// grows, none goes below 0, and exactly remove machines go, which is possible
// because allowed is never negative: remove is at most what the sets have.
func shrinkProportionally(d *v1alpha1.MachineDeployment, active []*v1alpha1.MachineSet, allowed, remove int32) map[string]int32 {
	sizes := make(map[string]int32, len(active))
	for _, s := range active {
		sizes[s.Name] = s.Spec.Replicas
	}
	// Largest first; among equals the oldest, which the rollout would
	// remove first anyway.
	order := slices.Clone(active)
	slices.SortStableFunc(order, func(a, b *v1alpha1.MachineSet) int {
		if c := cmp.Compare(b.Spec.Replicas, a.Spec.Replicas); c != 0 {
			return c
		}
		return compareAge(a, b)
	})
	left := remove
	for _, s := range order {
		if left == 0 {
			break
		}
		cut := int32(max(min(int64(s.Spec.Replicas)-proportionalSize(d, s, allowed), int64(left)), 0))
		sizes[s.Name] -= cut
		left -= cut
	}
	for _, s := range order {
		if left == 0 {
			break
		}
		cut := min(sizes[s.Name], left)
		sizes[s.Name] -= cut
		left -= cut
	}
	return sizes
}

// proportionalSize is the size a set would have if it kept its share of the
// deployment's maximum: its replicas times allowed over the max-replicas
// it was sized for, rounded to the nearest whole machine (halves up). When
// the annotation is missing or unusable (someone edited the set) the
// deployment's status.replicas stands in, and 1 when that is 0 too; the
// result is then only an estimate, which the caller bounds.
func proportionalSize(d *v1alpha1.MachineDeployment, s *v1alpha1.MachineSet, allowed int32) int64 {
	if allowed <= 0 {
		return 0
	}
	before, ok := maxReplicasOf(s)
	if !ok || before <= 0 {
		before = max(d.Status.Replicas, 1)
	}
	return (2*int64(s.Spec.Replicas)*int64(allowed) + int64(before)) / (2 * int64(before))
}
