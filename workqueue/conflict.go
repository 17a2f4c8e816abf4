package workqueue

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// onlyConflicts reports whether every failure in err is a 409 Conflict:
// a write guarded by a resourceVersion that someone else's write (the
// cluster-autoscaler's, kubectl's, another controller's) changed in
// between. The next sync reads the object again and resolves it, so it is
// an expected outcome of optimistic concurrency, not an error an operator
// should be paged for. A joined error counts only if all its parts are
// conflicts: a conflict beside a real failure must not hide it.
func onlyConflicts(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case apierrors.APIStatus:
		// A status error is a leaf: what it wraps, if anything, is the same
		// failure.
		return apierrors.IsConflict(err)
	case interface{ Unwrap() []error }:
		parts := e.Unwrap()
		for _, p := range parts {
			if p != nil && !onlyConflicts(p) {
				return false
			}
		}
		return len(parts) > 0
	}
	if inner := errors.Unwrap(err); inner != nil {
		return onlyConflicts(inner)
	}
	return false
}
