package machineset

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/apitime"
)

func TestCalculateStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	set := testSet(4)
	set.Spec.MinReadySeconds = 60
	// Applied, minReadySeconds keep the fresh machine unavailable.
	set.Annotations = map[string]string{v1alpha1.MinReadySecondsAnnotation: v1alpha1.MinReadySecondsApply}
	set.Generation = 7
	machine := func(name string, phase v1alpha1.MachinePhase, since time.Duration, labels map[string]string) *v1alpha1.Machine {
		m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		m.Status.CurrentStatus.Phase = phase
		m.Status.CurrentStatus.LastUpdateTime = metav1.NewTime(now.Add(-since))
		return m
	}
	labels := map[string]string{"pool": "a"}
	failed := machine("failed", v1alpha1.MachineFailed, time.Hour, labels)
	failed.Status.LastOperation = v1alpha1.LastOperation{State: v1alpha1.MachineStateFailed, Description: "health timeout"}
	deletingMachine := machine("deleting", v1alpha1.MachineRunning, time.Hour, labels)
	deletingMachine.DeletionTimestamp = &metav1.Time{Time: now}
	machines := []*v1alpha1.Machine{
		machine("old", v1alpha1.MachineRunning, time.Hour, labels),
		machine("fresh", v1alpha1.MachineRunning, time.Second, labels),                 // ready, not yet available
		machine("unlabelled", v1alpha1.MachinePending, time.Hour, map[string]string{}), // not fully labelled
		failed,
		deletingMachine, // does not count
	}
	// The safety controller's Frozen condition is kept as it is.
	frozen := v1alpha1.MachineSetCondition{Type: v1alpha1.MachineSetFrozen, Status: v1alpha1.ConditionTrue,
		Reason: "OverShootingReplicaCount", Message: "9 machines", LastTransitionTime: apitime.Of(now.Add(-time.Hour))}
	set.Status.Conditions = []v1alpha1.MachineSetCondition{frozen}
	got := calculateStatus(statusInput{Now: now, Set: set, Machines: machines, Selector: "pool=a", Synced: true})
	want := v1alpha1.MachineSetStatus{
		Replicas: 4, FullyLabeledReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 1, ObservedGeneration: 7, LabelSelector: "pool=a",
		FailedMachines: &[]v1alpha1.MachineSummary{{Name: "failed", OwnerRef: "pool", LastOperation: failed.Status.LastOperation}},
		Conditions:     []v1alpha1.MachineSetCondition{frozen},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	// A failed sync keeps the observed generation and reports the failure.
	set.Status = got
	set.Generation = 8
	again := calculateStatus(statusInput{Now: now.Add(time.Minute), Set: set, Machines: machines, Selector: "pool=a", ReplicaFailure: replicaFailure{Create: "quota"}})
	if again.ObservedGeneration != 7 {
		t.Errorf("observedGeneration %d after a failed sync, want 7", again.ObservedGeneration)
	}
	if conditionOf(&again, v1alpha1.MachineSetFrozen) == nil || conditionOf(&again, v1alpha1.MachineSetReplicaFailure) == nil {
		t.Errorf("conditions %+v, want Frozen kept and ReplicaFailure added", again.Conditions)
	}
}

