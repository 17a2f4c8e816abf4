package machineset

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// DeletionPolicy orders machines within one rung of the deletion ladder.
type DeletionPolicy string

// Deletion policies.
const (
	// DeletionPolicyOldest deletes older machines first (by
	// creationTimestamp), as MCM always does.
	DeletionPolicyOldest DeletionPolicy = "Oldest"
	// DeletionPolicyNewest deletes newer machines first, keeping the ones that
	// have proven themselves longest.
	DeletionPolicyNewest DeletionPolicy = "Newest"
	// DeletionPolicyRandom spreads deletions over the machines' ages. The
	// order is a hash of each machine's UID (FNV-64a, mixed) rather than a
	// random draw, so the ranking stays pure and every sync, and every
	// replica of the controller, picks the same machines.
	DeletionPolicyRandom DeletionPolicy = "Random"
)

// DeletionPolicyAnnotation on a MachineSet selects its DeletionPolicy; the
// controller's Options set the policy of sets without it.
const DeletionPolicyAnnotation = "mcmkit.io/deletion-policy"

// defaultPriority is the priority of a machine without a usable priority
// annotation: v1alpha1.MachinePriorityDefault, as in MCM.
const defaultPriority = 3

// phaseRank is rung 6 of the ladder: the less a machine contributes, the
// earlier it goes. Phases not named here (the in-place update phases, and
// any phase a newer API adds) rank with Unknown: the set cannot tell whether
// such a machine serves, so it neither sacrifices it before broken machines
// nor protects it like a healthy one. MCM ranks them 0, before Failed, which
// deletes a machine in the middle of an update ahead of a dead one.
func phaseRank(p v1alpha1.MachinePhase) int {
	switch p {
	case v1alpha1.MachineFailed:
		return 1
	case v1alpha1.MachineCrashLoopBackOff:
		return 2
	case v1alpha1.MachinePending, "": // no phase yet: not seen by the machine controller, as good as Pending
		return 4
	case v1alpha1.MachineAvailable:
		return 6
	case v1alpha1.MachineRunning:
		return 7
	default: // Unknown and unnamed phases
		return 3
	}
}

// rankWarmingUp is the phase rung of a Running (or Available) machine that
// has not been so for the set's minReadySeconds yet, on a set that applies
// minReadySeconds (v1alpha1.MinReadySecondsAnnotation "apply"): it does not
// count as available, so it goes before the machines that do. A rollout
// that sizes old sets by their available machines relies on this, as the
// Deployment controller relies on the ReplicaSet deleting not-ready pods
// first. Without the opt-in every Running machine is available, as in MCM,
// and none is warming up.
const rankWarmingUp = 5

// ladder is what ranking needs besides the machines.
type ladder struct {
	// Policy orders machines within a rung.
	Policy DeletionPolicy
	// Now and MinReady (from machinestate.MinReady) tell the machines that
	// are Running but not available yet; with MinReady 0 there are none.
	Now      time.Time
	MinReady time.Duration
	// Foreign holds the UIDs of the set's machines it did not create
	// (provenance): they go first.
	Foreign map[types.UID]bool
	// KeepPreserved makes a scale-down stop short of the machines whose
	// preservation holds at Now (Options.KeepPreservedOnScaleDown), rather
	// than take them last.
	KeepPreserved bool
}

// ladderOf is the ladder of a set at now with policy. It counts machines
// available as the set's status does (calculateStatus), which reports an
// unknown value of the annotation.
func ladderOf(set *v1alpha1.MachineSet, policy DeletionPolicy, now time.Time) ladder {
	minReady, _ := machinestate.MinReady(set.Annotations, set.Spec.MinReadySeconds)
	return ladder{Policy: policy, Now: now, MinReady: minReady}
}

// warmingUp tells whether m is Running or Available for less than
// MinReady.
func (l ladder) warmingUp(m *v1alpha1.Machine) bool {
	_, usable := machinestate.ReadySince(m)
	return usable && !machinestate.Available(m, l.MinReady, l.Now)
}

