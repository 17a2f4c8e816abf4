package deployment

import (
	"fmt"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// step is what one sync does to a deployment's sets.
type step struct {
	// Create, when set, creates the new set with that many replicas.
	Create *int32
	// Replicas are the spec.replicas the existing sets get, by name.
	Replicas map[string]int32
	// Scaling tells that the step sizes the sets for spec.replicas (a
	// scaling event): every set in Replicas gets the deployment's
	// desired-replicas and max-replicas annotations, even when its size
	// stays, so that the next sync sees no scaling event.
	Scaling bool
	// HeldBack tells that the deployment is frozen and the step would have
	// added machines.
	HeldBack bool
	// Unsupported says why the deployment's strategy is not rolled out
	// ("" when it is); such a deployment is only scaled.
	Unsupported string
}

// planStep decides one sync's step from what the sync observed. It is pure.
//
//   - A scaling event (isScalingEvent), and any sync of a paused
//     deployment or of an InPlaceUpdate one that planInPlace does not run
//     (no target cluster), sizes the sets with planScale: such a
//     deployment is scaled but does not roll, and the step says why.
//   - Otherwise the strategy rolls: planRolling for RollingUpdate,
//     planRecreate for Recreate.
//   - An InPlaceUpdate deployment without a new set whose old sets have
//     neither replicas nor machines (created from zero) gets its new set
//     with spec.replicas, as MCM's in-place rollout sizes it; it is not
//     reported unsupported, having nothing to roll.
//   - A frozen deployment drops every increase (creating the new set
//     included); decreases go ahead.
func planStep(d *v1alpha1.MachineDeployment, obs observed, frozen bool) (step, error) {
	var st step
	var plan rolloutPlan
	rolls := strategyType(d) == v1alpha1.RecreateMachineDeploymentStrategyType ||
		strategyType(d) == v1alpha1.RollingUpdateMachineDeploymentStrategyType
	// An in-place deployment whose old sets have neither replicas nor
	// machines has nothing to roll: it is sized like any other.
	inPlaceIdle := isInPlaceUpdate(d) && len(activeSets(obs.old)) == 0 && !oldMachinesExist(obs.old, obs.counts)
	fromZero := inPlaceIdle && obs.newSet == nil
	switch {
	case isInPlaceUpdate(d) && !inPlaceIdle && !d.Spec.Paused:
		// planSets runs every other in-place rollout (planInPlace).
		st.Unsupported = "strategy InPlaceUpdate needs the target cluster's nodes, and this controller has none; the deployment is only scaled"
	case !rolls && !isInPlaceUpdate(d):
		st.Unsupported = fmt.Sprintf("strategy %s is not rolled out by this controller; the deployment is only scaled", strategyType(d))
	}
	switch {
	case fromZero && !d.Spec.Paused:
		// Nothing to roll: the new set starts with spec.replicas, as MCM's
		// in-place rollout sizes it when the old sets have no replicas.
		plan.New = new(max(d.Spec.Replicas, 0))
	case d.Spec.Paused || !rolls || isScalingEvent(d, obs.newSet, obs.old):
		sizes, err := planScale(d, obs.newSet, obs.old, obs.counts)
		if err != nil {
			return step{}, err
		}
		st.Replicas, st.Scaling = sizes, true
	case strategyType(d) == v1alpha1.RecreateMachineDeploymentStrategyType:
		plan = planRecreate(d, obs.newSet, obs.old, obs.counts)
	default:
		var err error
		if plan, err = planRolling(d, obs.newSet, obs.old, obs.counts); err != nil {
			return step{}, err
		}
	}
	if plan.New != nil {
		if obs.newSet == nil {
			st.Create = plan.New
		} else {
			st.Replicas = withSize(st.Replicas, obs.newSet.Name, *plan.New)
		}
	}
	for name, n := range plan.Old {
		st.Replicas = withSize(st.Replicas, name, n)
	}
	if frozen {
		st = holdIncreases(st, obs)
	}
	return st, nil
}

func withSize(sizes map[string]int32, name string, n int32) map[string]int32 {
	if sizes == nil {
		sizes = make(map[string]int32)
	}
	sizes[name] = n
	return sizes
}

// holdIncreases drops what a step would add: the new set's creation and
// every growth of a set.
func holdIncreases(st step, obs observed) step {
	if st.Create != nil && *st.Create > 0 {
		st.Create, st.HeldBack = nil, true
	}
	for _, s := range obs.all() {
		if n, ok := st.Replicas[s.Name]; ok && n > s.Spec.Replicas {
			st.Replicas[s.Name], st.HeldBack = s.Spec.Replicas, true
		}
	}
	return st
}
