package machine

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/internal/apitime"
)

// inPlaceSummary is what a test looks at in a plan of the in-place step.
type inPlaceSummary struct {
	Phase     v1alpha1.MachinePhase
	Op        v1alpha1.LastOperation
	Condition string // reason: message of the InPlaceUpdate condition written, "" none
	Drain     *drainRules
	Result    string
	Requeue   time.Duration
	Retry     retryClass
	Failed    bool
	Events    []string
	DrainAnno string
}

func summarize(p machinePlan) inPlaceSummary {
	op := p.Machine.Status.LastOperation
	op.LastUpdateTime = metav1.Time{}
	s := inPlaceSummary{Phase: p.Machine.Status.CurrentStatus.Phase, Op: op, Drain: p.InPlaceDrain,
		Result: p.InPlaceOutcome.Result, Requeue: p.RequeueAfter, Retry: p.Retry, Failed: p.MarkedFailed,
		DrainAnno: p.Machine.Annotations[InPlaceDrainStartedAnnotation]}
	if c := p.InPlaceCondition; c != nil {
		s.Condition = c.Reason + ": " + c.Message
	}
	for _, e := range append([]*event{p.Event}, p.InPlaceEvents...) {
		if e != nil {
			s.Events = append(s.Events, e.Type+" "+e.Reason+": "+e.Message)
		}
	}
	return s
}

// inPlaceCase builds a machine in phase, updated at since, and its node
// n1 with the labels and InPlaceUpdate condition reason given.
type inPlaceCase struct {
	phase      v1alpha1.MachinePhase
	since      time.Time // the phase's lastUpdateTime
	labels     []string  // of the node
	reason     string    // of the node's InPlaceUpdate condition
	failedWhy  string
	notReady   bool
	mutate     func(*v1alpha1.Machine)
	denied     string
	drainStart time.Time // InPlaceDrainStartedAnnotation
}

func (c inPlaceCase) obs() observation {
	m := withPhase(baseMachine(), c.phase, "p1")
	m.Status.CurrentStatus.LastUpdateTime = apitime.Of(c.since)
	if !c.drainStart.IsZero() {
		setAnnotation(m, InPlaceDrainStartedAnnotation, formatTime(c.drainStart))
	}
	if c.mutate != nil {
		c.mutate(m)
	}
	ready := corev1.ConditionTrue
	if c.notReady {
		ready = corev1.ConditionFalse
	}
	n := node(cond(corev1.NodeReady, ready))
	n.Labels = map[string]string{}
	for _, l := range c.labels {
		n.Labels[l] = "true"
	}
	if v, ok := n.Labels[v1alpha1.UpdateResultLabel]; ok && v == "true" {
		n.Labels[v1alpha1.UpdateResultLabel] = v1alpha1.UpdateResultSuccessful
	}
	if c.failedWhy != "" {
		n.Labels[v1alpha1.UpdateResultLabel] = v1alpha1.UpdateResultFailed
		n.Annotations[v1alpha1.UpdateFailedReasonAnnotation] = c.failedWhy
	}
	if c.reason != "" {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: v1alpha1.NodeInPlaceUpdate,
			Status: corev1.ConditionTrue, Reason: c.reason, Message: inPlaceMessages[c.reason] + c.failedWhy, LastTransitionTime: metav1.NewTime(t0.Add(-30 * time.Minute))})
	}
	m.Status.Conditions = n.Status.Conditions
	o := obsFor(m)
	o.Node = n
	o.ReplacementDenied = c.denied
	return o
}

var inPlaceMessages = map[string]string{
	v1alpha1.CandidateForUpdate: v1alpha1.CandidateForUpdateMessage, v1alpha1.SelectedForUpdate: v1alpha1.SelectedForUpdateMessage,
	v1alpha1.DrainSuccessful: v1alpha1.DrainSuccessfulMessage, v1alpha1.ReadyForUpdate: v1alpha1.ReadyForUpdateMessage,
	v1alpha1.UpdateSuccessful: v1alpha1.UpdateSuccessfulMessage, v1alpha1.UpdateFailed: v1alpha1.UpdateFailedMessage,
}

const (
	candidate = v1alpha1.CandidateForUpdateLabel
	selected  = v1alpha1.SelectedForUpdateLabel
	result    = v1alpha1.UpdateResultLabel // "successful"
)

