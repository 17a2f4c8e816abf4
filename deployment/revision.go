package deployment

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// maxRevisionHistoryChars bounds the revision-history annotation of a set
// that has been rolled back to many times; the oldest entries are dropped
// first. Annotations share a size limit with everything else on the object.
const maxRevisionHistoryChars = 2000

// revisionOf returns the revision of a set or deployment from its
// deployment.kubernetes.io/revision annotation; 0 when it has none.
func revisionOf(obj metav1.Object) (int64, error) {
	v, ok := obj.GetAnnotations()[v1alpha1.RevisionAnnotation]
	if !ok {
		return 0, nil
	}
	rev, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("annotation %s of %s: %w", v1alpha1.RevisionAnnotation, obj.GetName(), err)
	}
	return rev, nil
}

// maxRevision returns the highest revision among sets. Sets whose revision
// cannot be read are skipped rather than failing the sync: someone edited
// the annotation, and the next new set still gets a revision above all the
// readable ones.
func maxRevision(sets []*v1alpha1.MachineSet) int64 {
	var highest int64
	for _, s := range sets {
		if rev, err := revisionOf(s); err == nil && rev > highest {
			highest = rev
		}
	}
	return highest
}

// skippedAnnotations are the deployment annotations that are not copied to
// its sets: bookkeeping of the deployment controller itself (each set has
// its own revision and replica annotations), kubectl's last applied
// configuration (the set was not applied), and annotations addressed to the
// deployment alone: the prefer-no-schedule marker, the safety controller's
// unfreeze request and the cluster-autoscaler's deletion list (MCM skips
// the same), plus the rollback request Kubernetes kept in an annotation,
// and the MachineSet controller's list of a set's foreign machines, which
// is each set's own.
var skippedAnnotations = map[string]bool{
	corev1.LastAppliedConfigAnnotation:      true,
	v1alpha1.RevisionAnnotation:             true,
	v1alpha1.RevisionHistoryAnnotation:      true,
	v1alpha1.DesiredReplicasAnnotation:      true,
	v1alpha1.MaxReplicasAnnotation:          true,
	v1alpha1.PreferNoScheduleTaintKey:       true,
	v1alpha1.UnfreezeAnnotation:             true,
	v1alpha1.TriggerDeletionByMCMAnnotation: true,
	appsv1.DeprecatedRollbackTo:             true,
	v1alpha1.ForeignMachinesAnnotation:      true,
}

// skipCopy reports whether a deployment annotation stays off its sets.
func skipCopy(key string) bool { return skippedAnnotations[key] }

// copiedAnnotations returns the deployment annotations its sets carry.
func copiedAnnotations(d *v1alpha1.MachineDeployment) map[string]string {
	copied := make(map[string]string, len(d.Annotations))
	for k, v := range d.Annotations {
		if !skipCopy(k) {
			copied[k] = v
		}
	}
	return copied
}

// policyAnnotations are the deployment annotations that every set of it
// carries exactly as the deployment does, old sets too, and loses when the
// deployment loses them: they decide how a set counts and ranks its
// machines, while the deployment plans with its own value (minReadyOf).
// Copied like the other annotations, to the new set only and never removed,
// an opt-out would not reach the sets, and old sets would go on ranking by a
// policy the rollout no longer follows.
var policyAnnotations = []string{v1alpha1.MinReadySecondsAnnotation}

// withSetPolicy returns a set's annotations with the deployment's
// policyAnnotations: set to the deployment's values, or removed where the
// deployment has none. annotations is not modified.
func withSetPolicy(d *v1alpha1.MachineDeployment, annotations map[string]string) map[string]string {
	out := maps.Clone(annotations)
	for _, k := range policyAnnotations {
		v, ok := d.Annotations[k]
		switch {
		case ok && out == nil:
			out = map[string]string{k: v}
		case ok:
			out[k] = v
		default:
			delete(out, k)
		}
	}
	return out
}

