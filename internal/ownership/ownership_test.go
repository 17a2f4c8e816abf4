package ownership

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestDecide(t *testing.T) {
	set := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "set-uid"}}
	selector := labels.SelectorFromSet(labels.Set{"pool": "a"})
	controllerRef := func(s *v1alpha1.MachineSet) metav1.OwnerReference {
		return ControllerRef(s, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))
	}
	other := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "other", UID: "other-uid"}}
	gone := metav1.NewTime(time.Unix(0, 0))
	m := func(name string, lbls map[string]string, owner *v1alpha1.MachineSet, deleted bool) *v1alpha1.Machine {
		mm := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: lbls}}
		if owner != nil {
			mm.OwnerReferences = []metav1.OwnerReference{controllerRef(owner)}
		}
		if deleted {
			mm.DeletionTimestamp = &gone
		}
		return mm
	}
	match, nomatch := map[string]string{"pool": "a"}, map[string]string{"pool": "b"}
	machines := []*v1alpha1.Machine{
		m("owned", match, set, false),
		m("owned-deleting", match, set, true),
		m("orphan", match, nil, false),
		m("orphan-deleting", match, nil, true),
		m("orphan-elsewhere", nomatch, nil, false),
		m("released", nomatch, set, false),
		m("released-deleting", nomatch, set, true),
		m("someone-elses", match, other, false),
	}
	names := func(ms []*v1alpha1.Machine) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Name)
		}
		return out
	}
	type result struct{ Owned, Adopt, Release []string }
	tests := []struct {
		name     string
		deleting bool
		want     result
	}{
		{name: "live set", want: result{Owned: []string{"owned", "owned-deleting"}, Adopt: []string{"orphan"}, Release: []string{"released"}}},
		{name: "a set being deleted adopts nothing", deleting: true, want: result{Owned: []string{"owned", "owned-deleting"}, Release: []string{"released"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := set.DeepCopy()
			if tt.deleting {
				s.DeletionTimestamp = &gone
			}
			o := Decide(s, selector, machines)
			got := result{names(o.Owned), names(o.Adopt), names(o.Release)}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ownership (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWithAndWithout(t *testing.T) {
	set := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "pool", UID: "set-uid"}}
	other := metav1.OwnerReference{Name: "other", UID: "other-uid"}
	ref := ControllerRef(set, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))
	stale := ref
	stale.Controller = nil
	got := With([]metav1.OwnerReference{other, stale}, ref)
	if diff := cmp.Diff([]metav1.OwnerReference{other, ref}, got); diff != "" {
		t.Errorf("With (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]metav1.OwnerReference{other}, Without(got, set)); diff != "" {
		t.Errorf("Without (-want +got):\n%s", diff)
	}
}

func TestControllerKey(t *testing.T) {
	set := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "pool", UID: "set-uid"}}
	gvk := v1alpha1.SchemeGroupVersion.WithKind("MachineSet")
	owned := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{ControllerRef(set, gvk)}}}
	if got := ControllerKey(owned, gvk); got != "ns/pool" {
		t.Errorf("ControllerKey = %q, want ns/pool", got)
	}
	if got := ControllerKey(owned, v1alpha1.SchemeGroupVersion.WithKind("MachineDeployment")); got != "" {
		t.Errorf("ControllerKey of another kind = %q, want none", got)
	}
	if got := ControllerKey(&v1alpha1.Machine{}, gvk); got != "" {
		t.Errorf("ControllerKey of an orphan = %q, want none", got)
	}
}