func inPlaceOp(desc string, state v1alpha1.MachineState) v1alpha1.LastOperation {
	return v1alpha1.LastOperation{Description: desc, State: state, Type: v1alpha1.MachineOperationInPlaceUpdate}
}

// TestPlanInPlace walks the machine's side of the protocol: the node's
// labels give its condition, a selected node is drained, the agent's
// result or the timeout give the phase, and the health rules that hold
// while updating.
func TestPlanInPlace(t *testing.T) {
	o := testOptions(t)
	running := v1alpha1.MachineRunning
	ready := "ReadyForUpdate: " + v1alpha1.ReadyForUpdateMessage
	rejoined := v1alpha1.LastOperation{Description: "Machine m1 successfully re-joined the cluster", State: v1alpha1.MachineStateSuccessful, Type: v1alpha1.MachineOperationHealthCheck}
	drainFrom := func(start time.Time) *drainRules {
		return &drainRules{Node: "n1", Start: start, Deadline: start.Add(2 * time.Hour), MaxEvictRetries: 360}
	}
	tests := []struct {
		name string
		c    inPlaceCase
		want inPlaceSummary
	}{
		{"a candidate gets its condition", inPlaceCase{phase: running, labels: []string{candidate}},
			inPlaceSummary{Phase: running, Condition: "CandidateForUpdate: " + v1alpha1.CandidateForUpdateMessage, Requeue: o.LongRetry}},
		{"a selected label without the candidate label is ignored", inPlaceCase{phase: running, labels: []string{selected}},
			inPlaceSummary{Phase: running, Requeue: o.LongRetry}},
		{"a candidate selected at once is selected and drained", inPlaceCase{phase: running, labels: []string{candidate, selected}},
			inPlaceSummary{Phase: running, Condition: "SelectedForUpdate: " + v1alpha1.SelectedForUpdateMessage, Drain: drainFrom(t0),
				Requeue: o.LongRetry, DrainAnno: formatTime(t0)}},
		{"a selected node is drained from the selection on", inPlaceCase{phase: running, labels: []string{candidate, selected},
			reason: v1alpha1.SelectedForUpdate, drainStart: t0.Add(-time.Hour)},
			inPlaceSummary{Phase: running, Drain: drainFrom(t0.Add(-30 * time.Minute)), Requeue: o.LongRetry, DrainAnno: formatTime(t0.Add(-30 * time.Minute))}},
		{"force-drain label: the deadline is now", inPlaceCase{phase: v1alpha1.MachineUnknown, labels: []string{candidate, selected},
			reason: v1alpha1.SelectedForUpdate, drainStart: t0.Add(-time.Minute), notReady: true,
			mutate: func(m *v1alpha1.Machine) {
				setLabel(m, v1alpha1.ForceDrainLabelKey, "True")
				setAnnotation(m, UnhealthySinceAnnotation, formatTime(t0))
			}},
			inPlaceSummary{Phase: v1alpha1.MachineUnknown, Requeue: o.HealthCheckPeriod, DrainAnno: formatTime(t0.Add(-time.Minute)),
				Drain: &drainRules{Node: "n1", Start: t0.Add(-time.Minute), Deadline: t0, ForceReason: v1alpha1.ForceDrainLabelKey + " label", MaxEvictRetries: 360}}},
		{"drained, the phase written, not the condition: ready", inPlaceCase{phase: v1alpha1.MachineInPlaceUpdating, since: t0,
			labels: []string{candidate, selected}, reason: v1alpha1.SelectedForUpdate, drainStart: t0.Add(-time.Minute)},
			inPlaceSummary{Phase: v1alpha1.MachineInPlaceUpdating, Condition: ready, Requeue: o.LongRetry}},
		{"MCM drained and stopped before ReadyForUpdate", inPlaceCase{phase: running, labels: []string{candidate, selected}, reason: v1alpha1.DrainSuccessful},
			inPlaceSummary{Phase: v1alpha1.MachineInPlaceUpdating, Condition: ready, Result: inPlaceStarted, Requeue: o.LongRetry,
				Op:     inPlaceOp("Machine m1 is undergoing an in-place update", v1alpha1.MachineStateProcessing),
				Events: []string{"Normal InPlaceUpdating: Machine m1 is undergoing an in-place update"}}},
		{"updating: synced again at the timeout", inPlaceCase{phase: v1alpha1.MachineInPlaceUpdating, since: t0.Add(-15 * time.Minute),
			labels: []string{candidate, selected}, reason: v1alpha1.ReadyForUpdate},
			inPlaceSummary{Phase: v1alpha1.MachineInPlaceUpdating, Requeue: 5*time.Minute + time.Millisecond}},
		{"updating on a NotReady node: neither Unknown nor a health timeout", inPlaceCase{phase: v1alpha1.MachineInPlaceUpdating,
			since: t0.Add(-19 * time.Minute), labels: []string{candidate, selected}, reason: v1alpha1.ReadyForUpdate, notReady: true},
			inPlaceSummary{Phase: v1alpha1.MachineInPlaceUpdating, Requeue: time.Minute + time.Millisecond}},
		{"the in-place timeout ran out", inPlaceCase{phase: v1alpha1.MachineInPlaceUpdating, since: t0.Add(-21 * time.Minute),
			labels: []string{candidate, selected}, reason: v1alpha1.ReadyForUpdate},
			inPlaceSummary{Phase: v1alpha1.MachineInPlaceUpdateFailed, Result: inPlaceFailed, Requeue: o.LongRetry,
				Op:     inPlaceOp("Machine m1 failed to in-place update in 20m0s minutes.", v1alpha1.MachineStateFailed),
				Events: []string{"Warning InPlaceUpdateFailed: Machine m1 failed to in-place update in 20m0s minutes."}}},
		{"the machine's own in-place timeout wins", inPlaceCase{phase: v1alpha1.MachineInPlaceUpdating, since: t0.Add(-6 * time.Minute),
			labels: []string{candidate, selected}, reason: v1alpha1.ReadyForUpdate, mutate: func(m *v1alpha1.Machine) {
				m.Spec.MachineConfiguration = &v1alpha1.MachineConfiguration{MachineInPlaceUpdateTimeout: &metav1.Duration{Duration: 5 * time.Minute}}
			}},
			inPlaceSummary{Phase: v1alpha1.MachineInPlaceUpdateFailed, Result: inPlaceFailed, Requeue: o.LongRetry,
				Op:     inPlaceOp("Machine m1 failed to in-place update in 5m0s minutes.", v1alpha1.MachineStateFailed),
				Events: []string{"Warning InPlaceUpdateFailed: Machine m1 failed to in-place update in 5m0s minutes."}}},
		{"the agent's success", inPlaceCase{phase: v1alpha1.MachineInPlaceUpdating, since: t0.Add(-3 * time.Minute),
			labels: []string{candidate, selected, result}, reason: v1alpha1.ReadyForUpdate},
			inPlaceSummary{Phase: v1alpha1.MachineInPlaceUpdateSuccessful, Result: inPlaceSuccessful, Requeue: o.LongRetry,
				Condition: "UpdateSuccessful: " + v1alpha1.UpdateSuccessfulMessage,
				Op:        inPlaceOp("Machine m1 successfully updated dependencies", v1alpha1.MachineStateSuccessful),
				Events:    []string{"Normal InPlaceUpdateSuccessful: Machine m1 successfully updated dependencies"}}},
		{"the agent's failure, with its reason", inPlaceCase{phase: v1alpha1.MachineInPlaceUpdating, since: t0.Add(-3 * time.Minute),
			labels: []string{candidate, selected}, reason: v1alpha1.ReadyForUpdate, failedWhy: "kubelet is not healthy"},
			inPlaceSummary{Phase: v1alpha1.MachineInPlaceUpdateFailed, Result: inPlaceFailed, Requeue: o.LongRetry,
				Condition: "UpdateFailed: Node in-place update failed: kubelet is not healthy",
				Op:        inPlaceOp("Machine m1 failed to update dependencies: kubelet is not healthy", v1alpha1.MachineStateFailed),
				Events:    []string{"Warning InPlaceUpdateFailed: The node agent failed to update machine m1 in place: kubelet is not healthy"}}},
		{"failed, NotReady for long: never Failed, never Unknown", inPlaceCase{phase: v1alpha1.MachineInPlaceUpdateFailed, since: t0.Add(-5 * time.Hour),
			labels: []string{candidate, selected}, reason: v1alpha1.UpdateFailed, failedWhy: "x", notReady: true,
			mutate: func(m *v1alpha1.Machine) {
				m.Status.LastOperation = inPlaceOp("Machine m1 failed to update dependencies: x", v1alpha1.MachineStateFailed)
			}},
			inPlaceSummary{Phase: v1alpha1.MachineInPlaceUpdateFailed, Requeue: o.LongRetry,
				Op: inPlaceOp("Machine m1 failed to update dependencies: x", v1alpha1.MachineStateFailed)}},
		{"the agent's failure after the timeout: its reason, once", inPlaceCase{phase: v1alpha1.MachineInPlaceUpdateFailed, since: t0.Add(-time.Minute),
			labels: []string{candidate, selected}, reason: v1alpha1.ReadyForUpdate, failedWhy: "disk full"},
			inPlaceSummary{Phase: v1alpha1.MachineInPlaceUpdateFailed, Requeue: o.LongRetry,
				Condition: "UpdateFailed: Node in-place update failed: disk full",
				Op:        inPlaceOp("Machine m1 failed to update dependencies: disk full", v1alpha1.MachineStateFailed),
				Events:    []string{"Warning InPlaceUpdateFailed: The node agent failed to update machine m1 in place: disk full"}}},
		{"a success after a failure recovers the machine", inPlaceCase{phase: v1alpha1.MachineInPlaceUpdateFailed, since: t0.Add(-time.Hour),
			labels: []string{candidate, selected, result}, reason: v1alpha1.UpdateFailed},
			inPlaceSummary{Phase: v1alpha1.MachineInPlaceUpdateSuccessful, Result: inPlaceSuccessful, Requeue: o.LongRetry,
				Condition: "UpdateSuccessful: " + v1alpha1.UpdateSuccessfulMessage,
				Op:        inPlaceOp("Machine m1 successfully updated dependencies", v1alpha1.MachineStateSuccessful),
				Events:    []string{"Normal InPlaceUpdateSuccessful: Machine m1 successfully updated dependencies"}}},
		{"updated and healthy: Running again", inPlaceCase{phase: v1alpha1.MachineInPlaceUpdateSuccessful, since: t0.Add(-time.Minute),
			labels: []string{candidate, selected, result}, reason: v1alpha1.UpdateSuccessful},
			inPlaceSummary{Phase: running, Op: rejoined, Requeue: o.LongRetry,
				Events: []string{"Normal Recovered: Machine m1 successfully re-joined the cluster"}}},
		{"updated, not healthy yet", inPlaceCase{phase: v1alpha1.MachineInPlaceUpdateSuccessful, since: t0.Add(-5 * time.Minute),
			labels: []string{candidate, selected, result}, reason: v1alpha1.UpdateSuccessful, notReady: true},
			inPlaceSummary{Phase: v1alpha1.MachineInPlaceUpdateSuccessful, Requeue: o.HealthCheckPeriod}},
		{"updated, unhealthy past the health timeout: Failed", inPlaceCase{phase: v1alpha1.MachineInPlaceUpdateSuccessful, since: t0.Add(-11 * time.Minute),
			labels: []string{candidate, selected, result}, reason: v1alpha1.UpdateSuccessful, notReady: true},
			inPlaceSummary{Phase: v1alpha1.MachineFailed, Failed: true, Requeue: o.LongRetry,
				Op: v1alpha1.LastOperation{Description: "Machine m1 health checks failed for 10m0s after its in-place update (Node conditions: Ready=False) - changing MachineState to Failed",
					State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationHealthCheck},
				Events: []string{"Warning HealthTimeout: Machine m1 health checks failed for 10m0s after its in-place update (Node conditions: Ready=False) - changing MachineState to Failed"}}},
		{"updated, unhealthy, health timeout disabled: kept", inPlaceCase{phase: v1alpha1.MachineInPlaceUpdateSuccessful, since: t0.Add(-time.Hour),
			labels: []string{candidate, selected, result}, reason: v1alpha1.UpdateSuccessful, notReady: true,
			mutate: func(m *v1alpha1.Machine) {
				m.Spec.MachineConfiguration = &v1alpha1.MachineConfiguration{DisableHealthTimeout: new(bool)}
				*m.Spec.MachineConfiguration.DisableHealthTimeout = true
			}},
			inPlaceSummary{Phase: v1alpha1.MachineInPlaceUpdateSuccessful, Requeue: o.HealthCheckPeriod}},
		{"a new rollout: the last update's success becomes a candidacy", inPlaceCase{phase: running, labels: []string{candidate}, reason: v1alpha1.UpdateSuccessful},
			inPlaceSummary{Phase: running, Requeue: o.LongRetry, Condition: "CandidateForUpdate: " + v1alpha1.CandidateForUpdateMessage}},
		{"a Failed machine is not drained for an update", inPlaceCase{phase: v1alpha1.MachineFailed, labels: []string{candidate, selected}, reason: v1alpha1.SelectedForUpdate,
			drainStart: t0},
			inPlaceSummary{Phase: v1alpha1.MachineFailed, Requeue: o.LongRetry}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := planMachine(tc.c.obs(), o)
			if diff := cmp.Diff(tc.want, summarize(p)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanInPlaceDrainOutcome: a pass that is done starts the update, one
// that goes on stores its state, one that fails is reported with MCM's
// text and retried, the machine staying as it was.
func TestPlanInPlaceDrainOutcome(t *testing.T) {
	o := testOptions(t)
	c := inPlaceCase{phase: v1alpha1.MachineRunning, labels: []string{candidate, selected}, reason: v1alpha1.SelectedForUpdate, drainStart: t0.Add(-time.Minute)}
	var started drain.State
	if err := started.UnmarshalJSON([]byte(`{"start":"` + t0.Add(-time.Minute).Format(time.RFC3339) + `"}`)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		res  drain.Result
		err  error
		want inPlaceSummary
	}{
		{"done", drain.Result{Plan: drain.Plan{Done: true, State: started}}, nil, inPlaceSummary{
			Phase: v1alpha1.MachineInPlaceUpdating, Condition: "ReadyForUpdate: " + v1alpha1.ReadyForUpdateMessage, Result: inPlaceStarted,
			Requeue: o.LongRetry, Op: inPlaceOp("Machine m1 is undergoing an in-place update", v1alpha1.MachineStateProcessing),
			Events: []string{"Normal InPlaceUpdating: Machine m1 is undergoing an in-place update"}}},
		{"going on", drain.Result{Plan: drain.Plan{NextCheck: t0.Add(5 * time.Second)}}, nil, inPlaceSummary{
			Phase: v1alpha1.MachineRunning, Requeue: 5 * time.Second, DrainAnno: formatTime(t0.Add(-time.Minute))}},
		{"failed", drain.Result{}, errors.New("apiserver down"), inPlaceSummary{
			Phase: v1alpha1.MachineRunning, Requeue: o.LongRetry, Retry: retryShort, DrainAnno: formatTime(t0.Add(-time.Minute)),
			Op: v1alpha1.LastOperation{Description: "Drain failed due to - apiserver down. Will retry in next sync. Initiate node drain",
				State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationDrainNode},
			Events: []string{"Warning DrainFailed: Drain failed due to - apiserver down. Will retry in next sync. Initiate node drain"}}},
		{"node gone", drain.Result{}, drain.ErrNodeNotFound, inPlaceSummary{
			Phase: v1alpha1.MachineRunning, Requeue: o.LongRetry, DrainAnno: formatTime(t0.Add(-time.Minute))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := c.obs()
			p := planMachine(obs, o)
			if p.InPlaceDrain == nil {
				t.Fatal("no drain planned")
			}
			p = planInPlaceDrainOutcome(p, obs.Node, obs.Config, tc.res, tc.err, t0)
			got := summarize(p)
			got.Drain = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if tc.name == "done" && p.InPlaceOutcome.DrainTook != time.Minute {
				t.Errorf("drain took %v, want 1m", p.InPlaceOutcome.DrainTook)
			}
			if _, ok := p.Machine.Annotations[InPlaceDrainStateAnnotation]; ok != (tc.name == "going on" || tc.name == "failed") {
				t.Errorf("drain state stored: %v", ok)
			}
		})
	}
}
