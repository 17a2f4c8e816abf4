package explain

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/kubectl-mcm/internal/tree"
	"github.com/mcmkit/mcm/machine"
)

// MachineState is what Machine explains: the machine, its node (nil when
// it has none or the node is gone) and the events about the machine.
type MachineState struct {
	Machine *v1alpha1.Machine
	Node    *corev1.Node
	// NodeName is the node the machine names, shown when Node is nil.
	NodeName string
	Events   []corev1.Event
}

// eventsShown is how many of the latest events are listed.
const eventsShown = 8

// Machine explains st as of now in a few lines.
func Machine(st MachineState, now time.Time) string {
	m := st.Machine
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	owner := "no MachineSet"
	if ref := metav1.GetControllerOf(m); ref != nil {
		owner = ref.Kind + " " + ref.Name
	}
	fmt.Fprintf(&b, "Machine %s/%s (%s)\n", m.Namespace, m.Name, owner)
	phase := "none yet"
	if p := m.Status.CurrentStatus.Phase; p != "" {
		phase = fmt.Sprintf("%s for %s", p, ago(m.Status.CurrentStatus.LastUpdateTime.Time, now))
	}
	row(tw, "Phase", fmt.Sprintf("%s (created %s ago)", phase, ago(m.CreationTimestamp.Time, now)))
	if _, doing := tree.Activity(m, st.Node, now); doing != "" {
		row(tw, "Now", doing)
	}
	if op := m.Status.LastOperation; op.Type != "" || op.Description != "" {
		text := fmt.Sprintf("%s %s, %s ago: %s", op.Type, op.State, ago(op.LastUpdateTime.Time, now), op.Description)
		if op.ErrorCode != "" {
			text += " (" + op.ErrorCode + ")"
		}
		row(tw, "Last operation", text)
	}
	row(tw, "Node", nodeLine(st))
	for _, c := range m.Status.Conditions {
		if c.Type == v1alpha1.NodeInPlaceUpdate {
			row(tw, "In-place update", fmt.Sprintf("%s (%s): %s", c.Reason, c.Status, c.Message))
		}
	}
	if step := m.Annotations[machine.DeletionStepAnnotation]; step != "" {
		row(tw, "Deletion", "at step "+step+deletionDrain(m))
	}
	if exp := m.Status.CurrentStatus.PreserveExpiryTime; exp != nil {
		row(tw, "Preserved", "until "+exp.UTC().Format(time.RFC3339))
	}
	if m.Spec.ProviderID != "" {
		row(tw, "Provider ID", m.Spec.ProviderID)
	}
	_ = tw.Flush()
	events(&b, st.Events, now)
	return b.String()
}

func row(tw *tabwriter.Writer, key, value string) { fmt.Fprintf(tw, "  %s:\t%s\n", key, value) }

func nodeLine(st MachineState) string {
	if st.Node == nil {
		if st.NodeName == "" {
			return "none yet"
		}
		return st.NodeName + " (not in the target cluster)"
	}
	n := tree.DescribeNode(st.Node)
	text := n.Name + " " + n.ReadyWord()
	if len(n.Notes) > 0 {
		text += "; " + strings.Join(n.Notes, "; ")
	}
	var marks []string
	for _, k := range []string{v1alpha1.CandidateForUpdateLabel, v1alpha1.SelectedForUpdateLabel, v1alpha1.UpdateResultLabel} {
		if v, ok := st.Node.Labels[k]; ok {
			marks = append(marks, k+"="+v)
		}
	}
	if len(marks) > 0 {
		text += "; " + strings.Join(marks, ", ")
	}
	return text
}

// deletionDrain tells what the deletion's drain waits on.
func deletionDrain(m *v1alpha1.Machine) string {
	if pdbs := m.Annotations["mcmkit.io/drain-blocked-by"]; pdbs != "" {
		return "; drain blocked by PodDisruptionBudget " + pdbs
	}
	return ""
}

// events lists the latest events, oldest first.
func events(b *strings.Builder, evs []corev1.Event, now time.Time) {
	if len(evs) == 0 {
		b.WriteString("  Events: none\n")
		return
	}
	evs = slices.Clone(evs)
	slices.SortStableFunc(evs, func(x, y corev1.Event) int { return lastSeen(x).Compare(lastSeen(y)) })
	if len(evs) > eventsShown {
		evs = evs[len(evs)-eventsShown:]
	}
	b.WriteString("  Events:\n")
	tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	for _, e := range evs {
		count := ""
		if e.Count > 1 {
			count = fmt.Sprintf(" (x%d)", e.Count)
		}
		fmt.Fprintf(tw, "    %s ago\t%s\t%s\t%s%s\n", ago(lastSeen(e), now), e.Type, e.Reason, e.Message, count)
	}
	_ = tw.Flush()
}

func lastSeen(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

func ago(t, now time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return duration.HumanDuration(now.Sub(t))
}
