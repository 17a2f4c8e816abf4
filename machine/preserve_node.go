package machine

import (
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// preservedTaint keeps new pods off the node of a preserved Failed
// machine (newer MCM's way; v0.62.1 cordoned it through the drain).
var preservedTaint = corev1.Taint{Key: v1alpha1.PreservedTaintKey, Effect: corev1.TaintEffectNoSchedule}

// nodeShowsPreservation reports whether the node carries a preservation's
// marks: the preserved taint, or a Preserved condition that is not a
// stop's.
func nodeShowsPreservation(node *corev1.Node) bool {
	if node == nil {
		return false
	}
	if hasTaint(node, v1alpha1.PreservedTaintKey) {
		return true
	}
	c := preservedCondition(node)
	return c != nil && c.Reason != v1alpha1.PreservationStopped
}

func preservedCondition(node *corev1.Node) *corev1.NodeCondition {
	return nodeCondition(node, v1alpha1.NodePreserved)
}

// nodeCondition is the node's condition of type t, nil if it has none.
func nodeCondition(node *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// mcmCordoned reports whether MCM v0.62.1's preservation drain cordoned
// the node: it is cordoned, its Preserved condition tells of a drain,
// and it lacks the taint this controller sets before it drains.
func mcmCordoned(node *corev1.Node) bool {
	c := preservedCondition(node)
	return node.Spec.Unschedulable && c != nil && drainedMessage(c.Message) &&
		!hasTaint(node, v1alpha1.PreservedTaintKey)
}

// mcmDrained reports whether MCM v0.62.1's preservation drain succeeded
// on the node: its Preserved condition says so, and the node lacks the
// taint this controller sets before it drains.
func mcmDrained(node *corev1.Node) bool {
	c := preservedCondition(node)
	return c != nil && strings.HasPrefix(c.Message, v1alpha1.PreservedNodeDrainSuccessful) &&
		!hasTaint(node, v1alpha1.PreservedTaintKey)
}

// planPreservedNode plans the node's side of decision d into p: p.Node
// (from the node sync's, or node), p.NodeCondition and p.PreserveDrain.
// Only the keys the preservation owns are touched: a scale-down-disabled
// annotation without the by-mcm marker is a person's, and a cordon is
// undone only when it is the preservation's.
func planPreservedNode(p *machinePlan, obs observation, node *corev1.Node, d preserveDecision, o *Options) {
	m := p.Machine
	out := p.Node
	if out == nil {
		out = node.DeepCopy()
	}
	failed := m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed
	active := d.Action == preserveStart || d.Action == preserveKeep
	if d.Action == preserveStop && d.RemoveRequest && d.FromNode {
		delete(out.Annotations, v1alpha1.PreserveAnnotation)
	}
	switch {
	case active && out.Annotations[v1alpha1.ScaleDownDisabledAnnotation] != "true":
		setMapKey(&out.Annotations, v1alpha1.ScaleDownDisabledAnnotation, "true")
		setMapKey(&out.Annotations, v1alpha1.ScaleDownDisabledByMCMAnnotation, "true")
	case d.Action == preserveStop && out.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] == "true":
		delete(out.Annotations, v1alpha1.ScaleDownDisabledAnnotation)
		delete(out.Annotations, v1alpha1.ScaleDownDisabledByMCMAnnotation)
	}
	switch tainted := hasTaint(out, v1alpha1.PreservedTaintKey); {
	case active && failed && !tainted:
		out.Spec.Taints = append(out.Spec.Taints, preservedTaint)
	case !(active && failed) && tainted:
		out.Spec.Taints = slices.DeleteFunc(out.Spec.Taints, func(t corev1.Taint) bool { return t.Key == v1alpha1.PreservedTaintKey })
		if len(out.Spec.Taints) == 0 {
			out.Spec.Taints = nil
		}
	}
	planPreserveCordon(m, node, out)

	until, _ := machinestate.PreservedUntil(m)
	if active && failed && !preserveDrained(m) && mcmDrained(node) {
		// MCM v0.62.1 drained the node (and cordoned it): taken over, not
		// drained again.
		setPreserveDrained(m, obs.Now)
	}
	switch {
	case active:
		want := preservingCondition(m, d, until, preserveDrained(m))
		p.NodeCondition = conditionUpdate(node, want, obs.Now)
		if failed && !preserveDrained(m) && hasTaint(node, v1alpha1.PreservedTaintKey) {
			// The taint is on the node before the drain starts, so that
			// evicted pods do not come back; a Drainer that cordons is
			// recorded as cordoning before it runs (see
			// planPreserveCordon).
			if !o.preserveDrainCordons() || node.Spec.Unschedulable || m.Annotations[PreserveCordonedAnnotation] != "" {
				drained := preservingCondition(m, d, until, true)
				p.PreserveDrain = planPreserveDrain(obs, m, node.Name, drained)
			} else {
				setAnnotation(m, PreserveCordonedAnnotation, "true")
			}
		}
	case d.Action == preserveStop && preservedCondition(node) != nil:
		want := corev1.NodeCondition{Type: v1alpha1.NodePreserved, Status: corev1.ConditionFalse,
			Reason: v1alpha1.PreservationStopped, Message: "Preservation stopped: " + d.Why + "."}
		p.NodeCondition = conditionUpdate(node, want, obs.Now)
	}
	p.Node = nil
	if !nodeSame(out, node) {
		p.Node = out
	}
}

// planPreserveCordon undoes the preservation's cordon once the machine
// runs again (MCM uncordons a preserved node of a Running machine), and
// takes over the knowledge of MCM v0.62.1's cordon before the node's
// marks change: the machine records it.
func planPreserveCordon(m *v1alpha1.Machine, node, out *corev1.Node) {
	ours := m.Annotations[PreserveCordonedAnnotation] != "" || mcmCordoned(node)
	if m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
		if ours && node.Spec.Unschedulable {
			out.Spec.Unschedulable = false
		}
		deleteAnnotation(m, PreserveCordonedAnnotation)
		return
	}
	if mcmCordoned(node) {
		setAnnotation(m, PreserveCordonedAnnotation, "true")
	}
}

