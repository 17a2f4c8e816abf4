package machineset

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/apitime"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// statusInput is what the status of a set is computed from.
type statusInput struct {
	Now      time.Time
	Set      *v1alpha1.MachineSet
	Machines []*v1alpha1.Machine // owned, those being deleted included
	Selector string
	// ReplicaFailure is why the sync could not bring the set to its
	// replicas; zero when nothing stood in the way.
	ReplicaFailure replicaFailure
	// Foreign names the machines the set did not create
	// (foreignMessage); "" when there are none.
	Foreign string
	// Capped tells why the set keeps fewer machines than spec.replicas
	// (wantedReplicas); "" when it keeps as many.
	Capped string
	// Done is what the sync created and deleted.
	Done applied
	// Synced: the sync succeeded, so the status reflects the spec's
	// generation.
	Synced bool
}

// ConditionInvalidAnnotation is v1alpha1.InvalidAnnotationCondition as a
// MachineSet condition; ReasonInvalidMinReadySeconds its reason for
// v1alpha1.MinReadySecondsAnnotation.
const (
	ConditionInvalidAnnotation   v1alpha1.MachineSetConditionType = v1alpha1.InvalidAnnotationCondition
	ReasonInvalidMinReadySeconds                                  = v1alpha1.InvalidMinReadySecondsReason
)

// ConditionReplicasCapped is v1alpha1.ReplicasCappedCondition as a
// MachineSet condition; ReasonTooManyReplicas is its reason, and the
// reason of the Warning event that tells of it.
const (
	ConditionReplicasCapped v1alpha1.MachineSetConditionType = v1alpha1.ReplicasCappedCondition
	ReasonTooManyReplicas                                    = v1alpha1.TooManyReplicasReason
)

// ConditionForeignMachines is v1alpha1.ForeignMachinesCondition as a
// MachineSet condition, ReasonNotCreatedBySet its reason.
const (
	ConditionForeignMachines v1alpha1.MachineSetConditionType = v1alpha1.ForeignMachinesCondition
	ReasonNotCreatedBySet                                     = v1alpha1.NotCreatedBySetReason
)

// calculateStatus computes a set's status. It is pure; the status is
// written only when it differs from the stored one.
//
// A machine not being deleted counts as available once it is Running (or
// Available), as in MCM; only with v1alpha1.MinReadySecondsAnnotation
// "apply" does it have to be so for spec.minReadySeconds first
// (machinestate.MinReady). An unknown value of the annotation counts as
// MCM's behaviour and sets ConditionInvalidAnnotation.
//
// Of the machines not being deleted, preservedFailedReplicas counts the
// Failed ones whose preservation holds (machinestate.PreservedFailed) and
// autoPreserveFailedMachineCount those carrying the auto-preserved mark,
// in any phase, as MCM; failedMachines leaves out the Failed machines the
// set keeps (machinestate.KeepFailed). MCM counts a preservation that ran
// out until the machine controller clears it; here it stops counting at
// its expiry.
func calculateStatus(in statusInput) v1alpha1.MachineSetStatus {
	set := in.Set
	st := *set.Status.DeepCopy()
	st.Replicas, st.FullyLabeledReplicas, st.ReadyReplicas, st.AvailableReplicas = 0, 0, 0, 0
	st.LabelSelector = in.Selector
	templateLabels := labels.SelectorFromSet(set.Spec.Template.Labels)
	minReady, invalidMinReady := machinestate.MinReady(set.Annotations, set.Spec.MinReadySeconds)
	var failed []v1alpha1.MachineSummary
	var preservedFailed, autoPreserved int32
	for _, m := range in.Machines {
		if machinestate.BeingDeleted(m) {
			continue
		}
		st.Replicas++
		if templateLabels.Matches(labels.Set(m.Labels)) {
			st.FullyLabeledReplicas++
		}
		if m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
			st.ReadyReplicas++
		}
		if machinestate.Available(m, minReady, in.Now) {
			st.AvailableReplicas++
		}
		if machinestate.PreservedFailed(m, in.Now) {
			preservedFailed++
		}
		if machinestate.AutoPreserved(m) {
			autoPreserved++
		}
		// A Failed machine the set keeps is not reported failed: a
		// deployment would count it unavailable (MCM's rule).
		kept := m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed && machinestate.KeepFailed(m, in.Now)
		if m.Status.LastOperation.State == v1alpha1.MachineStateFailed && !kept {
			failed = append(failed, v1alpha1.MachineSummary{Name: m.Name, ProviderID: m.Spec.ProviderID,
				LastOperation: m.Status.LastOperation, OwnerRef: set.Name})
		}
	}
	st.FailedMachines = nil
	if len(failed) > 0 {
		st.FailedMachines = &failed
	}
	st.PreservedFailedReplicas = preservedFailed
	// Absent when zero, as MCM's int32 with omitempty is on the wire.
	st.AutoPreserveFailedMachineCount = nil
	if autoPreserved > 0 {
		st.AutoPreserveFailedMachineCount = &autoPreserved
	}
	setCondition(&st, v1alpha1.MachineSetReplicaFailure, in.ReplicaFailure.message(), in.ReplicaFailure.reason(), in.Now)
	setCondition(&st, ConditionInvalidAnnotation, errorMessage(invalidMinReady), ReasonInvalidMinReadySeconds, in.Now)
	setCondition(&st, ConditionReplicasCapped, in.Capped, ReasonTooManyReplicas, in.Now)
	setCondition(&st, ConditionForeignMachines, in.Foreign, ReasonNotCreatedBySet, in.Now)
	if op := lastOperation(in.ReplicaFailure, in.Done); op != nil && !sameOperation(*op, st.LastOperation) {
		op.LastUpdateTime = apitime.Of(in.Now)
		st.LastOperation = *op
	}
	if in.Synced {
		st.ObservedGeneration = set.Generation
	}
	return st
}