// newSetAnnotations returns the annotations of the deployment's new set,
// given its current ones (nil when it is about to be created) and newRevision,
// one above the highest revision of the old sets. current is not modified.
//
//   - The deployment's annotations are copied (copiedAnnotations); annotations
//     only the set has are kept.
//   - The revision becomes newRevision unless the set already has a higher
//     one (old sets may have been deleted since it got it). When a set that
//     had a revision gets a new one, the deployment rolled back to its
//     template, and the old revision is appended to revision-history.
//     A revision that cannot be read is replaced and not kept in history.
//   - A set about to be created gets desired-replicas and max-replicas, as
//     any set does when it is scaled (replicaAnnotations).
func newSetAnnotations(d *v1alpha1.MachineDeployment, current map[string]string, newRevision int64, creating bool) (map[string]string, error) {
	annotations := maps.Clone(current)
	if annotations == nil {
		annotations = make(map[string]string)
	}
	maps.Copy(annotations, copiedAnnotations(d))

	old, had := current[v1alpha1.RevisionAnnotation]
	oldRevision, err := strconv.ParseInt(old, 10, 64)
	readable := had && err == nil
	if !readable || oldRevision < newRevision {
		annotations[v1alpha1.RevisionAnnotation] = strconv.FormatInt(newRevision, 10)
		if readable {
			annotations[v1alpha1.RevisionHistoryAnnotation] = appendRevisionHistory(current[v1alpha1.RevisionHistoryAnnotation], old)
		}
	}

	if creating {
		replicaAnns, err := replicaAnnotations(d)
		if err != nil {
			return nil, err
		}
		maps.Copy(annotations, replicaAnns)
	}
	return annotations, nil
}

// appendRevisionHistory adds revision to a comma-separated revision history,
// dropping the oldest entries while the result is longer than
// maxRevisionHistoryChars.
func appendRevisionHistory(history, revision string) string {
	var entries []string
	if history != "" {
		entries = strings.Split(history, ",")
	}
	entries = append(entries, revision)
	joined := strings.Join(entries, ",")
	for len(joined) > maxRevisionHistoryChars && len(entries) > 1 {
		entries = entries[1:]
		joined = strings.Join(entries, ",")
	}
	return joined
}

// replicaAnnotations returns the annotations a set gets whenever the
// deployment sizes it: desired-replicas, the deployment's spec.replicas,
// which tells a later scaling event from a rollout (isScalingEvent), and
// max-replicas, spec.replicas + maxSurge, the maximum the set's share was
// computed for (proportionalSize).
func replicaAnnotations(d *v1alpha1.MachineDeployment) (map[string]string, error) {
	surge, _, err := rolloutBounds(d)
	if err != nil {
		return nil, err
	}
	replicas := max(d.Spec.Replicas, 0)
	return map[string]string{
		v1alpha1.DesiredReplicasAnnotation: strconv.FormatInt(int64(replicas), 10),
		v1alpha1.MaxReplicasAnnotation:     strconv.FormatInt(int64(replicas)+int64(surge), 10),
	}, nil
}

// desiredReplicasOf returns a set's desired-replicas annotation, and whether
// it has a usable one.
func desiredReplicasOf(s *v1alpha1.MachineSet) (int32, bool) {
	return int32Annotation(s, v1alpha1.DesiredReplicasAnnotation)
}

// maxReplicasOf returns a set's max-replicas annotation, and whether it has a
// usable one.
func maxReplicasOf(s *v1alpha1.MachineSet) (int32, bool) {
	return int32Annotation(s, v1alpha1.MaxReplicasAnnotation)
}

// int32Annotation reads a non-negative int32 annotation; a missing or
// malformed value is reported as absent so that callers fall back instead
// of failing on something a person typed.
func int32Annotation(s *v1alpha1.MachineSet, key string) (int32, bool) {
	v, ok := s.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}
