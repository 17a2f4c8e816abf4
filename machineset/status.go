package machineset

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// statusInput is what the status of a set is computed from.
type statusInput struct {
	Now      time.Time
	Set      *v1alpha1.MachineSet
	Machines []*v1alpha1.Machine // owned, those being deleted included
	Selector string
	// ReplicaFailure describes a failed creation or deletion of this sync;
	// "" when none failed.
	ReplicaFailure string
	// Frozen describes why creations are held back; "" when they are not.
	Frozen string
	// Synced: the sync succeeded, so the status reflects the spec's
	// generation.
	Synced bool
}

// calculateStatus computes a set's status. It is pure; the status is
// written only when it differs from the stored one.
func calculateStatus(in statusInput) v1alpha1.MachineSetStatus {
	set := in.Set
	st := *set.Status.DeepCopy()
	st.Replicas, st.FullyLabeledReplicas, st.ReadyReplicas, st.AvailableReplicas = 0, 0, 0, 0
	st.LabelSelector = in.Selector
	templateLabels := labels.SelectorFromSet(set.Spec.Template.Labels)
	minReady := time.Duration(set.Spec.MinReadySeconds) * time.Second
	var failed []v1alpha1.MachineSummary
	for _, m := range in.Machines {
		if beingDeleted(m) {
			continue
		}
		st.Replicas++
		if templateLabels.Matches(labels.Set(m.Labels)) {
			st.FullyLabeledReplicas++
		}
		switch phase := m.Status.CurrentStatus.Phase; phase {
		case v1alpha1.MachineRunning, v1alpha1.MachineAvailable:
			if phase == v1alpha1.MachineRunning {
				st.ReadyReplicas++
			}
			if since := m.Status.CurrentStatus.LastUpdateTime.Time; minReady == 0 || !in.Now.Before(since.Add(minReady)) {
				st.AvailableReplicas++
			}
		}
		if m.Status.LastOperation.State == v1alpha1.MachineStateFailed {
			failed = append(failed, v1alpha1.MachineSummary{Name: m.Name, ProviderID: m.Spec.ProviderID,
				LastOperation: m.Status.LastOperation, OwnerRef: set.Name})
		}
	}
	st.FailedMachines = nil
	if len(failed) > 0 {
		st.FailedMachines = &failed
	}
	setCondition(&st, v1alpha1.MachineSetReplicaFailure, in.ReplicaFailure, "ReplicaFailure", in.Now)
	setCondition(&st, v1alpha1.MachineSetFrozen, in.Frozen, "Frozen", in.Now)
	if in.Synced {
		st.ObservedGeneration = set.Generation
	}
	return st
}

// conditionOf returns the set's condition of type typ, or nil.
func conditionOf(st *v1alpha1.MachineSetStatus, typ v1alpha1.MachineSetConditionType) *v1alpha1.MachineSetCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == typ {
			return &st.Conditions[i]
		}
	}
	return nil
}

// reported reports whether the stored status already tells message under
// the condition typ, so that a repeated problem is not told again by an
// event at every sync.
func reported(set *v1alpha1.MachineSet, typ v1alpha1.MachineSetConditionType, message string) bool {
	c := conditionOf(&set.Status, typ)
	return c != nil && c.Message == message
}

// setCondition sets a condition True with message, or removes it when
// message is empty. The transition time moves only when the status does.
func setCondition(st *v1alpha1.MachineSetStatus, typ v1alpha1.MachineSetConditionType, message, reason string, now time.Time) {
	for i, c := range st.Conditions {
		if c.Type != typ {
			continue
		}
		if message == "" {
			st.Conditions = append(st.Conditions[:i:i], st.Conditions[i+1:]...)
			return
		}
		st.Conditions[i].Reason, st.Conditions[i].Message = reason, message
		return
	}
	if message != "" {
		st.Conditions = append(st.Conditions, v1alpha1.MachineSetCondition{Type: typ, Status: v1alpha1.ConditionTrue,
			Reason: reason, Message: message, LastTransitionTime: metaTime(now)})
	}
}

// metaTime is now as an API time, which has one-second precision.
func metaTime(now time.Time) metav1.Time { return metav1.NewTime(now.UTC().Truncate(time.Second)) }
