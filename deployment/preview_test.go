package deployment

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestPreviewChange(t *testing.T) {
	toClass := func(name string) mdOpt {
		return func(d *v1alpha1.MachineDeployment) { d.Spec.Template.Spec.Class.Name = name }
	}
	nodeLabel := func(d *v1alpha1.MachineDeployment) {
		d.Spec.Template.Spec.NodeTemplateSpec.Labels = map[string]string{"tier": "gold"}
	}
	inPlace := func(orchestration v1alpha1.OrchestrationType, unavailable string) mdOpt {
		return func(d *v1alpha1.MachineDeployment) {
			*d = *inPlaceDeployment(d.Spec.Replicas, orchestration, "0", unavailable).DeepCopy()
		}
	}
	current := func(set *v1alpha1.MachineSet) []*v1alpha1.MachineSet { return []*v1alpha1.MachineSet{set} }
	tests := []struct {
		name      string
		current   *v1alpha1.MachineDeployment
		proposed  *v1alpha1.MachineDeployment
		sets      []*v1alpha1.MachineSet
		want      Preview
		wantError bool
	}{{
		name:     "a new class rolls every machine, one wave per maxSurge",
		current:  newDeployment(5),
		proposed: newDeployment(5, toClass("class-b")),
		sets:     current(newSet("md-a", 5, 0, withRevision("1"))),
		want: Preview{Change: ChangeRoll, Strategy: v1alpha1.RollingUpdateMachineDeploymentStrategyType, Machines: 5, Waves: 5,
			Surge: 1, Fields: []string{"spec.class.name"}},
	}, {
		name:     "maxSurge 2 takes ceil(5/2) waves",
		current:  newDeployment(5, withRolling("2", "0")),
		proposed: newDeployment(5, withRolling("2", "0"), toClass("class-b")),
		sets:     current(newSet("md-a", 5, 0)),
		want: Preview{Change: ChangeRoll, Strategy: v1alpha1.RollingUpdateMachineDeploymentStrategyType, Machines: 5, Waves: 3,
			Surge: 2, Fields: []string{"spec.class.name"}},
	}, {
		name:     "maxUnavailable alone, 25% of 8: waves of 2",
		current:  newDeployment(8, withRolling("0", "25%")),
		proposed: newDeployment(8, withRolling("0", "25%"), toClass("class-b")),
		sets:     current(newSet("md-a", 8, 0)),
		want: Preview{Change: ChangeRoll, Strategy: v1alpha1.RollingUpdateMachineDeploymentStrategyType, Machines: 8, Waves: 4,
			Unavailable: 2, Fields: []string{"spec.class.name"}},
	}, {
		name:     "surge and unavailable together: 3 new machines per wave after the first",
		current:  newDeployment(10, withRolling("2", "1")),
		proposed: newDeployment(10, withRolling("2", "1"), toClass("class-b")),
		sets:     current(newSet("md-a", 10, 0)),
		want: Preview{Change: ChangeRoll, Strategy: v1alpha1.RollingUpdateMachineDeploymentStrategyType, Machines: 10, Waves: 4,
			Surge: 2, Unavailable: 1, Fields: []string{"spec.class.name"}},
	}, {
		name:     "Recreate replaces all at once",
		current:  newDeployment(5, withRecreate()),
		proposed: newDeployment(5, withRecreate(), toClass("class-b")),
		sets:     current(newSet("md-a", 5, 0)),
		want: Preview{Change: ChangeRoll, Strategy: v1alpha1.RecreateMachineDeploymentStrategyType, Machines: 5, Waves: 1,
			Fields: []string{"spec.class.name"}},
	}, {
		name:     "a node template label only propagates",
		current:  newDeployment(5),
		proposed: newDeployment(5, nodeLabel),
		sets:     current(newSet("md-a", 5, 0)),
		want: Preview{Change: ChangePropagate, Strategy: v1alpha1.RollingUpdateMachineDeploymentStrategyType, Machines: 5,
			Surge: 1, Fields: []string{"spec.nodeTemplate.metadata.labels.tier"}},
	}, {
		name:     "InPlaceUpdate Auto: batches of maxUnavailable",
		current:  newDeployment(6, inPlace(v1alpha1.OrchestrationTypeAuto, "2")),
		proposed: newDeployment(6, inPlace(v1alpha1.OrchestrationTypeAuto, "2"), toClass("class-b")),
		sets:     current(newSet("md-a", 6, 0)),
		want: Preview{Change: ChangeInPlace, Strategy: v1alpha1.InPlaceUpdateMachineDeploymentStrategyType, Machines: 6, Waves: 3,
			Unavailable: 2, Fields: []string{"spec.class.name"}},
	}, {
		name:     "InPlaceUpdate Manual: a person picks, no waves",
		current:  newDeployment(6, inPlace(v1alpha1.OrchestrationTypeManual, "2")),
		proposed: newDeployment(6, inPlace(v1alpha1.OrchestrationTypeManual, "2"), toClass("class-b")),
		sets:     current(newSet("md-a", 6, 0)),
		want: Preview{Change: ChangeInPlace, Strategy: v1alpha1.InPlaceUpdateMachineDeploymentStrategyType, Machines: 6,
			Unavailable: 2, Fields: []string{"spec.class.name"}},
	}, {
		name:     "back to an old set's template: a rollback to its revision, its machines kept",
		current:  newDeployment(5, toClass("class-b")),
		proposed: newDeployment(5),
		sets: []*v1alpha1.MachineSet{
			newSet("md-a", 2, 0, withRevision("1")),
			newSet("md-b", 3, 1, withRevision("2"), withClass("class-b")),
		},
		want: Preview{Change: ChangeRoll, Strategy: v1alpha1.RollingUpdateMachineDeploymentStrategyType, Machines: 3, Waves: 3,
			Surge: 1, RollbackTo: 1, Fields: []string{"spec.class.name"}},
	}, {
		name:     "replicas only: nothing rolls, the scale is told",
		current:  newDeployment(5),
		proposed: newDeployment(8),
		sets:     current(newSet("md-a", 5, 0)),
		want: Preview{Change: ChangeNone, Strategy: v1alpha1.RollingUpdateMachineDeploymentStrategyType, Surge: 1,
			Scale: &[2]int32{5, 8}},
	}, {
		name:    "paused: told, the change is still what it will be",
		current: newDeployment(2),
		proposed: newDeployment(2, toClass("class-b"), func(d *v1alpha1.MachineDeployment) {
			d.Spec.Paused = true
		}),
		sets: current(newSet("md-a", 2, 0)),
		want: Preview{Change: ChangeRoll, Strategy: v1alpha1.RollingUpdateMachineDeploymentStrategyType, Machines: 2, Waves: 2,
			Surge: 1, Paused: true, Fields: []string{"spec.class.name"}},
	}, {
		name:      "an invalid maxSurge is an error",
		current:   newDeployment(2),
		proposed:  newDeployment(2, withRolling("x%", "0"), toClass("class-b")),
		sets:      current(newSet("md-a", 2, 0)),
		wantError: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PreviewChange(tt.current, tt.proposed, tt.sets)
			if (err != nil) != tt.wantError {
				t.Fatalf("error %v, want error %v", err, tt.wantError)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PreviewChange (-want +got):\n%s", diff)
			}
		})
	}
}

// The preview's inputs are the controller's caches: it must not change
// them.
func TestPreviewChangeWritesNothing(t *testing.T) {
	sets := []*v1alpha1.MachineSet{newSet("md-a", 4, 0)}
	before := sets[0].DeepCopy()
	proposed := newDeployment(4)
	proposed.Spec.Template.Spec.Class.Name = "class-b"
	if _, err := PreviewChange(newDeployment(4), proposed, sets); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, sets[0]); diff != "" {
		t.Errorf("the set changed (-before +after):\n%s", diff)
	}
}
