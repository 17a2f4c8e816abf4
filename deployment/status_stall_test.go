package deployment

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/apitime"
)

// TestStallMessageFollows: while a rollout stays stalled for the same
// reason, the Progressing condition follows the stall's message (another
// machine failed first by name, the agent gave another reason) and keeps
// its lastTransitionTime, so that it never names a failure that is gone and
// the stall's event is told once per message, not at every sync.
func TestStallMessageFollows(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := newDeployment(0)
	first := stall{ReasonInPlaceUpdateFailed, "in-place update of machine m2 failed: the instance type"}
	second := stall{ReasonInPlaceUpdateFailed, "in-place update of machine m1 failed: the instance type"}
	steps := []struct {
		stall stall
		at    time.Time
		want  v1alpha1.MachineDeploymentCondition
	}{
		{first, t0, progressingFalse(first.message, t0, t0)},
		{second, t0.Add(time.Minute), progressingFalse(second.message, t0.Add(time.Minute), t0)},
		{second, t0.Add(2 * time.Minute), progressingFalse(second.message, t0.Add(time.Minute), t0)},
	}
	for i, step := range steps {
		st, err := nextStatus(d, observed{}, "", step.stall, step.at, true)
		if err != nil {
			t.Fatal(err)
		}
		d = d.DeepCopy()
		d.Status = st
		got, _ := conditionOf(st.Conditions, v1alpha1.MachineDeploymentProgressing)
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("step %d: Progressing (-want +got):\n%s", i, diff)
		}
		if !reported(d, v1alpha1.MachineDeploymentProgressing, step.stall.message) {
			t.Errorf("step %d: the stored status does not tell %q: its event would be sent again at the next sync", i, step.stall.message)
		}
	}
}

func progressingFalse(message string, updated, transition time.Time) v1alpha1.MachineDeploymentCondition {
	return v1alpha1.MachineDeploymentCondition{
		Type: v1alpha1.MachineDeploymentProgressing, Status: v1alpha1.ConditionFalse, Reason: ReasonInPlaceUpdateFailed,
		Message: message, LastUpdateTime: apitime.Of(updated), LastTransitionTime: apitime.Of(transition),
	}
}
