// In-place parts of a machine spec: the node template, the machine
// configuration (timeouts, maxEvictRetries, nodeConditions) and the class
// kind. The MachineDeployment controller copies them into its sets without
// a rollout, the MachineSet controller into its machines, and the machine
// controller onto the nodes; every other change of a template needs new
// machines.

package machinestate

import (
	"reflect"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/patch"
)

// parts are the fields of a machine spec that change in place, with the
// JSON names of v1alpha1.MachineSpec.
type parts struct {
	NodeTemplate                   v1alpha1.NodeTemplateSpec `json:"nodeTemplate"`
	*v1alpha1.MachineConfiguration `json:",inline"`
	Class                          struct {
		Kind string `json:"kind,omitempty"`
	} `json:"class"`
}

func partsOf(spec *v1alpha1.MachineSpec) parts {
	p := parts{NodeTemplate: spec.NodeTemplateSpec, MachineConfiguration: spec.MachineConfiguration}
	p.Class.Kind = spec.Class.Kind
	return p
}

// SameInPlace reports whether a and b agree on the parts that change in
// place.
// It is cheap enough to run for every machine at every sync, so that a
// patch is built only for a spec that lags behind.
func SameInPlace(a, b *v1alpha1.MachineSpec) bool {
	return reflect.DeepEqual(partsOf(a), partsOf(b))
}

// InPlaceFields are spec's in-place parts as patch fields at the path of JSON
// field names leading to the spec, outermost first: "spec" for a machine;
// "spec", "template", "spec" for a set.
func InPlaceFields(spec *v1alpha1.MachineSpec, outer string, inner ...string) patch.Fields {
	var f any = partsOf(spec)
	for i := len(inner) - 1; i >= 0; i-- {
		f = patch.Fields{inner[i]: f}
	}
	return patch.Fields{outer: f}
}

// MachineInPlaceFields are a machine's in-place parts as patch fields:
// InPlaceFields at "spec", the owned fields of patch.Diff for a machine's
// spec.
func MachineInPlaceFields(spec *v1alpha1.MachineSpec) patch.Fields {
	return InPlaceFields(spec, "spec")
}
