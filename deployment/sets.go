package deployment

import (
	"cmp"
	"slices"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// byAge returns sets ordered oldest first: by creation time, then by name so
// that sets created in the same second still have one order. Rollout steps
// take old sets in this order, so the sets furthest behind go first. The
// argument is not reordered.
func byAge(sets []*v1alpha1.MachineSet) []*v1alpha1.MachineSet {
	sorted := slices.Clone(sets)
	slices.SortStableFunc(sorted, compareAge)
	return sorted
}

// compareAge orders two sets oldest first, then by name.
func compareAge(a, b *v1alpha1.MachineSet) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// findNewSet returns the deployment's new set: the oldest set with the
// deployment's template, or nil when there is none. More than one set can
// have the template (MCM and Kubernetes have seen this after upgrades that
// changed hashing); taking the oldest makes every sync pick the same one.
func findNewSet(d *v1alpha1.MachineDeployment, sets []*v1alpha1.MachineSet) *v1alpha1.MachineSet {
	for _, s := range byAge(sets) {
		if sameTemplate(&s.Spec.Template, &d.Spec.Template) {
			return s
		}
	}
	return nil
}

// splitSets separates the deployment's sets into its new set (nil when it
// does not exist yet) and the old ones, in the order given.
func splitSets(d *v1alpha1.MachineDeployment, sets []*v1alpha1.MachineSet) (*v1alpha1.MachineSet, []*v1alpha1.MachineSet) {
	newSet := findNewSet(d, sets)
	var old []*v1alpha1.MachineSet
	for _, s := range sets {
		if s != newSet {
			old = append(old, s)
		}
	}
	return newSet, old
}

// withNew returns old followed by newSet when there is one: all sets of a
// deployment, as most sums need them.
func withNew(newSet *v1alpha1.MachineSet, old []*v1alpha1.MachineSet) []*v1alpha1.MachineSet {
	all := slices.Clone(old)
	if newSet != nil {
		all = append(all, newSet)
	}
	return all
}

// activeSets returns the sets that are meant to have machines (spec.replicas
// above 0), skipping nil entries.
func activeSets(sets []*v1alpha1.MachineSet) []*v1alpha1.MachineSet {
	var active []*v1alpha1.MachineSet
	for _, s := range sets {
		if s != nil && s.Spec.Replicas > 0 {
			active = append(active, s)
		}
	}
	return active
}

// specReplicas sums spec.replicas over sets.
func specReplicas(sets []*v1alpha1.MachineSet) int32 {
	var sum int32
	for _, s := range sets {
		if s != nil {
			sum += s.Spec.Replicas
		}
	}
	return sum
}

// newest returns the most recently created of sets, or nil when there are none.
func newest(sets []*v1alpha1.MachineSet) *v1alpha1.MachineSet {
	if len(sets) == 0 {
		return nil
	}
	sorted := byAge(sets)
	return sorted[len(sorted)-1]
}

// findActiveOrLatest returns the set a scaling event sizes alone: the only
// active set, or when no set is active the new set (the newest old set when
// there is no new set), which scales the deployment up from zero. It returns
// nil when several sets are active, which are then scaled together.
func findActiveOrLatest(newSet *v1alpha1.MachineSet, old []*v1alpha1.MachineSet) *v1alpha1.MachineSet {
	switch active := activeSets(withNew(newSet, old)); len(active) {
	case 0:
		if newSet != nil {
			return newSet
		}
		return newest(old)
	case 1:
		return active[0]
	default:
		return nil
	}
}

// isSaturated reports whether set, the new set, already carries the whole
// deployment: sized for the current replicas, told so by its desired-replicas
// annotation, and with that many machines available. Old sets are then of no
// use and can go to 0 without a rolling step.
func isSaturated(d *v1alpha1.MachineDeployment, set *v1alpha1.MachineSet, counts map[string]machineCounts) bool {
	if set == nil || set.Spec.Replicas != d.Spec.Replicas {
		return false
	}
	desired, ok := desiredReplicasOf(set)
	return ok && desired == d.Spec.Replicas && counts[set.Name].Available >= d.Spec.Replicas
}
