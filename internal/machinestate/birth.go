// Birth: how a MachineSet's new machine is built, and the defaults every
// Machine gets, decided once for the MachineSet controller, which creates
// machines, and the machine controller, which stores the defaults on a
// machine that lacks them.

package machinestate

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/ownership"
)

// maxGeneratedNameLength is how much of a set's name its machines' names
// keep, as the API server's generateName keeps: a name is at most 63
// characters, 5 of them random.
const maxGeneratedNameLength = 63 - 5

// SetDefaults gives m the defaults of a Machine: the machine finalizer,
// which must be stored before a VM may be created for m (a machine that may
// have a VM goes through the machine controller's deletion flow), and,
// unless one is set, the default deletion priority
// (v1alpha1.MachinePriorityDefault), which MCM's machine controller writes
// with the VM's provider ID. It reports whether it changed m.
func SetDefaults(m *v1alpha1.Machine) bool {
	changed := false
	if !slices.Contains(m.Finalizers, v1alpha1.MachineFinalizer) {
		m.Finalizers = append(m.Finalizers, v1alpha1.MachineFinalizer)
		changed = true
	}
	if m.Annotations[v1alpha1.MachinePriorityAnnotation] == "" {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[v1alpha1.MachinePriorityAnnotation] = v1alpha1.MachinePriorityDefault
		changed = true
	}
	return changed
}

// NewMachine builds a new machine of set: named <set>-<random> as
// generateName would name it, but by the set, which can then tell the
// machine as its own even if the answer to the creation is lost; with the
// template's labels, annotations and spec; controlled by the set; and
// with SetDefaults applied, so that the machine controller has nothing to
// store before it creates the machine's VM (its creation start goes with
// the VM's provider ID). set is not modified.
func NewMachine(set *v1alpha1.MachineSet) *v1alpha1.Machine {
	t := set.Spec.Template.DeepCopy()
	prefix := set.Name + "-"
	if len(prefix) > maxGeneratedNameLength {
		prefix = prefix[:maxGeneratedNameLength]
	}
	m := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name:            prefix + utilrand.String(5),
			GenerateName:    set.Name + "-",
			Namespace:       set.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			OwnerReferences: []metav1.OwnerReference{ownership.ControllerRef(set, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))},
		},
		Spec: t.Spec,
	}
	SetDefaults(m)
	return m
}
