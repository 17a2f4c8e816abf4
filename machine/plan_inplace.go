package machine

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
)

// The in-place update's records on a Machine.
const (
	// InPlaceDrainCondition is the type of the status condition in which
	// the controller keeps the drain of the node selected for an in-place
	// update (see flowRecord): reason Draining, its lastTransitionTime
	// when the drain began (the drain timeout counts from there, never
	// from before the node's SelectedForUpdate condition, which the
	// controller wrote on the node), its message the drain timeout and
	// maxEvictRetries in force then. Patching the machine during the
	// drain neither shortens it nor moves its start. It goes when the
	// drain ends.
	InPlaceDrainCondition corev1.NodeConditionType = "mcmkit.io/InPlaceDrain"
	// InPlaceDrainStartedAnnotation mirrors (RFC 3339) the start of that
	// drain for people and tools. It is read only for a drain an older
	// version began, which has no InPlaceDrainCondition yet.
	InPlaceDrainStartedAnnotation = "mcmkit.io/inplace-drain-started"
	// InPlaceDrainStateAnnotation holds the drain state (drain.State) of
	// that drain between passes.
	InPlaceDrainStateAnnotation = "mcmkit.io/inplace-drain-state"
)

// Event reasons of the in-place update.
const (
	// ReasonInPlaceUpdating: the node is drained and ready for its agent.
	ReasonInPlaceUpdating = "InPlaceUpdating"
	// ReasonInPlaceUpdated: the agent reported a successful update.
	ReasonInPlaceUpdated = "InPlaceUpdateSuccessful"
	// ReasonInPlaceUpdateFailed: the agent reported a failure, or the
	// in-place update timeout ran out.
	ReasonInPlaceUpdateFailed = "InPlaceUpdateFailed"
)

// The results the in-place metrics count (mcm_machine_inplace_updates_total).
const (
	inPlaceStarted    = "started"
	inPlaceSuccessful = "successful"
	inPlaceFailed     = "failed"
)

// inPlaceOutcome is what a sync did to the machine's in-place update, for
// the metrics: Result is "" (nothing), inPlaceStarted, inPlaceSuccessful
// or inPlaceFailed; Took, for a result, the time since the update started
// (zero when it is not known: a success after a failure); DrainTook, for
// a start, how long the drain took.
type inPlaceOutcome struct {
	Result          string
	Took, DrainTook time.Duration
}

// readyForUpdate is the condition that tells the node agent to update.
var readyForUpdate = corev1.NodeCondition{Type: v1alpha1.NodeInPlaceUpdate, Status: corev1.ConditionTrue,
	Reason: v1alpha1.ReadyForUpdate, Message: v1alpha1.ReadyForUpdateMessage}

// planInPlace plans the machine's side of an in-place update into p,
// after the health step: the phase the node agent's result or the
// in-place timeout gives, the node's InPlaceUpdate condition its labels
// give, and the drain of a selected node. node is the machine's own
// node, nil when it has none (then only the timeout applies). It is
// pure; the drain's outcome is planned by planInPlaceDrainOutcome.
func planInPlace(p *machinePlan, obs observation, node *corev1.Node) {
	m := p.Machine
	planInPlaceResult(p, obs, node)
	if node == nil {
		clearInPlaceDrain(m)
		return
	}
	cur := nodeCondition(node, v1alpha1.NodeInPlaceUpdate)
	want := nextInPlaceCondition(node, cur)
	reason := ""
	switch {
	case want != nil:
		reason = want.Reason
	case cur != nil:
		reason = cur.Reason
	}
	phase := m.Status.CurrentStatus.Phase
	// A machine is drained for an update while it runs (or is Unknown)
	// since before this sync: one the health step just brought back
	// from an update is written Running first.
	was := obs.Machine.Status.CurrentStatus.Phase
	drainable := (phase == v1alpha1.MachineRunning || phase == v1alpha1.MachineUnknown) &&
		(was == v1alpha1.MachineRunning || was == v1alpha1.MachineUnknown)
	switch {
	case phase == v1alpha1.MachineInPlaceUpdating && (reason == v1alpha1.SelectedForUpdate || reason == v1alpha1.DrainSuccessful):
		// Drained, and the phase written, but not the condition (its
		// write failed, or MCM stopped between the two).
		want = &readyForUpdate
		clearInPlaceDrain(m)
	case drainable && reason == v1alpha1.DrainSuccessful:
		// MCM drained the node and stopped before ReadyForUpdate.
		startInPlaceUpdate(p, obs.Config, obs.Now, 0)
		want = &readyForUpdate
	case drainable && reason == v1alpha1.SelectedForUpdate:
		p.InPlaceDrain = planInPlaceDrain(obs, m, node.Name, cur)
	default:
		clearInPlaceDrain(m)
	}
	if want != nil {
		p.InPlaceCondition = inPlaceConditionUpdate(node, *want, obs.Now)
	}
}

