package deployment

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// inPlacePlan is every write of one sync of an in-place rollout but the
// sets' own bookkeeping (planSets writes those, the sizes from step).
type inPlacePlan struct {
	// step sizes the sets: the new set's creation, the replicas of
	// machines moved earlier, a scaling event.
	step step
	// transfers move machines whose update is done from their old set to
	// the new one: owner reference and labels, as MCM.
	transfers []transfer
	// unlabel are the new set's machines whose update-result label can go:
	// the set's spec.replicas counts them.
	unlabel []*v1alpha1.Machine
	// nodes are the node writes, by node name.
	nodes []nodeLabelChange
	// failure is the failed update that stops the rollout, or nil.
	failure *updateFailure
}

// transfer moves Machine from its old set From to the new set To.
type transfer struct {
	Machine  *v1alpha1.Machine
	From, To *v1alpha1.MachineSet
}

// updateFailure is an in-place update of the current rollout that failed.
type updateFailure struct {
	Machine, Reason string
}

// message is the Progressing condition's message and the event's.
func (f updateFailure) message() string {
	return fmt.Sprintf("in-place update of machine %s failed: %s; no further machine is selected until the failure is cleared (the node labelled %s=%s, or the machine deleted) or the template changes",
		f.Machine, f.Reason, v1alpha1.UpdateResultLabel, v1alpha1.UpdateResultSuccessful)
}

// nodeLabelChange is what the rollout writes on one node: labels and
// annotations to set (a value) or remove (nil), the cordon lifted, the
// PreferNoSchedule taint removed and the critical-components taint added.
type nodeLabelChange struct {
	Node        *corev1.Node
	Labels      map[string]*string
	Annotations map[string]*string
	Uncordon    bool
	// Untaint removes the PreferNoSchedule taint; Critical adds the
	// critical-components-not-ready taint (Options.CriticalComponentsNotReadyTaint).
	Untaint, Critical bool
}

// planInPlace plans one sync of an in-place rollout, rolling: the old sets
// have replicas or machines. It is pure. See doc.go (# In-place update)
// for the rules.
func planInPlace(in inPlaceInput, frozen bool) (inPlacePlan, error) {
	d, obs := in.d, in.obs
	replicas := max(d.Spec.Replicas, 0)
	surge, maxUnavailable, err := inPlaceBounds(d)
	if err != nil {
		return inPlacePlan{}, err
	}
	var p inPlacePlan
	machines := in.inPlaceMachines()
	changes := map[string]*nodeLabelChange{}
	change := func(n *corev1.Node) *nodeLabelChange {
		ch := changes[n.Name]
		if ch == nil {
			ch = &nodeLabelChange{Node: n, Labels: map[string]*string{}, Annotations: map[string]*string{}}
			changes[n.Name] = ch
		}
		return ch
	}
	target := newSetName(d)
	if obs.newSet != nil {
		target = obs.newSet.Name
	}
	planCandidates(machines, target, change)
	if obs.newSet == nil {
		size := min(replicas+surge-oldMachineCount(obs), replicas)
		if manual(d) || frozen {
			size = 0
		}
		p.step.Create = new(max(size, 0))
		p.nodes = sortedChanges(changes)
		return p, nil
	}
	// The sizes follow a move in the next sync, once the cache shows it:
	// MCM resizes both sets right after the move, and a set controller
	// whose machine cache lags behind its set cache then deletes (old set)
	// or creates (new set) a machine.
	p.failure = currentFailure(machines, obs.newSet)
	scaling := isScalingEvent(d, obs.newSet, obs.old) && len(activeSets(obs.all())) > 1
	if scaling {
		p.step.Replicas, p.step.Scaling = scaleInPlace(d, obs)
	} else {
		p.transfers = planTransfers(machines, obs.newSet)
		planRearm(machines, target, change)
		sizes := sizeInPlace(d, obs, surge, rework(machines, target))
		p.step.Replicas = sizes
		if !manual(d) && !frozen && p.failure == nil {
			planSelection(machines, p.transfers, sizes, obs.newSet.Name, replicas, maxUnavailable, change)
		}
	}
	planNewSetNodes(machines, p.transfers, target, in.criticalTaint, change)
	p.unlabel = movedAndCounted(machines, obs.newSet, replicas, p.step.Replicas)
	p.nodes = sortedChanges(changes)
	return p, nil
}

