package machineset

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/ownership"
)

func TestMachineChangeMatters(t *testing.T) {
	base := func() *v1alpha1.Machine {
		w := newSettledWorld(t, 1)
		return w.machines[0].DeepCopy()
	}()
	at := metav1.NewTime(settledEpoch.Add(time.Hour))
	tests := []struct {
		name   string
		change func(m *v1alpha1.Machine)
		want   bool
	}{
		{"resourceVersion only", func(m *v1alpha1.Machine) { m.ResourceVersion = "99" }, false},
		{"lastOperation time of a healthy machine", func(m *v1alpha1.Machine) { m.Status.LastOperation.LastUpdateTime = at }, false},
		{"lastOperation description of a healthy machine", func(m *v1alpha1.Machine) { m.Status.LastOperation.Description = "x" }, false},
		{"someone else's annotation", func(m *v1alpha1.Machine) { m.Annotations["example.com/x"] = "y" }, false},
		{"node conditions", func(m *v1alpha1.Machine) {
			m.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: at}}
		}, false},
		{"managed fields", func(m *v1alpha1.Machine) { m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}} }, false},
		{"phase", func(m *v1alpha1.Machine) { m.Status.CurrentStatus.Phase = v1alpha1.MachineFailed }, true},
		{"phase time", func(m *v1alpha1.Machine) { m.Status.CurrentStatus.LastUpdateTime = at }, true},
		{"preservation expiry", func(m *v1alpha1.Machine) { m.Status.CurrentStatus.PreserveExpiryTime = &at }, true},
		{"last operation fails", func(m *v1alpha1.Machine) { m.Status.LastOperation.State = v1alpha1.MachineStateFailed }, true},
		{"labels", func(m *v1alpha1.Machine) { m.Labels["pool"] = "b" }, true},
		{"owner", func(m *v1alpha1.Machine) { m.OwnerReferences = nil }, true},
		{"deletion", func(m *v1alpha1.Machine) { m.DeletionTimestamp = &at }, true},
		{"priority", func(m *v1alpha1.Machine) { m.Annotations[v1alpha1.MachinePriorityAnnotation] = "1" }, true},
		{"marked for deletion", func(m *v1alpha1.Machine) {
			m.Annotations[v1alpha1.MarkedForDeletionTimeAnnotation] = at.UTC().Format(time.RFC3339)
		}, true},
		{"preserve", func(m *v1alpha1.Machine) { m.Annotations[v1alpha1.PreserveAnnotation] = "now" }, true},
		{"node's preserve", func(m *v1alpha1.Machine) { m.Annotations[v1alpha1.LastAppliedNodePreserveValueAnnotation] = "now" }, true},
		{"spec", func(m *v1alpha1.Machine) { m.Spec.Class.Name = "other" }, true},
	}
	got, want := map[string]bool{}, map[string]bool{}
	for _, tt := range tests {
		m := base.DeepCopy()
		tt.change(m)
		got[tt.name], want[tt.name] = machineChangeMatters(base, m), tt.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("machineChangeMatters (-want +got):\n%s", diff)
	}
}

// TestUnrelatedMachineEventIsFree: in a settled set, a machine update that
// changes nothing the set decides on queues no sync and writes nothing;
// one that does (the machine failed) syncs the set.
func TestUnrelatedMachineEventIsFree(t *testing.T) {
	w := newSettledWorld(t, 50)
	stop := w.freshQueue()
	defer stop()
	w.client.ClearActions()
	if syncs := w.deliver(w.unrelatedUpdate(7)); syncs != 0 {
		t.Errorf("unrelated update: %d syncs, want 0", syncs)
	}
	if a := w.client.Actions(); len(a) != 0 {
		t.Errorf("unrelated update: %d API calls, want none: %v", len(a), a)
	}
	old := w.machines[7]
	failed := old.DeepCopy()
	failed.ResourceVersion = "failed"
	failed.Status.CurrentStatus.Phase = v1alpha1.MachineFailed
	if err := w.inf.Machines.Informer().GetIndexer().Update(failed); err != nil {
		t.Fatal(err)
	}
	if syncs := w.deliver(old, failed); syncs != 1 {
		t.Errorf("failed machine: %d syncs, want 1", syncs)
	}
}

// setDecision is what one sync of the world's set decides and reports with
// the machines the cache holds: the plan and the status, machines named.
func (w *settledWorld) setDecision(t *rapid.T) any {
	set, err := w.ctrl.sets.MachineSets("ns").Get("pool")
	if err != nil {
		t.Fatal(err)
	}
	s, err := w.ctrl.observe(w.ctx, "ns/pool", set)
	if err != nil {
		t.Fatal(err)
	}
	p := plan(s, 10)
	// The cache lists machines in no order; the set's decision does not
	// depend on it.
	p.Owned = slices.SortedFunc(slices.Values(p.Owned), func(a, b *v1alpha1.Machine) int { return strings.Compare(a.Name, b.Name) })
	st := calculateStatus(statusInput{Now: s.now, Set: set, Machines: p.Owned, Selector: s.selector,
		Foreign: foreignMessage(p.Foreign), Capped: s.capped, Synced: true})
	return struct {
		Plan   syncPlan
		Status v1alpha1.MachineSetStatus
	}{p, st}
}