// nextInPlaceCondition is the InPlaceUpdate condition the node's labels
// ask for, from cur (nil: none), as MCM's machine controller decides it;
// nil when they ask for no change. Without the candidate label nothing
// changes (a selected label alone is ignored). A candidate gets
// CandidateForUpdate when it has no condition yet or its last update
// succeeded and its result label is gone (a new rollout); a selected
// candidate then SelectedForUpdate (it is drained at that reason); the
// agent's result label then UpdateSuccessful or UpdateFailed. MCM makes
// one of these steps per pass; they are taken at once here.
func nextInPlaceCondition(node *corev1.Node, cur *corev1.NodeCondition) *corev1.NodeCondition {
	if _, ok := node.Labels[v1alpha1.CandidateForUpdateLabel]; !ok {
		return nil
	}
	reason, message := "", ""
	if cur != nil {
		reason, message = cur.Reason, cur.Message
	}
	for range 3 { // candidate, selected: each step at most once
		next, msg, ok := inPlaceStep(node, reason)
		if !ok || (next == reason && msg == message) {
			break
		}
		reason, message = next, msg
	}
	if cur != nil && cur.Reason == reason && cur.Message == message {
		return nil
	}
	return &corev1.NodeCondition{Type: v1alpha1.NodeInPlaceUpdate, Status: corev1.ConditionTrue, Reason: reason, Message: message}
}

// inPlaceStep is the condition's next reason and message from reason by
// the node's labels; ok is false when the labels ask for no step.
func inPlaceStep(node *corev1.Node, reason string) (next, message string, ok bool) {
	result, hasResult := node.Labels[v1alpha1.UpdateResultLabel]
	_, selected := node.Labels[v1alpha1.SelectedForUpdateLabel]
	switch {
	case reason == "" || (reason == v1alpha1.UpdateSuccessful && !hasResult):
		return v1alpha1.CandidateForUpdate, v1alpha1.CandidateForUpdateMessage, true
	case selected && reason == v1alpha1.CandidateForUpdate:
		return v1alpha1.SelectedForUpdate, v1alpha1.SelectedForUpdateMessage, true
	case selected && reason == v1alpha1.SelectedForUpdate:
		// Drained before a result is taken.
	case result == v1alpha1.UpdateResultSuccessful:
		return v1alpha1.UpdateSuccessful, v1alpha1.UpdateSuccessfulMessage, true
	case result == v1alpha1.UpdateResultFailed:
		// The agent's reason is anyone's text of any size.
		return v1alpha1.UpdateFailed, boundMessage(v1alpha1.UpdateFailedMessage+node.Annotations[v1alpha1.UpdateFailedReasonAnnotation], maxStatusMessage), true
	}
	return "", "", false
}

// inPlaceConditionUpdate is conditionUpdate for the InPlaceUpdate
// condition, whose status is always True: its transition time moves with
// its reason, as MCM's does.
func inPlaceConditionUpdate(node *corev1.Node, want corev1.NodeCondition, now time.Time) *corev1.NodeCondition {
	c := conditionUpdate(node, want, now)
	if c == nil {
		return nil
	}
	if cur := nodeCondition(node, want.Type); cur != nil && cur.Reason != want.Reason {
		c.LastTransitionTime = metav1.NewTime(now)
	}
	return c
}

