package deployment

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// ipRound is what one round of the world did, for the golden tables: the
// sets' sizes after the deployment controller's sync, and how many
// machines were unavailable or in flight then.
type ipRound struct{ New, Old, Busy int32 }

// round runs every actor once: the deployment controller, the sets, the
// machine controller and the agent; then it checks the invariants.
func (w *ipWorld) round() ipRound {
	w.rounds++
	w.now = w.now.Add(time.Minute)
	failed, before := w.failedUpdate(), w.selectedNodes()
	w.controller()
	if after := w.selectedNodes(); failed != "" && len(after) > len(before) {
		w.fail("round %d: the update of %s failed, yet nodes %v were selected after %v\n%s", w.rounds, failed, after, before, w)
	}
	r := w.sizes()
	r.Busy = w.busy()
	w.checkBusy("after the controller")
	w.sync()
	w.bootMachines()
	for _, m := range slices.Clone(w.machines) {
		if m.Name == w.lagging && w.rounds%2 == 1 {
			continue
		}
		w.machineController(m)
		w.agent(m)
	}
	w.checkOwners()
	w.checkBusy("after the machines moved")
	return r
}

// nodeCondition is the node's InPlaceUpdate reason, "" when it has none.
func nodeCondition(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == v1alpha1.NodeInPlaceUpdate {
			return c.Reason
		}
	}
	return ""
}

func (w *ipWorld) setCondition(m *v1alpha1.Machine, n *corev1.Node, reason string) {
	c := corev1.NodeCondition{Type: v1alpha1.NodeInPlaceUpdate, Status: corev1.ConditionTrue, Reason: reason,
		LastTransitionTime: metav1.NewTime(w.now)}
	n.Status.Conditions = []corev1.NodeCondition{c}
	m.Status.Conditions = []corev1.NodeCondition{c}
}

// machineController moves one machine one step along MCM's machine-side
// protocol (fact sheet §2.2): candidate, selected, drained (cordon,
// InPlaceUpdating, ReadyForUpdate), the agent's result seen in the phase,
// then in the condition and back to Running.
func (w *ipWorld) machineController(m *v1alpha1.Machine) {
	n := w.nodes[m.Labels[v1alpha1.NodeLabelKey]]
	if n == nil || m.Status.CurrentStatus.Phase == v1alpha1.MachinePending {
		return
	}
	_, candidate := n.Labels[v1alpha1.CandidateForUpdateLabel]
	_, selected := n.Labels[v1alpha1.SelectedForUpdateLabel]
	result := n.Labels[v1alpha1.UpdateResultLabel]
	phase, reason := m.Status.CurrentStatus.Phase, nodeCondition(n)
	switch {
	case phase == v1alpha1.MachineInPlaceUpdating && result == v1alpha1.UpdateResultSuccessful,
		phase == v1alpha1.MachineInPlaceUpdateFailed && result == v1alpha1.UpdateResultSuccessful:
		w.setPhase(m, v1alpha1.MachineInPlaceUpdateSuccessful)
	case phase == v1alpha1.MachineInPlaceUpdating && result == v1alpha1.UpdateResultFailed:
		w.setPhase(m, v1alpha1.MachineInPlaceUpdateFailed)
		w.setCondition(m, n, v1alpha1.UpdateFailed)
	case phase == v1alpha1.MachineInPlaceUpdateSuccessful:
		w.setCondition(m, n, v1alpha1.UpdateSuccessful)
		w.setPhase(m, v1alpha1.MachineRunning)
	case !candidate:
	case reason == "" || (reason == v1alpha1.UpdateSuccessful && result == ""):
		w.setCondition(m, n, v1alpha1.CandidateForUpdate)
	case selected && reason == v1alpha1.CandidateForUpdate:
		w.setCondition(m, n, v1alpha1.SelectedForUpdate)
	case reason == v1alpha1.SelectedForUpdate:
		n.Spec.Unschedulable = true
		w.setPhase(m, v1alpha1.MachineInPlaceUpdating)
		w.setCondition(m, n, v1alpha1.ReadyForUpdate)
	}
}

