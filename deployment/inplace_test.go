package deployment

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// TestNodeLabelPatchNamesOnlyOwnedKeys: a node write names the keys it
// changes and nothing else; a taint change sends the full list, guarded.
func TestNodeLabelPatchNamesOnlyOwnedKeys(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "7",
			Labels:      map[string]string{"foreign": "x", v1alpha1.SelectedForUpdateLabel: "true"},
			Annotations: map[string]string{"foreign": "y"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoExecute}, rolloutTaint()}},
	}
	tests := []struct {
		name string
		ch   nodeLabelChange
		want string
	}{
		{"select", nodeLabelChange{Node: n, Labels: map[string]*string{v1alpha1.SelectedForUpdateLabel: new("true")}},
			`{"metadata":{"labels":{"node.machine.sapcloud.io/selected-for-update":"true"}}}`},
		{"cleanup without the critical taint", nodeLabelChange{Node: n, Labels: map[string]*string{v1alpha1.SelectedForUpdateLabel: nil}, Uncordon: true, Untaint: true},
			`{"metadata":{"labels":{"node.machine.sapcloud.io/selected-for-update":null},"resourceVersion":"7"},"spec":{"taints":[{"key":"other","effect":"NoExecute"}],"unschedulable":false}}`},
		{"cleanup with the critical taint", nodeLabelChange{Node: n, Untaint: true, Critical: true},
			`{"metadata":{"resourceVersion":"7"},"spec":{"taints":[{"key":"other","effect":"NoExecute"},{"key":"node.gardener.cloud/critical-components-not-ready","effect":"NoSchedule"}]}}`},
		{"nothing", nodeLabelChange{Node: n}, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := nodeLabelPatch(tt.ch)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTransferPatch: a move replaces the controller reference only, swaps
// the selector labels, adds update-result=successful and is guarded.
func TestTransferPatch(t *testing.T) {
	from := newSet("md-a", 3, 0)
	from.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "workers", v1alpha1.MachineTemplateHashLabelKey: "a", "old-only": "1"}}
	to := newSet("md-b", 0, 1)
	to.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "workers", v1alpha1.MachineTemplateHashLabelKey: "b"}}
	m := newMachine("m1")
	m.ResourceVersion, m.UID = "5", "uid-m1"
	m.Labels = map[string]string{"pool": "workers", v1alpha1.MachineTemplateHashLabelKey: "a", "old-only": "1", "node": "n1"}
	m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(from, v1alpha1.SchemeGroupVersion.WithKind("MachineSet")),
		{APIVersion: "v1", Kind: "ConfigMap", Name: "keep", UID: "cm"}}
	data, err := transferPatch(transfer{Machine: m, From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Metadata struct {
			UID             string                  `json:"uid"`
			ResourceVersion string                  `json:"resourceVersion"`
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
			Labels          map[string]*string      `json:"labels"`
		} `json:"metadata"`
		Spec any `json:"spec"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata.UID != "uid-m1" || got.Metadata.ResourceVersion != "5" || got.Spec != nil {
		t.Errorf("guard %q/%q, spec %v; want uid-m1/5 and no spec", got.Metadata.UID, got.Metadata.ResourceVersion, got.Spec)
	}
	var controllers []string
	for _, r := range got.Metadata.OwnerReferences {
		if r.Controller != nil && *r.Controller {
			controllers = append(controllers, r.Name)
		}
	}
	if diff := cmp.Diff([]string{"md-b"}, controllers); diff != "" || len(got.Metadata.OwnerReferences) != 2 {
		t.Errorf("controllers (-want +got):\n%s\nall: %v", diff, got.Metadata.OwnerReferences)
	}
	want := map[string]*string{"pool": new("workers"), v1alpha1.MachineTemplateHashLabelKey: new("b"), "old-only": nil,
		v1alpha1.UpdateResultLabel: new(v1alpha1.UpdateResultSuccessful)}
	if diff := cmp.Diff(want, got.Metadata.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}

// TestInPlaceFailClosed: a failed update of the current rollout stops the
// selection, and the status and event name the machine and the agent's
// reason; labelled successful by a person, the rollout resumes and ends.
func TestInPlaceFailClosed(t *testing.T) {
	w := newIPWorld(inPlaceDeployment(3, v1alpha1.OrchestrationTypeAuto, "0", "1"), t.Errorf)
	w.d.Spec.Template.Spec.Class.Name = "class-b"
	w.failing["n-m01"] = "kubelet is not healthy after in-place update"
	for range 10 {
		w.round()
	}
	p := plan(w.scope(), DefaultMaxReplicas)
	st := p.stall()
	want := "in-place update of machine m01 failed: kubelet is not healthy after in-place update; no further machine is selected"
	if st.reason != ReasonInPlaceUpdateFailed || len(st.message) < len(want) || st.message[:len(want)] != want {
		t.Fatalf("stall %+v, want %s %q...", st, ReasonInPlaceUpdateFailed, want)
	}
	if got := w.selectedNodes(); !cmp.Equal(got, []string{"n-m01"}) {
		t.Errorf("selected %v, want only the failed n-m01", got)
	}
	w.clearFailure(w.nodes["n-m01"])
	for range 40 {
		w.round()
		if ok, _ := w.converged(); ok {
			return
		}
	}
	_, why := w.converged()
	t.Fatalf("no convergence after the failure was cleared: %s\n%s", why, w)
}

// TestMovedAndCountedInAZeroedOldSet: a machine moved into a set that a
// template change then made old keeps its update-result label while the
// set counts it; once a step sizes that set to 0 (a scale-down left the new
// set holding every replica), the label goes, or the set could never
// delete the machine and the rollout would never end.
func TestMovedAndCountedInAZeroedOldSet(t *testing.T) {
	newSet := newSet("md-new", 1, 0)
	old := newSet.DeepCopy()
	old.Name, old.Spec.Replicas = "md-old", 0
	moved := newMachine("moved")
	moved.Labels = map[string]string{v1alpha1.UpdateResultLabel: v1alpha1.UpdateResultSuccessful}
	machines := []inPlaceMachine{{m: moved, set: old, old: true}, {m: newMachine("fresh"), set: newSet}}
	for _, tc := range []struct {
		name  string
		sizes map[string]int32
		want  []string
	}{
		{"the step sizes the old set to 0", map[string]int32{"md-old": 0, "md-new": 1}, []string{"moved"}},
		{"the step sizes the old set to count it", map[string]int32{"md-old": 1, "md-new": 1}, nil},
		{"no step size (a scaling event's sizes left it out)", map[string]int32{"md-new": 1}, nil},
	} {
		var got []string
		for _, m := range movedAndCounted(machines, newSet, 1, tc.sizes) {
			got = append(got, m.Name)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: unlabelled (-want +got):\n%s", tc.name, diff)
		}
	}
}
