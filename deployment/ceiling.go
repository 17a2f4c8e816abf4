package deployment

import (
	"fmt"
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// ConditionReplicasCapped is v1alpha1.ReplicasCappedCondition as a
// MachineDeployment condition; ReasonTooManyReplicas is its reason, and the
// reason of the Warning event that tells of it.
const (
	ConditionReplicasCapped v1alpha1.MachineDeploymentConditionType = v1alpha1.ReplicasCappedCondition
	ReasonTooManyReplicas                                           = v1alpha1.TooManyReplicasReason
)

// withinCeiling returns the deployment as the sync plans with it: d itself
// when spec.replicas is at most ceiling, else a copy whose spec.replicas
// is ceiling, with the message that says so. Everything a sync derives
// from the replicas (the sets' sizes, their desired-replicas annotation,
// the rollout's bounds, the status' conditions) then follows the ceiling,
// so the deployment runs at it, never above; nothing writes the copy's
// spec back. Without the ceiling a replicas typo such as 2147483647
// created machines for as long as the cloud let it, with nothing to tell
// why.
func withinCeiling(d *v1alpha1.MachineDeployment, ceiling int) (*v1alpha1.MachineDeployment, string) {
	if int(d.Spec.Replicas) <= ceiling {
		return d, ""
	}
	msg := fmt.Sprintf("spec.replicas asks for %d machines, more than the ceiling of %d per machine deployment; the deployment keeps %d",
		d.Spec.Replicas, ceiling, ceiling)
	capped := d.DeepCopy()
	capped.Spec.Replicas = int32(ceiling)
	return capped, msg
}

// withCapped returns conditions with ConditionReplicasCapped telling capped,
// or without it when capped is "". A changed message replaces the
// condition, keeping its transition time: it names the replicas asked for
// now.
func withCapped(conditions []v1alpha1.MachineDeploymentCondition, capped string, now time.Time) []v1alpha1.MachineDeploymentCondition {
	if capped == "" {
		return withoutCondition(conditions, ConditionReplicasCapped)
	}
	c := newCondition(ConditionReplicasCapped, v1alpha1.ConditionTrue, ReasonTooManyReplicas, capped, now)
	if old, ok := conditionOf(conditions, ConditionReplicasCapped); ok && old.Message != c.Message {
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		conditions = withoutCondition(conditions, ConditionReplicasCapped)
	}
	return withCondition(conditions, c)
}
