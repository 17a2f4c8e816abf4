package machineset

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/ownership"
)

// controllerRef is the owner reference a set puts on its machines.
func controllerRef(set *v1alpha1.MachineSet) metav1.OwnerReference {
	return ownership.ControllerRef(set, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))
}
