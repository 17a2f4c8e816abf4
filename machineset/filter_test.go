package machineset

import (
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
	"github.com/mcmkit/mcm/internal/testsupport/machinedraw"
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
	draw := machinedraw.New(settledEpoch)
	rapid.Check(t, func(t *rapid.T) {
		// Several updates per case: a hidden change is found in fewer
		// cases than there are parts to draw.
		set := set.DeepCopy()
		set.Spec.Replicas = int32(rapid.IntRange(0, 4).Draw(t, "replicas"))
		_ = w.inf.MachineSets.Informer().GetIndexer().Update(set)
		for range 50 {
			old := draw.Machine(t, w.machines[0], set, "old")
			updated := draw.Mutate(t, old, set)
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
