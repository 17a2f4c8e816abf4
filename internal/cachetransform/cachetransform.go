// Package cachetransform holds the informer transform every informer of
// mcm uses, so that caches stay small the same way everywhere.
package cachetransform

import "k8s.io/apimachinery/pkg/api/meta"

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