// byName compares machines by name and decisions including unexported
// fields: a decision refers to machines, it does not copy them.
var byName = cmp.Options{
	cmp.Transformer("name", func(m *v1alpha1.Machine) string {
		if m == nil {
			return ""
		}
		return m.Name
	}),
	cmp.Exporter(func(reflect.Type) bool { return true }),
}

// TestPropertyFilterHidesNoSync: for random updates of a machine, whenever
// the set's plan or status with the new machine differs from that with
// the old, machineChangeMatters says the update matters.
func TestPropertyFilterHidesNoSync(t *testing.T) {
	w := newSettledWorld(t, 3)
	set, _ := w.ctrl.sets.MachineSets("ns").Get("pool")
	idx := w.inf.Machines.Informer().GetIndexer()
	defer func() { _ = idx.Update(w.machines[0]); _ = w.inf.MachineSets.Informer().GetIndexer().Update(set) }()
	rapid.Check(t, func(t *rapid.T) {
		// Several updates per case: a hidden change is found in fewer
		// cases than there are parts to draw.
		set := set.DeepCopy()
		set.Spec.Replicas = int32(rapid.IntRange(0, 4).Draw(t, "replicas"))
		_ = w.inf.MachineSets.Informer().GetIndexer().Update(set)
		for range 50 {
			old := drawMachine(t, w.machines[0], set, "old")
			updated := mutateMachine(t, old, set)
			_ = idx.Update(old)
			before := w.setDecision(t)
			_ = idx.Update(updated)
			after := w.setDecision(t)
			if diff := cmp.Diff(before, after, byName); diff != "" && !machineChangeMatters(old, updated) {
				t.Fatalf("the set decides differently, but the filter hides the update:\n%s", diff)
			}
		}
	})
}

var (
	drawTimes = []time.Time{settledEpoch.Add(-time.Hour), settledEpoch, settledEpoch.Add(time.Minute), settledEpoch.Add(48 * time.Hour)}
	// Failed and Running come often: most of what a set decides on
	// depends on them.
	drawPhases = []v1alpha1.MachinePhase{v1alpha1.MachinePending, v1alpha1.MachineRunning, v1alpha1.MachineRunning, v1alpha1.MachineAvailable,
		v1alpha1.MachineFailed, v1alpha1.MachineFailed, v1alpha1.MachineFailed, v1alpha1.MachineTerminating, v1alpha1.MachineInPlaceUpdateFailed}
	drawAnnotations = []string{v1alpha1.MachinePriorityAnnotation, v1alpha1.MarkedForDeletionTimeAnnotation,
		v1alpha1.PreserveAnnotation, v1alpha1.LastAppliedNodePreserveValueAnnotation, "example.com/other"}
	drawValues = []string{"", "1", "3", "now", "when-failed", "auto-preserved", "false",
		settledEpoch.Format(time.RFC3339), settledEpoch.Add(48 * time.Hour).Format(time.RFC3339)}
)

func drawTime(t *rapid.T, label string) metav1.Time {
	return metav1.NewTime(rapid.SampledFrom(drawTimes).Draw(t, label))
}

// drawMachine is base with every part either side of the filter drawn.
func drawMachine(t *rapid.T, base *v1alpha1.Machine, set *v1alpha1.MachineSet, label string) *v1alpha1.Machine {
	m := base.DeepCopy()
	for _, part := range machineParts {
		part(t, m, set)
	}
	for range rapid.IntRange(0, 3).Draw(t, "annotations") {
		machineParts[1](t, m, set)
	}
	m.ResourceVersion = label
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
			m.Labels[k] = rapid.SampledFrom([]string{"a", "b", v1alpha1.UpdateResultSuccessful}).Draw(t, "label")
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
	},
	func(t *rapid.T, m *v1alpha1.Machine, _ *v1alpha1.MachineSet) {
		m.Spec.ProviderID = rapid.SampledFrom([]string{"", "sim://a", "sim://b"}).Draw(t, "providerID")
		m.Spec.Class.Name = rapid.SampledFrom([]string{"c", "other"}).Draw(t, "class")
		m.Spec.Class.Kind = rapid.SampledFrom([]string{"MachineClass", "AWSMachineClass"}).Draw(t, "classKind")
	},
}