// preservingCondition is the Preserved condition of a preservation that
// holds, in MCM's words.
func preservingCondition(m *v1alpha1.Machine, d preserveDecision, until time.Time, drained bool) corev1.NodeCondition {
	c := corev1.NodeCondition{Type: v1alpha1.NodePreserved, Status: corev1.ConditionTrue, Reason: v1alpha1.PreservedByUser}
	if d.Value == v1alpha1.PreserveAutoPreserved {
		c.Reason = v1alpha1.PreservedByMCM
	}
	suffix := "Machine preserved until " + preserveTime(until) + "."
	switch {
	case m.Status.CurrentStatus.Phase != v1alpha1.MachineFailed:
		c.Message = suffix
	case drained:
		c.Message = v1alpha1.PreservedNodeDrainSuccessful + " " + suffix
	default:
		c.Status, c.Message = corev1.ConditionFalse, v1alpha1.PreservedNodeDrainUnsuccessful+" "+suffix
	}
	return c
}

// conditionUpdate returns want stamped for writing, nil when the node's
// condition of its type says the same already. Its transition time is now
// when the status changes, else the node's.
func conditionUpdate(node *corev1.Node, want corev1.NodeCondition, now time.Time) *corev1.NodeCondition {
	cur := nodeCondition(node, want.Type)
	if cur != nil && cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message {
		return nil
	}
	want.LastHeartbeatTime = metav1.NewTime(now)
	want.LastTransitionTime = metav1.NewTime(now)
	if cur != nil && cur.Status == want.Status {
		want.LastTransitionTime = cur.LastTransitionTime
	}
	return &want
}

// nodeSame reports whether out writes nothing over node: the fields the
// controller owns are equal.
func nodeSame(out, node *corev1.Node) bool {
	return maps.Equal(out.Labels, node.Labels) && maps.Equal(out.Annotations, node.Annotations) &&
		slices.EqualFunc(out.Spec.Taints, node.Spec.Taints, taintEqual) &&
		slices.Equal(out.Finalizers, node.Finalizers) &&
		out.Spec.Unschedulable == node.Spec.Unschedulable &&
		apiequality.Semantic.DeepEqual(out.Status.Capacity, node.Status.Capacity)
}
