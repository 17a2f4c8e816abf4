package deployment

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

// statusInput is what a deployment's status is computed from.
type statusInput struct {
	Deployment *v1alpha1.MachineDeployment
	// NewSet is the deployment's new set, nil when it does not exist yet.
	NewSet *v1alpha1.MachineSet
	// OldSets are the deployment's other sets.
	OldSets []*v1alpha1.MachineSet
	// Machines holds the machines each set controls, by set name, and
	// Counts what countSets counted of them at Now (the sync counted them
	// already, for its plan).
	Machines map[string][]*v1alpha1.Machine
	Counts   map[string]machineCounts
	// Selector is the deployment's selector as a string, for the scale
	// subresource.
	Selector string
	Now      time.Time
	// Synced tells that the sync succeeded, so that the status reflects the
	// spec's generation; observedGeneration only moves then.
	Synced bool
}

// calculateStatus computes a deployment's status from its sets and their
// machines, starting from the stored status so that conditions keep their
// times and status.collisionCount is kept. It sets the Available and
// ReplicaFailure conditions, and ConditionInvalidAnnotation while
// v1alpha1.MinReadySecondsAnnotation has a value it does not know; the
// Progressing condition is withProgress's and pausedCondition's. The
// deployment is not modified.
//
//   - replicas: machines not being deleted, over all sets;
//   - updatedReplicas: those of the new set;
//   - readyReplicas: those in phase Running;
//   - availableReplicas: those available (countMachines): Running, as in
//     MCM, or Running for minReadySeconds when the deployment opts in
//     (minReadyOf);
//   - unavailableReplicas: what the sets are sized for minus the available
//     machines, never below 0 (there are more available machines than that
//     while a scale-down is under way);
//   - failedMachines: machines not being deleted whose last operation
//     failed, but the Failed ones their set keeps (machinestate.KeepFailed),
//     as the sets' own failedMachines;
//   - preservedFailedReplicas: the sum of the sets' (their Failed machines
//     whose preservation holds); the Available condition needs that many
//     fewer available machines, as in MCM.
func calculateStatus(in statusInput) (v1alpha1.MachineDeploymentStatus, error) {
	d := in.Deployment
	st := *d.Status.DeepCopy()
	all := withNew(in.NewSet, in.OldSets)
	counts := in.Counts

	st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas, st.PreservedFailedReplicas = 0, 0, 0, 0, 0
	for _, s := range all {
		c := counts[s.Name]
		st.Replicas += c.Machines
		st.ReadyReplicas += c.Ready
		st.AvailableReplicas += c.Available
		st.PreservedFailedReplicas += s.Status.PreservedFailedReplicas
	}
	if in.NewSet != nil {
		st.UpdatedReplicas = counts[in.NewSet.Name].Machines
	}
	st.UnavailableReplicas = max(specReplicas(all)-st.AvailableReplicas, 0)
	st.FailedMachines = failedMachines(all, in.Machines, in.Now)
	st.LabelSelector = in.Selector

	_, unavailable, err := rolloutBounds(d)
	if err != nil {
		return v1alpha1.MachineDeploymentStatus{}, err
	}
	// A preserved Failed machine is kept, not replaced: as in MCM, it
	// lowers the availability the deployment needs rather than making it
	// unavailable.
	minAvailable := max(d.Spec.Replicas-unavailable-st.PreservedFailedReplicas, 0)
	st.Conditions = withCondition(st.Conditions, availableCondition(minAvailable, st.AvailableReplicas, in.Now))
	if failure, ok := replicaFailure(in.NewSet, in.OldSets); ok {
		st.Conditions = withCondition(st.Conditions, failure)
	} else {
		st.Conditions = withoutCondition(st.Conditions, v1alpha1.MachineDeploymentReplicaFailure)
	}
	st.Conditions = withInvalidAnnotation(st.Conditions, d, in.Now)
	if in.Synced {
		st.ObservedGeneration = d.Generation
	}
	return st, nil
}

// ConditionInvalidAnnotation is v1alpha1.InvalidAnnotationCondition as a
// MachineDeployment condition; ReasonInvalidMinReadySeconds its reason for
// v1alpha1.MinReadySecondsAnnotation.
const (
	ConditionInvalidAnnotation   v1alpha1.MachineDeploymentConditionType = v1alpha1.InvalidAnnotationCondition
	ReasonInvalidMinReadySeconds                                         = v1alpha1.InvalidMinReadySecondsReason
)

