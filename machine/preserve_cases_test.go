package machine

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/apitime"
)

type preserveWriteCase struct {
	name             string
	machine          *v1alpha1.Machine
	node             *corev1.Node
	cordoningDrainer bool
	wantMachine      *v1alpha1.Machine
	wantNode         *corev1.Node
	wantCondition    *corev1.NodeCondition
	wantDrain        bool
	wantEvents       []string
}

// Long: a table of whole objects, one case a paragraph.
func preserveWriteCases(now time.Time, until metav1.Time, mcmUntil time.Time, expiry func(time.Time) *metav1.Time) []preserveWriteCase {
	stamp := metav1.NewTime(now)
	with := func(m *v1alpha1.Machine, f func(*v1alpha1.Machine)) *v1alpha1.Machine {
		m = m.DeepCopy()
		f(m)
		return m
	}
	withNode := func(n *corev1.Node, f func(*corev1.Node)) *corev1.Node { n = n.DeepCopy(); f(n); return n }
	withMachine := func(m *v1alpha1.Machine, f func(*v1alpha1.Machine)) *v1alpha1.Machine { f(m); return m }
	ca := map[string]string{v1alpha1.ScaleDownDisabledAnnotation: "true", v1alpha1.ScaleDownDisabledByMCMAnnotation: "true"}
	merged := func(maps ...map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range maps {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	preservedCond := func(status corev1.ConditionStatus, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: v1alpha1.NodePreserved, Status: status, Reason: v1alpha1.PreservedByUser, Message: msg}
	}
	stopped := func(why string) *corev1.NodeCondition {
		return &corev1.NodeCondition{Type: v1alpha1.NodePreserved, Status: corev1.ConditionFalse, Reason: v1alpha1.PreservationStopped,
			Message: "Preservation stopped: " + why + ".", LastHeartbeatTime: stamp, LastTransitionTime: stamp}
	}
	untilMsg := "Machine preserved until " + preserveTime(until.Time) + "."
	mcmMsg := "Machine preserved until " + preserveTime(mcmUntil) + "."

	failedNodeAsked := preserveMachine(v1alpha1.MachineFailed, nil, nil)
	askingNode := preserveNode(map[string]string{v1alpha1.PreserveAnnotation: "when-failed"})

	// As MCM v0.62.1 leaves a Failed machine preserved through its Node:
	// the machine's own annotation stripped, the Node's value recorded,
	// the node drained and cordoned.
	mcmMachine := preserveMachine(v1alpha1.MachineFailed,
		map[string]string{v1alpha1.LastAppliedNodePreserveValueAnnotation: "when-failed"}, &mcmUntil)
	mcmNode := withNode(askingNode, func(n *corev1.Node) {
		n.Annotations = merged(n.Annotations, ca)
		n.Spec.Unschedulable = true
		n.Status.Conditions = append(n.Status.Conditions,
			preservedCond(corev1.ConditionTrue, v1alpha1.PreservedNodeDrainSuccessful+" "+mcmMsg))
	})

	runningNow := preserveMachine(v1alpha1.MachineRunning, map[string]string{v1alpha1.PreserveAnnotation: "now"}, &mcmUntil)
	userCANode := preserveNode(map[string]string{v1alpha1.ScaleDownDisabledAnnotation: "true"})
	userCANode.Status.Conditions = append(userCANode.Status.Conditions, preservedCond(corev1.ConditionTrue, mcmMsg))

	expiredFailed := preserveMachine(v1alpha1.MachineFailed,
		map[string]string{v1alpha1.LastAppliedNodePreserveValueAnnotation: "now"}, &now)
	expiredNode := preserveNode(map[string]string{v1alpha1.PreserveAnnotation: "now"})
	markPreserved(expiredNode, v1alpha1.MachineFailed, now)

	return []preserveWriteCase{{
		name:    "the Node asks when-failed of a Failed machine: recorded, preserved, marked; the drain waits for the taint",
		machine: failedNodeAsked, node: askingNode,
		wantMachine: with(failedNodeAsked, func(m *v1alpha1.Machine) {
			m.Annotations = map[string]string{v1alpha1.LastAppliedNodePreserveValueAnnotation: "when-failed"}
			m.Status.CurrentStatus.PreserveExpiryTime = &until
		}),
		wantNode: withNode(askingNode, func(n *corev1.Node) {
			n.Annotations = merged(n.Annotations, ca)
			n.Spec.Taints = []corev1.Taint{preservedTaint}
		}),
		wantCondition: &corev1.NodeCondition{Type: v1alpha1.NodePreserved, Status: corev1.ConditionFalse, Reason: v1alpha1.PreservedByUser,
			Message: v1alpha1.PreservedNodeDrainUnsuccessful + " " + untilMsg, LastHeartbeatTime: stamp, LastTransitionTime: stamp},
		wantEvents: []string{ReasonPreserved},
	}, {
		name:    "migration: a Failed machine MCM preserved keeps its expiry and drain; its cordon is recorded as the preservation's",
		machine: mcmMachine, node: mcmNode,
		wantMachine: with(mcmMachine, func(m *v1alpha1.Machine) {
			m.Annotations[PreserveCordonedAnnotation] = "true"
			m.Annotations[PreserveDrainedAnnotation] = formatTime(now)
			setFlowRecord(m, PreserveDrainCondition, flowRecord{Reason: preserveDrainedReason, Since: apitime.Of(now)})
		}),
		wantNode: withNode(mcmNode, func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{preservedTaint} }),
	}, {
		name: "migration: MCM's preservation stops when the machine runs again; MCM's cordon is undone",
		machine: with(mcmMachine, func(m *v1alpha1.Machine) {
			m.Status.CurrentStatus.Phase = v1alpha1.MachineRunning
		}),
		node: mcmNode,
		wantMachine: with(mcmMachine, func(m *v1alpha1.Machine) {
			m.Status.CurrentStatus.Phase = v1alpha1.MachineRunning
			m.Status.CurrentStatus.PreserveExpiryTime = nil
		}),
		wantNode: withNode(askingNode, func(n *corev1.Node) {
			n.Status.Conditions = mcmNode.Status.Conditions
		}),
		wantCondition: stopped(`the machine is no longer Failed (preserve "when-failed")`),
		wantEvents:    []string{ReasonPreservationStopped},
	}, {
		name:    "a user's scale-down-disabled annotation is kept while preserving",
		machine: runningNow, node: userCANode,
		wantMachine: runningNow,
	}, {
		name: "a user's scale-down-disabled annotation is kept when the preservation stops",
		machine: with(runningNow, func(m *v1alpha1.Machine) {
			delete(m.Annotations, v1alpha1.PreserveAnnotation)
		}),
		node: userCANode,
		wantMachine: with(runningNow, func(m *v1alpha1.Machine) {
			delete(m.Annotations, v1alpha1.PreserveAnnotation)
			m.Status.CurrentStatus.PreserveExpiryTime = nil
		}),
		wantCondition: stopped("the preserve annotation was removed"),
		wantEvents:    []string{ReasonPreservationStopped},
	}, {
		name:    "a user's cordon of a preserved Running node is left alone",
		machine: runningNow,
		node: withNode(userCANode, func(n *corev1.Node) {
			n.Annotations = ca
			n.Spec.Unschedulable = true
		}),
		wantMachine: runningNow,
	}, {
		name:    "an expired preservation of a Failed machine: the Node's annotation goes, the (past) expiry stays",
		machine: expiredFailed, node: expiredNode,
		// The record goes when a sync sees the Node's annotation gone.
		wantMachine: expiredFailed,
		wantNode: withNode(expiredNode, func(n *corev1.Node) {
			n.Annotations = map[string]string{}
			n.Spec.Taints = nil
		}),
		wantCondition: stopped("the preservation expired at " + preserveTime(now)),
		wantEvents:    []string{ReasonPreservationStopped},
	}, {
		name:    "an unknown value is reported once and ignored",
		machine: preserveMachine(v1alpha1.MachineRunning, nil, nil),
		node:    preserveNode(map[string]string{v1alpha1.PreserveAnnotation: "sometimes"}),
		wantMachine: with(preserveMachine(v1alpha1.MachineRunning, nil, nil), func(m *v1alpha1.Machine) {
			m.Annotations = map[string]string{v1alpha1.LastAppliedNodePreserveValueAnnotation: "sometimes",
				preserveReportedAnnotation: "sometimes"}
			m.Status.LastOperation = v1alpha1.LastOperation{State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationUpdate,
				LastUpdateTime: stamp,
				Description:    `Ignoring the node's node.machine.sapcloud.io/preserve annotation: "sometimes" is not one of now, when-failed, auto-preserved, false`}
		}),
		wantEvents: []string{ReasonInvalidPreserveValue},
	}, {
		name: "an unknown value already reported: nothing",
		machine: preserveMachine(v1alpha1.MachineRunning, map[string]string{
			v1alpha1.LastAppliedNodePreserveValueAnnotation: "sometimes", preserveReportedAnnotation: "sometimes"}, nil),
		node: preserveNode(map[string]string{v1alpha1.PreserveAnnotation: "sometimes"}),
		wantMachine: preserveMachine(v1alpha1.MachineRunning, map[string]string{
			v1alpha1.LastAppliedNodePreserveValueAnnotation: "sometimes", preserveReportedAnnotation: "sometimes"}, nil),
	}, {
		name:    "preserved with now while healthy, then Failed: tainted, and drained next (MCM never drains it)",
		machine: with(runningNow, func(m *v1alpha1.Machine) { m.Status.CurrentStatus.Phase = v1alpha1.MachineFailed }),
		node: withNode(preserveNode(ca), func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, preservedCond(corev1.ConditionTrue, mcmMsg))
		}),
		wantMachine: with(runningNow, func(m *v1alpha1.Machine) { m.Status.CurrentStatus.Phase = v1alpha1.MachineFailed }),
		wantNode: withNode(preserveNode(ca), func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, preservedCond(corev1.ConditionTrue, mcmMsg))
			n.Spec.Taints = []corev1.Taint{preservedTaint}
		}),
		wantCondition: &corev1.NodeCondition{Type: v1alpha1.NodePreserved, Status: corev1.ConditionFalse, Reason: v1alpha1.PreservedByUser,
			Message: v1alpha1.PreservedNodeDrainUnsuccessful + " " + mcmMsg, LastHeartbeatTime: stamp, LastTransitionTime: stamp},
	}, {
		name:    "a Drainer that cordons: the cordon is recorded before the drain runs",
		machine: preserveMachine(v1alpha1.MachineFailed, map[string]string{v1alpha1.PreserveAnnotation: "now"}, &mcmUntil),
		node: withNode(preserveNode(ca), func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{preservedTaint}
			n.Status.Conditions = append(n.Status.Conditions,
				preservedCond(corev1.ConditionFalse, v1alpha1.PreservedNodeDrainUnsuccessful+" "+mcmMsg))
		}),
		cordoningDrainer: true,
		wantMachine: preserveMachine(v1alpha1.MachineFailed, map[string]string{v1alpha1.PreserveAnnotation: "now",
			PreserveCordonedAnnotation: "true"}, &mcmUntil),
	}, {
		name:    "the drain runs once the taint is on the node",
		machine: preserveMachine(v1alpha1.MachineFailed, map[string]string{v1alpha1.PreserveAnnotation: "now"}, &mcmUntil),
		node: withNode(preserveNode(ca), func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{preservedTaint}
			n.Status.Conditions = append(n.Status.Conditions,
				preservedCond(corev1.ConditionFalse, v1alpha1.PreservedNodeDrainUnsuccessful+" "+mcmMsg))
		}),
		// The drain's first pass records its start (that of the
		// preservation) and the drain parameters in force.
		wantMachine: withMachine(preserveMachine(v1alpha1.MachineFailed, map[string]string{v1alpha1.PreserveAnnotation: "now"}, &mcmUntil),
			func(m *v1alpha1.Machine) {
				setFlowRecord(m, PreserveDrainCondition, flowRecord{Reason: drainingReason, Since: apitime.Of(mcmUntil.Add(-testPreserveTimeout)),
					Drain: drainParams{DrainTimeout: metav1.Duration{Duration: 2 * time.Hour}}})
			}),
		wantDrain: true,
	}}
}
