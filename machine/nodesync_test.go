package machine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestTemplateRecordFormat(t *testing.T) {
	want := appliedTemplate{
		Labels:      map[string]string{"pool": "a"},
		Annotations: map[string]string{"note": "x"},
		Taints:      []corev1.Taint{{Key: "t", Value: "v", Effect: corev1.TaintEffectNoSchedule}},
	}
	got := templateRecordOf(want)
	// MCM's format: the JSON of a NodeTemplateSpec.
	const mcm = `{"metadata":{"labels":{"pool":"a"},"annotations":{"note":"x"}},"spec":{"taints":[{"key":"t","value":"v","effect":"NoSchedule"}]}}`
	if got != mcm {
		t.Errorf("record = %s\nwant      %s", got, mcm)
	}
	for _, raw := range []string{
		mcm,
		// As MCM writes it, with the zero creation timestamp.
		`{"metadata":{"creationTimestamp":null,"labels":{"pool":"a"},"annotations":{"note":"x"}},"spec":{"taints":[{"key":"t","value":"v","effect":"NoSchedule"}]}}`,
		// As an earlier version of this controller wrote it.
		`{"labels":{"pool":"a"},"annotations":{"note":"x"},"taints":[{"key":"t","value":"v","effect":"NoSchedule"}]}`,
	} {
		if got := readTemplateRecord(raw); !got.equal(want) {
			t.Errorf("readTemplateRecord(%s) = %+v, want %+v", raw, got, want)
		}
	}
	if got := readTemplateRecord("not json"); !got.empty() {
		t.Errorf("unreadable record read as %+v, want empty", got)
	}
}

func TestPlanNodeSyncAfterMCM(t *testing.T) {
	m := withPhase(baseMachine(), v1alpha1.MachineRunning, "p1")
	m.Spec.NodeTemplateSpec.Labels = map[string]string{"pool": "a"}
	mcmRecord := `{"metadata":{"creationTimestamp":null,"labels":{"pool":"a","dropped":"1"}},"spec":{"taints":[{"key":"gone","effect":"NoSchedule"}]}}`
	node := func() *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        "n1",
				Labels:      map[string]string{"pool": "a", "dropped": "1", "user": "u", v1alpha1.MachineNameLabelKey: "m1"},
				Annotations: map[string]string{v1alpha1.LastAppliedNodeTemplateAnnotation: mcmRecord},
				Finalizers:  []string{v1alpha1.NodeFinalizer},
			},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "gone", Effect: corev1.TaintEffectNoSchedule}, {Key: "user", Effect: corev1.TaintEffectNoExecute}}},
		}
	}

	got := planNodeSync(node(), m, nil)
	if got == nil {
		t.Fatal("keys the template dropped were not removed")
	}
	if diff := cmp.Diff(map[string]string{"pool": "a", "user": "u", v1alpha1.MachineNameLabelKey: "m1"}, got.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.Taint{{Key: "user", Effect: corev1.TaintEffectNoExecute}}, got.Spec.Taints); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
	if rec := got.Annotations[v1alpha1.LastAppliedNodeTemplateAnnotation]; rec != `{"metadata":{"labels":{"pool":"a"}},"spec":{}}` {
		t.Errorf("record = %s", rec)
	}

	// A node MCM left in sync gets the binding to its machine, and
	// nothing else, whatever the record's byte form; once bound, it is
	// not written at all.
	m.Spec.NodeTemplateSpec.Labels = map[string]string{"pool": "a", "dropped": "1"}
	m.Spec.NodeTemplateSpec.Spec.Taints = []corev1.Taint{{Key: "gone", Effect: corev1.TaintEffectNoSchedule}}
	got = planNodeSync(node(), m, nil)
	want := node()
	want.Annotations[v1alpha1.MachineUIDAnnotation] = string(m.UID)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node in sync after MCM (-want +got):\n%s", diff)
	}
	if got := planNodeSync(want, m, nil); got != nil {
		t.Errorf("bound node in sync is rewritten: %+v", got.ObjectMeta)
	}
	// An empty template with MCM's empty record is in sync too.
	empty := withPhase(baseMachine(), v1alpha1.MachineRunning, "p1")
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
		Labels: map[string]string{v1alpha1.MachineNameLabelKey: "m1"},
		Annotations: map[string]string{v1alpha1.LastAppliedNodeTemplateAnnotation: `{"metadata":{"creationTimestamp":null},"spec":{}}`,
			v1alpha1.MachineUIDAnnotation: string(empty.UID)},
		Finalizers: []string{v1alpha1.NodeFinalizer}}}
	if got := planNodeSync(n, empty, nil); got != nil {
		t.Errorf("empty template in sync is rewritten: %+v", got.ObjectMeta)
	}
	// A fresh node of an empty template gets label and finalizer, no record.
	n = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	got = planNodeSync(n, empty, nil)
	if got == nil || got.Annotations[v1alpha1.LastAppliedNodeTemplateAnnotation] != "" ||
		!cmp.Equal(got.Finalizers, []string{v1alpha1.NodeFinalizer}) || got.Labels[v1alpha1.MachineNameLabelKey] != "m1" {
		t.Errorf("fresh node planned as %+v", got)
	}
}