// errorMessage is err's message, or "" for nil.
func errorMessage(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// replicaFailure is why a sync could not bring a set to its replicas.
type replicaFailure struct {
	// Invalid: the set cannot work (it got past admission).
	Invalid string
	// NoClass: the template's MachineClass does not exist or is being deleted.
	NoClass string
	// Create and Delete describe creations and deletions that failed.
	Create, Delete string
}

// message is the ReplicaFailure condition's message; "" when nothing failed.
func (f replicaFailure) message() string {
	return joinNonEmpty(f.Invalid, f.NoClass, f.Delete, f.Create)
}

// reason is the ReplicaFailure condition's reason: MCM's FailedCreate and
// FailedDelete, and InvalidMachineSet for a set that cannot work.
func (f replicaFailure) reason() string {
	switch {
	case f.Invalid != "":
		return ReasonInvalid
	case f.NoClass == "" && f.Create == "" && f.Delete != "":
		return ReasonDeleteFailed
	default:
		return ReasonCreateFailed
	}
}

// lastOperation is what a sync tells of itself in status.lastOperation: its
// failure, or the machines it created and deleted; nil when it did nothing
// worth telling, so that the stored one stays.
func lastOperation(f replicaFailure, done applied) *v1alpha1.LastOperation {
	op := &v1alpha1.LastOperation{Type: v1alpha1.MachineOperationCreate, State: v1alpha1.MachineStateSuccessful}
	if done.Created == 0 && (done.Deleted > 0 || f.reason() == ReasonDeleteFailed) {
		op.Type = v1alpha1.MachineOperationDelete
	}
	switch msg := f.message(); {
	case msg != "":
		op.State, op.Description = v1alpha1.MachineStateFailed, msg
	case done.Created > 0 && done.Deleted > 0:
		op.Description = fmt.Sprintf("Created %d and deleted %d machine(s)", done.Created, done.Deleted)
	case done.Created > 0:
		op.Description = fmt.Sprintf("Created %d machine(s)", done.Created)
	case done.Deleted > 0:
		op.Description = fmt.Sprintf("Deleted %d machine(s)", done.Deleted)
	default:
		return nil
	}
	return op
}

// sameOperation reports whether a and b tell the same, whenever it was; a
// repeated operation keeps its first time, so that it is not written again.
func sameOperation(a, b v1alpha1.LastOperation) bool {
	return a.Type == b.Type && a.State == b.State && a.Description == b.Description && a.ErrorCode == b.ErrorCode
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
			Reason: reason, Message: message, LastTransitionTime: apitime.Of(now)})
	}
}
