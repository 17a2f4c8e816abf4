package machineset

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// ownership sorts the machines of a namespace for one set.
type ownership struct {
	// Owned are the machines the set controls and selects, those being
	// deleted included.
	Owned []*v1alpha1.Machine
	// Adopt are orphans the set selects; they are not being deleted, and
	// the set is not either.
	Adopt []*v1alpha1.Machine
	// Release are machines the set controls but no longer selects.
	Release []*v1alpha1.Machine
}

// planOwnership decides which machines a set keeps, adopts and releases,
// like kube-controller-manager's ControllerRefManager. It is pure. A
// machine controlled by someone else is never touched.
func planOwnership(set *v1alpha1.MachineSet, selector labels.Selector, machines []*v1alpha1.Machine) ownership {
	var o ownership
	for _, m := range machines {
		matches := selector.Matches(labels.Set(m.Labels))
		switch ref := metav1.GetControllerOf(m); {
		case ref != nil && ref.UID == set.UID:
			if matches {
				o.Owned = append(o.Owned, m)
			} else if m.DeletionTimestamp == nil {
				o.Release = append(o.Release, m)
			}
		case ref != nil:
			// Someone else's.
		case matches && m.DeletionTimestamp == nil && set.DeletionTimestamp == nil:
			o.Adopt = append(o.Adopt, m)
		}
	}
	return o
}

// controllerRef is the owner reference a set puts on its machines.
func controllerRef(set *v1alpha1.MachineSet) metav1.OwnerReference {
	return *metav1.NewControllerRef(set, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))
}

// withOwner returns refs with the set's controller reference added.
func withOwner(refs []metav1.OwnerReference, set *v1alpha1.MachineSet) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(refs)+1)
	for _, r := range refs {
		if r.UID != set.UID {
			out = append(out, r)
		}
	}
	return append(out, controllerRef(set))
}

// withoutOwner returns refs without the set's reference.
func withoutOwner(refs []metav1.OwnerReference, set *v1alpha1.MachineSet) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, r := range refs {
		if r.UID != set.UID {
			out = append(out, r)
		}
	}
	return out
}