func TestPlanNodeSyncFinalizer(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	for _, tc := range []struct {
		name                    string
		nodeDeleting, mDeleting bool
		want                    []string
	}{
		{name: "added", want: []string{"other", v1alpha1.NodeFinalizer}},
		{name: "node being deleted", nodeDeleting: true, want: []string{"other"}},
		{name: "machine being deleted", mDeleting: true, want: []string{"other"}},
	} {
		m := withPhase(baseMachine(), v1alpha1.MachineRunning, "p1")
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Finalizers: []string{"other"}}}
		if tc.nodeDeleting {
			n.DeletionTimestamp = &now
		}
		if tc.mDeleting {
			m.DeletionTimestamp = &now
		}
		got := planNodeSync(n, m, nil)
		if diff := cmp.Diff(tc.want, got.Finalizers); diff != "" {
			t.Errorf("%s: finalizers (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestPlanNodeSyncVirtualCapacity(t *testing.T) {
	q := resource.MustParse
	m := withPhase(baseMachine(), v1alpha1.MachineRunning, "p1")
	class := &v1alpha1.MachineClass{NodeTemplate: &v1alpha1.NodeTemplate{VirtualCapacity: corev1.ResourceList{"example.com/a": q("2"), "example.com/b": q("1")}}}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{v1alpha1.MachineNameLabelKey: "m1"}, Finalizers: []string{v1alpha1.NodeFinalizer}},
		Status:     corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: q("4")}},
	}
	first := planNodeSync(n, m, class)
	if first == nil {
		t.Fatal("virtual capacity not planned")
	}
	if diff := cmp.Diff(corev1.ResourceList{corev1.ResourceCPU: q("4"), "example.com/a": q("2"), "example.com/b": q("1")}, first.Status.Capacity, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("capacity (-want +got):\n%s", diff)
	}
	if rec := first.Annotations[v1alpha1.LastAppliedVirtualCapacityAnnotation]; rec != `{"example.com/a":"2","example.com/b":"1"}` {
		t.Errorf("record = %s", rec)
	}
	if again := planNodeSync(first, m, class); again != nil {
		t.Errorf("second sync not a no-op: %+v", again.Status.Capacity)
	}
	// b is dropped from the class: removed from the node, the record follows.
	class.NodeTemplate.VirtualCapacity = corev1.ResourceList{"example.com/a": q("2")}
	second := planNodeSync(first, m, class)
	if _, ok := second.Status.Capacity["example.com/b"]; ok || second.Annotations[v1alpha1.LastAppliedVirtualCapacityAnnotation] != `{"example.com/a":"2"}` {
		t.Errorf("dropped resource kept: %v %v", second.Status.Capacity, second.Annotations)
	}
	// The class loses its node template: everything applied goes.
	class.NodeTemplate = nil
	third := planNodeSync(second, m, class)
	if _, ok := third.Status.Capacity["example.com/a"]; ok || third.Annotations[v1alpha1.LastAppliedVirtualCapacityAnnotation] != "" {
		t.Errorf("applied resource kept: %v %v", third.Status.Capacity, third.Annotations)
	}
	if _, ok := third.Status.Capacity[corev1.ResourceCPU]; !ok {
		t.Error("the kubelet's capacity was removed")
	}
	// A class that is not found leaves everything alone.
	if got := planNodeSync(second, m, nil); got != nil {
		t.Errorf("unknown class changed the node: %+v", got.Status.Capacity)
	}
}

