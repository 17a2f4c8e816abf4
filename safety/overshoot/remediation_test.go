package overshoot

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/replacement"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestRemediationCondition(t *testing.T) {
	later := t0.Add(time.Minute)
	blocked, ok := replacement.Remediation{Unhealthy: 5, Total: 10, Limit: 4}, replacement.Remediation{Unhealthy: 1, Total: 10, Limit: 4}
	conds := remediationCondition(nil, "pool", blocked, t0)
	if len(conds) != 1 || conds[0].Status != v1alpha1.ConditionFalse || conds[0].Reason != ReasonTooManyUnhealthy {
		t.Fatalf("blocked: %+v", conds)
	}
	if again := remediationCondition(conds, "pool", blocked, later); !cmp.Equal(again, conds) {
		t.Errorf("an unchanged assessment changed the condition:\n%s", cmp.Diff(conds, again))
	}
	more := remediationCondition(conds, "pool", replacement.Remediation{Unhealthy: 6, Total: 10, Limit: 4}, later)
	if !more[0].LastTransitionTime.Equal(&metav1.Time{Time: t0}) || more[0].Message == conds[0].Message {
		t.Errorf("a new count keeps the transition time and changes the message: %+v", more[0])
	}
	resumed := remediationCondition(more, "pool", ok, later)
	if resumed[0].Status != v1alpha1.ConditionTrue || resumed[0].Reason != ReasonWithinMaxUnhealthy || !resumed[0].LastTransitionTime.Equal(&metav1.Time{Time: later}) {
		t.Errorf("resumed: %+v", resumed[0])
	}
	others := []v1alpha1.MachineDeploymentCondition{{Type: v1alpha1.MachineDeploymentAvailable, Status: v1alpha1.ConditionTrue}}
	if got := remediationCondition(others, "pool", ok, t0); len(got) != 2 || got[0].Type != v1alpha1.MachineDeploymentAvailable {
		t.Errorf("other conditions not kept: %+v", got)
	}
}