// planCandidates labels the nodes of old sets' machines candidate-for-update
// and stamps those not selected yet with the set their update is for,
// target (InPlaceTargetAnnotation): a node selected later is updated to
// that set's template.
func planCandidates(machines []inPlaceMachine, target string, change func(*corev1.Node) *nodeLabelChange) {
	for _, im := range machines {
		if !im.old || im.node == nil || im.stale {
			continue
		}
		if !hasLabel(im.node, v1alpha1.CandidateForUpdateLabel) {
			change(im.node).Labels[v1alpha1.CandidateForUpdateLabel] = new(inPlaceTrue)
		}
		if !im.selected() && im.node.Annotations[InPlaceTargetAnnotation] != target {
			change(im.node).Annotations[InPlaceTargetAnnotation] = new(target)
		}
	}
}

// planRearm re-arms (rearm) every old set's machine whose update is done,
// but for another set than target.
func planRearm(machines []inPlaceMachine, target string, change func(*corev1.Node) *nodeLabelChange) {
	for _, im := range machines {
		if im.old && !im.stale && im.updateDone() && !im.forTarget(target) {
			rearm(change(im.node), target)
		}
	}
}

// rearm makes the machine of a node whose update is done, but for another
// set than target (the template changed while it was updated, or after:
// MCM then moves it to the new set without the new template; or a rollback
// made its set the new one again), a candidate again: the selected and
// result labels, the failure reason and the cordon go, the candidate
// label stays, and the stamp names target; the machine controller then
// sets the node back to CandidateForUpdate, and the machine is updated
// again.
func rearm(ch *nodeLabelChange, target string) {
	n := ch.Node
	for _, key := range []string{v1alpha1.SelectedForUpdateLabel, v1alpha1.UpdateResultLabel} {
		if _, ok := n.Labels[key]; ok {
			ch.Labels[key] = nil
		}
	}
	if !hasLabel(n, v1alpha1.CandidateForUpdateLabel) {
		ch.Labels[v1alpha1.CandidateForUpdateLabel] = new(inPlaceTrue)
	}
	if _, ok := n.Annotations[v1alpha1.UpdateFailedReasonAnnotation]; ok {
		ch.Annotations[v1alpha1.UpdateFailedReasonAnnotation] = nil
	}
	ch.Annotations[InPlaceTargetAnnotation] = new(target)
	ch.Uncordon = n.Spec.Unschedulable
}

// planNewSetNodes plans the nodes of the machines of the new set, target,
// those moved to it now included: a machine whose update is done is
// cleaned up (planCleanup), or re-armed when the update was for another
// set (after a rollback); the candidate label goes from a node that is
// not being updated and not re-armed for the new set (planUncandidate).
func planNewSetNodes(machines []inPlaceMachine, transfers []transfer, target string, critical bool, change func(*corev1.Node) *nodeLabelChange) {
	moved := map[string]bool{}
	for _, t := range transfers {
		moved[t.Machine.Name] = true
	}
	for _, im := range machines {
		switch {
		case im.node == nil || im.stale || (im.old && !moved[im.m.Name]):
		case im.updateDone() && im.forTarget(target):
			planCleanup(change(im.node), critical)
		case im.updateDone():
			rearm(change(im.node), target)
		case !im.selected() && im.node.Labels[v1alpha1.UpdateResultLabel] == "" && !im.pending(target):
			planUncandidate(change(im.node))
		}
	}
}

