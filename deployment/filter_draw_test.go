package deployment

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/ownership"
)

// The draws below make machines either side of machineChangeMatters for
// TestPropertyFilterHidesNoSync.

var (
	drawTimes = []time.Time{epoch.Add(-time.Hour), epoch, epoch.Add(time.Minute), epoch.Add(48 * time.Hour)}
	// Failed and Running come often: most of what a set decides on
	// depends on them.
	drawPhases = []v1alpha1.MachinePhase{v1alpha1.MachinePending, v1alpha1.MachineRunning, v1alpha1.MachineRunning, v1alpha1.MachineAvailable,
		v1alpha1.MachineFailed, v1alpha1.MachineFailed, v1alpha1.MachineFailed, v1alpha1.MachineTerminating, v1alpha1.MachineInPlaceUpdateFailed}
	drawAnnotations = []string{v1alpha1.MachinePriorityAnnotation, v1alpha1.MarkedForDeletionTimeAnnotation,
		v1alpha1.PreserveAnnotation, v1alpha1.LastAppliedNodePreserveValueAnnotation, "example.com/other"}
	drawValues = []string{"", "1", "3", "now", "when-failed", "auto-preserved", "false",
		epoch.Format(time.RFC3339), epoch.Add(48 * time.Hour).Format(time.RFC3339)}
)

func drawTime(t *rapid.T, label string) metav1.Time {
	return metav1.NewTime(rapid.SampledFrom(drawTimes).Draw(t, label))
}

// drawMachine is base with every part either side of the filter drawn.
func drawMachine(t *rapid.T, base *v1alpha1.Machine, set *v1alpha1.MachineSet) *v1alpha1.Machine {
	m := base.DeepCopy()
	for _, part := range machineParts {
		part(t, m, set)
	}
	for range rapid.IntRange(0, 3).Draw(t, "annotations") {
		machineParts[1](t, m, set)
	}
	m.ResourceVersion = "old"
	return m
}

// mutateMachine is old with one or two of its parts drawn again.
func mutateMachine(t *rapid.T, old *v1alpha1.Machine, set *v1alpha1.MachineSet) *v1alpha1.Machine {
	m := old.DeepCopy()
	for range rapid.IntRange(1, 2).Draw(t, "changes") {
		machineParts[rapid.IntRange(0, len(machineParts)-1).Draw(t, "part")](t, m, set)
	}
	m.ResourceVersion = "new"
	return m
}

// machineParts each draw one part of a machine.
var machineParts = []func(t *rapid.T, m *v1alpha1.Machine, set *v1alpha1.MachineSet){
	func(t *rapid.T, m *v1alpha1.Machine, set *v1alpha1.MachineSet) {
		m.Labels = map[string]string{}
		for _, k := range rapid.SliceOfDistinct(rapid.SampledFrom([]string{"pool", v1alpha1.NodeLabelKey, v1alpha1.UpdateResultLabel, "example.com/other"}), rapid.ID).Draw(t, "labels") {
			m.Labels[k] = rapid.SampledFrom([]string{"a", "b", "node-1", v1alpha1.UpdateResultSuccessful}).Draw(t, "label")
		}
	},
	func(t *rapid.T, m *v1alpha1.Machine, set *v1alpha1.MachineSet) {
		// One annotation at a time: a change the filter misses shows
		// only when nothing else it sees changed with it.
		k := rapid.SampledFrom(drawAnnotations).Draw(t, "annotation")
		m.Annotations = maps.Clone(m.Annotations)
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		if v := rapid.SampledFrom(append(drawValues, "(none)")).Draw(t, "value"); v == "(none)" {
			delete(m.Annotations, k)
		} else {
			m.Annotations[k] = v
		}
	},
	func(t *rapid.T, m *v1alpha1.Machine, set *v1alpha1.MachineSet) {
		switch rapid.IntRange(0, 5).Draw(t, "owner") {
		default: // mostly the set's: only then does the set decide on it
			m.OwnerReferences = []metav1.OwnerReference{ownership.ControllerRef(set, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))}
		case 4:
			m.OwnerReferences = nil
		case 5:
			ref := ownership.ControllerRef(set, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))
			ref.Name, ref.UID = "other", "other-uid"
			m.OwnerReferences = []metav1.OwnerReference{ref}
		}
	},
	func(t *rapid.T, m *v1alpha1.Machine, _ *v1alpha1.MachineSet) {
		m.DeletionTimestamp = nil
		if rapid.IntRange(0, 4).Draw(t, "deleting") == 0 {
			m.DeletionTimestamp = new(drawTime(t, "deletedAt"))
		}
	},
	func(t *rapid.T, m *v1alpha1.Machine, _ *v1alpha1.MachineSet) {
		m.Status.CurrentStatus.Phase = rapid.SampledFrom(drawPhases).Draw(t, "phase")
	},
	func(t *rapid.T, m *v1alpha1.Machine, _ *v1alpha1.MachineSet) {
		m.Status.CurrentStatus.LastUpdateTime = drawTime(t, "phaseAt")
	},
	func(t *rapid.T, m *v1alpha1.Machine, _ *v1alpha1.MachineSet) {
		m.Status.CurrentStatus.PreserveExpiryTime = nil
		if rapid.Bool().Draw(t, "preserved") {
			m.Status.CurrentStatus.PreserveExpiryTime = new(drawTime(t, "preservedUntil"))
		}
	},
	func(t *rapid.T, m *v1alpha1.Machine, _ *v1alpha1.MachineSet) {
		m.Status.LastOperation = v1alpha1.LastOperation{
			State:          rapid.SampledFrom([]v1alpha1.MachineState{v1alpha1.MachineStateSuccessful, v1alpha1.MachineStateFailed, v1alpha1.MachineStateProcessing}).Draw(t, "opState"),
			Type:           rapid.SampledFrom([]v1alpha1.MachineOperationType{v1alpha1.MachineOperationCreate, v1alpha1.MachineOperationHealthCheck}).Draw(t, "opType"),
			Description:    rapid.SampledFrom([]string{"a", "b"}).Draw(t, "opDescription"),
			LastUpdateTime: drawTime(t, "opAt"),
		}
	},
	func(t *rapid.T, m *v1alpha1.Machine, _ *v1alpha1.MachineSet) {
		m.Status.Conditions = nil
		if rapid.Bool().Draw(t, "ready") {
			m.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: drawTime(t, "heartbeat")}}
		}
		if rapid.Bool().Draw(t, "inPlace") {
			m.Status.Conditions = append(m.Status.Conditions, corev1.NodeCondition{Type: v1alpha1.NodeInPlaceUpdate,
				Status: corev1.ConditionTrue, Reason: rapid.SampledFrom([]string{"a", "b"}).Draw(t, "inPlaceReason")})
		}
	},
	func(t *rapid.T, m *v1alpha1.Machine, _ *v1alpha1.MachineSet) {
		m.Spec.ProviderID = rapid.SampledFrom([]string{"", "sim://a", "sim://b"}).Draw(t, "providerID")
		m.Spec.Class.Name = rapid.SampledFrom([]string{"c", "other"}).Draw(t, "class")
		m.Spec.Class.Kind = rapid.SampledFrom([]string{"MachineClass", "AWSMachineClass"}).Draw(t, "classKind")
	},
}
