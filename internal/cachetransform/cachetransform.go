// Package cachetransform holds the informer transform every informer of
// mcm uses, Transform, so that caches stay small the same way everywhere.
package cachetransform

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/internal/virtualcapacity"
)

// Transform is the transform of mcm's informers: DropManagedFields, and
// for a Node, TrimNodeStatus.
func Transform(obj any) (any, error) {
	obj, err := DropManagedFields(obj)
	if n, ok := obj.(*corev1.Node); ok && err == nil {
		return TrimNodeStatus(n), nil
	}
	return obj, err
}

// TrimNodeStatus returns n with only the status fields mcm reads:
// conditions (health, copied to the machine), the capacity entries the
// machine controller set (the class's virtual capacity, which its record
// annotation names) and volumesAttached (the drain's wait for detached
// volumes); the phase is kept too, as it costs nothing. The kubelet's
// capacity, allocatable, images, node info, addresses, daemon endpoints,
// volumes in use and the rest go: on a real node the image list alone is
// often most of the object, a capacity map costs more than a node's
// conditions, and a controller's cache holds every node of the cluster. A
// node with nothing to drop is returned as it is, one with something to
// drop as a copy (n may be shared, as fake clientsets share theirs). Writes
// built from a trimmed node must not send its status whole: mcm's patch
// only the fields they change.
func TrimNodeStatus(n *corev1.Node) *corev1.Node {
	st := n.Status
	capacity := virtualCapacity(n)
	if len(capacity) == len(st.Capacity) && len(st.Images) == 0 && st.NodeInfo == (corev1.NodeSystemInfo{}) && len(st.Allocatable) == 0 &&
		len(st.Addresses) == 0 && st.DaemonEndpoints == (corev1.NodeDaemonEndpoints{}) && len(st.VolumesInUse) == 0 &&
		st.Config == nil && len(st.RuntimeHandlers) == 0 && st.Features == nil && len(st.DeclaredFeatures) == 0 {
		return n
	}
	trimmed := *n
	trimmed.Status = corev1.NodeStatus{
		Capacity: capacity, Phase: st.Phase, Conditions: st.Conditions, VolumesAttached: st.VolumesAttached,
	}
	return &trimmed
}

// virtualCapacity returns the entries of n's capacity that its virtual
// capacity record names, nil if none.
func virtualCapacity(n *corev1.Node) corev1.ResourceList {
	recorded, _ := virtualcapacity.Recorded(n)
	var kept corev1.ResourceList
	for name := range recorded {
		if q, ok := n.Status.Capacity[name]; ok {
			if kept == nil {
				kept = corev1.ResourceList{}
			}
			kept[name] = q
		}
	}
	return kept
}

// DropManagedFields is a cache.TransformFunc that removes managed fields:
// they are often the largest part of an object and nothing in mcm reads
// them. Objects without managed fields are returned untouched, which also
// keeps the transform from writing to objects that a fake clientset shares
// with its tracker.
func DropManagedFields(obj any) (any, error) {
	if acc, err := meta.Accessor(obj); err == nil && acc.GetManagedFields() != nil {
		acc.SetManagedFields(nil)
	}
	return obj, nil
}

// SetOn sets Transform on each informer that has not started yet.
// A started informer cannot take a transform: one started by someone else
// keeps theirs, and one started by another controller of this module
// (informers shared by controllers built one after the other, some
// while others run) has this one already.
func SetOn(informers ...cache.SharedIndexInformer) {
	for _, i := range informers {
		// The one error SetTransform returns is "already started".
		_ = i.SetTransform(Transform)
	}
}
