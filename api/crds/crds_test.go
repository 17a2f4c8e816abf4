package crds

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestObjects checks what the generated manifests must declare for the
// controllers and for people: names, short names, subresources and columns.
func TestObjects(t *testing.T) {
	objs, err := Objects()
	if err != nil {
		t.Fatal(err)
	}
	type summary struct {
		Name       string
		Scope      string
		ShortNames []string
		Status     bool
		Scale      map[string]any
		Columns    []string
		HasRules   bool
	}
	var got []summary
	for _, obj := range objs {
		s := summary{Name: obj.GetName()}
		s.Scope, _, _ = unstructured.NestedString(obj.Object, "spec", "scope")
		s.ShortNames, _, _ = unstructured.NestedStringSlice(obj.Object, "spec", "names", "shortNames")
		versions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
		if len(versions) != 1 {
			t.Fatalf("%s: want exactly one version, got %d", obj.GetName(), len(versions))
		}
		v := versions[0].(map[string]any)
		_, s.Status, _ = unstructured.NestedMap(v, "subresources", "status")
		s.Scale, _, _ = unstructured.NestedMap(v, "subresources", "scale")
		cols, _, _ := unstructured.NestedSlice(v, "additionalPrinterColumns")
		for _, c := range cols {
			s.Columns = append(s.Columns, c.(map[string]any)["name"].(string))
		}
		s.HasRules = containsKey(v, "x-kubernetes-validations")
		got = append(got, s)
	}
	scale := map[string]any{
		"specReplicasPath":   ".spec.replicas",
		"statusReplicasPath": ".status.replicas",
		"labelSelectorPath":  ".status.labelSelector",
	}
	want := []summary{
		{Name: "machineclasses.machine.sapcloud.io", Scope: "Namespaced", ShortNames: []string{"mcc"},
			Columns: []string{"Provider", "Instance Type", "Zone", "Age"}, HasRules: true},
		{Name: "machinedeployments.machine.sapcloud.io", Scope: "Namespaced", ShortNames: []string{"mcd"}, Status: true, Scale: scale,
			Columns: []string{"Desired", "Current", "Ready", "Up-to-date", "Available", "Age"}, HasRules: true},
		{Name: "machines.machine.sapcloud.io", Scope: "Namespaced", ShortNames: []string{"mc"}, Status: true,
			Columns: []string{"Status", "Node", "ProviderID", "Preserved", "Last Operation", "Error", "Age"}, HasRules: true},
		{Name: "machinesets.machine.sapcloud.io", Scope: "Namespaced", ShortNames: []string{"mcs"}, Status: true, Scale: scale,
			Columns: []string{"Desired", "Current", "Ready", "Available", "Age"}, HasRules: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CRD summary mismatch (-want +got):\n%s", diff)
	}
}

func containsKey(v any, key string) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if k == key || containsKey(child, key) {
				return true
			}
		}
	case []any:
		for _, child := range v {
			if containsKey(child, key) {
				return true
			}
		}
	}
	return false
}
