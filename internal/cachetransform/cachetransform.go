// Package cachetransform holds the informer transform every informer of
// mcm uses, so that caches stay small the same way everywhere.
package cachetransform

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

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

// SetOn sets DropManagedFields on each informer that has not started yet
// (a started informer cannot take a transform, and one started by someone
// else keeps theirs).
func SetOn(informers ...cache.SharedIndexInformer) error {
	for _, i := range informers {
		if i.HasSynced() {
			continue
		}
		if err := i.SetTransform(DropManagedFields); err != nil {
			return fmt.Errorf("setting informer transform: %w", err)
		}
	}
	return nil
}
