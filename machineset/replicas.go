package machineset

import (
	"fmt"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/workqueue"
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
	// Active is how many of the set's machines are not being deleted.
	Active int
}

// planReplicas decides the creations and deletions of one sync of set,
// whose machines (the ones it owns, those being deleted included) are
// given, when it wants wanted machines (spec.replicas up to the ceiling,
// wantedReplicas). It is pure.
//
// Machines being deleted do not count: they are on their way out, and a
// replacement is created at once (MCM #1086). The surplus, the machines
// the cluster-autoscaler marked, and Failed machines are deleted in ladder
// order (planDeletions); a deleted Failed or marked machine is replaced by
// a later sync, once its deletion is seen. At most burst machines are
// created, and at most burst deleted, per sync. A frozen set creates
// nothing; it still deletes.
func planReplicas(set *v1alpha1.MachineSet, wanted int, machines []*v1alpha1.Machine, frozen bool, burst int, l ladder) replicaPlan {
	active := 0
	for _, m := range machines {
		if !machinestate.BeingDeleted(m) {
			active++
		}
	}
	if set.DeletionTimestamp != nil {
		// The set is going: all its machines go, in ladder order.
		return replicaPlan{Delete: planDeletions(set, machines, active, burst, l), Active: active}
	}
	diff := wanted - active
	p := replicaPlan{Delete: planDeletions(set, machines, -diff, burst, l), Active: active}
	switch {
	case diff <= 0:
	case frozen:
		p.HeldBack = diff
	default:
		p.Create = min(diff, burst)
	}
	return p
}

// wantedReplicas is how many machines the set wants: spec.replicas, but at
// most ceiling. Above it, capped says so, for the set's
// ConditionReplicasCapped and a Warning event: a replicas typo such as
// 2147483647 would otherwise create machines for as long as the cloud
// lets it, at the client's rate, with nothing to show why.
func wantedReplicas(set *v1alpha1.MachineSet, ceiling int) (wanted int, capped string) {
	asked := int(set.Spec.Replicas)
	if asked <= ceiling {
		return asked, ""
	}
	return ceiling, fmt.Sprintf("spec.replicas asks for %d machines, more than the ceiling of %d per machine set; the set keeps %d", asked, ceiling, ceiling)
}

// stillWanted is how many of run's creations set, as it is now, still
// wants: none once it is gone, replaced, being deleted or frozen by its
// label (the safety gate is asked at the next sync).
func (c *Controller) stillWanted(run *creationRun, set *v1alpha1.MachineSet) int {
	if set == nil || set.UID != run.uid || set.DeletionTimestamp != nil ||
		set.Labels[v1alpha1.FreezeLabelKey] == v1alpha1.FreezeLabelValue {
		return 0
	}
	wanted, _ := wantedReplicas(set, c.opts.MaxReplicas)
	return wanted - run.active
}

// limitCreations lowers the creation run under way for the set obj, if
// any, to what the set now wants (informer handlers).
func (c *Controller) limitCreations(obj any) {
	set, ok := obj.(*v1alpha1.MachineSet)
	if !ok {
		return
	}
	if run := c.creating.get(workqueue.KeyOf(set)); run != nil {
		run.lower(c.stillWanted(run, set))
	}
}
