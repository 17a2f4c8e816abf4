package ownership

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/internal/patch"
)

// GetFunc is the Get method of a typed client, e.g.
// client.MachineV1alpha1().MachineSets(ns).Get.
type GetFunc[T any] func(ctx context.Context, name string, opts metav1.GetOptions) (T, error)

// CanAdopt reads owner again through get, uncached, and reports whether it
// is still the object the cache showed (same UID) and not being deleted:
// only then may it adopt. The cache may be older than a deletion of the
// owner, or than a delete and re-create of the same name, and an orphan
// adopted by a stale owner would be garbage-collected with it. This is the
// one API call a sync's observation makes; it reads, and writes nothing.
func CanAdopt[T metav1.Object](ctx context.Context, get GetFunc[T], owner metav1.Object) (bool, error) {
	fresh, err := get(ctx, owner.GetName(), metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	return fresh.GetUID() == owner.GetUID() && fresh.GetDeletionTimestamp() == nil, nil
}

// Adopt makes ref (ControllerRef of the owner) the controlling owner
// reference of obj, through send (the Patch method of obj's typed client):
// a merge patch of obj's owner references, guarded by the resourceVersion
// obj was read at, since a merge patch replaces the list whole. A conflict
// means obj changed meanwhile; the next sync looks at it again. It returns
// obj as written, or obj itself when it carried ref already. Call it only
// for an orphan Decide put in Plan.Adopt, after CanAdopt said yes. Callers
// wrap its error with what they were doing.
func Adopt[T metav1.Object](ctx context.Context, send patch.Func[T], obj T, ref metav1.OwnerReference, fieldManager string) (T, error) {
	return setOwners(ctx, send, obj, With(obj.GetOwnerReferences(), ref), fieldManager)
}

// Release removes owner's references from obj, guarded as Adopt is. It
// returns obj as written, or obj itself when there was nothing to remove
// or obj is gone already (nothing is left to release).
func Release[T metav1.Object](ctx context.Context, send patch.Func[T], obj T, owner metav1.Object, fieldManager string) (T, error) {
	updated, err := setOwners(ctx, send, obj, Without(obj.GetOwnerReferences(), owner), fieldManager)
	if apierrors.IsNotFound(err) {
		return obj, nil
	}
	return updated, err
}

// setOwners writes refs as obj's owner references.
func setOwners[T metav1.Object](ctx context.Context, send patch.Func[T], obj T, refs []metav1.OwnerReference, fieldManager string) (T, error) {
	data, err := patch.Diff(Fields, obj.GetOwnerReferences(), refs, obj.GetResourceVersion())
	if err != nil || data == nil {
		return obj, err
	}
	return patch.Send(ctx, send, obj.GetName(), data, fieldManager)
}
