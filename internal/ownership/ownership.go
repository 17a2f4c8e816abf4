// Package ownership decides which objects a controller owns, adopts and
// releases, as kube-controller-manager's ControllerRefManager does: the
// MachineSet controller claims machines, the MachineDeployment controller
// claims sets. The decision is pure (Decide); a sync observes with one
// uncached read of the owner (CanAdopt), plans, and applies each change
// with Adopt or Release: one patch of the object's owner references,
// guarded by its resourceVersion.
//
// # Usage
//
//	p := ownership.Decide(set, selector, machines)
//	ok, err := ownership.CanAdopt(ctx, client.MachineSets(ns).Get, set) // observe, only if p.Adopt is not empty
//	// plan: adopt p.Adopt if ok, release p.Release, work on p.Owned and the adopted
//	m, err = ownership.Adopt(ctx, client.Machines(ns).Patch, m, ownership.ControllerRef(set, gvk), fieldManager)
//	m, err = ownership.Release(ctx, client.Machines(ns).Patch, m, set, fieldManager)
package ownership

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/internal/patch"
)

// Plan sorts the objects of a namespace for one owner.
type Plan[T metav1.Object] struct {
	// Owned are the objects the owner controls and selects, those being
	// deleted included.
	Owned []T
	// Adopt are orphans the owner selects; they are not being deleted, and
	// the owner is not either.
	Adopt []T
	// Release are objects the owner controls but no longer selects, not
	// being deleted.
	Release []T
}

// Decide sorts objs for owner by selector. An object controlled by someone
// else is never touched; an object being deleted is never adopted nor
// released (it is on its way out); an owner being deleted adopts nothing.
func Decide[T metav1.Object](owner metav1.Object, selector labels.Selector, objs []T) Plan[T] {
	var p Plan[T]
	for _, o := range objs {
		matches := selector.Matches(labels.Set(o.GetLabels()))
		switch ref := metav1.GetControllerOfNoCopy(o); {
		case ref != nil && ref.UID == owner.GetUID():
			if matches {
				p.Owned = append(p.Owned, o)
			} else if o.GetDeletionTimestamp() == nil {
				p.Release = append(p.Release, o)
			}
		case ref != nil:
			// Someone else's.
		case matches && o.GetDeletionTimestamp() == nil && owner.GetDeletionTimestamp() == nil:
			p.Adopt = append(p.Adopt, o)
		}
	}
	return p
}

// ControllerRef is the reference an owner of kind gvk puts on what it
// controls: controller, and blocking the owner's foreground deletion.
func ControllerRef(owner metav1.Object, gvk schema.GroupVersionKind) metav1.OwnerReference {
	return *metav1.NewControllerRef(owner, gvk)
}

// ControllerKey returns the "namespace/name" key of obj's controller when
// it is of kind gvk, API version included; "" otherwise. Informer handlers
// use it to queue the owner of a changed object.
func ControllerKey(obj metav1.Object, gvk schema.GroupVersionKind) string {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != gvk.Kind || ref.APIVersion != gvk.GroupVersion().String() {
		return ""
	}
	return cache.NewObjectName(obj.GetNamespace(), ref.Name).String()
}

// With returns refs with ref added, replacing any reference to the same
// owner.
func With(refs []metav1.OwnerReference, ref metav1.OwnerReference) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(refs)+1)
	for _, r := range refs {
		if r.UID != ref.UID {
			out = append(out, r)
		}
	}
	return append(out, ref)
}

// Without returns refs without the references to owner.
func Without(refs []metav1.OwnerReference, owner metav1.Object) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, r := range refs {
		if r.UID != owner.GetUID() {
			out = append(out, r)
		}
	}
	return out
}

// Fields are an object's owner references as the fields patch.Diff writes
// when a controller adopts or releases it. A merge patch replaces the list
// whole, so the patch must be guarded by the resourceVersion it was read at.
func Fields(refs []metav1.OwnerReference) patch.Fields {
	return patch.Fields{"metadata": patch.Fields{"ownerReferences": refs}}
}
