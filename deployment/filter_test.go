package deployment

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
	base := newSettledWorld(t, 1).machines[0].DeepCopy()
	at := metav1.NewTime(epoch.Add(time.Hour))
	tests := []struct {
		name   string
		change func(m *v1alpha1.Machine)
		want   bool
	}{
		{"resourceVersion only", func(m *v1alpha1.Machine) { m.ResourceVersion = "99" }, false},
		{"lastOperation time of a healthy machine", func(m *v1alpha1.Machine) { m.Status.LastOperation.LastUpdateTime = at }, false},
		{"someone else's annotation", func(m *v1alpha1.Machine) { m.Annotations["example.com/x"] = "y" }, false},
		{"node conditions", func(m *v1alpha1.Machine) {
			m.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: at}}
		}, false},
		{"in-place condition", func(m *v1alpha1.Machine) {
			m.Status.Conditions = []corev1.NodeCondition{{Type: v1alpha1.NodeInPlaceUpdate, Status: corev1.ConditionTrue}}
		}, true},
		{"in-place failure's reason", func(m *v1alpha1.Machine) {
			m.Status.CurrentStatus.Phase = v1alpha1.MachineInPlaceUpdateFailed
			m.Status.LastOperation.Description = "agent failed"
		}, true},
		{"phase", func(m *v1alpha1.Machine) { m.Status.CurrentStatus.Phase = v1alpha1.MachineFailed }, true},
		{"phase time", func(m *v1alpha1.Machine) { m.Status.CurrentStatus.LastUpdateTime = at }, true},
		{"preservation expiry", func(m *v1alpha1.Machine) { m.Status.CurrentStatus.PreserveExpiryTime = &at }, true},
		{"last operation fails", func(m *v1alpha1.Machine) { m.Status.LastOperation.State = v1alpha1.MachineStateFailed }, true},
		{"node", func(m *v1alpha1.Machine) { m.Labels[v1alpha1.NodeLabelKey] = "elsewhere" }, true},
		{"owner", func(m *v1alpha1.Machine) { m.OwnerReferences = nil }, true},
		{"deletion", func(m *v1alpha1.Machine) { m.DeletionTimestamp = &at }, true},
		{"priority", func(m *v1alpha1.Machine) { m.Annotations[v1alpha1.MachinePriorityAnnotation] = "1" }, true},
		{"marked for deletion", func(m *v1alpha1.Machine) { m.Annotations[v1alpha1.MarkedForDeletionTimeAnnotation] = "x" }, true},
		{"preserve", func(m *v1alpha1.Machine) { m.Annotations[v1alpha1.PreserveAnnotation] = "now" }, true},
		{"provider ID", func(m *v1alpha1.Machine) { m.Spec.ProviderID = "sim://other" }, true},
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

// TestUnrelatedMachineEventIsFree: in a settled deployment, a machine update
// that changes nothing the deployment decides on queues neither its sync
// nor its nodes' check, and nothing is written; a machine that moves to
// another node queues both.
func TestUnrelatedMachineEventIsFree(t *testing.T) {
	w := newSettledWorld(t, 50)
	stop := w.freshQueues()
	defer stop()
	w.client.ClearActions()
	w.target.ClearActions()
	if syncs := w.deliver(w.unrelatedUpdate(7)); syncs != 0 {
		t.Errorf("unrelated update: %d syncs, want 0", syncs)
	}
	if a := append(w.client.Actions(), w.target.Actions()...); len(a) != 0 {
		t.Errorf("unrelated update: %d API calls, want none: %v", len(a), a)
	}
	old := w.machines[7]
	moved := old.DeepCopy()
	moved.ResourceVersion = "moved"
	moved.Labels[v1alpha1.NodeLabelKey] = "node-elsewhere"
	if err := w.inf.Machines.Informer().GetIndexer().Update(moved); err != nil {
		t.Fatal(err)
	}
	if syncs := w.deliver(old, moved); syncs != 2 {
		t.Errorf("machine on another node: %d syncs, want the deployment's and its nodes' check", syncs)
	}
}