// TestCalculateStatusMinReadySeconds: as in MCM, a machine counts as
// available as soon as it is Running, whatever minReadySeconds says; only
// the opt-in makes it wait, and an unknown value of the annotation is told
// in a condition and counts as MCM's behaviour.
func TestCalculateStatusMinReadySeconds(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	earlier := apitime.Of(now.Add(-time.Hour))
	machine := func(name string, phase v1alpha1.MachinePhase, since time.Duration) *v1alpha1.Machine {
		m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "a"}}}
		m.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: phase, LastUpdateTime: metav1.NewTime(now.Add(-since))}
		return m
	}
	machines := []*v1alpha1.Machine{
		machine("old", v1alpha1.MachineRunning, time.Hour),
		machine("just-running", v1alpha1.MachineRunning, 0),
		machine("running-a-minute", v1alpha1.MachineRunning, time.Minute),
		machine("available-no-target", v1alpha1.MachineAvailable, time.Second),
		machine("pending", v1alpha1.MachinePending, time.Hour),
	}
	invalid := func(value string) v1alpha1.MachineSetCondition {
		return v1alpha1.MachineSetCondition{Type: ConditionInvalidAnnotation, Status: v1alpha1.ConditionTrue, Reason: ReasonInvalidMinReadySeconds,
			Message: `annotation mcmkit.io/min-ready-seconds: unknown value "` + value + `" (want apply or ignore); ` +
				"minReadySeconds is not applied: machines count as available once Running, as in MCM",
			LastTransitionTime: apitime.Of(now)}
	}
	tests := []struct {
		name       string
		annotation *string // nil: none
		stored     []v1alpha1.MachineSetCondition
		available  int32
		conditions []v1alpha1.MachineSetCondition
	}{
		{name: "no annotation: available once Running, as in MCM", available: 4},
		{name: "ignore", annotation: new(v1alpha1.MinReadySecondsIgnore), available: 4},
		{name: "apply: Running for 500 s first", annotation: new(v1alpha1.MinReadySecondsApply), available: 1},
		{name: "unknown value: as in MCM, and told", annotation: new("Apply"), available: 4, conditions: []v1alpha1.MachineSetCondition{invalid("Apply")}},
		{
			name: "another unknown value: the condition names it and keeps its transition time", annotation: new("on"),
			stored:    []v1alpha1.MachineSetCondition{func() v1alpha1.MachineSetCondition { c := invalid("Apply"); c.LastTransitionTime = earlier; return c }()},
			available: 4, conditions: []v1alpha1.MachineSetCondition{func() v1alpha1.MachineSetCondition { c := invalid("on"); c.LastTransitionTime = earlier; return c }()},
		},
		{name: "fixed: the condition goes", annotation: new(v1alpha1.MinReadySecondsApply), stored: []v1alpha1.MachineSetCondition{invalid("Apply")}, available: 1,
			conditions: []v1alpha1.MachineSetCondition{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := testSet(5)
			set.Spec.MinReadySeconds = 500
			if tt.annotation != nil {
				set.Annotations = map[string]string{v1alpha1.MinReadySecondsAnnotation: *tt.annotation}
			}
			set.Status.Conditions = tt.stored
			got := calculateStatus(statusInput{Now: now, Set: set, Machines: machines, Selector: "pool=a", Synced: true})
			want := v1alpha1.MachineSetStatus{
				Replicas: 5, FullyLabeledReplicas: 5, ReadyReplicas: 3, AvailableReplicas: tt.available, ObservedGeneration: 1,
				LabelSelector: "pool=a", Conditions: tt.conditions,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLastOperation(t *testing.T) {
	create, del := v1alpha1.MachineOperationCreate, v1alpha1.MachineOperationDelete
	ok, failed := v1alpha1.MachineStateSuccessful, v1alpha1.MachineStateFailed
	tests := []struct {
		name    string
		failure replicaFailure
		done    applied
		want    *v1alpha1.LastOperation
		reason  string
	}{
		{"nothing done", replicaFailure{}, applied{}, nil, ReasonCreateFailed},
		{"created", replicaFailure{}, applied{Created: 3}, &v1alpha1.LastOperation{Type: create, State: ok, Description: "Created 3 machine(s)"}, ReasonCreateFailed},
		{"deleted", replicaFailure{}, applied{Deleted: 2}, &v1alpha1.LastOperation{Type: del, State: ok, Description: "Deleted 2 machine(s)"}, ReasonCreateFailed},
		{"both", replicaFailure{}, applied{Created: 1, Deleted: 1}, &v1alpha1.LastOperation{Type: create, State: ok, Description: "Created 1 and deleted 1 machine(s)"}, ReasonCreateFailed},
		{"create failed", replicaFailure{Create: "quota"}, applied{Created: 1}, &v1alpha1.LastOperation{Type: create, State: failed, Description: "quota"}, ReasonCreateFailed},
		{"delete failed", replicaFailure{Delete: "forbidden"}, applied{}, &v1alpha1.LastOperation{Type: del, State: failed, Description: "forbidden"}, ReasonDeleteFailed},
		{"no class", replicaFailure{NoClass: "no class"}, applied{Deleted: 1}, &v1alpha1.LastOperation{Type: del, State: failed, Description: "no class"}, ReasonCreateFailed},
		{"invalid", replicaFailure{Invalid: "selector"}, applied{}, &v1alpha1.LastOperation{Type: create, State: failed, Description: "selector"}, ReasonInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, lastOperation(tt.failure, tt.done)); diff != "" {
				t.Errorf("lastOperation (-want +got):\n%s", diff)
			}
			if got := tt.failure.reason(); got != tt.reason {
				t.Errorf("reason %q, want %q", got, tt.reason)
			}
		})
	}
}

// TestRepeatedOperationIsNotRewritten: a sync that does what the last one
// did leaves lastOperation (and its time) as stored, so that the status
// does not change.
func TestRepeatedOperationIsNotRewritten(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	set := testSet(3)
	first := calculateStatus(statusInput{Now: now, Set: set, ReplicaFailure: replicaFailure{Create: "quota"}})
	set.Status = first
	again := calculateStatus(statusInput{Now: now.Add(time.Minute), Set: set, ReplicaFailure: replicaFailure{Create: "quota"}})
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("status changed for a repeated failure (-first +again):\n%s", diff)
	}
}
