package deployment

import (
	"slices"
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/apitime"
)

// newCondition returns a condition that changed at now.
func newCondition(typ v1alpha1.MachineDeploymentConditionType, status v1alpha1.ConditionStatus, reason, message string, now time.Time) v1alpha1.MachineDeploymentCondition {
	return v1alpha1.MachineDeploymentCondition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            message,
		LastUpdateTime:     apitime.Of(now),
		LastTransitionTime: apitime.Of(now),
	}
}

// conditionOf returns the condition of type typ, and whether there is one.
func conditionOf(conditions []v1alpha1.MachineDeploymentCondition, typ v1alpha1.MachineDeploymentConditionType) (v1alpha1.MachineDeploymentCondition, bool) {
	for _, c := range conditions {
		if c.Type == typ {
			return c, true
		}
	}
	return v1alpha1.MachineDeploymentCondition{}, false
}

// withCondition returns conditions with c in place of the condition of its
// type, following Kubernetes' rules so that conditions only move when
// something happened: a condition with the same status and reason is kept
// as it is (times and message included), and one whose status stays keeps
// its lastTransitionTime. conditions is not modified.
func withCondition(conditions []v1alpha1.MachineDeploymentCondition, c v1alpha1.MachineDeploymentCondition) []v1alpha1.MachineDeploymentCondition {
	out := slices.Clone(conditions)
	for i, old := range out {
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status && old.Reason == c.Reason {
			return out
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		out[i] = c
		return out
	}
	return append(out, c)
}

// withoutCondition returns conditions without the condition of type typ.
// conditions is not modified.
func withoutCondition(conditions []v1alpha1.MachineDeploymentCondition, typ v1alpha1.MachineDeploymentConditionType) []v1alpha1.MachineDeploymentCondition {
	out := slices.DeleteFunc(slices.Clone(conditions), func(c v1alpha1.MachineDeploymentCondition) bool { return c.Type == typ })
	if len(out) == 0 {
		return nil
	}
	return out
}
