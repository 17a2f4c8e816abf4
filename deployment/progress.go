package deployment

import (
	"fmt"
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// deploymentComplete reports whether the rollout of the deployment's current
// template is done according to st: every machine is of the new set, there
// are as many as spec.replicas, all available, and st was computed for the
// current generation.
func deploymentComplete(d *v1alpha1.MachineDeployment, st v1alpha1.MachineDeploymentStatus) bool {
	return st.UpdatedReplicas == d.Spec.Replicas &&
		st.Replicas == d.Spec.Replicas &&
		st.AvailableReplicas == d.Spec.Replicas &&
		st.ObservedGeneration >= d.Generation
}

// deploymentProgressing reports whether st shows progress over the stored
// status: more machines of the new set, fewer old machines, or more ready or
// available machines. Only progress restarts the progress deadline.
func deploymentProgressing(d *v1alpha1.MachineDeployment, st v1alpha1.MachineDeploymentStatus) bool {
	was := d.Status
	return st.UpdatedReplicas > was.UpdatedReplicas ||
		st.Replicas-st.UpdatedReplicas < was.Replicas-was.UpdatedReplicas ||
		st.ReadyReplicas > was.ReadyReplicas ||
		st.AvailableReplicas > was.AvailableReplicas
}

// progressDeadline returns the deployment's progress deadline and whether it
// has one.
func progressDeadline(d *v1alpha1.MachineDeployment) (time.Duration, bool) {
	if d.Spec.ProgressDeadlineSeconds == nil {
		return 0, false
	}
	return time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second, true
}

// deploymentTimedOut reports whether the rollout has made no progress for
// longer than spec.progressDeadlineSeconds at now, judged by the Progressing
// condition of st: its lastUpdateTime is when progress was last seen. A
// complete rollout never times out, one that timed out stays so, and without
// a deadline or a Progressing condition there is nothing to judge by.
func deploymentTimedOut(d *v1alpha1.MachineDeployment, st v1alpha1.MachineDeploymentStatus, now time.Time) bool {
	deadline, ok := progressDeadline(d)
	if !ok {
		return false
	}
	c, ok := conditionOf(st.Conditions, v1alpha1.MachineDeploymentProgressing)
	if !ok {
		return false
	}
	switch c.Reason {
	case v1alpha1.NewMachineSetAvailableReason:
		return false
	case v1alpha1.ProgressDeadlineExceededReason:
		return true
	}
	return c.LastUpdateTime.Add(deadline).Before(now)
}

// withProgress returns st with the Progressing condition brought up to date
// after a rollout step, as Kubernetes' Deployment controller does with MCM's
// reasons:
//
//   - complete: True, NewMachineSetAvailable;
//   - progress seen: True, MachineSetUpdated, with lastUpdateTime now (the
//     deadline counts from there) and lastTransitionTime kept while it was
//     True already;
//   - no progress past the deadline: False, ProgressDeadlineExceeded.
//
// Once the condition says NewMachineSetAvailable and all machines are of the
// new set, nothing is estimated any more: syncs after a finished rollout
// must not report progress. Unlike Kubernetes, and as MCM does (its issue
// 762), the condition is kept and maintained without a deadline too; only
// the timeout needs one. newSetName names the new set in messages ("" when
// there is none). st is the freshly calculated status (calculateStatus); d
// carries the stored one.
func withProgress(d *v1alpha1.MachineDeployment, st v1alpha1.MachineDeploymentStatus, newSetName string, now time.Time) v1alpha1.MachineDeploymentStatus {
	st = *st.DeepCopy()
	current, hasCurrent := conditionOf(d.Status.Conditions, v1alpha1.MachineDeploymentProgressing)
	if st.Replicas == st.UpdatedReplicas && hasCurrent && current.Reason == v1alpha1.NewMachineSetAvailableReason {
		return st
	}
	subject := fmt.Sprintf("MachineDeployment %q", d.Name)
	if newSetName != "" {
		subject = fmt.Sprintf("MachineSet %q", newSetName)
	}
	switch {
	case deploymentComplete(d, st):
		st.Conditions = withCondition(st.Conditions, newCondition(v1alpha1.MachineDeploymentProgressing, v1alpha1.ConditionTrue,
			v1alpha1.NewMachineSetAvailableReason, subject+" has successfully progressed.", now))
	case deploymentProgressing(d, st):
		c := newCondition(v1alpha1.MachineDeploymentProgressing, v1alpha1.ConditionTrue,
			v1alpha1.MachineSetUpdatedReason, subject+" is progressing.", now)
		// withCondition would keep a condition with the same reason as it
		// is; progress must move lastUpdateTime, so the condition is
		// replaced, keeping only its transition time.
		if hasCurrent && current.Status == v1alpha1.ConditionTrue {
			c.LastTransitionTime = current.LastTransitionTime
		}
		st.Conditions = withCondition(withoutCondition(st.Conditions, v1alpha1.MachineDeploymentProgressing), c)
	case deploymentTimedOut(d, st, now):
		st.Conditions = withCondition(st.Conditions, newCondition(v1alpha1.MachineDeploymentProgressing, v1alpha1.ConditionFalse,
			v1alpha1.ProgressDeadlineExceededReason, subject+" has timed out progressing.", now))
	}
	return st
}

// progressCheckAfter returns how long after now the deployment must be synced
// again to notice that its progress deadline passed, because nothing else
// would wake it: a stuck rollout produces no events. It reports false when no
// such check is needed: no deadline, no Progressing condition yet, the
// rollout complete (by st, the new status) or already timed out. The second
// added to the remaining time lets the deadline, which compares whole
// seconds, have passed by then.
func progressCheckAfter(d *v1alpha1.MachineDeployment, st v1alpha1.MachineDeploymentStatus, now time.Time) (time.Duration, bool) {
	deadline, ok := progressDeadline(d)
	if !ok {
		return 0, false
	}
	c, ok := conditionOf(d.Status.Conditions, v1alpha1.MachineDeploymentProgressing)
	if !ok || c.Reason == v1alpha1.ProgressDeadlineExceededReason || deploymentComplete(d, st) {
		return 0, false
	}
	return max(c.LastUpdateTime.Add(deadline).Sub(now), 0) + time.Second, true
}

// pausedCondition returns the stored status with the Progressing condition
// telling that the deployment was paused or resumed (status Unknown, reasons
// DeploymentPaused and DeploymentResumed), and whether it changed. Resuming
// sets lastUpdateTime to now, so that time spent paused does not count
// against the progress deadline. A rollout reported as timed out keeps that
// report.
func pausedCondition(d *v1alpha1.MachineDeployment, now time.Time) (v1alpha1.MachineDeploymentStatus, bool) {
	st := *d.Status.DeepCopy()
	c, ok := conditionOf(st.Conditions, v1alpha1.MachineDeploymentProgressing)
	if ok && c.Reason == v1alpha1.ProgressDeadlineExceededReason {
		return st, false
	}
	paused := ok && c.Reason == v1alpha1.DeploymentPausedReason
	switch {
	case d.Spec.Paused && !paused:
		st.Conditions = withCondition(st.Conditions, newCondition(v1alpha1.MachineDeploymentProgressing, v1alpha1.ConditionUnknown,
			v1alpha1.DeploymentPausedReason, "MachineDeployment is paused.", now))
		return st, true
	case !d.Spec.Paused && paused:
		st.Conditions = withCondition(st.Conditions, newCondition(v1alpha1.MachineDeploymentProgressing, v1alpha1.ConditionUnknown,
			v1alpha1.DeploymentResumedReason, "MachineDeployment is resumed.", now))
		return st, true
	}
	return st, false
}