// rung is where a machine stands on the deletion ladder, before the policy
// orders machines that stand on the same rung. compareRungs orders them,
// field by field in declaration order; a smaller rung is deleted first.
type rung struct {
	// notDeleting is false for machines already being deleted (rung 1).
	notDeleting bool
	// preserved is true for machines whose preservation holds; among
	// them, userPreserved is false for the auto-preserved ones, and
	// preservedUntil orders by expiry (rung 2).
	preserved, userPreserved bool
	preservedUntil           time.Time
	// own is false for machines the set did not create (rung 3).
	own bool
	// priority is the machinepriority annotation (rung 4).
	priority int
	// unmarked is false for machines with a parsable
	// marked-for-deletion-time; markedAt is that time (rung 5).
	unmarked bool
	markedAt time.Time
	// phase is the phaseRank of the machine's phase (rung 6).
	phase int
}

// compareRungs orders rungs: negative when a is deleted before b.
func compareRungs(a, b rung) int {
	return cmp.Or(
		compareBool(a.notDeleting, b.notDeleting),
		compareBool(a.preserved, b.preserved),
		compareBool(a.userPreserved, b.userPreserved),
		a.preservedUntil.Compare(b.preservedUntil),
		compareBool(a.own, b.own),
		cmp.Compare(a.priority, b.priority),
		compareBool(a.unmarked, b.unmarked),
		a.markedAt.Compare(b.markedAt),
		cmp.Compare(a.phase, b.phase),
	)
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	default:
		return 1
	}
}

// rungOf places a machine on the ladder.
func rungOf(m *v1alpha1.Machine, l ladder) rung {
	r := rung{notDeleting: !machinestate.BeingDeleted(m), own: !l.Foreign[m.UID], priority: priorityOf(m), unmarked: true}
	if machinestate.Preserved(m, l.Now) {
		// Auto-preserved is what is asked of the machine as the machine
		// controller reads it (the Node's value wins), not its own
		// annotation alone: a Node asking to preserve it makes it the
		// user's.
		asked, _ := machinestate.PreserveRequest(m)
		r.preserved, r.userPreserved = true, asked != v1alpha1.PreserveAutoPreserved
		r.preservedUntil, _ = machinestate.PreservedUntil(m)
	}
	if t, ok := machinestate.MarkedForDeletionAt(m); ok {
		r.unmarked, r.markedAt = false, t
	}
	r.phase = phaseRank(m.Status.CurrentStatus.Phase)
	if l.warmingUp(m) {
		r.phase = rankWarmingUp
	}
	return r
}

// priorityOf is the machine's machinepriority annotation, or the default
// when it is missing or not an integer, as in MCM.
func priorityOf(m *v1alpha1.Machine) int {
	s, ok := m.Annotations[v1alpha1.MachinePriorityAnnotation]
	if !ok {
		return defaultPriority
	}
	p, err := strconv.Atoi(s)
	if err != nil {
		return defaultPriority
	}
	return p
}

// ranked is a machine with its place on the ladder and its policy key,
// computed once so that sorting does not parse annotations again.
type ranked struct {
	m    *v1alpha1.Machine
	rung rung
	// created is the creationTimestamp; hash is the Random key.
	created time.Time
	hash    uint64
}

