package tree

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/machine"
)

// drainBlockedByAnnotation is where the machine controller lists the
// PodDisruptionBudgets a deletion's drain waits on (package machine keeps
// the name unexported; it is part of the machine's documented state).
const drainBlockedByAnnotation = "mcmkit.io/drain-blocked-by"

func buildMachine(m *v1alpha1.Machine, nodes map[string]*corev1.Node, now time.Time) Machine {
	out := Machine{Name: m.Name, Phase: m.Status.CurrentStatus.Phase, Created: m.CreationTimestamp.Time}
	var node *corev1.Node
	if name := m.Labels[v1alpha1.NodeLabelKey]; name != "" && nodes != nil {
		node = nodes[name]
		out.Node = &Node{Name: name, Ready: Missing}
		if node != nil {
			out.Node = DescribeNode(node)
		}
	}
	out.DoingKind, out.Doing = Activity(m, node, now)
	return out
}

// Activity says what m does now, as a kind without times or counts (for
// grouping) and as a text for people; both empty for a machine that just
// runs. node is m's node, nil when unknown.
func Activity(m *v1alpha1.Machine, node *corev1.Node, now time.Time) (kind, text string) {
	op := m.Status.LastOperation
	if m.DeletionTimestamp != nil {
		return deleting(m, now)
	}
	phase := m.Status.CurrentStatus.Phase
	switch phase {
	case v1alpha1.MachineFailed, v1alpha1.MachineCrashLoopBackOff, v1alpha1.MachineInPlaceUpdateFailed:
		kind = "failed"
		if op.Description != "" {
			text = op.Description
		}
		if exp := m.Status.CurrentStatus.PreserveExpiryTime; exp != nil && exp.After(now) {
			kind, text = "preserved", join("preserved until "+exp.UTC().Format(time.RFC3339), text)
		}
		return kind, text
	case "", v1alpha1.MachinePending:
		return "creating", "creating for " + since(m.CreationTimestamp.Time, now)
	case v1alpha1.MachineUnknown:
		return "unhealthy", join("unhealthy for "+since(m.Status.CurrentStatus.LastUpdateTime.Time, now), op.Description)
	case v1alpha1.MachineInPlaceUpdating, v1alpha1.MachineInPlaceUpdateSuccessful:
		return "in-place", "in-place update: " + inPlaceReason(m, node, string(phase))
	}
	if exp := m.Status.CurrentStatus.PreserveExpiryTime; exp != nil && exp.After(now) {
		return "preserved", "preserved until " + exp.UTC().Format(time.RFC3339)
	}
	if node != nil {
		switch {
		case node.Labels[v1alpha1.SelectedForUpdateLabel] == "true":
			return "in-place", "in-place update: " + inPlaceReason(m, node, "selected")
		case node.Labels[v1alpha1.CandidateForUpdateLabel] == "true":
			return "in-place candidate", "in-place update: candidate"
		}
	}
	return "", ""
}

// deleting describes a machine being deleted: the step it is at and, while
// it drains, what the drain waits for.
func deleting(m *v1alpha1.Machine, now time.Time) (kind, text string) {
	step := m.Annotations[machine.DeletionStepAnnotation]
	text = "deleting for " + since(m.DeletionTimestamp.Time, now)
	if step == string(machine.StepDrain) {
		kind, text = "draining", "draining for "+since(m.DeletionTimestamp.Time, now)
		if desc := m.Status.LastOperation.Description; desc != "" {
			text += ": " + strings.TrimPrefix(desc, "Draining node: ")
		}
		if pdbs := m.Annotations[drainBlockedByAnnotation]; pdbs != "" && !strings.Contains(text, pdbs) {
			text += "; blocked by PDB " + pdbs
		}
		return kind, text
	}
	if step != "" {
		text += " (" + step + ")"
	}
	return "deleting", text
}

// inPlaceReason is the reason of the InPlaceUpdate node condition, from the
// node or, failing that, the machine's copy, else fallback.
func inPlaceReason(m *v1alpha1.Machine, node *corev1.Node, fallback string) string {
	if node != nil {
		for _, c := range node.Status.Conditions {
			if c.Type == v1alpha1.NodeInPlaceUpdate && c.Reason != "" {
				return c.Reason
			}
		}
	}
	for _, c := range m.Status.Conditions {
		if c.Type == v1alpha1.NodeInPlaceUpdate && c.Reason != "" {
			return c.Reason
		}
	}
	return fallback
}

// DescribeNode tells the node's readiness and what is notable about it.
func DescribeNode(n *corev1.Node) *Node {
	out := &Node{Name: n.Name, Ready: corev1.ConditionUnknown}
	if n.Spec.Unschedulable {
		out.Notes = append(out.Notes, "cordoned")
	}
	for _, c := range n.Status.Conditions {
		switch {
		case c.Type == corev1.NodeReady:
			out.Ready = c.Status
		case c.Type == v1alpha1.NodeInPlaceUpdate:
			// Told by the machine's activity while it matters.
		case c.Status == corev1.ConditionTrue:
			out.Notes = append(out.Notes, string(c.Type))
		}
	}
	if reason := n.Annotations[v1alpha1.UpdateFailedReasonAnnotation]; reason != "" {
		out.Notes = append(out.Notes, "update failed: "+reason)
	}
	return out
}

// ReadyWord is how a node's readiness reads in a line.
func (n *Node) ReadyWord() string {
	switch n.Ready {
	case corev1.ConditionTrue:
		return "Ready"
	case corev1.ConditionFalse:
		return "NotReady"
	case Missing:
		return "missing"
	}
	return "Ready=Unknown"
}

func since(t, now time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return duration.HumanDuration(now.Sub(t))
}

func join(a, b string) string {
	if b == "" {
		return a
	}
	return fmt.Sprintf("%s; %s", a, b)
}
