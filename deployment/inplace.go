package deployment

import (
	"cmp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/nodebinding"
)

// An in-place rollout (strategy InPlaceUpdate) keeps every machine and its
// VM: the machines of the old sets are updated on their nodes by a node
// agent and then moved to the new set. The protocol, with MCM's keys, is
// told in doc.go (# In-place update); this file holds what the planner
// (planInPlace) knows about each machine.

// inPlaceInput is what planInPlace decides on: the deployment, its sets
// and their machines as observe saw them, and the nodes of those machines
// by name.
type inPlaceInput struct {
	d   *v1alpha1.MachineDeployment
	obs observed
	// nodes are the nodes the machines name, by name; a machine whose
	// node is missing, or is not bound to it (nodebinding.Bound), has no
	// node for the planner. stale names the nodes whose cache does not
	// show the controller's last write yet: their machines count as busy
	// and are neither selected nor moved.
	nodes map[string]*corev1.Node
	stale map[string]bool
	// noTarget tells that there is no target cluster: no node can be read
	// or written, and a rollout cannot be run.
	noTarget bool
	minReady time.Duration
	now      time.Time
	// criticalTaint is Options.CriticalComponentsNotReadyTaint.
	criticalTaint bool
}

// inPlaceMachine is one machine of the deployment as the planner sees it.
type inPlaceMachine struct {
	m    *v1alpha1.Machine
	set  *v1alpha1.MachineSet
	node *corev1.Node // nil when the machine has no bound node
	old  bool         // the machine belongs to an old set
	// available: machinestate.Available at the deployment's minReadySeconds.
	available bool
	// stale: the node's cache does not show the controller's last write.
	stale bool
}

// nodeOf returns the node the machine names, when the node is bound to
// it: a node label and a provider ID are anyone's to write who may create
// a machine, and an in-place update labels, cordons and drains the node.
func nodeOf(m *v1alpha1.Machine, nodes map[string]*corev1.Node) *corev1.Node {
	n := nodes[m.Labels[v1alpha1.NodeLabelKey]]
	if n == nil || !nodebinding.Bound(n, m) {
		return nil
	}
	return n
}

// inPlaceMachines returns the machines of all sets that are not being
// deleted, old sets' first (oldest set first), then the new set's; within
// a set in selection order (selectionOrder).
func (in inPlaceInput) inPlaceMachines() []inPlaceMachine {
	var out []inPlaceMachine
	add := func(s *v1alpha1.MachineSet, old bool) {
		var ms []inPlaceMachine
		for _, m := range in.obs.machines[s.Name] {
			if machinestate.BeingDeleted(m) {
				continue
			}
			n := nodeOf(m, in.nodes)
			ms = append(ms, inPlaceMachine{m: m, set: s, node: n, old: old,
				available: machinestate.Available(m, in.minReady, in.now),
				stale:     n != nil && in.stale[n.Name]})
		}
		slices.SortFunc(ms, selectionOrder)
		out = append(out, ms...)
	}
	for _, s := range byAge(in.obs.old) {
		add(s, true)
	}
	if in.obs.newSet != nil {
		add(in.obs.newSet, false)
	}
	return out
}

// selectionOrder is the order in which the machines of one old set are
// selected for update: unavailable machines first (updating them costs no
// availability), then by name. MCM takes the lister's order, which is
// arbitrary.
func selectionOrder(a, b inPlaceMachine) int {
	if a.available != b.available {
		if !a.available {
			return -1
		}
		return 1
	}
	return strings.Compare(a.m.Name, b.m.Name)
}

func hasLabel(n *corev1.Node, key string) bool {
	if n == nil {
		return false
	}
	_, ok := n.Labels[key]
	return ok
}

// selected: the machine's node carries the selected-for-update label (the
// controller's, or a person's in Manual).
func (im inPlaceMachine) selected() bool { return hasLabel(im.node, v1alpha1.SelectedForUpdateLabel) }

// updateDone tells whether the machine's update is over and seen by the
// machine controller: the node says update-result=successful, the
// machine's copy of the node condition InPlaceUpdate says UpdateSuccessful,
// and its phase is past the update (neither InPlaceUpdating nor
// InPlaceUpdateFailed). MCM accepts InPlaceUpdateFailed too, and a machine
// moved then stays InPlaceUpdateFailed in the new set (its bug trail
// #1020/#1021); here it waits until the machine controller moved the phase
// on. The result label is taken off the node only after this holds, so
// the machine controller always sees it.
func (im inPlaceMachine) updateDone() bool {
	if im.node == nil || im.node.Labels[v1alpha1.UpdateResultLabel] != v1alpha1.UpdateResultSuccessful {
		return false
	}
	switch im.m.Status.CurrentStatus.Phase {
	case v1alpha1.MachineInPlaceUpdating, v1alpha1.MachineInPlaceUpdateFailed:
		return false
	}
	c := machineInPlaceCondition(im.m)
	return c != nil && c.Reason == v1alpha1.UpdateSuccessful
}