// oldMachineCount counts the old sets' machines that are not being deleted.
func oldMachineCount(obs observed) int32 {
	var n int32
	for _, s := range obs.old {
		n += obs.counts[s.Name].Machines
	}
	return n
}

// currentFailure is the failed update of an old set's machine that failed
// since the new set was created (a failure of an earlier rollout does not
// stop this one), the first by machine name; nil when there is none.
func currentFailure(machines []inPlaceMachine, newSet *v1alpha1.MachineSet) *updateFailure {
	var out *updateFailure
	for _, im := range machines {
		failed, at, reason := im.updateFailure()
		if !im.old || !failed || at.Before(newSet.CreationTimestamp.Time) {
			continue
		}
		if out == nil || im.m.Name < out.Machine {
			out = &updateFailure{Machine: im.m.Name, Reason: reason}
		}
	}
	return out
}

// planTransfers moves every old set's machine whose update is done
// (updateDone), for the new set (forTarget), and whose node's cache is
// current, to the new set.
func planTransfers(machines []inPlaceMachine, newSet *v1alpha1.MachineSet) []transfer {
	var out []transfer
	for _, im := range machines {
		if im.old && !im.stale && im.updateDone() && im.forTarget(newSet.Name) {
			out = append(out, transfer{Machine: im.m, From: im.set, To: newSet})
		}
	}
	return out
}

// sizeInPlace sizes the sets as MCM's syncMachineSets and
// reconcileNewMachineSetInPlace do: the new set counts the machines moved
// to it (labelled update-result=successful) that its size does not count
// yet; an old set shrinks to the machines it has left (one moved away, or
// deleted: not replaced there); with no old replicas left the new set gets
// spec.replicas, and it makes up for old machines gone by new ones; at
// spec.replicas, the old sets go to 0 (the machines a surge replaced).
// With a surge (Auto), the new set is kept at least at the size MCM
// creates it with, spec.replicas + surge - old replicas: after a scaling
// event took the surge's machines away, a rollout with maxUnavailable 0
// needs them back to move at all.
//
// A new set that is still sized for machines that moved out of it (a
// rollback made it new again before it shrank) is held to what the old
// sets leave room for.
//
// A new set whose machines are updated again after a rollback (rework > 0)
// is grown by the surge meanwhile, as a new set starts with it, and comes
// back to spec.replicas once they are done (surge is 0 in Manual). A
// frozen deployment's growth is held back afterwards (holdIncreases).
func sizeInPlace(d *v1alpha1.MachineDeployment, obs observed, surge, rework int32) map[string]int32 {
	replicas := max(d.Spec.Replicas, 0)
	sizes := map[string]int32{}
	newSpec := obs.newSet.Spec.Replicas
	if have := obs.counts[obs.newSet.Name].Machines; have > newSpec {
		newSpec += min(movedIn(obs.machines[obs.newSet.Name]), have-newSpec)
	}
	for _, s := range obs.old {
		// A machine moved into a set that a template change made old
		// is counted there too, or the set would delete it once
		// unlabelled.
		spec := s.Spec.Replicas
		if have := obs.counts[s.Name].Machines; have > spec {
			spec += min(movedIn(obs.machines[s.Name]), have-spec)
		}
		sizes[s.Name] = min(spec, obs.counts[s.Name].Machines)
	}
	var old int32
	for _, s := range obs.old {
		old += sizes[s.Name]
	}
	switch {
	case old == 0 && rework > 0:
		newSpec = replicas + surge
	case old == 0:
		newSpec = replicas
	case old+newSpec < replicas+surge:
		newSpec = min(max(newSpec, replicas+surge-old), replicas)
	default:
		// The new set holds no more than the old sets leave room for
		// (yet never fewer than its machines): a set that is new again
		// after a rollback may still be sized for the machines that had
		// moved out of it, and growing it to that size would create VMs
		// and zero the old sets, whose machines are still to come back.
		newSpec = min(newSpec, replicas, max(replicas+surge-old, obs.counts[obs.newSet.Name].Machines))
	}
	if newSpec >= replicas {
		for _, s := range obs.old {
			sizes[s.Name] = 0
		}
	}
	sizes[obs.newSet.Name] = newSpec
	return sizes
}

