package machineset

import (
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// replicaPlan is what one sync does about a set's number of machines.
type replicaPlan struct {
	// Create is how many machines to create.
	Create int
	// Delete are the machines to delete, in ladder order.
	Delete []*v1alpha1.Machine
	// HeldBack is how many machines are missing but not created because
	// the set is frozen.
	HeldBack int
}

// planReplicas decides the creations and deletions of one sync of set,
// whose machines (the ones it owns, those being deleted included) are
// given. It is pure.
//
// Machines being deleted do not count: they are on their way out, and a
// replacement is created at once (MCM #1086). The surplus, the machines
// the cluster-autoscaler marked, and Failed machines are deleted in ladder
// order (planDeletions); a deleted Failed or marked machine is replaced by
// a later sync, once its deletion is seen. At most burst machines are
// created, and at most burst deleted, per sync. A frozen set creates
// nothing; it still deletes.
func planReplicas(set *v1alpha1.MachineSet, machines []*v1alpha1.Machine, frozen bool, burst int, l ladder) replicaPlan {
	active := 0
	for _, m := range machines {
		if !machinestate.BeingDeleted(m) {
			active++
		}
	}
	if set.DeletionTimestamp != nil {
		// The set is going: all its machines go, in ladder order.
		return replicaPlan{Delete: planDeletions(set, machines, active, burst, l)}
	}
	diff := int(set.Spec.Replicas) - active
	p := replicaPlan{Delete: planDeletions(set, machines, -diff, burst, l)}
	switch {
	case diff <= 0:
	case frozen:
		p.HeldBack = diff
	default:
		p.Create = min(diff, burst)
	}
	return p
}
