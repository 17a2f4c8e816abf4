package nodebinding

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestBoundAndConfirms(t *testing.T) {
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", UID: "uid-m"}, Spec: v1alpha1.MachineSpec{ProviderID: "p1"}}
	node := func(pid, owner string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{ProviderID: pid}}
		if owner != "" {
			n.Annotations = map[string]string{v1alpha1.MachineUIDAnnotation: owner}
		}
		return n
	}
	for _, tc := range []struct {
		name            string
		node            *corev1.Node
		bound, confirms bool
	}{
		{"bound", node("p1", "uid-m"), true, true},
		{"bound to another machine", node("p1", "uid-x"), false, false},
		{"bound, but runs on another VM", node("p2", "uid-m"), false, false},
		{"not bound, same VM", node("p1", ""), false, true},
		{"not bound, another VM", node("p2", ""), false, false},
		{"not bound, no provider ID", node("", ""), false, false},
		{"no node", nil, false, false},
	} {
		if got := Bound(tc.node, m); got != tc.bound {
			t.Errorf("%s: Bound = %v, want %v", tc.name, got, tc.bound)
		}
		if got := Confirms(tc.node, m); got != tc.confirms {
			t.Errorf("%s: Confirms = %v, want %v", tc.name, got, tc.confirms)
		}
	}
	noUID := m.DeepCopy()
	noUID.UID = ""
	if Bound(node("p1", ""), noUID) {
		t.Error("a machine without a UID is bound to an unbound node")
	}
}
