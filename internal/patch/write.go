package patch

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SetFinalizer adds (want) or removes finalizer on obj through send (the
// Patch method of obj's typed client): the patch of Finalizer, guarded by
// the resourceVersion obj was read at. It returns obj as written, or obj
// itself when its finalizers were as wanted already, or when a removal
// finds obj gone (nothing is left to hold). Callers wrap its error with
// what they were doing.
func SetFinalizer[T metav1.Object](ctx context.Context, send Func[T], obj T, finalizer string, want bool, fieldManager string) (T, error) {
	data, err := Finalizer(obj.GetFinalizers(), finalizer, want, obj.GetResourceVersion())
	if err != nil || data == nil {
		return obj, err
	}
	updated, err := Send(ctx, send, obj.GetName(), data, fieldManager)
	switch {
	case err == nil:
		return updated, nil
	case !want && apierrors.IsNotFound(err):
		return obj, nil
	default:
		return obj, err
	}
}

// WriteStatus writes computed over stored, obj's status as read, through
// send (the Patch method of obj's typed client, on the status subresource)
// when the two differ, for a controller that owns the object's whole
// status. It returns obj as written, or obj itself when nothing differed.
// conditions returns a status's conditions list. Callers wrap its error
// with what they were doing.
//
// The write is guarded by obj's resourceVersion only when the conditions
// change. The rest of the status is the controller's alone, and its sync
// starts only once the cache shows its last write (expectations.Writes), so
// the status read is the stored one and a diff from it loses nothing;
// guarded, the write failed with a conflict whenever someone had just
// changed the object's spec (a deployment resizing its set, during a
// rollout at every step), and the retries' backoff held the work up. The
// conditions list is shared, though (the safety controller writes the
// Frozen condition), and a merge patch replaces a list whole: a change of
// the conditions computed from a cache that does not show the other
// writer's change yet would undo it. Guarded, such a write conflicts, and
// the next sync starts from the stored list; conditions change far less
// often than specs.
func WriteStatus[T metav1.Object, S any](ctx context.Context, send Func[T], obj T, stored, computed S,
	conditions func(S) any, fieldManager string) (T, error) {
	data, err := statusPatch(stored, computed, conditions, obj.GetResourceVersion())
	if err != nil || data == nil {
		return obj, err
	}
	updated, err := Send(ctx, send, obj.GetName(), data, fieldManager, "status")
	if err != nil {
		return obj, err
	}
	return updated, nil
}

// statusPatch is the patch WriteStatus sends: computed over stored, guarded
// by resourceVersion when the conditions differ; nil when nothing does.
func statusPatch[S any](stored, computed S, conditions func(S) any, resourceVersion string) ([]byte, error) {
	if apiequality.Semantic.DeepEqual(conditions(stored), conditions(computed)) {
		resourceVersion = ""
	}
	return Diff(statusFields[S], stored, computed, resourceVersion)
}

// statusFields: the writer owns the whole status.
func statusFields[S any](st S) Fields { return Fields{"status": st} }