// withInvalidAnnotation returns conditions with ConditionInvalidAnnotation
// when the deployment's v1alpha1.MinReadySecondsAnnotation has an unknown
// value (which minReadyOf counts as MCM's behaviour), and without it
// otherwise. A changed message replaces the condition, keeping its
// transition time: the condition names the value that is wrong now.
func withInvalidAnnotation(conditions []v1alpha1.MachineDeploymentCondition, d *v1alpha1.MachineDeployment, now time.Time) []v1alpha1.MachineDeploymentCondition {
	_, err := machinestate.MinReady(d.Annotations, d.Spec.MinReadySeconds)
	if err == nil {
		return withoutCondition(conditions, ConditionInvalidAnnotation)
	}
	c := newCondition(ConditionInvalidAnnotation, v1alpha1.ConditionTrue, ReasonInvalidMinReadySeconds, err.Error(), now)
	if old, ok := conditionOf(conditions, ConditionInvalidAnnotation); ok && old.Message != c.Message {
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		conditions = withoutCondition(conditions, ConditionInvalidAnnotation)
	}
	return withCondition(conditions, c)
}

// availableCondition is the Available condition: True while at least
// minAvailable (spec.replicas - maxUnavailable) machines are available, the
// capacity a rollout promises to keep.
func availableCondition(minAvailable, available int32, now time.Time) v1alpha1.MachineDeploymentCondition {
	if available >= minAvailable {
		return newCondition(v1alpha1.MachineDeploymentAvailable, v1alpha1.ConditionTrue, v1alpha1.MinimumReplicasAvailableReason,
			"Deployment has minimum availability.", now)
	}
	return newCondition(v1alpha1.MachineDeploymentAvailable, v1alpha1.ConditionFalse, v1alpha1.MinimumReplicasUnavailableReason,
		fmt.Sprintf("Deployment does not have minimum availability: %d of at least %d machines available.", available, minAvailable), now)
}

// replicaFailure returns the deployment's ReplicaFailure condition, copied
// from a set that could not create or delete machines: the new set's when it
// has one, since that is the set the rollout waits for, else the oldest old
// set's. It reports false when no set has the condition.
func replicaFailure(newSet *v1alpha1.MachineSet, old []*v1alpha1.MachineSet) (v1alpha1.MachineDeploymentCondition, bool) {
	candidates := byAge(old)
	if newSet != nil {
		candidates = append([]*v1alpha1.MachineSet{newSet}, candidates...)
	}
	for _, s := range candidates {
		for _, c := range s.Status.Conditions {
			if c.Type == v1alpha1.MachineSetReplicaFailure {
				return v1alpha1.MachineDeploymentCondition{
					Type:               v1alpha1.MachineDeploymentReplicaFailure,
					Status:             c.Status,
					Reason:             c.Reason,
					Message:            c.Message,
					LastUpdateTime:     c.LastTransitionTime,
					LastTransitionTime: c.LastTransitionTime,
				}, true
			}
		}
	}
	return v1alpha1.MachineDeploymentCondition{}, false
}

// failedMachines summarises the machines of sets, not being deleted, whose
// last operation failed, ordered by name so that the status does not change
// with the order of the cache; nil when there are none.
func failedMachines(sets []*v1alpha1.MachineSet, machines map[string][]*v1alpha1.Machine, now time.Time) []*v1alpha1.MachineSummary {
	var failed []*v1alpha1.MachineSummary
	for _, s := range sets {
		for _, m := range machines[s.Name] {
			if machinestate.BeingDeleted(m) || m.Status.LastOperation.State != v1alpha1.MachineStateFailed {
				continue
			}
			if m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed && machinestate.KeepFailed(m, now) {
				continue // kept by its set, as the set's failedMachines tells
			}
			failed = append(failed, &v1alpha1.MachineSummary{
				Name:          m.Name,
				ProviderID:    m.Spec.ProviderID,
				LastOperation: m.Status.LastOperation,
				OwnerRef:      s.Name,
			})
		}
	}
	slices.SortFunc(failed, func(a, b *v1alpha1.MachineSummary) int { return cmp.Compare(a.Name, b.Name) })
	return failed
}

// status computes the status one sync writes: calculateStatus on top of
// the paused/resumed report, the Progressing condition (withProgress, or
// the strategy this controller does not roll out). The Frozen condition is
// the safety controller's and stays as stored. It is pure.
func nextStatus(d *v1alpha1.MachineDeployment, obs observed, selector string, stalled stall, now time.Time, synced bool) (v1alpha1.MachineDeploymentStatus, error) {
	base := d
	if paused, changed := pausedCondition(d, now); changed {
		base = d.DeepCopy()
		base.Status = paused
	}
	st, err := calculateStatus(statusInput{Deployment: base, NewSet: obs.newSet, OldSets: obs.old, Machines: obs.machines, Counts: obs.counts,
		Selector: selector, Now: now, Synced: synced})
	if err != nil {
		return v1alpha1.MachineDeploymentStatus{}, err
	}
	switch {
	case stalled.message != "":
		st.Conditions = withStall(st.Conditions, newCondition(v1alpha1.MachineDeploymentProgressing, v1alpha1.ConditionFalse,
			stalled.reason, stalled.message, now))
	case !d.Spec.Paused:
		newSetName := ""
		if obs.newSet != nil {
			newSetName = obs.newSet.Name
		}
		st = withProgress(base, st, newSetName, now)
	}
	return st, nil
}