// rework counts the new set's machines being updated again after a
// rollback: pending, or selected and not done.
func rework(machines []inPlaceMachine, target string) int32 {
	var n int32
	for _, im := range machines {
		if !im.old && (im.pending(target) || im.selected() && !im.updateDone()) {
			n++
		}
	}
	return n
}

// movedIn counts the machines carrying the update-result label a transfer
// puts on them.
func movedIn(machines []*v1alpha1.Machine) int32 {
	var n int32
	for _, m := range machines {
		if m.Labels[v1alpha1.UpdateResultLabel] == v1alpha1.UpdateResultSuccessful {
			n++
		}
	}
	return n
}

// movedAndCounted are the machines that carry the update-result label in
// a set whose spec.replicas counts all its machines (for the new set, or
// spec.replicas when it has more: a scale-down took the deployment below
// them): the label has done its work (it kept the set from deleting them
// while its size did not count them yet). A set that a template change
// made old counts them too (sizeInPlace).
//
// An old set this step sizes to 0 (sizes) has no machine to keep: the new
// set holds the deployment's replicas, as after a scale-down. Its labels
// go too, or the set could never delete the machines they protect.
func movedAndCounted(machines []inPlaceMachine, newSet *v1alpha1.MachineSet, replicas int32, sizes map[string]int32) []*v1alpha1.Machine {
	have := map[string]int32{}
	labelled := map[string][]*v1alpha1.Machine{}
	sets := map[string]*v1alpha1.MachineSet{}
	for _, im := range machines {
		have[im.set.Name]++
		sets[im.set.Name] = im.set
		if im.m.Labels[v1alpha1.UpdateResultLabel] == v1alpha1.UpdateResultSuccessful {
			labelled[im.set.Name] = append(labelled[im.set.Name], im.m)
		}
	}
	var out []*v1alpha1.Machine
	for name, ms := range labelled {
		counted := have[name]
		if name == newSet.Name {
			counted = min(counted, replicas)
		}
		size, sized := sizes[name]
		if sets[name].Spec.Replicas >= counted || name != newSet.Name && sized && size == 0 {
			out = append(out, ms...)
		}
	}
	slices.SortFunc(out, byMachineName)
	return out
}

// planSelection selects (Auto) old sets' machines for update, labelling
// their nodes selected-for-update: oldest set first, within a set in
// selectionOrder, only machines with a current node; then the new set's
// machines re-armed for it (pending). An
// in-flight machine (selected, not yet moved) counts once: at most
// maxUnavailable machines are unavailable or in flight at a time, plus
// what a surge's new machines add; selecting an unavailable machine costs
// no availability. No more are selected than the new set still needs, nor
// more from a set than its size.
func planSelection(machines []inPlaceMachine, transfers []transfer, sizes map[string]int32, newSetName string, replicas, maxUnavailable int32, change func(*corev1.Node) *nodeLabelChange) {
	moving := map[string]bool{}
	for _, t := range transfers {
		moving[t.Machine.Name] = true
	}
	inFlight := func(im inPlaceMachine) bool {
		if !im.old {
			return im.selected() && !im.updateDone()
		}
		return !moving[im.m.Name] && (im.selected() || im.stale)
	}
	var available, flyingOld, pending int32
	perSet := map[string]int32{}
	for _, im := range machines {
		switch {
		case inFlight(im):
			perSet[im.set.Name]++
			if im.old {
				flyingOld++
			}
		case im.available:
			available++
		}
		if im.pending(newSetName) && !im.stale {
			pending++
		}
	}
	budget := available - (replicas - maxUnavailable)
	need := max(replicas-sizes[newSetName]-flyingOld-int32(len(moving)), 0) + pending
	for _, im := range machines {
		if need <= 0 {
			return
		}
		eligible := im.old && !moving[im.m.Name] && !inFlight(im) && perSet[im.set.Name] < sizes[im.set.Name]
		if !(eligible || im.pending(newSetName)) || im.node == nil || im.stale {
			continue
		}
		if im.available {
			if budget <= 0 {
				continue
			}
			budget--
		}
		change(im.node).Labels[v1alpha1.SelectedForUpdateLabel] = new(inPlaceTrue)
		perSet[im.set.Name]++
		need--
	}
}