// agent answers a node that is ReadyForUpdate: it updates it to the
// deployment's class and labels it successful, or fails it when told to.
func (w *ipWorld) agent(m *v1alpha1.Machine) {
	n := w.nodes[m.Labels[v1alpha1.NodeLabelKey]]
	if n == nil || nodeCondition(n) != v1alpha1.ReadyForUpdate || n.Labels[v1alpha1.UpdateResultLabel] != "" {
		return
	}
	if reason, ok := w.failing[n.Name]; ok {
		delete(w.failing, n.Name)
		n.Labels[v1alpha1.UpdateResultLabel] = v1alpha1.UpdateResultFailed
		n.Annotations[v1alpha1.UpdateFailedReasonAnnotation] = reason
		return
	}
	n.Labels[v1alpha1.UpdateResultLabel] = v1alpha1.UpdateResultSuccessful
	n.Labels[ipVersionLabel] = w.d.Spec.Template.Spec.Class.Name
}

// clearFailure is what a person does about a failed update: label the
// node successful (the node was fixed by hand).
func (w *ipWorld) clearFailure(n *corev1.Node) {
	n.Labels[v1alpha1.UpdateResultLabel] = v1alpha1.UpdateResultSuccessful
	n.Labels[ipVersionLabel] = w.d.Spec.Template.Spec.Class.Name
}

