package deployment

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/apitime"
)

func TestWithCondition(t *testing.T) {
	t0, t1 := epoch, epoch.Add(time.Hour)
	avail := func(status v1alpha1.ConditionStatus, reason, message string, at time.Time) v1alpha1.MachineDeploymentCondition {
		return newCondition(v1alpha1.MachineDeploymentAvailable, status, reason, message, at)
	}
	other := newCondition(v1alpha1.MachineDeploymentFrozen, v1alpha1.ConditionTrue, "Frozen", "", t0)
	tests := []struct {
		name       string
		conditions []v1alpha1.MachineDeploymentCondition
		c          v1alpha1.MachineDeploymentCondition
		want       []v1alpha1.MachineDeploymentCondition
	}{
		{
			name: "added",
			c:    avail(v1alpha1.ConditionTrue, "R", "m", t1),
			want: []v1alpha1.MachineDeploymentCondition{avail(v1alpha1.ConditionTrue, "R", "m", t1)},
		},
		{
			name:       "same status and reason: kept as it is",
			conditions: []v1alpha1.MachineDeploymentCondition{avail(v1alpha1.ConditionTrue, "R", "old", t0), other},
			c:          avail(v1alpha1.ConditionTrue, "R", "new", t1),
			want:       []v1alpha1.MachineDeploymentCondition{avail(v1alpha1.ConditionTrue, "R", "old", t0), other},
		},
		{
			name:       "same status, other reason: transition time kept, in place",
			conditions: []v1alpha1.MachineDeploymentCondition{other, avail(v1alpha1.ConditionTrue, "R", "old", t0)},
			c:          avail(v1alpha1.ConditionTrue, "S", "new", t1),
			want: []v1alpha1.MachineDeploymentCondition{other, {
				Type: v1alpha1.MachineDeploymentAvailable, Status: v1alpha1.ConditionTrue, Reason: "S", Message: "new",
				LastUpdateTime: apitime.Of(t1), LastTransitionTime: apitime.Of(t0),
			}},
		},
		{
			name:       "status changes: all new",
			conditions: []v1alpha1.MachineDeploymentCondition{avail(v1alpha1.ConditionTrue, "R", "old", t0)},
			c:          avail(v1alpha1.ConditionFalse, "R", "new", t1),
			want:       []v1alpha1.MachineDeploymentCondition{avail(v1alpha1.ConditionFalse, "R", "new", t1)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := append([]v1alpha1.MachineDeploymentCondition(nil), tt.conditions...)
			if diff := cmp.Diff(tt.want, withCondition(tt.conditions, tt.c)); diff != "" {
				t.Errorf("withCondition (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.conditions); diff != "" {
				t.Errorf("argument modified (-before +after):\n%s", diff)
			}
		})
	}
}

func TestWithoutCondition(t *testing.T) {
	a := newCondition(v1alpha1.MachineDeploymentAvailable, v1alpha1.ConditionTrue, "R", "", epoch)
	f := newCondition(v1alpha1.MachineDeploymentFrozen, v1alpha1.ConditionTrue, "F", "", epoch)
	conditions := []v1alpha1.MachineDeploymentCondition{a, f}
	if diff := cmp.Diff([]v1alpha1.MachineDeploymentCondition{f}, withoutCondition(conditions, v1alpha1.MachineDeploymentAvailable)); diff != "" {
		t.Errorf("withoutCondition (-want +got):\n%s", diff)
	}
	if got := withoutCondition([]v1alpha1.MachineDeploymentCondition{a}, v1alpha1.MachineDeploymentAvailable); got != nil {
		t.Errorf("withoutCondition of the last one = %v, want nil", got)
	}
	if diff := cmp.Diff([]v1alpha1.MachineDeploymentCondition{a, f}, conditions); diff != "" {
		t.Errorf("argument modified (-want +got):\n%s", diff)
	}
	if _, ok := conditionOf(conditions, v1alpha1.MachineDeploymentProgressing); ok {
		t.Error("conditionOf found a missing condition")
	}
}
