package machinestate

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestSameInPlaceSeesOnlyInPlaceParts(t *testing.T) {
	base := v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "small"}}
	tests := []struct {
		name   string
		change func(*v1alpha1.MachineSpec)
		equal  bool
	}{
		{"class name needs a new machine", func(s *v1alpha1.MachineSpec) { s.Class.Name = "big" }, true},
		{"provider ID is not a template part", func(s *v1alpha1.MachineSpec) { s.ProviderID = "sim:///x" }, true},
		{"class kind", func(s *v1alpha1.MachineSpec) { s.Class.Kind = "" }, false},
		{"node labels", func(s *v1alpha1.MachineSpec) { s.NodeTemplateSpec.Labels = map[string]string{"a": "b"} }, false},
		{"drain timeout", func(s *v1alpha1.MachineSpec) {
			s.MachineConfiguration = &v1alpha1.MachineConfiguration{MachineDrainTimeout: &metav1.Duration{Duration: time.Minute}}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed := base.DeepCopy()
			tt.change(changed)
			if got := SameInPlace(&base, changed); got != tt.equal {
				t.Errorf("SameInPlace = %v, want %v", got, tt.equal)
			}
		})
	}
}

func TestInPlaceFieldsNestAtPath(t *testing.T) {
	spec := v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass"}}
	b, err := json.Marshal(InPlaceFields(&spec, "spec", "template", "spec"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"nodeTemplate": map[string]any{"metadata": map[string]any{}, "spec": map[string]any{}},
		"class":        map[string]any{"kind": "MachineClass"},
	}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}
