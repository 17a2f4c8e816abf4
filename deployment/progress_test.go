package deployment

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/apitime"
)

// progressing is a Progressing condition last updated and changed minutes
// after epoch.
func progressing(status v1alpha1.ConditionStatus, reason string, updated, changed int) v1alpha1.MachineDeploymentCondition {
	return v1alpha1.MachineDeploymentCondition{
		Type: v1alpha1.MachineDeploymentProgressing, Status: status, Reason: reason, Message: "stored",
		LastUpdateTime:     metav1.NewTime(epoch.Add(time.Duration(updated) * time.Minute)),
		LastTransitionTime: metav1.NewTime(epoch.Add(time.Duration(changed) * time.Minute)),
	}
}

// storedStatus gives the deployment a stored status with the given counts
// (updated, replicas, available) and conditions, observed at generation 1,
// and a ten-minute progress deadline.
func storedStatus(updated, replicas, available int32, conds ...v1alpha1.MachineDeploymentCondition) mdOpt {
	return func(d *v1alpha1.MachineDeployment) {
		d.Spec.ProgressDeadlineSeconds = new(int32(600))
		d.Status = v1alpha1.MachineDeploymentStatus{ObservedGeneration: 1, UpdatedReplicas: updated, Replicas: replicas,
			AvailableReplicas: available, Conditions: conds}
	}
}

func noDeadline(d *v1alpha1.MachineDeployment) { d.Spec.ProgressDeadlineSeconds = nil }

// counts is a fresh status with the given counts, observed at generation 1,
// with the stored conditions of d.
func counts(d *v1alpha1.MachineDeployment, updated, replicas, available int32) v1alpha1.MachineDeploymentStatus {
	st := *d.Status.DeepCopy()
	st.UpdatedReplicas, st.Replicas, st.AvailableReplicas, st.ObservedGeneration = updated, replicas, available, 1
	return st
}

