package machinestate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func birthSet(name string, annotations map[string]string) *v1alpha1.MachineSet {
	labels := map[string]string{"pool": "a"}
	return &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "set-uid"},
		Spec: v1alpha1.MachineSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "c"}},
			},
		},
	}
}

// TestNewMachine: a set's new machine is the template's, controlled by
// the set, named by it as generateName would, and carries the defaults
// (finalizer, priority unless the template sets one); the set is not
// changed.
func TestNewMachine(t *testing.T) {
	yes := true
	owner := metav1.OwnerReference{APIVersion: "machine.sapcloud.io/v1alpha1", Kind: "MachineSet", Name: "pool", UID: "set-uid",
		Controller: &yes, BlockOwnerDeletion: &yes}
	tests := []struct {
		name        string
		set         *v1alpha1.MachineSet
		wantPrefix  string
		annotations map[string]string
	}{
		{"default priority", birthSet("pool", nil), "pool-",
			map[string]string{v1alpha1.MachinePriorityAnnotation: v1alpha1.MachinePriorityDefault}},
		{"the template's priority", birthSet("pool", map[string]string{v1alpha1.MachinePriorityAnnotation: "1", "k": "v"}), "pool-",
			map[string]string{v1alpha1.MachinePriorityAnnotation: "1", "k": "v"}},
		{"long set name", birthSet(strings.Repeat("s", 70), nil), strings.Repeat("s", maxGeneratedNameLength),
			map[string]string{v1alpha1.MachinePriorityAnnotation: v1alpha1.MachinePriorityDefault}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.set.DeepCopy()
			m := NewMachine(tc.set)
			if diff := cmp.Diff(before, tc.set); diff != "" {
				t.Errorf("the set changed (-before +after):\n%s", diff)
			}
			if !strings.HasPrefix(m.Name, tc.wantPrefix) || len(m.Name) != len(tc.wantPrefix)+5 || len(m.Name) > 63 {
				t.Errorf("name %q, want %q and 5 random characters", m.Name, tc.wantPrefix)
			}
			want := &v1alpha1.Machine{
				ObjectMeta: metav1.ObjectMeta{
					GenerateName: tc.set.Name + "-", Namespace: "ns",
					Labels: map[string]string{"pool": "a"}, Annotations: tc.annotations,
					Finalizers:      []string{v1alpha1.MachineFinalizer},
					OwnerReferences: []metav1.OwnerReference{owner},
				},
				Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "c"}},
			}
			want.OwnerReferences[0].Name = tc.set.Name
			if diff := cmp.Diff(want, m, cmpopts.IgnoreFields(metav1.ObjectMeta{}, "Name")); diff != "" {
				t.Errorf("machine (-want +got):\n%s", diff)
			}
			if m.Annotations != nil && tc.set.Spec.Template.Annotations != nil {
				m.Annotations["x"] = "y"
				if _, shared := tc.set.Spec.Template.Annotations["x"]; shared {
					t.Error("the machine shares the template's annotations")
				}
			}
		})
	}
}

// TestSetDefaults: the defaults are added where missing, nothing else is
// touched, and a second call changes nothing.
func TestSetDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   v1alpha1.Machine
		want v1alpha1.Machine
	}{
		{"bare", v1alpha1.Machine{}, v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{
			Finalizers:  []string{v1alpha1.MachineFinalizer},
			Annotations: map[string]string{v1alpha1.MachinePriorityAnnotation: v1alpha1.MachinePriorityDefault}}}},
		{"others' finalizer and a priority kept", v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{
			Finalizers:  []string{"other"},
			Annotations: map[string]string{v1alpha1.MachinePriorityAnnotation: "5"}}},
			v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{
				Finalizers:  []string{"other", v1alpha1.MachineFinalizer},
				Annotations: map[string]string{v1alpha1.MachinePriorityAnnotation: "5"}}}},
		{"an empty priority is no priority", v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{
			Finalizers:  []string{v1alpha1.MachineFinalizer},
			Annotations: map[string]string{v1alpha1.MachinePriorityAnnotation: ""}}},
			v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{
				Finalizers:  []string{v1alpha1.MachineFinalizer},
				Annotations: map[string]string{v1alpha1.MachinePriorityAnnotation: v1alpha1.MachinePriorityDefault}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.in.DeepCopy()
			if !SetDefaults(m) {
				t.Error("SetDefaults reported no change")
			}
			if diff := cmp.Diff(&tc.want, m); diff != "" {
				t.Errorf("machine (-want +got):\n%s", diff)
			}
			if SetDefaults(m) {
				t.Error("a second SetDefaults reported a change")
			}
		})
	}
}