// forTarget tells whether the machine's update is for the set target: its
// node's stamp (InPlaceTargetAnnotation) names it, or the node has none
// (selected by MCM before a switch, which does not stamp: taken as MCM
// takes it). planCleanup removes the stamp once the machine is in the set
// it names.
func (im inPlaceMachine) forTarget(target string) bool {
	if im.node == nil {
		return true
	}
	stamp, ok := im.node.Annotations[InPlaceTargetAnnotation]
	return !ok || stamp == target
}

// pending tells whether a new set's machine waits for an update to the new
// set target (re-armed after a rollback): its node is a candidate stamped
// for target, neither selected nor answered.
func (im inPlaceMachine) pending(target string) bool {
	if im.old || im.node == nil || im.selected() || im.node.Labels[v1alpha1.UpdateResultLabel] != "" {
		return false
	}
	stamp, ok := im.node.Annotations[InPlaceTargetAnnotation]
	return ok && stamp == target && hasLabel(im.node, v1alpha1.CandidateForUpdateLabel)
}

// InPlaceTargetAnnotation on a node of an in-place rollout names the new
// MachineSet its update is for: the deployment controller writes it on the
// nodes of old sets' machines until they are selected. A machine whose
// update is done for another set than the new one (the template changed
// meanwhile) is updated again rather than moved.
const InPlaceTargetAnnotation = "mcmkit.io/in-place-update-target"

// machineInPlaceCondition is the machine's copy of its node's InPlaceUpdate
// condition, nil when it has none.
func machineInPlaceCondition(m *v1alpha1.Machine) *corev1.NodeCondition {
	for i := range m.Status.Conditions {
		if m.Status.Conditions[i].Type == v1alpha1.NodeInPlaceUpdate {
			return &m.Status.Conditions[i]
		}
	}
	return nil
}

// updateFailure tells whether the machine's update failed, when, and the
// node agent's reason: phase InPlaceUpdateFailed (the machine controller's
// timeout, or the agent's answer seen), or the node's update-result=failed.
// The time is the node condition's transition to UpdateFailed, else the
// machine's last status change.
func (im inPlaceMachine) updateFailure() (failed bool, at time.Time, reason string) {
	phaseFailed := im.m.Status.CurrentStatus.Phase == v1alpha1.MachineInPlaceUpdateFailed
	resultFailed := im.node != nil && im.node.Labels[v1alpha1.UpdateResultLabel] == v1alpha1.UpdateResultFailed
	if !phaseFailed && !resultFailed {
		return false, time.Time{}, ""
	}
	at = im.m.Status.CurrentStatus.LastUpdateTime.Time
	if im.node != nil {
		reason = im.node.Annotations[v1alpha1.UpdateFailedReasonAnnotation]
		for _, c := range im.node.Status.Conditions {
			if c.Type == v1alpha1.NodeInPlaceUpdate && c.Reason == v1alpha1.UpdateFailed {
				at = c.LastTransitionTime.Time
			}
		}
	}
	if reason == "" {
		reason = im.m.Status.LastOperation.Description
	}
	return true, at, reason
}

// inPlaceBounds are the in-place rollout's surge and maxUnavailable for
// spec.replicas, as MCM resolves them: a surge percentage rounds up, an
// unavailable one down, 1 unavailable when both are 0, and no surge with
// Manual orchestration. (rolloutBounds reports no surge for the strategy,
// as MCM's max-replicas annotation and Available condition count none.)
func inPlaceBounds(d *v1alpha1.MachineDeployment) (surge, unavailable int32, err error) {
	ip := d.Spec.Strategy.InPlaceUpdate
	var maxSurge, maxUnavailable *intstr.IntOrString
	if ip != nil {
		maxSurge, maxUnavailable = ip.MaxSurge, ip.MaxUnavailable
		if ip.OrchestrationType == v1alpha1.OrchestrationTypeManual {
			maxSurge = nil
		}
	}
	return resolveFenceposts(maxSurge, maxUnavailable, max(d.Spec.Replicas, 0))
}

// manual tells whether a person selects the nodes to update.
func manual(d *v1alpha1.MachineDeployment) bool {
	ip := d.Spec.Strategy.InPlaceUpdate
	return ip != nil && ip.OrchestrationType == v1alpha1.OrchestrationTypeManual
}

// byMachineName orders machines by name.
func byMachineName(a, b *v1alpha1.Machine) int { return cmp.Compare(a.Name, b.Name) }