// uidHash is the Random policy's key: FNV-64a of the UID, passed through
// MurmurHash3's 64-bit finalizer. FNV alone barely moves the high bits for
// keys that differ in their last byte, so similar UIDs or names would come
// out in nearly their sorted order; the finalizer spreads them. Machines
// without a UID (built in memory, never stored) hash their namespace and
// name instead, so they are spread too.
func uidHash(m *v1alpha1.Machine) uint64 {
	h := fnv.New64a()
	if m.UID != "" {
		_, _ = h.Write([]byte(m.UID))
	} else {
		_, _ = h.Write([]byte(m.Namespace + "/" + m.Name))
	}
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// rankForDeletion returns a new slice with the machines in the order the set
// deletes them, first deleted first. It does not modify machines or the
// machines they point to.
//
// The deletion ladder; an earlier rung is deleted first, and each rung only
// orders machines the rungs above it leave tied:
//
//  1. machines already being deleted (deletionTimestamp set, or phase
//     Terminating);
//  2. machines whose preservation holds at ladder.Now go after all the
//     others (machinestate.Preserved); among them the auto-preserved ones
//     (as the machine controller reads the request, the Node's value
//     winning) before those a user preserved, then the earlier expiry;
//  3. machines the set did not create (ladder.Foreign, see provenance):
//     whatever their priority or phase, none is kept in place of the
//     set's own;
//  4. lower machinepriority.machine.sapcloud.io first (missing or not an
//     integer counts as the default 3; the cluster-autoscaler sets 1);
//  5. machines with a marked-for-deletion-time before machines without one,
//     and among marked machines the older mark first (an unparsable mark
//     counts as none);
//  6. by phase: Failed, then CrashLoopBackOff, then Unknown, then Pending
//     (and no phase yet), then Running or Available for less than the
//     set's minReadySeconds (not available yet; only on a set that applies
//     minReadySeconds, see rankWarmingUp), then Available, then Running;
//     phases not named here (in-place updates) rank with Unknown;
//  7. within a rung, the policy: Oldest deletes the older creationTimestamp
//     first, Newest the newer, Random orders by a hash of the UID; an
//     unknown policy acts as Oldest. Ties left after that go by name (then
//     namespace and UID), so the order is total and the same on every call.
//
// Unlike MCM, being deleted is the first rung rather than part of the phase
// rung (MCM ranks preservation before it: no difference to what is
// deleted, since machines being deleted are never picked), foreign
// machines go before the set's own, and in-place update phases no longer
// rank ahead of Failed.
func rankForDeletion(machines []*v1alpha1.Machine, l ladder) []*v1alpha1.Machine {
	policy := l.Policy
	rs := make([]ranked, len(machines))
	for i, m := range machines {
		rs[i] = ranked{m: m, rung: rungOf(m, l), created: m.CreationTimestamp.Time}
		if policy == DeletionPolicyRandom {
			rs[i].hash = uidHash(m)
		}
	}
	slices.SortStableFunc(rs, func(a, b ranked) int {
		if c := compareRungs(a.rung, b.rung); c != 0 {
			return c
		}
		var c int
		switch policy {
		case DeletionPolicyNewest:
			c = b.created.Compare(a.created)
		case DeletionPolicyRandom:
			c = cmp.Compare(a.hash, b.hash)
		default:
			c = a.created.Compare(b.created)
		}
		return cmp.Or(c,
			cmp.Compare(a.m.Name, b.m.Name),
			cmp.Compare(a.m.Namespace, b.m.Namespace),
			cmp.Compare(a.m.UID, b.m.UID))
	})
	out := make([]*v1alpha1.Machine, len(rs))
	for i, r := range rs {
		out[i] = r.m
	}
	return out
}

// planDeletions picks the machines one sync of set deletes, in ladder order
// (see rankForDeletion), each at most once:
//
//   - the first surplus machines of the ranking that are not being deleted
//     (surplus is how many machines the set has above spec.replicas, counting
//     only machines not being deleted; zero or less picks none this way).
//     Machines whose preservation holds rank last, so they are taken only
//     when the surplus needs them; with ladder.KeepPreserved the surplus
//     stops short of them instead, and heldBy is the first of them, the
//     one that holds the scale-down;
//   - every machine the cluster-autoscaler marked for deletion (see
//     markedByAutoscaler), even when there is no surplus: the autoscaler
//     expects that very machine to go, also when the replica decrease that
//     came with the mark left no surplus here (it went to another set of the
//     deployment, or a missing machine absorbed it); a preserved machine is
//     not taken this way (as in MCM, whose ranking puts it after the
//     surplus);
//   - every Failed machine the set need not keep (machinestate.KeepFailed
//     at ladder.Now), even when there is no surplus: the set replaces it
//     with a new one.
//
// Machines being deleted are never picked: they already count as gone. A
// positive limit caps the result, keeping its head, so what a capped sync
// leaves for the next one is always the end of the ladder. The result is a
// new slice; nothing is modified.
func planDeletions(set *v1alpha1.MachineSet, machines []*v1alpha1.Machine, surplus, limit int, l ladder) (out []*v1alpha1.Machine, heldBy *v1alpha1.Machine) {
	scalerAt, scalerOK := lastScalerChange(set)
	for _, m := range rankForDeletion(machines, l) {
		if limit > 0 && len(out) == limit {
			break
		}
		if machinestate.BeingDeleted(m) {
			continue
		}
		preserved := machinestate.Preserved(m, l.Now)
		if surplus > 0 && preserved && l.KeepPreserved {
			// The preserved machines rank last: none after this one
			// is taken for the surplus either.
			surplus, heldBy = 0, m
		}
		// The ranking is walked in order, so the machines taken for the
		// surplus are exactly its first surplus non-deleting ones; marked
		// and Failed machines among them are not taken twice.
		if surplus > 0 {
			surplus--
			out = append(out, m)
			continue
		}
		if preserved {
			continue
		}
		failed := m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed && !machinestate.KeepFailed(m, l.Now)
		if failed || markedByAutoscaler(m, scalerAt, scalerOK) {
			out = append(out, m)
		}
	}
	return out, heldBy
}

// lastScalerChange reads the set's last-deployment-replica-change-by-scaler
// time; ok is false when the set has none or it does not parse.
func lastScalerChange(set *v1alpha1.MachineSet) (at time.Time, ok bool) {
	if set == nil {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, set.Annotations[v1alpha1.LastReplicaChangeByScalerAnnotation])
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// markedByAutoscaler tells whether the cluster-autoscaler asked for m to go:
// priority "1" and a marked-for-deletion-time that is not later than the
// set's last replica change by the scaler. A mark newer than that change,
// or on a set that records none, belongs to a scale-down whose replica
// decrease has not reached the set yet (the deployment writes the marks
// first and lowers the replicas in a later sync): deleting now would make
// the set create a replacement, and the decrease would then remove yet
// another machine. MCM's MachineSet takes no marked machine without that
// time either. An unparsable scaler time marks nothing, for the same
// reason. In each case the surplus path still deletes priority-1 machines
// first once the replicas drop.
func markedByAutoscaler(m *v1alpha1.Machine, scalerAt time.Time, scalerOK bool) bool {
	if m.Annotations[v1alpha1.MachinePriorityAnnotation] != v1alpha1.MachinePriorityDeleteFirst {
		return false
	}
	markedAt, ok := machinestate.MarkedForDeletionAt(m)
	return ok && scalerOK && !markedAt.After(scalerAt)
}

// policyOf returns the set's DeletionPolicy from DeletionPolicyAnnotation,
// or def when the annotation is absent or empty. An unknown value returns
// def together with an error naming the value, for the caller to report on
// the set: a typo should not stop scale-down, nor go unnoticed.
func policyOf(set *v1alpha1.MachineSet, def DeletionPolicy) (DeletionPolicy, error) {
	if set == nil {
		return def, nil
	}
	v := set.Annotations[DeletionPolicyAnnotation]
	switch p := DeletionPolicy(v); p {
	case "":
		return def, nil
	case DeletionPolicyOldest, DeletionPolicyNewest, DeletionPolicyRandom:
		return p, nil
	default:
		return def, fmt.Errorf("annotation %s: unknown deletion policy %q (want %s, %s or %s); using %s",
			DeletionPolicyAnnotation, v, DeletionPolicyOldest, DeletionPolicyNewest, DeletionPolicyRandom, def)
	}
}
