package machineset

import (
	"slices"
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// syncPlan is every write of one sync of a set but its status, which is
// computed from what the writes did. plan makes it from what observe saw;
// apply makes the writes, in the order of the fields.
type syncPlan struct {
	// AddFinalizer: the set lacks its finalizer. It is added first; if
	// that fails, nothing else is written.
	AddFinalizer bool
	// Adopt are the orphans the set takes, Release the machines it lets
	// go: one patch of the owner references each.
	Adopt, Release []*v1alpha1.Machine
	machinePlan
}

// machinePlan is what a sync writes on the set's machines, and on the set
// about them, given the machines it owns.
type machinePlan struct {
	// Owned are the machines the set owns once its ownership changes are
	// made, those being deleted included.
	Owned []*v1alpha1.Machine
	// Propagate are the owned machines whose in-place parts (node
	// template, machine configuration, class kind) lag behind the
	// template's: one patch each.
	Propagate []*v1alpha1.Machine
	// Foreign are the owned machines the set did not create
	// (provenance), not being deleted; RecordForeign tells that
	// v1alpha1.ForeignMachinesAnnotation does not list the foreign
	// machines yet, those being deleted included, and is written with
	// ForeignAnnotation.
	Foreign           []*v1alpha1.Machine
	RecordForeign     bool
	ForeignAnnotation string
	// AutoPreserve are the auto-preserved marks put on and taken off,
	// written before the deletions, which are planned as if they were
	// (withMarks).
	AutoPreserve autoPreservePlan
	// Replicas are the creations and deletions.
	Replicas replicaPlan
	// NextExpiry is the earliest preservation expiry still to come among
	// the machines (nextExpiry), when the set syncs again; zero if none.
	NextExpiry time.Time
	// Finish: the set is being deleted and owns no machine left. Its
	// finalizer is removed (RemoveFinalizer, when it has it), and no status
	// is written.
	Finish, RemoveFinalizer bool
}

// plan decides every write of one sync but the status from what observe
// saw, assuming each adoption succeeds (apply plans the machines again for
// one that fails). It is pure.
func plan(s *scope, burst int) syncPlan {
	if s.invalid != "" {
		return syncPlan{} // a set that cannot work gets its status written, nothing else
	}
	return syncPlan{
		AddFinalizer: s.set.DeletionTimestamp == nil && !slices.Contains(s.set.Finalizers, Finalizer),
		Adopt:        s.adopt,
		Release:      s.own.Release,
		machinePlan:  planMachines(s, s.owned(), s.foreign, burst),
	}
}

// planMachines decides the writes about the set's machines when it owns
// owned, of which foreign are foreign. It is pure.
func planMachines(s *scope, owned, foreign []*v1alpha1.Machine, burst int) machinePlan {
	set := s.set
	rankBy := ladderOf(set, s.policy, s.now)
	rankBy.Foreign = uidSet(foreign)
	rankBy.KeepPreserved = s.keepPreserved
	marks := planAutoPreserve(set, owned)
	p := machinePlan{
		Owned:             owned,
		Propagate:         lagging(set, owned),
		Foreign:           slices.DeleteFunc(slices.Clone(foreign), machinestate.BeingDeleted),
		ForeignAnnotation: foreignAnnotation(foreign),
		AutoPreserve:      marks,
		Replicas:          planReplicas(set, s.wanted, withMarks(owned, marks), s.frozen != "" || s.noClass != "", burst, rankBy),
		NextExpiry:        nextExpiry(owned, s.now),
		Finish:            set.DeletionTimestamp != nil && len(owned) == 0,
	}
	have, listed := set.Annotations[v1alpha1.ForeignMachinesAnnotation]
	p.RecordForeign = listed != (p.ForeignAnnotation != "") || have != p.ForeignAnnotation
	p.RemoveFinalizer = p.Finish && slices.Contains(set.Finalizers, Finalizer)
	return p
}

// lagging are the machines, not being deleted, whose in-place parts differ
// from the set's template. A machine whose spec changed syncs the set
// (machineChangeMatters compares the whole spec): the comparison is cheap,
// and a patch is built only for a machine that lags.
func lagging(set *v1alpha1.MachineSet, machines []*v1alpha1.Machine) []*v1alpha1.Machine {
	var out []*v1alpha1.Machine
	for _, m := range machines {
		if !machinestate.BeingDeleted(m) && !machinestate.SameInPlace(&m.Spec, &set.Spec.Template.Spec) {
			out = append(out, m)
		}
	}
	return out
}
