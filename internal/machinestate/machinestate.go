// Lifecycle: whether a machine is on its way out, whether and since when
// it is available, and since when the cluster-autoscaler wants it gone.

package machinestate

import (
	"fmt"
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// BeingDeleted tells whether a machine is on its way out: it has a
// deletionTimestamp, or its phase says Terminating. MCM counts machines in
// phase Terminating as gone (#1086); agreeing with it keeps the counts the
// same when objects move between MCM and these controllers.
func BeingDeleted(m *v1alpha1.Machine) bool {
	return m.DeletionTimestamp != nil || m.Status.CurrentStatus.Phase == v1alpha1.MachineTerminating
}

// ReadySince returns when a machine became usable (phase Running, or
// Available when there is no target cluster) and whether it is usable at
// all; a machine being deleted is not.
func ReadySince(m *v1alpha1.Machine) (time.Time, bool) {
	switch m.Status.CurrentStatus.Phase {
	case v1alpha1.MachineRunning, v1alpha1.MachineAvailable:
		return m.Status.CurrentStatus.LastUpdateTime.Time, !BeingDeleted(m)
	}
	return time.Time{}, false
}

// MinReady returns how long a machine of a MachineSet or MachineDeployment
// with the given annotations and spec.minReadySeconds must have been usable
// before it counts as available: 0 (at once, as in MCM) unless
// v1alpha1.MinReadySecondsAnnotation is v1alpha1.MinReadySecondsApply, then
// minReadySeconds (negative counts as 0). An unknown value of the
// annotation also gives 0, together with an error naming the value for the
// caller to report on the object: a typo must neither stall rollouts nor go
// unnoticed.
func MinReady(annotations map[string]string, minReadySeconds int32) (time.Duration, error) {
	switch v := annotations[v1alpha1.MinReadySecondsAnnotation]; v {
	case "", v1alpha1.MinReadySecondsIgnore:
		return 0, nil
	case v1alpha1.MinReadySecondsApply:
		return time.Duration(max(minReadySeconds, 0)) * time.Second, nil
	default:
		return 0, fmt.Errorf("annotation %s: unknown value %q (want %s or %s); minReadySeconds is not applied: machines count as available once Running, as in MCM",
			v1alpha1.MinReadySecondsAnnotation, v, v1alpha1.MinReadySecondsApply, v1alpha1.MinReadySecondsIgnore)
	}
}

// Available tells whether a machine counts as available at now: usable for
// at least minReady (from MinReady; zero or less means at once).
func Available(m *v1alpha1.Machine, minReady time.Duration, now time.Time) bool {
	since, ok := ReadySince(m)
	// Without a minReady a usable machine is available, even if its time
	// is ahead of now (another controller's clock).
	return ok && (minReady <= 0 || !now.Before(since.Add(minReady)))
}

// MarkedForDeletionAt returns the machine's marked-for-deletion-time, the
// instant the cluster-autoscaler marked it, and whether it has one. An
// unparsable value counts as no mark: the cluster-autoscaler writes RFC
// 3339, so anything else did not come from it.
func MarkedForDeletionAt(m *v1alpha1.Machine) (time.Time, bool) {
	s, ok := m.Annotations[v1alpha1.MarkedForDeletionTimeAnnotation]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// PickAnnotations returns the entries of annotations under keys, nil when
// there are none: the part of a machine's annotations a controller reads,
// for comparing two versions of a machine by what a sync decides on.
func PickAnnotations(annotations map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := annotations[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}