// planCleanup takes the rollout's marks off the node of a machine whose
// update is done: the candidate, selected and result labels, the failure
// reason, the stamp, the cordon and the PreferNoSchedule taint; the critical-components
// taint is added when asked for (critical).
func planCleanup(ch *nodeLabelChange, critical bool) {
	n := ch.Node
	for _, key := range []string{v1alpha1.CandidateForUpdateLabel, v1alpha1.SelectedForUpdateLabel, v1alpha1.UpdateResultLabel} {
		if _, ok := n.Labels[key]; ok {
			ch.Labels[key] = nil
		}
	}
	for _, key := range []string{v1alpha1.UpdateFailedReasonAnnotation, InPlaceTargetAnnotation} {
		if _, ok := n.Annotations[key]; ok {
			ch.Annotations[key] = nil
		}
	}
	ch.Uncordon = n.Spec.Unschedulable
	ch.Untaint = slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == v1alpha1.PreferNoScheduleTaintKey })
	ch.Critical = critical && !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == v1alpha1.CriticalComponentsNotReadyTaintKey && t.Effect == corev1.TaintEffectNoSchedule
	})
}

// empty tells whether the change writes nothing.
func (ch nodeLabelChange) empty() bool {
	return len(ch.Labels) == 0 && len(ch.Annotations) == 0 && !ch.Uncordon && !ch.Untaint && !ch.Critical
}

// planUncandidate takes the candidate label and the stamp off the node of
// a new set's machine that is not being updated: after a rollback its set
// is new again, and nothing is left to update (MCM leaves the label).
func planUncandidate(ch *nodeLabelChange) {
	if hasLabel(ch.Node, v1alpha1.CandidateForUpdateLabel) {
		ch.Labels[v1alpha1.CandidateForUpdateLabel] = nil
	}
	if _, ok := ch.Node.Annotations[InPlaceTargetAnnotation]; ok {
		ch.Annotations[InPlaceTargetAnnotation] = nil
	}
}

// sortedChanges lists the changes by node name.
func sortedChanges(changes map[string]*nodeLabelChange) []nodeLabelChange {
	out := make([]nodeLabelChange, 0, len(changes))
	for _, ch := range changes {
		if !ch.empty() {
			out = append(out, *ch)
		}
	}
	slices.SortFunc(out, func(a, b nodeLabelChange) int { return strings.Compare(a.Node.Name, b.Node.Name) })
	return out
}

// scaleInPlace sizes the sets of an in-place rollout for a new
// spec.replicas. MCM stalls here (its scale handles one active set only);
// growth goes to the new set (old sets create nothing), a shrink is shared
// in proportion to the sets' sizes (shrinkProportionally).
func scaleInPlace(d *v1alpha1.MachineDeployment, obs observed) (map[string]int32, bool) {
	replicas := max(d.Spec.Replicas, 0)
	active := activeSets(obs.all())
	sizes := map[string]int32{}
	for _, s := range active {
		sizes[s.Name] = s.Spec.Replicas
	}
	switch delta := int64(replicas) - int64(specReplicas(active)); {
	case delta > 0:
		sizes[obs.newSet.Name] = obs.newSet.Spec.Replicas + int32(delta)
	case delta < 0:
		sizes = shrinkProportionally(d, active, replicas, int32(-delta))
	}
	return sizes, true
}