func TestWithProgress(t *testing.T) {
	at := func(minutes int) time.Time { return epoch.Add(time.Duration(minutes) * time.Minute) }
	stamp := func(minutes int) metav1.Time { return apitime.Of(at(minutes)) }
	tests := []struct {
		name     string
		d        *v1alpha1.MachineDeployment
		counts   [3]int32 // updated, replicas, available
		now      int      // minutes after epoch
		newSet   string
		wantCond *v1alpha1.MachineDeploymentCondition // nil: no Progressing condition
	}{
		{
			name:   "complete",
			d:      newDeployment(3, storedStatus(2, 4, 3, progressing(v1alpha1.ConditionTrue, v1alpha1.MachineSetUpdatedReason, 5, 1))),
			counts: [3]int32{3, 3, 3}, now: 8, newSet: "n",
			wantCond: &v1alpha1.MachineDeploymentCondition{Type: v1alpha1.MachineDeploymentProgressing, Status: v1alpha1.ConditionTrue,
				Reason: v1alpha1.NewMachineSetAvailableReason, Message: `MachineSet "n" has successfully progressed.`,
				LastUpdateTime: stamp(8), LastTransitionTime: metav1.NewTime(at(1))},
		},
		{
			name:   "complete earlier: not estimated again",
			d:      newDeployment(3, storedStatus(3, 3, 3, progressing(v1alpha1.ConditionTrue, v1alpha1.NewMachineSetAvailableReason, 5, 1))),
			counts: [3]int32{3, 3, 1}, now: 80, newSet: "n",
			wantCond: new(progressing(v1alpha1.ConditionTrue, v1alpha1.NewMachineSetAvailableReason, 5, 1)),
		},
		{
			name:   "progress moves the update time, keeps the transition time",
			d:      newDeployment(3, storedStatus(1, 4, 3, progressing(v1alpha1.ConditionTrue, v1alpha1.MachineSetUpdatedReason, 5, 1))),
			counts: [3]int32{2, 4, 3}, now: 9, newSet: "n",
			wantCond: &v1alpha1.MachineDeploymentCondition{Type: v1alpha1.MachineDeploymentProgressing, Status: v1alpha1.ConditionTrue,
				Reason: v1alpha1.MachineSetUpdatedReason, Message: `MachineSet "n" is progressing.`,
				LastUpdateTime: stamp(9), LastTransitionTime: metav1.NewTime(at(1))},
		},
		{
			name:   "progress after a timeout",
			d:      newDeployment(3, storedStatus(1, 4, 3, progressing(v1alpha1.ConditionFalse, v1alpha1.ProgressDeadlineExceededReason, 20, 20))),
			counts: [3]int32{1, 4, 4}, now: 30,
			wantCond: &v1alpha1.MachineDeploymentCondition{Type: v1alpha1.MachineDeploymentProgressing, Status: v1alpha1.ConditionTrue,
				Reason: v1alpha1.MachineSetUpdatedReason, Message: `MachineDeployment "md" is progressing.`,
				LastUpdateTime: stamp(30), LastTransitionTime: stamp(30)},
		},
		{
			name:   "no progress within the deadline",
			d:      newDeployment(3, storedStatus(1, 4, 3, progressing(v1alpha1.ConditionTrue, v1alpha1.MachineSetUpdatedReason, 5, 1))),
			counts: [3]int32{1, 4, 3}, now: 15, newSet: "n",
			wantCond: new(progressing(v1alpha1.ConditionTrue, v1alpha1.MachineSetUpdatedReason, 5, 1)),
		},
		{
			name:   "no progress past the deadline",
			d:      newDeployment(3, storedStatus(1, 4, 3, progressing(v1alpha1.ConditionTrue, v1alpha1.MachineSetUpdatedReason, 5, 1))),
			counts: [3]int32{1, 4, 3}, now: 16, newSet: "n",
			wantCond: &v1alpha1.MachineDeploymentCondition{Type: v1alpha1.MachineDeploymentProgressing, Status: v1alpha1.ConditionFalse,
				Reason: v1alpha1.ProgressDeadlineExceededReason, Message: `MachineSet "n" has timed out progressing.`,
				LastUpdateTime: stamp(16), LastTransitionTime: stamp(16)},
		},
		{
			name:   "no deadline: never times out",
			d:      newDeployment(3, storedStatus(1, 4, 3, progressing(v1alpha1.ConditionTrue, v1alpha1.MachineSetUpdatedReason, 5, 1)), noDeadline),
			counts: [3]int32{1, 4, 3}, now: 6000, newSet: "n",
			wantCond: new(progressing(v1alpha1.ConditionTrue, v1alpha1.MachineSetUpdatedReason, 5, 1)),
		},
		{
			name:   "no deadline: progress is still reported",
			d:      newDeployment(3, storedStatus(1, 4, 3), noDeadline),
			counts: [3]int32{1, 3, 3}, now: 7, newSet: "n",
			wantCond: &v1alpha1.MachineDeploymentCondition{Type: v1alpha1.MachineDeploymentProgressing, Status: v1alpha1.ConditionTrue,
				Reason: v1alpha1.MachineSetUpdatedReason, Message: `MachineSet "n" is progressing.`,
				LastUpdateTime: stamp(7), LastTransitionTime: stamp(7)},
		},
		{
			name:   "no condition and no progress: nothing to judge",
			d:      newDeployment(3, storedStatus(1, 4, 3)),
			counts: [3]int32{1, 4, 3}, now: 600, newSet: "n",
		},
		{
			name: "not complete while the status is for an older generation",
			d: newDeployment(3, storedStatus(3, 3, 3, progressing(v1alpha1.ConditionTrue, v1alpha1.MachineSetUpdatedReason, 5, 1)),
				func(d *v1alpha1.MachineDeployment) { d.Generation = 2 }),
			counts: [3]int32{3, 3, 3}, now: 8, newSet: "n",
			wantCond: new(progressing(v1alpha1.ConditionTrue, v1alpha1.MachineSetUpdatedReason, 5, 1)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.d.DeepCopy()
			st := counts(tt.d, tt.counts[0], tt.counts[1], tt.counts[2])
			got := withProgress(tt.d, st, tt.newSet, at(tt.now))
			var gotCond *v1alpha1.MachineDeploymentCondition
			if c, ok := conditionOf(got.Conditions, v1alpha1.MachineDeploymentProgressing); ok {
				gotCond = &c
			}
			if diff := cmp.Diff(tt.wantCond, gotCond); diff != "" {
				t.Errorf("Progressing condition (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.d); diff != "" {
				t.Errorf("deployment modified (-before +after):\n%s", diff)
			}
			if got.Replicas != st.Replicas || got.UpdatedReplicas != st.UpdatedReplicas {
				t.Errorf("counts changed: %+v", got)
			}
		})
	}
}

func TestDeploymentProgressing(t *testing.T) {
	d := newDeployment(3, storedStatus(1, 4, 2, progressing(v1alpha1.ConditionTrue, "", 0, 0)))
	d.Status.ReadyReplicas = 2
	tests := []struct {
		name string
		st   v1alpha1.MachineDeploymentStatus
		want bool
	}{
		{"same", v1alpha1.MachineDeploymentStatus{UpdatedReplicas: 1, Replicas: 4, AvailableReplicas: 2, ReadyReplicas: 2}, false},
		{"more updated", v1alpha1.MachineDeploymentStatus{UpdatedReplicas: 2, Replicas: 5, AvailableReplicas: 2, ReadyReplicas: 2}, true},
		{"fewer old", v1alpha1.MachineDeploymentStatus{UpdatedReplicas: 1, Replicas: 3, AvailableReplicas: 2, ReadyReplicas: 2}, true},
		{"more ready", v1alpha1.MachineDeploymentStatus{UpdatedReplicas: 1, Replicas: 4, AvailableReplicas: 2, ReadyReplicas: 3}, true},
		{"more available", v1alpha1.MachineDeploymentStatus{UpdatedReplicas: 1, Replicas: 4, AvailableReplicas: 3, ReadyReplicas: 2}, true},
		{"fewer available", v1alpha1.MachineDeploymentStatus{UpdatedReplicas: 1, Replicas: 4, AvailableReplicas: 1, ReadyReplicas: 2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := deploymentProgressing(d, tt.st); got != tt.want {
				t.Errorf("deploymentProgressing = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDeploymentTimedOut(t *testing.T) {
	at := func(minutes int) time.Time { return epoch.Add(time.Duration(minutes) * time.Minute) }
	tests := []struct {
		name string
		d    *v1alpha1.MachineDeployment
		now  time.Time
		want bool
	}{
		{"no deadline", newDeployment(1, storedStatus(0, 0, 0, progressing(v1alpha1.ConditionTrue, v1alpha1.MachineSetUpdatedReason, 0, 0)), noDeadline), at(100), false},
		{"no condition", newDeployment(1, storedStatus(0, 0, 0)), at(100), false},
		{"within", newDeployment(1, storedStatus(0, 0, 0, progressing(v1alpha1.ConditionTrue, v1alpha1.MachineSetUpdatedReason, 0, 0))), at(10), false},
		{"past", newDeployment(1, storedStatus(0, 0, 0, progressing(v1alpha1.ConditionTrue, v1alpha1.MachineSetUpdatedReason, 0, 0))), at(10).Add(time.Second), true},
		{"complete never", newDeployment(1, storedStatus(0, 0, 0, progressing(v1alpha1.ConditionTrue, v1alpha1.NewMachineSetAvailableReason, 0, 0))), at(100), false},
		{"timed out stays", newDeployment(1, storedStatus(0, 0, 0, progressing(v1alpha1.ConditionFalse, v1alpha1.ProgressDeadlineExceededReason, 99, 99))), at(99), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := deploymentTimedOut(tt.d, tt.d.Status, tt.now); got != tt.want {
				t.Errorf("deploymentTimedOut = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestProgressCheckAfter(t *testing.T) {
	now := epoch.Add(3 * time.Minute)
	updating := progressing(v1alpha1.ConditionTrue, v1alpha1.MachineSetUpdatedReason, 0, 0)
	tests := []struct {
		name   string
		d      *v1alpha1.MachineDeployment
		st     v1alpha1.MachineDeploymentStatus
		want   time.Duration
		wantOK bool
	}{
		{"seven minutes left", newDeployment(3, storedStatus(1, 3, 3, updating)), v1alpha1.MachineDeploymentStatus{}, 7*time.Minute + time.Second, true},
		{"deadline passed: now", newDeployment(3, storedStatus(1, 3, 3, progressing(v1alpha1.ConditionTrue, v1alpha1.MachineSetUpdatedReason, -20, -20))),
			v1alpha1.MachineDeploymentStatus{}, time.Second, true},
		{"no deadline", newDeployment(3, storedStatus(1, 3, 3, updating), noDeadline), v1alpha1.MachineDeploymentStatus{}, 0, false},
		{"no condition", newDeployment(3, storedStatus(1, 3, 3)), v1alpha1.MachineDeploymentStatus{}, 0, false},
		{"timed out", newDeployment(3, storedStatus(1, 3, 3, progressing(v1alpha1.ConditionFalse, v1alpha1.ProgressDeadlineExceededReason, 0, 0))),
			v1alpha1.MachineDeploymentStatus{}, 0, false},
		{"complete", newDeployment(3, storedStatus(1, 3, 3, updating)),
			v1alpha1.MachineDeploymentStatus{UpdatedReplicas: 3, Replicas: 3, AvailableReplicas: 3, ObservedGeneration: 1}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := progressCheckAfter(tt.d, tt.st, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("progressCheckAfter = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestPausedCondition(t *testing.T) {
	now := epoch.Add(time.Hour)
	paused := func(d *v1alpha1.MachineDeployment) { d.Spec.Paused = true }
	tests := []struct {
		name     string
		d        *v1alpha1.MachineDeployment
		wantCond *v1alpha1.MachineDeploymentCondition
		wantOK   bool
	}{
		{
			name: "paused",
			d:    newDeployment(1, storedStatus(0, 0, 0, progressing(v1alpha1.ConditionTrue, v1alpha1.MachineSetUpdatedReason, 0, 0)), paused),
			wantCond: &v1alpha1.MachineDeploymentCondition{Type: v1alpha1.MachineDeploymentProgressing, Status: v1alpha1.ConditionUnknown,
				Reason: v1alpha1.DeploymentPausedReason, Message: "MachineDeployment is paused.", LastUpdateTime: apitime.Of(now), LastTransitionTime: apitime.Of(now)},
			wantOK: true,
		},
		{
			name:     "still paused",
			d:        newDeployment(1, storedStatus(0, 0, 0, progressing(v1alpha1.ConditionUnknown, v1alpha1.DeploymentPausedReason, 0, 0)), paused),
			wantCond: new(progressing(v1alpha1.ConditionUnknown, v1alpha1.DeploymentPausedReason, 0, 0)),
		},
		{
			name: "resumed: the update time restarts the deadline",
			d:    newDeployment(1, storedStatus(0, 0, 0, progressing(v1alpha1.ConditionUnknown, v1alpha1.DeploymentPausedReason, 0, 0))),
			wantCond: &v1alpha1.MachineDeploymentCondition{Type: v1alpha1.MachineDeploymentProgressing, Status: v1alpha1.ConditionUnknown,
				Reason: v1alpha1.DeploymentResumedReason, Message: "MachineDeployment is resumed.", LastUpdateTime: apitime.Of(now),
				LastTransitionTime: metav1.NewTime(epoch)},
			wantOK: true,
		},
		{
			name:     "timed out: kept while paused",
			d:        newDeployment(1, storedStatus(0, 0, 0, progressing(v1alpha1.ConditionFalse, v1alpha1.ProgressDeadlineExceededReason, 0, 0)), paused),
			wantCond: new(progressing(v1alpha1.ConditionFalse, v1alpha1.ProgressDeadlineExceededReason, 0, 0)),
		},
		{
			name: "not paused, nothing to say",
			d:    newDeployment(1, storedStatus(0, 0, 0)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.d.DeepCopy()
			got, ok := pausedCondition(tt.d, now)
			var gotCond *v1alpha1.MachineDeploymentCondition
			if c, found := conditionOf(got.Conditions, v1alpha1.MachineDeploymentProgressing); found {
				gotCond = &c
			}
			if diff := cmp.Diff(tt.wantCond, gotCond); diff != "" {
				t.Errorf("Progressing condition (-want +got):\n%s", diff)
			}
			if ok != tt.wantOK {
				t.Errorf("changed = %v, want %v", ok, tt.wantOK)
			}
			if diff := cmp.Diff(before, tt.d); diff != "" {
				t.Errorf("deployment modified (-before +after):\n%s", diff)
			}
		})
	}
}
