package validation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// TestCRDRulesListTheControllerWrittenKeys ties the CEL rules to
// controllerWrittenKey: each CRD's rule names exactly the keys the function
// reports for its kind, among every label key the API package declares
// and a few it does not.
func TestCRDRulesListTheControllerWrittenKeys(t *testing.T) {
	keys := []string{
		v1alpha1.NodeLabelKey, v1alpha1.UpdateResultLabel, v1alpha1.MachineTemplateHashLabelKey, v1alpha1.ScaleUpDisabledLabel, v1alpha1.FreezeLabelKey,
		v1alpha1.MachineDeploymentNameLabelKey, v1alpha1.MachineNameLabelKey, v1alpha1.ForceDeletionLabelKey,
		v1alpha1.ForceDrainLabelKey, v1alpha1.CandidateForUpdateLabel, v1alpha1.SelectedForUpdateLabel, "app",
	}
	for _, tc := range []struct {
		file  string
		owner SelectorOwner
	}{
		{"machine.sapcloud.io_machinesets.yaml", OwnerMachineSet},
		{"machine.sapcloud.io_machinedeployments.yaml", OwnerMachineDeployment},
	} {
		rule := writtenKeysRule(t, tc.file)
		for _, key := range keys {
			inRule := strings.Contains(rule, "'"+key+"'")
			if want := controllerWrittenKey(tc.owner, key); inRule != want {
				t.Errorf("%s: the rule names %q: %v; controllerWrittenKey says %v", tc.file, key, inRule, want)
			}
		}
	}
}

// writtenKeysRule returns the CEL rule of the CRD file whose message is
// about the controllers' label keys.
func writtenKeysRule(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "crds", file))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties struct {
							Spec struct {
								Validations []struct{ Rule, Message string } `json:"x-kubernetes-validations"`
							} `json:"spec"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		for _, r := range v.Schema.OpenAPIV3Schema.Properties.Spec.Validations {
			if strings.Contains(r.Message, "must not use the label keys") {
				return r.Rule
			}
		}
	}
	t.Fatalf("%s has no rule about the controllers' label keys", file)
	return ""
}
