package machineset

import (
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/patch"
)

// propagated are the parts of a machine's spec a set keeps in line with
// its template without replacing the machine: the node template, the
// machine configuration (timeouts, maxEvictRetries, nodeConditions) and
// the class kind. Anything else changes only with a new machine.
type propagated struct {
	NodeTemplate                   v1alpha1.NodeTemplateSpec `json:"nodeTemplate"`
	*v1alpha1.MachineConfiguration `json:",inline"`
	Class                          struct {
		Kind string `json:"kind,omitempty"`
	} `json:"class"`
}

func propagatedOf(spec *v1alpha1.MachineSpec) propagated {
	p := propagated{NodeTemplate: spec.NodeTemplateSpec, MachineConfiguration: spec.MachineConfiguration}
	p.Class.Kind = spec.Class.Kind
	return p
}

// propagationFields are the fields of a machine the propagation writes.
func propagationFields(spec *v1alpha1.MachineSpec) patch.Fields {
	return patch.Fields{"spec": propagatedOf(spec)}
}
