package machineset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func rkLabel(key, value string) rkOpt {
	return func(m *v1alpha1.Machine) {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[key] = value
	}
}

// rkTransferred is a machine an in-place rollout moved into the set.
var rkTransferred = rkLabel(v1alpha1.UpdateResultLabel, v1alpha1.UpdateResultSuccessful)

// TestPlanReplicasInPlace: a set labelled scale-up-disabled creates
// nothing but still deletes, and a machine moved into a set by an
// in-place rollout is never deleted for the surplus it makes before the
// set's spec.replicas counts it.
func TestPlanReplicasInPlace(t *testing.T) {
	disabled := func(replicas int32) *v1alpha1.MachineSet {
		return &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "old",
			Labels: map[string]string{v1alpha1.ScaleUpDisabledLabel: "true"}}, Spec: v1alpha1.MachineSetSpec{Replicas: replicas}}
	}
	plain := func(replicas int32) *v1alpha1.MachineSet {
		return &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "new"}, Spec: v1alpha1.MachineSetSpec{Replicas: replicas}}
	}
	tests := []struct {
		name       string
		set        *v1alpha1.MachineSet
		machines   []*v1alpha1.Machine
		wantCreate int
		wantDelete []string
	}{
		{"scale-up disabled: a machine moved out is not replaced", disabled(3),
			[]*v1alpha1.Machine{rkMachine("a"), rkMachine("b")}, 0, nil},
		{"scale-up disabled: from zero, nothing", disabled(2), nil, 0, nil},
		{"scale-up disabled: still deletes its surplus", disabled(1),
			[]*v1alpha1.Machine{rkMachine("a", rkAge(2)), rkMachine("b", rkAge(1))}, 0, []string{"b"}},
		{"scale-up disabled: still replaces a Failed machine by deleting it", disabled(2),
			[]*v1alpha1.Machine{rkMachine("a"), rkMachine("b", rkPhase(v1alpha1.MachineFailed))}, 0, []string{"b"}},
		{"moved-in machine above replicas is kept", plain(2),
			[]*v1alpha1.Machine{rkMachine("a"), rkMachine("b"), rkMachine("c", rkTransferred)}, 0, nil},
		{"moved-in machine is not taken even when the rest is short", plain(1),
			[]*v1alpha1.Machine{rkMachine("a", rkAge(2)), rkMachine("b", rkAge(1)), rkMachine("c", rkTransferred, rkPhase(v1alpha1.MachinePending))},
			0, []string{"b"}},
		{"moved-in machine counts for creations", plain(3),
			[]*v1alpha1.Machine{rkMachine("a"), rkMachine("c", rkTransferred)}, 1, nil},
		{"other update-result values are ordinary", plain(1),
			[]*v1alpha1.Machine{rkMachine("a", rkAge(2)), rkMachine("b", rkAge(1), rkLabel(v1alpha1.UpdateResultLabel, v1alpha1.UpdateResultFailed))},
			0, []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := planReplicas(tt.set, int(tt.set.Spec.Replicas), tt.machines, false, 100, ladder{Policy: DeletionPolicy("")})
			if p.Create != tt.wantCreate {
				t.Errorf("creates %d, want %d", p.Create, tt.wantCreate)
			}
			if diff := cmp.Diff(tt.wantDelete, rkNames(p.Delete), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("deletions (-want +got):\n%s", diff)
			}
		})
	}
}
