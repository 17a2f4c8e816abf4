package machinedraw

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/ownership"
)

// Drawer draws machines whose times and time-valued annotations lie around
// an epoch: an hour before, at it, a minute after and two days after.
type Drawer struct {
	times  []time.Time
	values []string
	parts  []part
}

// New returns a Drawer around epoch.
func New(epoch time.Time) *Drawer {
	d := &Drawer{
		times: []time.Time{epoch.Add(-time.Hour), epoch, epoch.Add(time.Minute), epoch.Add(48 * time.Hour)},
		values: []string{"", "1", "3", "now", "when-failed", "auto-preserved", "false",
			epoch.Format(time.RFC3339), epoch.Add(48 * time.Hour).Format(time.RFC3339)},
	}
	d.parts = d.newParts()
	return d
}

// Failed and Running come often: most of what a set decides on depends on
// them.
var phases = []v1alpha1.MachinePhase{v1alpha1.MachinePending, v1alpha1.MachineRunning, v1alpha1.MachineRunning, v1alpha1.MachineAvailable,
	v1alpha1.MachineFailed, v1alpha1.MachineFailed, v1alpha1.MachineFailed, v1alpha1.MachineTerminating, v1alpha1.MachineInPlaceUpdateFailed}

var annotations = []string{v1alpha1.MachinePriorityAnnotation, v1alpha1.MarkedForDeletionTimeAnnotation,
	v1alpha1.PreserveAnnotation, v1alpha1.LastAppliedNodePreserveValueAnnotation, "example.com/other"}

// Machine is base with every part drawn, its resourceVersion set to
// version.
func (d *Drawer) Machine(t *rapid.T, base *v1alpha1.Machine, set *v1alpha1.MachineSet, version string) *v1alpha1.Machine {
	m := base.DeepCopy()
	for _, part := range d.parts {
		part(t, m, set)
	}
	for range rapid.IntRange(0, 3).Draw(t, "annotations") {
		d.annotation(t, m)
	}
	m.ResourceVersion = version
	return m
}

// Mutate is old with one or two of its parts drawn again, its
// resourceVersion "new".
func (d *Drawer) Mutate(t *rapid.T, old *v1alpha1.Machine, set *v1alpha1.MachineSet) *v1alpha1.Machine {
	m := old.DeepCopy()
	for range rapid.IntRange(1, 2).Draw(t, "changes") {
		d.parts[rapid.IntRange(0, len(d.parts)-1).Draw(t, "part")](t, m, set)
	}
	m.ResourceVersion = "new"
	return m
}

func (d *Drawer) time(t *rapid.T, label string) metav1.Time {
	return metav1.NewTime(rapid.SampledFrom(d.times).Draw(t, label))
}

// annotation draws one annotation at a time: a change the filter misses
// shows only when nothing else it sees changed with it.
func (d *Drawer) annotation(t *rapid.T, m *v1alpha1.Machine) {
	k := rapid.SampledFrom(annotations).Draw(t, "annotation")
	m.Annotations = maps.Clone(m.Annotations)
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	if v := rapid.SampledFrom(append(d.values, "(none)")).Draw(t, "value"); v == "(none)" {
		delete(m.Annotations, k)
	} else {
		m.Annotations[k] = v
	}
}

type part func(t *rapid.T, m *v1alpha1.Machine, set *v1alpha1.MachineSet)

// newParts are functions that each draw one part of a machine.
func (d *Drawer) newParts() []part {
	return []part{
		labels,
		func(t *rapid.T, m *v1alpha1.Machine, _ *v1alpha1.MachineSet) { d.annotation(t, m) },
		owner,
		func(t *rapid.T, m *v1alpha1.Machine, _ *v1alpha1.MachineSet) {
			m.DeletionTimestamp = nil
			if rapid.IntRange(0, 4).Draw(t, "deleting") == 0 {
				m.DeletionTimestamp = new(d.time(t, "deletedAt"))
			}
		},
		func(t *rapid.T, m *v1alpha1.Machine, _ *v1alpha1.MachineSet) {
			m.Status.CurrentStatus.Phase = rapid.SampledFrom(phases).Draw(t, "phase")
		},
		func(t *rapid.T, m *v1alpha1.Machine, _ *v1alpha1.MachineSet) {
			m.Status.CurrentStatus.LastUpdateTime = d.time(t, "phaseAt")
		},
		func(t *rapid.T, m *v1alpha1.Machine, _ *v1alpha1.MachineSet) {
			m.Status.CurrentStatus.PreserveExpiryTime = nil
			if rapid.Bool().Draw(t, "preserved") {
				m.Status.CurrentStatus.PreserveExpiryTime = new(d.time(t, "preservedUntil"))
			}
		},
		func(t *rapid.T, m *v1alpha1.Machine, _ *v1alpha1.MachineSet) {
			m.Status.LastOperation = v1alpha1.LastOperation{
				State:          rapid.SampledFrom([]v1alpha1.MachineState{v1alpha1.MachineStateSuccessful, v1alpha1.MachineStateFailed, v1alpha1.MachineStateProcessing}).Draw(t, "opState"),
				Type:           rapid.SampledFrom([]v1alpha1.MachineOperationType{v1alpha1.MachineOperationCreate, v1alpha1.MachineOperationHealthCheck}).Draw(t, "opType"),
				Description:    rapid.SampledFrom([]string{"a", "b"}).Draw(t, "opDescription"),
				LastUpdateTime: d.time(t, "opAt"),
			}
		},
		func(t *rapid.T, m *v1alpha1.Machine, _ *v1alpha1.MachineSet) {
			m.Status.Conditions = nil
			if rapid.Bool().Draw(t, "ready") {
				m.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: d.time(t, "heartbeat")}}
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
}

func labels(t *rapid.T, m *v1alpha1.Machine, _ *v1alpha1.MachineSet) {
	m.Labels = map[string]string{}
	for _, k := range rapid.SliceOfDistinct(rapid.SampledFrom([]string{"pool", v1alpha1.NodeLabelKey, v1alpha1.UpdateResultLabel, "example.com/other"}), rapid.ID).Draw(t, "labels") {
		m.Labels[k] = rapid.SampledFrom([]string{"a", "b", "node-1", v1alpha1.UpdateResultSuccessful}).Draw(t, "label")
	}
}

// owner is mostly the set's: only then does the set decide on the machine.
func owner(t *rapid.T, m *v1alpha1.Machine, set *v1alpha1.MachineSet) {
	switch rapid.IntRange(0, 5).Draw(t, "owner") {
	default:
		m.OwnerReferences = []metav1.OwnerReference{ownership.ControllerRef(set, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))}
	case 4:
		m.OwnerReferences = nil
	case 5:
		ref := ownership.ControllerRef(set, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))
		ref.Name, ref.UID = "other", "other-uid"
		m.OwnerReferences = []metav1.OwnerReference{ref}
	}
}