// stall is why a deployment's rollout does not progress, for its
// Progressing condition (False); the zero value when it may.
type stall struct{ reason, message string }

// stall is the step's: the strategy not rolled out, or an in-place update
// that failed.
func (p stepPlan) stall() stall {
	switch {
	case p.step.Unsupported != "":
		return stall{ReasonUnsupported, p.step.Unsupported}
	case p.inPlace != nil && p.inPlace.failure != nil:
		return stall{ReasonInPlaceUpdateFailed, p.inPlace.failure.message()}
	}
	return stall{}
}

// withStall is withCondition for a stall's Progressing condition, except
// that a new message replaces the stored one (with lastUpdateTime; the
// lastTransitionTime stays): the message names what stops the rollout,
// such as the failed machine and the agent's reason, which change while
// status and reason stay. Kept as withCondition keeps it, the condition
// would go on naming a failure that is gone, and the event that tells a
// stall once per message (reported) would be sent at every sync.
func withStall(conditions []v1alpha1.MachineDeploymentCondition, c v1alpha1.MachineDeploymentCondition) []v1alpha1.MachineDeploymentCondition {
	old, ok := conditionOf(conditions, c.Type)
	if !ok || old.Status != c.Status || old.Reason != c.Reason || old.Message == c.Message {
		return withCondition(conditions, c)
	}
	out := slices.Clone(conditions)
	for i := range out {
		if out[i].Type == c.Type {
			c.LastTransitionTime = old.LastTransitionTime
			out[i] = c
		}
	}
	return out
}

// reported reports whether the stored status already tells message under
// the condition typ, so that a standing problem is told by one event, not
// one per sync.
func reported(d *v1alpha1.MachineDeployment, typ v1alpha1.MachineDeploymentConditionType, message string) bool {
	c, ok := conditionOf(d.Status.Conditions, typ)
	return ok && c.Message == message
}

// updateStatus writes the status of statusOf when it changed.
func (c *Controller) updateStatus(ctx context.Context, s scope, p syncPlan, done applied) (v1alpha1.MachineDeploymentStatus, error) {
	st, err := statusOf(s, p, done)
	if err != nil {
		return st, err
	}
	_, err = c.writeStatus(ctx, done.d, st)
	return st, err
}

// statusOf is the deployment's status after a sync's step: nextStatus of
// what the sync observed, with the set apply created and observedGeneration
// moved only when the step's writes succeeded, and the ceiling's
// condition. It is pure.
func statusOf(s scope, p syncPlan, done applied) (v1alpha1.MachineDeploymentStatus, error) {
	obs := s.observed
	if done.newSet != nil {
		obs.newSet = done.newSet
	}
	st, err := nextStatus(p.d, obs, s.selector, p.stall(), s.now, done.stepErr == nil)
	if err != nil {
		return st, err
	}
	st.Conditions = withCapped(st.Conditions, p.capped, s.now)
	return st, nil
}

// reportInvalid tells once, by the ReplicaFailure condition and an event,
// why the deployment cannot work, and returns the error that retries it
// with backoff.
func (c *Controller) reportInvalid(ctx context.Context, d *v1alpha1.MachineDeployment, problem string, now time.Time) error {
	if !reported(d, v1alpha1.MachineDeploymentReplicaFailure, problem) {
		c.warn(d, ReasonInvalid, problem)
	}
	st := *d.Status.DeepCopy()
	st.Conditions = withCondition(st.Conditions, newCondition(v1alpha1.MachineDeploymentReplicaFailure, v1alpha1.ConditionTrue,
		ReasonInvalid, problem, now))
	_, err := c.writeStatus(ctx, d, st)
	return errors.Join(fmt.Errorf("machine deployment %s/%s is invalid: %s", d.Namespace, d.Name, problem), err)
}

// deploymentConditions is the conditions list of a deployment's status,
// which patch.WriteStatus guards.
func deploymentConditions(st v1alpha1.MachineDeploymentStatus) any { return st.Conditions }

// writeStatus writes st when it differs from the stored status
// (patch.WriteStatus says when the write is guarded, and why), and returns
// the deployment as written.
func (c *Controller) writeStatus(ctx context.Context, d *v1alpha1.MachineDeployment, st v1alpha1.MachineDeploymentStatus) (*v1alpha1.MachineDeployment, error) {
	updated, err := patch.WriteStatus(ctx, c.client.MachineV1alpha1().MachineDeployments(d.Namespace).Patch, d,
		d.Status, st, deploymentConditions, c.opts.FieldManager)
	if err != nil {
		return d, fmt.Errorf("writing status of machine deployment %s: %w", d.Name, err)
	}
	if updated != d {
		c.writes.Wrote(workqueue.KeyOf(d), updated.ResourceVersion)
	}
	return updated, nil
}