// planInPlaceResult moves an updating (or failed) machine's phase by the
// node agent's result label, as MCM does: successful gives
// InPlaceUpdateSuccessful (also after a failure), failed
// InPlaceUpdateFailed with the agent's reason; and an update that has no
// result when the in-place timeout runs out (counted from
// InPlaceUpdating) gives InPlaceUpdateFailed. Until then the machine is
// synced again at the timeout.
func planInPlaceResult(p *machinePlan, obs observation, node *corev1.Node) {
	m, now := p.Machine, obs.Now
	cs := m.Status.CurrentStatus
	if cs.Phase != v1alpha1.MachineInPlaceUpdating && cs.Phase != v1alpha1.MachineInPlaceUpdateFailed {
		return
	}
	var took time.Duration
	if cs.Phase == v1alpha1.MachineInPlaceUpdating {
		took = now.Sub(cs.LastUpdateTime.Time)
	}
	result := ""
	if node != nil {
		result = node.Labels[v1alpha1.UpdateResultLabel]
	}
	switch {
	case result == v1alpha1.UpdateResultSuccessful:
		p.InPlaceEvents = appendEvent(p.InPlaceEvents, report(m, now, transition{
			Phase: v1alpha1.MachineInPlaceUpdateSuccessful, Reason: ReasonInPlaceUpdated,
			Op: v1alpha1.LastOperation{Description: fmt.Sprintf("Machine %s successfully updated dependencies", m.Name),
				State: v1alpha1.MachineStateSuccessful, Type: v1alpha1.MachineOperationInPlaceUpdate},
		}))
		p.InPlaceOutcome = inPlaceOutcome{Result: inPlaceSuccessful, Took: took}
	case result == v1alpha1.UpdateResultFailed:
		// Also after the timeout: the agent's reason says more than the
		// timeout's text (reported once; the phase's time is kept).
		reason := node.Annotations[v1alpha1.UpdateFailedReasonAnnotation]
		p.InPlaceEvents = appendEvent(p.InPlaceEvents, report(m, now, transition{
			Phase: v1alpha1.MachineInPlaceUpdateFailed, Reason: ReasonInPlaceUpdateFailed, Warning: true,
			Op: v1alpha1.LastOperation{Description: fmt.Sprintf("Machine %s failed to update dependencies: %s", m.Name, reason),
				State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationInPlaceUpdate},
			Message: fmt.Sprintf("The node agent failed to update machine %s in place: %s", m.Name, reason),
		}))
		if cs.Phase == v1alpha1.MachineInPlaceUpdating {
			p.InPlaceOutcome = inPlaceOutcome{Result: inPlaceFailed, Took: took}
		}
	case cs.Phase == v1alpha1.MachineInPlaceUpdating:
		timeout := inPlaceTimeout(obs.Config)
		if took <= timeout {
			requeueWithin(p, timeout-took+time.Millisecond)
			return
		}
		// MCM's text: %s of the duration, followed by "minutes".
		msg := fmt.Sprintf("Machine %s failed to in-place update in %s minutes.", m.Name, timeout)
		p.InPlaceEvents = appendEvent(p.InPlaceEvents, report(m, now, transition{
			Phase: v1alpha1.MachineInPlaceUpdateFailed, Reason: ReasonInPlaceUpdateFailed, Warning: true,
			Op: v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationInPlaceUpdate},
		}))
		p.InPlaceOutcome = inPlaceOutcome{Result: inPlaceFailed, Took: took}
	}
}

// inPlaceTimeout is the machine's in-place update timeout.
func inPlaceTimeout(c v1alpha1.MachineConfiguration) time.Duration {
	if c.MachineInPlaceUpdateTimeout != nil {
		return c.MachineInPlaceUpdateTimeout.Duration
	}
	return v1alpha1.DefaultMachineInPlaceUpdateTimeout
}

// startInPlaceUpdate moves a drained machine to InPlaceUpdating, which
// starts the in-place timeout, and syncs it again when that runs out.
func startInPlaceUpdate(p *machinePlan, c v1alpha1.MachineConfiguration, now time.Time, drainTook time.Duration) {
	m := p.Machine
	clearInPlaceDrain(m)
	// An unhealthy spell before the update is not the updated node's.
	deleteAnnotation(m, UnhealthySinceAnnotation)
	p.InPlaceEvents = appendEvent(p.InPlaceEvents, report(m, now, transition{
		Phase: v1alpha1.MachineInPlaceUpdating, Reason: ReasonInPlaceUpdating,
		Op: v1alpha1.LastOperation{Description: fmt.Sprintf("Machine %s is undergoing an in-place update", m.Name),
			State: v1alpha1.MachineStateProcessing, Type: v1alpha1.MachineOperationInPlaceUpdate},
	}))
	p.InPlaceOutcome = inPlaceOutcome{Result: inPlaceStarted, DrainTook: drainTook}
	requeueWithin(p, inPlaceTimeout(c)+time.Millisecond)
}