func TestPlanNodeEvent(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	withUID := func(m *v1alpha1.Machine, uid types.UID) *v1alpha1.Machine {
		m.UID = uid
		return m
	}
	running := withPhase(baseMachine(), v1alpha1.MachineRunning, "p1") // uid-m1
	pending := withUID(withPhase(baseMachine(), v1alpha1.MachinePending, "p1"), "uid-pending")
	deleting := running.DeepCopy()
	deleting.DeletionTimestamp = &now
	boundTo := func(n *corev1.Node, uid types.UID) *corev1.Node {
		n = n.DeepCopy()
		n.Annotations = map[string]string{v1alpha1.MachineUIDAnnotation: string(uid)}
		return n
	}
	unbound := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Finalizers: []string{v1alpha1.NodeFinalizer}}, Spec: corev1.NodeSpec{ProviderID: "p1"}}
	live := boundTo(unbound, running.UID)
	terminating := live.DeepCopy()
	terminating.DeletionTimestamp = &now
	terminatingUnbound := unbound.DeepCopy()
	terminatingUnbound.DeletionTimestamp = &now
	plain := terminatingUnbound.DeepCopy()
	plain.Finalizers = nil
	// Claims the node does not confirm: another VM's node, or a node
	// bound to another machine.
	forged := withUID(withPhase(baseMachine(), v1alpha1.MachineRunning, "p2"), "uid-forged")
	boundElsewhere := boundTo(terminating, "uid-other")
	names := func(ms []*v1alpha1.Machine) []string {
		var out []string
		for _, m := range ms {
			out = append(out, string(m.Status.CurrentStatus.Phase)+map[bool]string{true: "/deleting"}[m.DeletionTimestamp != nil])
		}
		return out
	}
	readyNode := live.DeepCopy()
	readyNode.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	notReadyNode := live.DeepCopy()
	notReadyNode.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	unknown := withPhase(baseMachine(), v1alpha1.MachineUnknown, "p1")
	updated := withPhase(baseMachine(), v1alpha1.MachineInPlaceUpdateSuccessful, "p1")
	updating := withPhase(baseMachine(), v1alpha1.MachineInPlaceUpdating, "p1")
	failed := withUID(withPhase(baseMachine(), v1alpha1.MachineFailed, "p1"), "uid-failed")
	type result struct {
		SyncFirst, Sync, Delete []string
		RemoveFinalizer         bool
	}
	for _, tc := range []struct {
		name      string
		node      *corev1.Node
		goneOwner types.UID
		machines  []*v1alpha1.Machine
		want      result
	}{
		{"live node syncs its machine", live, "", []*v1alpha1.Machine{running}, result{Sync: []string{"Running"}}},
		{"a Ready node syncs first the machines it turns Running", readyNode, "", []*v1alpha1.Machine{pending, running, unknown, deleting},
			result{SyncFirst: []string{"Pending", "Unknown"}, Sync: []string{"Running", "Running/deleting"}}},
		{"a Ready node syncs first a machine updated in place", readyNode, "", []*v1alpha1.Machine{updated, updating, failed},
			result{SyncFirst: []string{"InPlaceUpdateSuccessful"}, Sync: []string{"InPlaceUpdating", "Failed"}}},
		{"a node that is not Ready syncs its machines in turn", notReadyNode, "", []*v1alpha1.Machine{pending, unknown, updated},
			result{Sync: []string{"Pending", "Unknown", "InPlaceUpdateSuccessful"}}},
		{"node being deleted deletes the machine bound to it, not one that claims it too", terminating, "", []*v1alpha1.Machine{running, pending},
			result{Sync: []string{"Pending"}, Delete: []string{"Running"}}},
		{"node being deleted deletes the machine bound to it, whatever its phase", boundTo(terminating, pending.UID), "", []*v1alpha1.Machine{pending},
			result{Delete: []string{"Pending"}}},
		{"machine already being deleted is synced", terminating, "", []*v1alpha1.Machine{deleting}, result{Sync: []string{"Running/deleting"}}},
		{"gone node deletes the machine it was bound to only", nil, running.UID, []*v1alpha1.Machine{running, failed},
			result{Sync: []string{"Failed"}, Delete: []string{"Running"}}},
		// Another manager's node on a shared target: its machine is not
		// this controller's, and a machine of this one that claims the
		// node (it lost the binding) is not deleted with it.
		{"gone node bound to an unknown machine deletes none", nil, "uid-other", []*v1alpha1.Machine{running, failed},
			result{Sync: []string{"Running", "Failed"}}},
		{"gone node bound to none deletes none", nil, "", []*v1alpha1.Machine{running}, result{Sync: []string{"Running"}}},
		{"node nobody bound, being deleted, deletes none of its claimants and loses the finalizer", terminatingUnbound, "", []*v1alpha1.Machine{running},
			result{Sync: []string{"Running"}, RemoveFinalizer: true}},
		{"unclaimed node being deleted loses the finalizer", terminatingUnbound, "", nil, result{RemoveFinalizer: true}},
		{"unclaimed node being deleted without the finalizer", plain, "", nil, result{}},
		{"unclaimed live node is left alone", live, "", nil, result{}},
		{"a claim the node does not confirm is not deleted with it", terminating, "", []*v1alpha1.Machine{forged, running},
			result{Sync: []string{"Running"}, Delete: []string{"Running"}}},
		{"a node bound to a machine that does not name it keeps its finalizer", terminating, "", []*v1alpha1.Machine{forged}, result{Sync: []string{"Running"}}},
		{"a node bound to another machine deletes none of its claimants", boundElsewhere, "", []*v1alpha1.Machine{running},
			result{Sync: []string{"Running"}}},
		// Another manager's, on a shared target: its finalizer is its own.
		{"a node bound to an unknown machine keeps its finalizer", boundElsewhere, "", nil, result{}},
	} {
		p := planNodeEvent(tc.node, tc.goneOwner, tc.machines)
		got := result{SyncFirst: names(p.SyncFirst), Sync: names(p.Sync), Delete: names(p.Delete), RemoveFinalizer: p.RemoveFinalizer}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestTerminationCondition(t *testing.T) {
	now := time.Unix(1000, 0)
	node := &corev1.Node{}
	for _, tc := range []struct {
		phase      v1alpha1.MachinePhase
		wantReason string
	}{
		{v1alpha1.MachineFailed, v1alpha1.NodeUnhealthy},
		{v1alpha1.MachineRunning, v1alpha1.NodeScaleDown},
		{v1alpha1.MachineTerminating, v1alpha1.NodeScaleDown},
	} {
		got := terminationCondition(withPhase(baseMachine(), tc.phase, "p1"), node, now)
		if got == nil || got.Reason != tc.wantReason || got.Status != corev1.ConditionTrue || got.Type != v1alpha1.NodeTerminationCondition {
			t.Errorf("%s: condition %+v, want reason %s", tc.phase, got, tc.wantReason)
		}
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: v1alpha1.NodeTerminationCondition, Status: corev1.ConditionTrue, Reason: v1alpha1.NodeUnhealthy}}
	if got := terminationCondition(withPhase(baseMachine(), v1alpha1.MachineTerminating, "p1"), node, now); got != nil {
		t.Errorf("condition already set is set again: %+v", got)
	}
}
