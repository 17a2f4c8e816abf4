package deployment

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/apitime"
)

func TestCalculateStatus(t *testing.T) {
	now := epoch.Add(time.Hour)
	earlier := metav1.NewTime(epoch)
	stamp := apitime.Of(now)
	availableTrue := v1alpha1.MachineDeploymentCondition{Type: v1alpha1.MachineDeploymentAvailable, Status: v1alpha1.ConditionTrue,
		Reason: v1alpha1.MinimumReplicasAvailableReason, Message: "Deployment has minimum availability.",
		LastUpdateTime: stamp, LastTransitionTime: stamp}
	stored := func(opts ...func(*v1alpha1.MachineDeploymentStatus)) mdOpt {
		return func(d *v1alpha1.MachineDeployment) {
			d.Generation = 3
			d.Status = v1alpha1.MachineDeploymentStatus{ObservedGeneration: 2, CollisionCount: new(int32(2)), Replicas: 9}
			for _, o := range opts {
				o(&d.Status)
			}
		}
	}
	failure := v1alpha1.MachineSetCondition{Type: v1alpha1.MachineSetReplicaFailure, Status: v1alpha1.ConditionTrue,
		Reason: v1alpha1.FailedCreateReason, Message: "quota", LastTransitionTime: earlier}
	withFailure := func(message string) msOpt {
		return func(s *v1alpha1.MachineSet) {
			c := failure
			c.Message = message
			s.Status.Conditions = append(s.Status.Conditions, c)
		}
	}

	tests := []struct {
		name string
		in   statusInput
		want v1alpha1.MachineDeploymentStatus
	}{
		{
			name: "mid rollout, synced",
			in: statusInput{
				Deployment: newDeployment(3, stored()),
				NewSet:     newSet("n", 2, 9),
				OldSets:    []*v1alpha1.MachineSet{newSet("o", 2, 0, withClass("a"))},
				Machines: map[string][]*v1alpha1.Machine{
					"o": append(machines("o", 2), newMachine("o-gone", deleting())),
					"n": {newMachine("n-0"), newMachine("n-1", inPhase(v1alpha1.MachinePending))},
				},
				Selector: "pool=workers",
				Now:      now,
				Synced:   true,
			},
			want: v1alpha1.MachineDeploymentStatus{
				ObservedGeneration: 3, Replicas: 4, UpdatedReplicas: 2, ReadyReplicas: 3, AvailableReplicas: 3,
				UnavailableReplicas: 1, CollisionCount: new(int32(2)), LabelSelector: "pool=workers",
				Conditions: []v1alpha1.MachineDeploymentCondition{availableTrue},
			},
		},
		{
			name: "not synced: observed generation stays",
			in: statusInput{
				Deployment: newDeployment(1, stored()),
				NewSet:     newSet("n", 1, 9),
				Machines:   map[string][]*v1alpha1.Machine{"n": machines("n", 1)},
				Now:        now,
			},
			want: v1alpha1.MachineDeploymentStatus{
				ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				CollisionCount: new(int32(2)), Conditions: []v1alpha1.MachineDeploymentCondition{availableTrue},
			},
		},
		{
			name: "scale-down under way: unavailable is not negative",
			in: statusInput{
				Deployment: newDeployment(1, stored()),
				NewSet:     newSet("n", 1, 9),
				Machines:   map[string][]*v1alpha1.Machine{"n": machines("n", 3)},
				Now:        now,
				Synced:     true,
			},
			want: v1alpha1.MachineDeploymentStatus{
				ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
				CollisionCount: new(int32(2)), Conditions: []v1alpha1.MachineDeploymentCondition{availableTrue},
			},
		},
		{
			name: "min ready seconds, as in MCM: Running machines are available at once",
			in: statusInput{
				Deployment: newDeployment(4, withRolling("1", "1"), stored(), func(d *v1alpha1.MachineDeployment) {
					d.Spec.MinReadySeconds = 500
				}),
				OldSets: []*v1alpha1.MachineSet{newSet("o", 4, 0, withClass("a"))},
				Machines: map[string][]*v1alpha1.Machine{"o": {
					newMachine("o-0"), newMachine("o-1"),
					newMachine("o-2", phaseSince(3600)),                                     // Running since now
					newMachine("o-3", phaseSince(3600), inPhase(v1alpha1.MachineAvailable)), // no target cluster
				}},
				Now:    now,
				Synced: true,
			},
			want: v1alpha1.MachineDeploymentStatus{
				ObservedGeneration: 3, Replicas: 4, ReadyReplicas: 3, AvailableReplicas: 4,
				CollisionCount: new(int32(2)), Conditions: []v1alpha1.MachineDeploymentCondition{availableTrue},
			},
		},
		{
			name: "unknown min ready seconds policy: as in MCM, and told",
			in: statusInput{
				Deployment: newDeployment(1, stored(), withDeploymentAnnotation(v1alpha1.MinReadySecondsAnnotation, "aply"),
					func(d *v1alpha1.MachineDeployment) { d.Spec.MinReadySeconds = 500 }),
				NewSet:   newSet("n", 1, 9),
				Machines: map[string][]*v1alpha1.Machine{"n": {newMachine("n-0", phaseSince(3600))}},
				Now:      now,
				Synced:   true,
			},
			want: v1alpha1.MachineDeploymentStatus{
				ObservedGeneration: 3, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				CollisionCount: new(int32(2)),
				Conditions: []v1alpha1.MachineDeploymentCondition{availableTrue, {
					Type: ConditionInvalidAnnotation, Status: v1alpha1.ConditionTrue, Reason: ReasonInvalidMinReadySeconds,
					Message: `annotation mcmkit.io/min-ready-seconds: unknown value "aply" (want apply or ignore); ` +
						"minReadySeconds is not applied: machines count as available once Running, as in MCM",
					LastUpdateTime: stamp, LastTransitionTime: stamp,
				}},
			},
		},
		{
			name: "min ready seconds policy fixed: the condition goes",
			in: statusInput{
				Deployment: newDeployment(1, withDeploymentAnnotation(v1alpha1.MinReadySecondsAnnotation, v1alpha1.MinReadySecondsIgnore),
					stored(func(st *v1alpha1.MachineDeploymentStatus) {
						st.Conditions = []v1alpha1.MachineDeploymentCondition{{Type: ConditionInvalidAnnotation, Status: v1alpha1.ConditionTrue,
							Reason: ReasonInvalidMinReadySeconds, Message: "old", LastUpdateTime: earlier, LastTransitionTime: earlier}}
					})),
				NewSet:   newSet("n", 1, 9),
				Machines: map[string][]*v1alpha1.Machine{"n": machines("n", 1)},
				Now:      now,
				Synced:   true,
			},
			want: v1alpha1.MachineDeploymentStatus{
				ObservedGeneration: 3, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				CollisionCount: new(int32(2)), Conditions: []v1alpha1.MachineDeploymentCondition{availableTrue},
			},
		},
		{
			name: "another unknown value: the condition names it, and keeps its transition time",
			in: statusInput{
				Deployment: newDeployment(1, withDeploymentAnnotation(v1alpha1.MinReadySecondsAnnotation, "yes"),
					stored(func(st *v1alpha1.MachineDeploymentStatus) {
						st.Conditions = []v1alpha1.MachineDeploymentCondition{{Type: ConditionInvalidAnnotation, Status: v1alpha1.ConditionTrue,
							Reason: ReasonInvalidMinReadySeconds, Message: "old", LastUpdateTime: earlier, LastTransitionTime: earlier}}
					})),
				NewSet:   newSet("n", 1, 9),
				Machines: map[string][]*v1alpha1.Machine{"n": machines("n", 1)},
				Now:      now,
				Synced:   true,
			},
			want: v1alpha1.MachineDeploymentStatus{
				ObservedGeneration: 3, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				CollisionCount: new(int32(2)),
				Conditions: []v1alpha1.MachineDeploymentCondition{availableTrue, {
					Type: ConditionInvalidAnnotation, Status: v1alpha1.ConditionTrue, Reason: ReasonInvalidMinReadySeconds,
					Message: `annotation mcmkit.io/min-ready-seconds: unknown value "yes" (want apply or ignore); ` +
						"minReadySeconds is not applied: machines count as available once Running, as in MCM",
					LastUpdateTime: stamp, LastTransitionTime: earlier,
				}},
			},
		},
		{
			name: "below minimum availability; min ready seconds count with the opt-in; no new set",
			in: statusInput{
				Deployment: newDeployment(4, withRolling("1", "1"), stored(), func(d *v1alpha1.MachineDeployment) {
					d.Spec.MinReadySeconds = 600
				}, withDeploymentAnnotation(v1alpha1.MinReadySecondsAnnotation, v1alpha1.MinReadySecondsApply)),
				OldSets: []*v1alpha1.MachineSet{newSet("o", 4, 0, withClass("a"))},
				Machines: map[string][]*v1alpha1.Machine{"o": {
					newMachine("o-0"), newMachine("o-1"),
					newMachine("o-2", phaseSince(3500)), // Running for 100s only
					newMachine("o-3", inPhase(v1alpha1.MachineUnknown)),
				}},
				Now:    now,
				Synced: true,
			},
			want: v1alpha1.MachineDeploymentStatus{
				ObservedGeneration: 3, Replicas: 4, ReadyReplicas: 3, AvailableReplicas: 2, UnavailableReplicas: 2,
				CollisionCount: new(int32(2)),
				Conditions: []v1alpha1.MachineDeploymentCondition{{
					Type: v1alpha1.MachineDeploymentAvailable, Status: v1alpha1.ConditionFalse,
					Reason:         v1alpha1.MinimumReplicasUnavailableReason,
					Message:        "Deployment does not have minimum availability: 2 of at least 3 machines available.",
					LastUpdateTime: stamp, LastTransitionTime: stamp,
				}},
			},
		},
		{
			name: "failed machines from all sets, by name; the stored Available condition keeps its times",
			in: statusInput{
				Deployment: newDeployment(2, stored(func(st *v1alpha1.MachineDeploymentStatus) {
					st.Conditions = []v1alpha1.MachineDeploymentCondition{{
						Type: v1alpha1.MachineDeploymentAvailable, Status: v1alpha1.ConditionTrue,
						Reason: v1alpha1.MinimumReplicasAvailableReason, Message: "old text",
						LastUpdateTime: earlier, LastTransitionTime: earlier,
					}}
					st.FailedMachines = []*v1alpha1.MachineSummary{{Name: "stale"}}
				})),
				NewSet:  newSet("n", 1, 9),
				OldSets: []*v1alpha1.MachineSet{newSet("o", 1, 0, withClass("a"))},
				Machines: map[string][]*v1alpha1.Machine{
					"o": {newMachine("z", failedOp(v1alpha1.MachineOperationHealthCheck, ""))},
					"n": {
						newMachine("a", inPhase(v1alpha1.MachineFailed), failedOp(v1alpha1.MachineOperationCreate, "ResourceExhausted"),
							func(m *v1alpha1.Machine) { m.Spec.ProviderID = "p-a" }),
						newMachine("gone", deleting(), failedOp(v1alpha1.MachineOperationCreate, "")),
					},
				},
				Now:    now,
				Synced: true,
			},
			want: v1alpha1.MachineDeploymentStatus{
				ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				UnavailableReplicas: 1, CollisionCount: new(int32(2)),
				FailedMachines: []*v1alpha1.MachineSummary{
					{Name: "a", ProviderID: "p-a", OwnerRef: "n", LastOperation: v1alpha1.LastOperation{
						Type: v1alpha1.MachineOperationCreate, State: v1alpha1.MachineStateFailed, ErrorCode: "ResourceExhausted",
						Description: "failed", LastUpdateTime: earlier}},
					{Name: "z", OwnerRef: "o", LastOperation: v1alpha1.LastOperation{
						Type: v1alpha1.MachineOperationHealthCheck, State: v1alpha1.MachineStateFailed,
						Description: "failed", LastUpdateTime: earlier}},
				},
				Conditions: []v1alpha1.MachineDeploymentCondition{{
					Type: v1alpha1.MachineDeploymentAvailable, Status: v1alpha1.ConditionFalse,
					Reason:         v1alpha1.MinimumReplicasUnavailableReason,
					Message:        "Deployment does not have minimum availability: 1 of at least 2 machines available.",
					LastUpdateTime: stamp, LastTransitionTime: stamp,
				}},
			},
		},
		{
			name: "replica failure: the new set's wins",
			in: statusInput{
				Deployment: newDeployment(0, stored()),
				NewSet:     newSet("n", 0, 9, withFailure("new")),
				OldSets:    []*v1alpha1.MachineSet{newSet("o", 0, 0, withClass("a"), withFailure("old"))},
				Now:        now,
			},
			want: v1alpha1.MachineDeploymentStatus{
				ObservedGeneration: 2, CollisionCount: new(int32(2)),
				Conditions: []v1alpha1.MachineDeploymentCondition{availableTrue, {
					Type: v1alpha1.MachineDeploymentReplicaFailure, Status: v1alpha1.ConditionTrue, Reason: v1alpha1.FailedCreateReason,
					Message: "new", LastUpdateTime: earlier, LastTransitionTime: earlier,
				}},
			},
		},
		{
			name: "replica failure from the oldest old set; the stored one keeps its transition time",
			in: statusInput{
				Deployment: newDeployment(0, stored(func(st *v1alpha1.MachineDeploymentStatus) {
					st.Conditions = []v1alpha1.MachineDeploymentCondition{{Type: v1alpha1.MachineDeploymentReplicaFailure, Status: v1alpha1.ConditionTrue}}
				})),
				NewSet:  newSet("n", 0, 9),
				OldSets: []*v1alpha1.MachineSet{newSet("o2", 0, 5, withClass("b"), withFailure("newer")), newSet("o1", 0, 0, withClass("a"), withFailure("older"))},
				Now:     now,
			},
			want: v1alpha1.MachineDeploymentStatus{
				ObservedGeneration: 2, CollisionCount: new(int32(2)),
				Conditions: []v1alpha1.MachineDeploymentCondition{{
					Type: v1alpha1.MachineDeploymentReplicaFailure, Status: v1alpha1.ConditionTrue, Reason: v1alpha1.FailedCreateReason,
					Message: "older", LastUpdateTime: earlier,
				}, availableTrue},
			},
		},
		{
			name: "no replica failure any more",
			in: statusInput{
				Deployment: newDeployment(0, stored(func(st *v1alpha1.MachineDeploymentStatus) {
					st.Conditions = []v1alpha1.MachineDeploymentCondition{{Type: v1alpha1.MachineDeploymentReplicaFailure, Status: v1alpha1.ConditionTrue}}
				})),
				NewSet: newSet("n", 0, 9),
				Now:    now,
			},
			want: v1alpha1.MachineDeploymentStatus{
				ObservedGeneration: 2, CollisionCount: new(int32(2)),
				Conditions: []v1alpha1.MachineDeploymentCondition{availableTrue},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.in.Deployment.DeepCopy()
			tt.in.Counts = countSets(withNew(tt.in.NewSet, tt.in.OldSets), tt.in.Machines, minReadyOf(tt.in.Deployment), tt.in.Now)
			got, err := calculateStatus(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("calculateStatus (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.in.Deployment); diff != "" {
				t.Errorf("deployment modified (-before +after):\n%s", diff)
			}
		})
	}
}

func TestCalculateStatusInvalidBounds(t *testing.T) {
	_, err := calculateStatus(statusInput{Deployment: newDeployment(1, withRolling("?", "0")), Now: epoch})
	if err == nil {
		t.Error("want an error for an unreadable maxSurge")
	}
}
