package deployment

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// TestInPlaceSyncWritesTheProtocol runs the controller against fake API
// servers with a target cluster: a template change marks the old set and
// the nodes, selects one node (maxUnavailable 1), and once the node says
// successful and the machine shows UpdateSuccessful, the machine moves to
// the new set, which grows while the old one shrinks, and its node is
// cleaned up; no machine is created or deleted.
func TestInPlaceSyncWritesTheProtocol(t *testing.T) {
	ctx := context.Background()
	d := testDeployment(2)
	d.Spec.Strategy = inPlaceDeployment(2, v1alpha1.OrchestrationTypeAuto, "0", "1").Spec.Strategy
	w := startFakeWorldWith(t, Options{}, k8sfake.NewSimpleClientset(), d)
	w.eventually(w.settled(2))
	target := w.target
	for _, m := range w.machines() {
		node := "node-" + m.Name
		if _, err := target.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{},
			Annotations: map[string]string{v1alpha1.MachineUIDAnnotation: string(m.UID)}},
			Spec: corev1.NodeSpec{ProviderID: "p-" + m.Name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		m.Spec.ProviderID = "p-" + m.Name
		m.Labels[v1alpha1.NodeLabelKey] = node
		if _, err := w.client.MachineV1alpha1().Machines("ns").Update(ctx, &m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before := machineNames(w.machines())
	w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.Template.Spec.Class.Name = "big" })
	nodes := func() []corev1.Node {
		list, _ := target.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return list.Items
	}
	var selected corev1.Node
	w.eventually(func() (bool, string) {
		var n int
		for _, node := range nodes() {
			if _, ok := node.Labels[v1alpha1.SelectedForUpdateLabel]; ok {
				n, selected = n+1, node
			}
			if node.Labels[v1alpha1.CandidateForUpdateLabel] != "true" || node.Annotations[InPlaceTargetAnnotation] == "" {
				return false, fmt.Sprintf("node %s labels %v annotations %v", node.Name, node.Labels, node.Annotations)
			}
		}
		return n == 1, fmt.Sprintf("%d nodes selected", n)
	})
	// The machine controller and the agent, in one go.
	selected.Labels[v1alpha1.UpdateResultLabel] = v1alpha1.UpdateResultSuccessful
	selected.Spec.Unschedulable = true
	if _, err := target.CoreV1().Nodes().Update(ctx, &selected, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, m := range w.machines() {
		if m.Labels[v1alpha1.NodeLabelKey] == selected.Name {
			m.Status.Conditions = []corev1.NodeCondition{{Type: v1alpha1.NodeInPlaceUpdate, Status: corev1.ConditionTrue, Reason: v1alpha1.UpdateSuccessful}}
			if _, err := w.client.MachineV1alpha1().Machines("ns").UpdateStatus(ctx, &m, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.eventually(func() (bool, string) {
		var moved bool
		for _, m := range w.machines() {
			if ref := metav1.GetControllerOf(&m); m.Labels[v1alpha1.NodeLabelKey] == selected.Name && ref != nil {
				moved = ref.Name == "pool-"+templateHash(&w.deployment().Spec.Template, nil) && m.Labels[v1alpha1.UpdateResultLabel] == ""
			}
		}
		n, _ := target.CoreV1().Nodes().Get(ctx, selected.Name, metav1.GetOptions{})
		_, candidate := n.Labels[v1alpha1.CandidateForUpdateLabel]
		sizes := worldSets(w.sets())
		var owners []string
		for _, m := range w.machines() {
			owners = append(owners, fmt.Sprint(m.Name, metav1.GetControllerOf(&m).Name, m.Labels))
		}
		return moved && !candidate && !n.Spec.Unschedulable && len(sizes) == 2,
			fmt.Sprintf("moved %v, node %v cordoned %v, sets %v, machines %v, status %+v", moved, n.Labels, n.Spec.Unschedulable, sizes, owners, w.deployment().Status.Conditions)
	})
	for _, s := range w.sets() {
		_, disabled := s.Labels[v1alpha1.ScaleUpDisabledLabel]
		if isNew := s.Spec.Template.Spec.Class.Name == "big"; s.Spec.Replicas != 1 || disabled == isNew {
			t.Errorf("set %s: replicas %d scale-up-disabled %v", s.Name, s.Spec.Replicas, disabled)
		}
	}
	if after := machineNames(w.machines()); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("machines %v, want %v: none created or deleted", after, before)
	}
}

func machineNames(ms []v1alpha1.Machine) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}