// TestSettledSyncQueuesNoNodeCheck: a sync that sees the machines as the
// last check was queued with queues none; a node that appears, or whose
// binding changes, queues one.
func TestSettledSyncQueuesNoNodeCheck(t *testing.T) {
	w := newSettledWorld(t, 5)
	stop := w.freshQueues()
	defer stop()
	if _, err := w.ctrl.Reconcile(w.ctx, w.key); err != nil {
		t.Fatal(err)
	}
	if n := w.ctrl.nodeQueue.Len(); n != 0 {
		t.Errorf("settled sync queued %d node checks, want none", n)
	}
	node, err := w.ctrl.nodes.Get("node-3")
	if err != nil {
		t.Fatal(err)
	}
	w.ctrl.onNodeAdd(node)
	if n := w.ctrl.nodeQueue.Len(); n != 1 {
		t.Errorf("node added: %d node checks queued, want 1", n)
	}
	stop()
	stop = w.freshQueues()
	unbound := node.DeepCopy()
	unbound.Annotations = nil
	w.ctrl.onNodeUpdate(node, unbound)
	if n := w.ctrl.nodeQueue.Len(); n != 1 {
		t.Errorf("node binding changed: %d node checks queued, want 1", n)
	}
	heartbeat := node.DeepCopy()
	heartbeat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, LastHeartbeatTime: metav1.NewTime(epoch)}}
	stop()
	stop = w.freshQueues()
	defer func() { stop() }()
	w.ctrl.onNodeUpdate(node, heartbeat)
	if n := w.ctrl.nodeQueue.Len() + w.ctrl.queue.Len(); n != 0 {
		t.Errorf("node heartbeat: %d keys queued, want none", n)
	}
}

// deploymentDecision is what a sync of the world's deployment and a check
// of its nodes decide and report with the machines the cache holds.
func (w *settledWorld) deploymentDecision(t *rapid.T) (decision any, nodeInputs string) {
	d, err := w.ctrl.deployments.MachineDeployments("ns").Get("pool")
	if err != nil {
		t.Fatal(err)
	}
	s, wait, err := w.ctrl.observe(w.ctx, d)
	if err != nil || wait {
		t.Fatalf("observe: wait %v, %v", wait, err)
	}
	p := plan(s, 0)
	var st v1alpha1.MachineDeploymentStatus
	if p.phase == phaseStep {
		st, _ = statusOf(s, p, applied{d: s.d})
	}
	ns, err := w.ctrl.observeNodes(d)
	if err != nil {
		t.Fatal(err)
	}
	nodes := ns.plan(true)
	slices.SortFunc(nodes, func(a, b nodeChange) int { return strings.Compare(a.Node, b.Node) })
	return struct {
		Plan   syncPlan
		Status v1alpha1.MachineDeploymentStatus
		Nodes  []nodeChange
	}{p, st, nodes}, nodeMarksInputs(s.d, s.observed, s.now)
}

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
// the deployment's plan, status or node marks with the new machine differ
// from those with the old, machineChangeMatters says the update matters;
// and whenever the node marks differ, so do the inputs the check is queued
// on (nodeMarksInputs).
func TestPropertyFilterHidesNoSync(t *testing.T) {
	t.Parallel()
	w := newSettledWorld(t, 3)
	idx := w.inf.Machines.Informer().GetIndexer()
	defer func() { _ = idx.Update(w.machines[0]) }()
	set, err := w.ctrl.sets.MachineSets("ns").List(everything)
	if err != nil || len(set) != 1 {
		t.Fatal(set, err)
	}
	draw := machinedraw.New(epoch)
	rapid.Check(t, func(t *rapid.T) {
		for range 30 {
			old := draw.Machine(t, w.machines[0], set[0], "old")
			updated := draw.Mutate(t, old, set[0])
			_ = idx.Update(old)
			before, beforeInputs := w.deploymentDecision(t)
			_ = idx.Update(updated)
			after, afterInputs := w.deploymentDecision(t)
			diff := cmp.Diff(before, after, byName)
			if diff != "" && !machineChangeMatters(old, updated) {
				t.Fatalf("the deployment decides differently, but the filter hides the update:\n%s", diff)
			}
			if diff != "" && beforeInputs == afterInputs &&
				cmp.Diff(nodesOfDecision(before), nodesOfDecision(after)) != "" {
				t.Fatalf("the node marks differ, but their inputs do not:\n%s", diff)
			}
		}
	})
}

func nodesOfDecision(d any) []nodeChange {
	return reflect.ValueOf(d).FieldByName("Nodes").Interface().([]nodeChange)
}