// selectByHand labels up to k candidate nodes selected, as a person does
// in Manual orchestration, by node name.
func (w *ipWorld) selectByHand(k int) {
	var names []string
	for name, n := range w.nodes {
		_, candidate := n.Labels[v1alpha1.CandidateForUpdateLabel]
		_, selected := n.Labels[v1alpha1.SelectedForUpdateLabel]
		if candidate && !selected {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names[:min(k, len(names))] {
		w.nodes[name].Labels[v1alpha1.SelectedForUpdateLabel] = "true"
	}
}

// failedUpdate names an old set's machine whose update failed since the
// new set was created and was not cleared (the node labelled successful);
// "" when there is none.
func (w *ipWorld) failedUpdate() string {
	newSet, old := splitSets(w.d, w.sets)
	if newSet == nil {
		return ""
	}
	for _, m := range w.machines {
		ref := metav1.GetControllerOfNoCopy(m)
		n := w.nodes[m.Labels[v1alpha1.NodeLabelKey]]
		if !slices.ContainsFunc(old, func(s *v1alpha1.MachineSet) bool { return s.UID == ref.UID }) || nodeCondition(n) != v1alpha1.UpdateFailed ||
			n.Labels[v1alpha1.UpdateResultLabel] == v1alpha1.UpdateResultSuccessful {
			continue
		}
		if c := n.Status.Conditions[0]; !c.LastTransitionTime.Before(&newSet.CreationTimestamp) {
			return m.Name
		}
	}
	return ""
}

// selectedNodes lists the nodes labelled selected-for-update.
func (w *ipWorld) selectedNodes() []string {
	var out []string
	for name, n := range w.nodes {
		if _, ok := n.Labels[v1alpha1.SelectedForUpdateLabel]; ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// sizes are the new set's and the old sets' spec.replicas.
func (w *ipWorld) sizes() ipRound {
	var r ipRound
	newSet, old := splitSets(w.d, w.sets)
	if newSet != nil {
		r.New = newSet.Spec.Replicas
	}
	r.Old = specReplicas(old)
	return r
}

// busy counts the machines that are unavailable or in flight (an old
// set's machine whose node is selected, or a new set's being updated
// again after a rollback).
func (w *ipWorld) busy() int32 {
	newSet, _ := splitSets(w.d, w.sets)
	var n int32
	for _, m := range w.machines {
		_, selected := w.nodes[m.Labels[v1alpha1.NodeLabelKey]].Labels[v1alpha1.SelectedForUpdateLabel]
		ref := metav1.GetControllerOfNoCopy(m)
		done := w.nodes[m.Labels[v1alpha1.NodeLabelKey]].Labels[v1alpha1.UpdateResultLabel] == v1alpha1.UpdateResultSuccessful
		inFlight := selected && (newSet == nil || ref.UID != newSet.UID || !done)
		if !w.available(m) || inFlight {
			n++
		}
	}
	return n
}

// checkBusy: in Auto, at most maxUnavailable machines are unavailable or
// in flight, plus the surge's new machines (MCM lets those count).
func (w *ipWorld) checkBusy(when string) {
	if manual(w.d) || w.scaled {
		return
	}
	surge, unavailable, _ := inPlaceBounds(w.d)
	if b := w.busy(); b > unavailable+surge {
		w.fail("round %d %s: %d machines unavailable or in flight, more than maxUnavailable %d + surge %d\n%s", w.rounds, when, b, unavailable, surge, w)
	}
}

// checkOwners: every machine has exactly one controller, an existing set.
func (w *ipWorld) checkOwners() {
	for _, m := range w.machines {
		var owners int
		for _, r := range m.OwnerReferences {
			if r.Controller != nil && *r.Controller {
				owners++
			}
		}
		ref := metav1.GetControllerOfNoCopy(m)
		if owners != 1 || !slices.ContainsFunc(w.sets, func(s *v1alpha1.MachineSet) bool { return s.UID == ref.UID }) {
			w.fail("round %d: machine %s has %d controllers %v", w.rounds, m.Name, owners, m.OwnerReferences)
		}
	}
}

// converged: the new set holds spec.replicas machines, all Running, each
// on a node updated to the template's class with no rollout mark left,
// and the old sets are empty.
func (w *ipWorld) converged() (bool, string) {
	newSet, old := splitSets(w.d, w.sets)
	if newSet == nil || newSet.Spec.Replicas != w.d.Spec.Replicas || specReplicas(old) != 0 {
		return false, "sets not settled"
	}
	for _, s := range old {
		if len(w.owned(s)) > 0 {
			return false, "old set " + s.Name + " has machines"
		}
	}
	if len(w.machines) != int(w.d.Spec.Replicas) {
		return false, fmt.Sprintf("%d machines", len(w.machines))
	}
	for _, m := range w.machines {
		n := w.nodes[m.Labels[v1alpha1.NodeLabelKey]]
		switch {
		case m.Status.CurrentStatus.Phase != v1alpha1.MachineRunning:
			return false, m.Name + " not Running"
		case n.Labels[ipVersionLabel] != w.d.Spec.Template.Spec.Class.Name:
			return false, n.Name + " not updated"
		case n.Spec.Unschedulable || len(n.Spec.Taints) > 0 && !w.critical:
			return false, n.Name + " cordoned or tainted"
		case m.Labels[v1alpha1.UpdateResultLabel] != "":
			return false, m.Name + " still labelled"
		}
		for _, k := range []string{v1alpha1.CandidateForUpdateLabel, v1alpha1.SelectedForUpdateLabel, v1alpha1.UpdateResultLabel} {
			if _, ok := n.Labels[k]; ok {
				return false, n.Name + " still labelled " + k
			}
		}
		if _, ok := n.Annotations[v1alpha1.ScaleDownDisabledAnnotation]; ok {
			return false, n.Name + " still scale-down-disabled"
		}
	}
	return true, ""
}

func (w *ipWorld) String() string {
	var b strings.Builder
	for _, s := range w.sets {
		fmt.Fprintf(&b, "set %s replicas %d labels %v created %v class %s\n", s.Name, s.Spec.Replicas, s.Labels, s.CreationTimestamp.Time, s.Spec.Template.Spec.Class.Name)
		for _, m := range w.owned(s) {
			n := w.nodes[m.Labels[v1alpha1.NodeLabelKey]]
			fmt.Fprintf(&b, "  %s %s avail=%v node %s %v labels %v annotations %v cordon=%v\n", m.Name, m.Status.CurrentStatus.Phase, w.available(m),
				nodeCondition(n), n.Status.Conditions, n.Labels, n.Annotations, n.Spec.Unschedulable)
		}
	}
	return b.String()
}
