package deployment

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// TestSizeInPlaceRollbackBeforeShrink: a rollback makes the first set new
// again right after two machines moved out of it to the second set and
// before the first set shrank: it is still sized 6 with 4 machines. It
// must not grow back to 6 (two new VMs) nor zero the second set, whose two
// machines are to be updated back and moved in.
func TestSizeInPlaceRollbackBeforeShrink(t *testing.T) {
	d := inPlaceDeployment(6, v1alpha1.OrchestrationTypeAuto, "0", "1")
	first, second := newSet("md-a", 6, 0), newSet("md-b", 0, 1, withClass("class-b"))
	moved := machines("moved", 2)
	for _, m := range moved {
		m.Labels = map[string]string{v1alpha1.UpdateResultLabel: v1alpha1.UpdateResultSuccessful}
	}
	obs := observed{
		newSet:   first,
		old:      []*v1alpha1.MachineSet{second},
		machines: map[string][]*v1alpha1.Machine{first.Name: machines("stayed", 4), second.Name: moved},
		counts:   map[string]machineCounts{first.Name: counted(4, 4), second.Name: counted(2, 2)},
	}
	want := map[string]int32{"md-a": 4, "md-b": 2}
	if diff := cmp.Diff(want, sizeInPlace(d, obs, 0, 0)); diff != "" {
		t.Errorf("sizes (-want +got):\n%s", diff)
	}
}