// planInPlaceDrain plans a pass of the drain of the machine's node,
// selected for an in-place update (its condition is SelectedForUpdate),
// under the machine's drain rules as they were when the drain began
// (InPlaceDrainCondition, recorded by the first pass). A record from
// before the node's SelectedForUpdate condition is an earlier drain's:
// the drain begins afresh. Without a record the drain begins now — or,
// for a drain an older version began, at InPlaceDrainStartedAnnotation,
// which is anyone's to write and so is taken never before the selection
// nor after now.
func planInPlaceDrain(obs observation, m *v1alpha1.Machine, node string, cur *corev1.NodeCondition) *drainRules {
	var selectedAt time.Time
	if cur != nil && cur.Reason == v1alpha1.SelectedForUpdate && !cur.LastTransitionTime.After(obs.Now) {
		selectedAt = cur.LastTransitionTime.Time
	}
	if rec, ok := flowRecordOf(m, InPlaceDrainCondition); ok && rec.Since.Before(&metav1.Time{Time: selectedAt}) {
		clearFlowRecord(m, InPlaceDrainCondition)
	}
	rec := frozenDrain(m, InPlaceDrainCondition, func() time.Time {
		start, ok := storedTime(m, InPlaceDrainStartedAnnotation, selectedAt, obs.Now)
		if !ok {
			start = obs.Now
		}
		return start
	}, obs.Config, obs.Now)
	setAnnotation(m, InPlaceDrainStartedAnnotation, formatTime(rec.Since.Time))
	r := planDrainRules(obs.Now, m, node, rec.Since.Time, rec.Drain)
	return &r
}

// planInPlaceDrainOutcome folds an in-place drain pass's outcome into p:
// while the drain goes on, its state on the machine and the next pass at
// its next check; on failure the state, lastOperation DrainNode Failed
// (MCM's text), an event and a retry with the machine's backoff — the
// machine stays as it was, available; once drained, InPlaceUpdating and
// the condition ReadyForUpdate, the node agent's go. It is pure.
func planInPlaceDrainOutcome(p machinePlan, node *corev1.Node, cfg v1alpha1.MachineConfiguration, res drain.Result, err error, now time.Time) machinePlan {
	m, r := p.Machine, p.InPlaceDrain
	switch {
	case errors.Is(err, drain.ErrNodeNotFound):
		// Gone: the health step and the node's event take it from here.
	case err != nil:
		storePassState(m, InPlaceDrainStateAnnotation, res.State)
		msg := fmt.Sprintf("Drain failed due to - %v. Will retry in next sync. Initiate node drain", err)
		p.InPlaceEvents = appendEvent(p.InPlaceEvents, report(m, now, transition{
			Op:     v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationDrainNode},
			Reason: ReasonDrainFailed, Warning: true,
		}))
		p.Retry, p.Err = retryShort, fmt.Errorf("draining node %s for an in-place update: %w", r.Node, err)
	case !res.Done:
		storePassState(m, InPlaceDrainStateAnnotation, res.State)
		requeueWithin(&p, max(res.NextCheck.Sub(now), 100*time.Millisecond))
	default:
		var took time.Duration
		if s := res.State.Start(); !s.IsZero() {
			took = now.Sub(s)
		}
		startInPlaceUpdate(&p, cfg, now, took)
		if node != nil {
			p.InPlaceCondition = inPlaceConditionUpdate(node, readyForUpdate, now)
		}
	}
	return p
}

// clearInPlaceDrain removes the in-place drain's records: a later drain
// starts afresh.
func clearInPlaceDrain(m *v1alpha1.Machine) {
	clearFlowRecord(m, InPlaceDrainCondition)
	deleteAnnotation(m, InPlaceDrainStartedAnnotation)
	deleteAnnotation(m, InPlaceDrainStateAnnotation)
}

// inPlaceHealthSince is when the health timeout of an updated machine
// (InPlaceUpdateSuccessful) whose node is not healthy started: at the
// success, or at the end of the last outage if that came later.
func inPlaceHealthSince(m *v1alpha1.Machine, obs observation) time.Time {
	since := m.Status.CurrentStatus.LastUpdateTime.Time
	if obs.OutageEnded.After(since) {
		since = obs.OutageEnded
	}
	return since
}

// requeueWithin makes p sync the machine again within d.
func requeueWithin(p *machinePlan, d time.Duration) {
	if p.RequeueAfter <= 0 || d < p.RequeueAfter {
		p.RequeueAfter = d
	}
}

func appendEvent(events []*event, e *event) []*event {
	if e == nil {
		return events
	}
	return append(events, e)
}
