package deployment

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestCountMachines(t *testing.T) {
	now := epoch.Add(time.Minute)
	tests := []struct {
		name     string
		machines []*v1alpha1.Machine
		minReady time.Duration
		want     machineCounts
	}{
		{"none", nil, 0, machineCounts{}},
		{"running", machines("m", 2), 0, machineCounts{Machines: 2, Ready: 2, Available: 2}},
		{
			"available without target cluster: available, not ready",
			machines("m", 1, inPhase(v1alpha1.MachineAvailable)), 0,
			machineCounts{Machines: 1, Available: 1},
		},
		{
			"phases that are not available",
			[]*v1alpha1.Machine{
				newMachine("p", inPhase(v1alpha1.MachinePending)),
				newMachine("u", inPhase(v1alpha1.MachineUnknown)),
				newMachine("f", inPhase(v1alpha1.MachineFailed)),
				newMachine("c", inPhase(v1alpha1.MachineCrashLoopBackOff)),
				newMachine("i", inPhase(v1alpha1.MachineInPlaceUpdating)),
				newMachine("e", inPhase("")),
			}, 0,
			machineCounts{Machines: 6},
		},
		{
			"being deleted",
			[]*v1alpha1.Machine{newMachine("d", deleting()), newMachine("t", inPhase(v1alpha1.MachineTerminating)), newMachine("r")}, 0,
			machineCounts{Machines: 1, Deleting: 2, Ready: 1, Available: 1},
		},
		{
			"min ready: one long enough, two waiting",
			[]*v1alpha1.Machine{newMachine("old"), newMachine("new", phaseSince(50)), newMachine("newer", phaseSince(55))}, 30 * time.Second,
			machineCounts{Machines: 3, Ready: 3, Available: 1, AvailableAt: epoch.Add(80 * time.Second)},
		},
		{
			"min ready reached exactly",
			[]*v1alpha1.Machine{newMachine("m", phaseSince(30))}, 30 * time.Second,
			machineCounts{Machines: 1, Ready: 1, Available: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, countMachines(tt.machines, tt.minReady, now)); diff != "" {
				t.Errorf("countMachines (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCountSets(t *testing.T) {
	sets := []*v1alpha1.MachineSet{newSet("a", 2, 0), newSet("b", 0, 0), nil}
	got := countSets(sets, map[string][]*v1alpha1.Machine{
		"a":     machines("a", 2),
		"other": machines("o", 5),
	}, 0, epoch)
	want := map[string]machineCounts{"a": counted(2, 2), "b": {}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("countSets (-want +got):\n%s", diff)
	}
}

// TestMinReadyOf: the deployment applies minReadySeconds only when it opts
// in; by default, and with an unknown value, machines count as available
// once Running, as in MCM.
func TestMinReadyOf(t *testing.T) {
	withMinReady := func(d *v1alpha1.MachineDeployment) { d.Spec.MinReadySeconds = 500 }
	tests := []struct {
		name string
		d    *v1alpha1.MachineDeployment
		want time.Duration
	}{
		{"no annotation", newDeployment(1, withMinReady), 0},
		{"ignore", newDeployment(1, withMinReady, withDeploymentAnnotation(v1alpha1.MinReadySecondsAnnotation, v1alpha1.MinReadySecondsIgnore)), 0},
		{"apply", newDeployment(1, withMinReady, withDeploymentAnnotation(v1alpha1.MinReadySecondsAnnotation, v1alpha1.MinReadySecondsApply)), 500 * time.Second},
		{"unknown value", newDeployment(1, withMinReady, withDeploymentAnnotation(v1alpha1.MinReadySecondsAnnotation, "true")), 0},
	}
	for _, tt := range tests {
		if got := minReadyOf(tt.d); got != tt.want {
			t.Errorf("%s: minReadyOf = %v, want %v", tt.name, got, tt.want)
		}
	}
}
