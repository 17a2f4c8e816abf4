package machine

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/apitime"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// The preservation's own records on a Machine.
const (
	// PreserveDrainCondition is the type of the status condition in
	// which the controller keeps the drain of a preserved Failed
	// machine's node (see flowRecord): reason Draining, its
	// lastTransitionTime when the drain began, its message the drain
	// timeout and maxEvictRetries in force then; reason Drained, since
	// when, once it completed. It goes when the preservation ends or the
	// machine is no longer Failed.
	PreserveDrainCondition corev1.NodeConditionType = "mcmkit.io/PreserveDrain"
	// PreserveDrainStateAnnotation holds the drain state (drain.State)
	// of the drain of a preserved Failed machine's node between passes.
	PreserveDrainStateAnnotation = "mcmkit.io/preserve-drain-state"
	// PreserveDrainedAnnotation mirrors when the drain of a preserved
	// Failed machine's node completed (PreserveDrainCondition, reason
	// Drained): it is not drained again while the machine stays Failed
	// and preserved. Removing the annotation does not drain it again; it
	// is read alone only for a drain an older version (or MCM) completed.
	PreserveDrainedAnnotation = "mcmkit.io/preserve-drained"
	// PreserveCordonedAnnotation records that the node's cordon is the
	// preservation's — set by a Drainer that cannot leave the node
	// schedulable, or by MCM v0.62.1's preservation drain — and is undone
	// once the machine runs again. A cordon without it is left alone.
	PreserveCordonedAnnotation = "mcmkit.io/preserve-cordoned"
	// preserveReportedAnnotation holds the unknown preserve value last
	// reported, so that it is reported once, not at every sync.
	preserveReportedAnnotation = "mcmkit.io/preserve-invalid-reported"
)

// Event reasons of the preservation.
const (
	ReasonPreserved            = "Preserved"
	ReasonPreservationStopped  = "PreservationStopped"
	ReasonInvalidPreserveValue = "InvalidPreserveValue"
	ReasonPreservedNodeDrained = "PreservedNodeDrained"
)

// preserveDrainCordons reports whether the drain of a preserved node
// cordons it: a Drainer given in Options must (see Drainer); the drain
// engine the controller builds leaves the node schedulable
// (drain.Options.SkipCordon), the preserved taint keeping new pods off.
func (o *Options) preserveDrainCordons() bool { return o.Drainer != nil }

// preserveAction is what a sync does about the machine's preservation.
type preserveAction int

const (
	preserveNothing preserveAction = iota
	// preserveStart: the expiry is set now; the node is marked.
	preserveStart
	// preserveKeep: the preservation holds; the node's marks are kept.
	preserveKeep
	// preserveStop: the preservation ends; the marks go.
	preserveStop
)

var preserveActionNames = [...]string{"Nothing", "Start", "Keep", "Stop"}

func (a preserveAction) String() string { return preserveActionNames[a] }

// preserveDecision is decidePreservation's verdict.
type preserveDecision struct {
	Action preserveAction
	// Value is the preservation asked for (machinestate.PreserveRequest);
	// FromNode is set when it is the Node's value.
	Value    v1alpha1.PreserveValue
	FromNode bool
	// Invalid: Value is none of MCM's; it is reported and ignored.
	Invalid bool
	// Why a preservation stops, for the condition and the event.
	Why string
	// Expired: the stop is the expiry's. A Failed machine keeps its
	// (past) expiry, so that it is replaced and never preserved again.
	Expired bool
	// RemoveRequest: the preserve annotation is removed where it came
	// from (an expired one; auto-preserved on recovery, as MCM does).
	RemoveRequest bool
}

// decidePreservation decides from the machine as planned (its annotations
// and phase, its expiry), whether its node still shows a preservation,
// and the time. It is pure.
func decidePreservation(m *v1alpha1.Machine, nodeShows bool, now time.Time) preserveDecision {
	v, asked := machinestate.PreserveRequest(m)
	d := preserveDecision{Value: v, FromNode: m.Annotations[v1alpha1.LastAppliedNodePreserveValueAnnotation] != ""}
	d.Invalid = asked && !machinestate.ValidPreserveValue(v)
	failed := m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed
	wants := v == v1alpha1.PreserveNow ||
		(failed && (v == v1alpha1.PreserveWhenFailed || v == v1alpha1.PreserveAutoPreserved))
	until, ever := machinestate.PreservedUntil(m)
	switch {
	case ever && !now.Before(until):
		d.Action, d.Expired = preserveStop, true
		d.RemoveRequest = v == v1alpha1.PreserveNow || v == v1alpha1.PreserveWhenFailed || v == v1alpha1.PreserveAutoPreserved
		d.Why = "the preservation expired at " + preserveTime(until)
	case ever && (d.Invalid || wants):
		d.Action = preserveKeep
	case ever:
		d.Action = preserveStop
		switch {
		case !asked:
			d.Why = "the preserve annotation was removed"
		case v == v1alpha1.PreserveFalse:
			d.Why = `the preserve annotation is "false"`
		default:
			d.Why = fmt.Sprintf("the machine is no longer Failed (preserve %q)", v)
			d.RemoveRequest = v == v1alpha1.PreserveAutoPreserved
		}
	case wants:
		d.Action = preserveStart
	case nodeShows:
		// The node shows a preservation the machine does not hold (one
		// whose record another writer dropped): its marks go.
		d.Action, d.Why = preserveStop, "the machine is not preserved"
	}
	return d
}

// drainRules are the machine's drain rules applied to a drain of its
// node that is not its deletion's (a preservation's, an in-place
// update's): one non-blocking pass of it is run by apply.
type drainRules struct {
	Node string
	// Start is when the drain began; Deadline when remaining pods are
	// deleted without eviction (Start plus the drain timeout, or now
	// with the force-drain label).
	Start, Deadline time.Time
	ForceReason     string
	MaxEvictRetries int
}

// planDrainRules applies the machine's drain rules to a drain of node
// that began at start under the drain parameters d, frozen when it began:
// its deadline counted from start, now with the force-drain label, and d's
// maxEvictRetries. A node NotReady for long is drained by force by the
// drain engine itself (drain.UnreachableOptions).
func planDrainRules(now time.Time, m *v1alpha1.Machine, node string, start time.Time, d drainParams) drainRules {
	r := drainRules{Node: node, Start: start, Deadline: start.Add(d.DrainTimeout.Duration), MaxEvictRetries: int(d.MaxEvictRetries)}
	if now.After(r.Deadline) {
		r.ForceReason = fmt.Sprintf("drain timeout %v exceeded", d.DrainTimeout.Duration)
	}
	if v, err := strconv.ParseBool(m.Labels[v1alpha1.ForceDrainLabelKey]); err == nil && v {
		r.Deadline, r.ForceReason = now, v1alpha1.ForceDrainLabelKey+" label"
	}
	return r
}

// preserveDrain is a pass of the drain of a preserved Failed machine's
// node, which apply runs; it began with the preservation.
type preserveDrain struct {
	drainRules
	// Condition is the Preserved condition to write once the pass found
	// the node drained.
	Drained corev1.NodeCondition
}

// planPreservation plans the machine's preservation into p, after the
// health step (so a machine the health step just marked Failed is
// preserved in the same write) and the node sync (p.Node): the record of
// the Node's preserve value, the expiry, the annotations to remove, the
// node's marks (scale-down-disabled annotations, taint, cordon,
// Preserved condition), the drain, the report of an unknown value, and a
// requeue at the expiry. node is the machine's own node, nil when it has
// none (then only the machine's side is planned). It is pure.
func planPreservation(p *machinePlan, obs observation, node *corev1.Node, o *Options) {
	m, now := p.Machine, obs.Now
	if node != nil {
		recordNodePreserveValue(m, node)
	}
	d := decidePreservation(m, nodeShowsPreservation(node), now)
	reportInvalidPreserveValue(p, d, now)
	failed := m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed
	var stopped bool
	switch d.Action {
	case preserveStart:
		timeout := v1alpha1.DefaultMachinePreserveTimeout
		if t := obs.Config.MachinePreserveTimeout; t != nil {
			timeout = t.Duration
		}
		until := apitime.Of(now.Add(timeout))
		m.Status.CurrentStatus.PreserveExpiryTime = &until
		p.PreserveEvents = append(p.PreserveEvents, &event{Type: corev1.EventTypeNormal, Reason: ReasonPreserved,
			Message: fmt.Sprintf("Machine preserved until %s (preserve %q)", preserveTime(until.Time), d.Value)})
	case preserveStop:
		stopped = stopPreservation(m, d)
	}
	active := d.Action == preserveStart || d.Action == preserveKeep
	if !active || !failed {
		// A drain belongs to one stretch of Failed under preservation: a
		// machine that fails again is drained again.
		clearPreserveDrain(m)
	}
	if node != nil {
		// The stop is told once: by the condition's change when the node
		// shows one, else by the expiry's.
		stopped = stopped && preservedCondition(node) == nil
		planPreservedNode(p, obs, node, d, o)
		if d.Action == preserveStop && p.NodeCondition != nil {
			stopped = true
		}
	}
	if stopped {
		p.PreserveEvents = append(p.PreserveEvents, &event{Type: corev1.EventTypeNormal, Reason: ReasonPreservationStopped,
			Message: "Preservation stopped: " + d.Why})
	}
	if until, ok := machinestate.PreservedUntil(m); ok && active {
		due := until.Sub(now) + time.Millisecond
		if p.RequeueAfter <= 0 || due < p.RequeueAfter {
			p.RequeueAfter = due
		}
	}
}

// stopPreservation writes the end of a preservation on the machine: the
// expired annotation removed where it came from, the expiry cleared
// (kept on an expired Failed machine). It reports whether the machine
// held a preservation that this stop ends, its expiry cleared.
func stopPreservation(m *v1alpha1.Machine, d preserveDecision) bool {
	switch {
	case d.RemoveRequest && d.FromNode && d.Expired:
		// The Node's annotation goes with the node's write; the machine
		// keeps its record and past expiry until a sync sees the
		// annotation gone, so that neither a failed node write nor a
		// node out of sight lets the Node's value start a new
		// preservation. (An auto-preserved value from the Node that
		// stops on recovery asks nothing of a machine that runs: its
		// expiry is cleared now, its record goes with the annotation.)
		return false
	case d.RemoveRequest && !d.FromNode:
		deleteAnnotation(m, v1alpha1.PreserveAnnotation)
	}
	cs := &m.Status.CurrentStatus
	if cs.PreserveExpiryTime == nil || (d.Expired && cs.Phase == v1alpha1.MachineFailed) {
		return false
	}
	cs.PreserveExpiryTime = nil
	return true
}

// recordNodePreserveValue records the Node's preserve value on the
// machine (LastAppliedNodePreserveValueAnnotation), and removes the
// record when the Node's annotation is gone. The machine's own
// annotation is left alone: it is someone else's key.
func recordNodePreserveValue(m *v1alpha1.Machine, node *corev1.Node) {
	if v := node.Annotations[v1alpha1.PreserveAnnotation]; v != "" {
		if m.Annotations[v1alpha1.LastAppliedNodePreserveValueAnnotation] != v {
			setAnnotation(m, v1alpha1.LastAppliedNodePreserveValueAnnotation, v)
		}
		return
	}
	deleteAnnotation(m, v1alpha1.LastAppliedNodePreserveValueAnnotation)
}

// reportInvalidPreserveValue reports an unknown preserve value once: an
// event and the last operation, and a record of the value reported, so
// that neither repeats while the value stays. A sync whose health step
// reported a change leaves the report to the next sync (the write brings
// the machine back), rather than overwrite it.
func reportInvalidPreserveValue(p *machinePlan, d preserveDecision, now time.Time) {
	m := p.Machine
	if !d.Invalid {
		deleteAnnotation(m, preserveReportedAnnotation)
		return
	}
	if m.Annotations[preserveReportedAnnotation] == string(d.Value) || p.Event != nil {
		return
	}
	where := "machine"
	if d.FromNode {
		where = "node"
	}
	msg := fmt.Sprintf("Ignoring the %s's %s annotation: %q is not one of %s, %s, %s, %s",
		where, v1alpha1.PreserveAnnotation, d.Value, v1alpha1.PreserveNow, v1alpha1.PreserveWhenFailed,
		v1alpha1.PreserveAutoPreserved, v1alpha1.PreserveFalse)
	setAnnotation(m, preserveReportedAnnotation, string(d.Value))
	// The operation's type is kept: it tells others (the stale-machine
	// metric of the MachineSet) what the machine last went through.
	opType := m.Status.LastOperation.Type
	if opType == "" {
		opType = v1alpha1.MachineOperationUpdate
	}
	setLastOperation(m, v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateFailed, Type: opType}, now)
	p.PreserveEvents = append(p.PreserveEvents, &event{Type: corev1.EventTypeWarning, Reason: ReasonInvalidPreserveValue, Message: msg})
}

// preserveDrainedReason is the reason of PreserveDrainCondition once the
// drain completed.
const preserveDrainedReason = "Drained"

// preserveDrained reports whether the node of a preserved Failed machine
// was drained for this preservation.
func preserveDrained(m *v1alpha1.Machine) bool {
	rec, ok := flowRecordOf(m, PreserveDrainCondition)
	return (ok && rec.Reason == preserveDrainedReason) || m.Annotations[PreserveDrainedAnnotation] != ""
}

// setPreserveDrained records that the drain of a preserved Failed
// machine's node completed at now.
func setPreserveDrained(m *v1alpha1.Machine, now time.Time) {
	rec, _ := flowRecordOf(m, PreserveDrainCondition)
	setFlowRecord(m, PreserveDrainCondition, flowRecord{Reason: preserveDrainedReason, Since: apitime.Of(now), Drain: rec.Drain})
	setAnnotation(m, PreserveDrainedAnnotation, formatTime(now))
}

// clearPreserveDrain removes the drain's records: a later drain starts
// afresh.
func clearPreserveDrain(m *v1alpha1.Machine) {
	clearFlowRecord(m, PreserveDrainCondition)
	deleteAnnotation(m, PreserveDrainStateAnnotation)
	deleteAnnotation(m, PreserveDrainedAnnotation)
}

// preserveTime formats an expiry as MCM's messages do (%v of the time, in
// UTC).
func preserveTime(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05 -0700 MST")
}

// planPreserveDrain plans the drain pass of a preserved Failed machine's
// node: under the machine's drain rules (planDrainRules) as they were when
// the drain began (PreserveDrainCondition, recorded by the first pass),
// its deadline counted from the start of the preservation then. Patching
// the machine's drainTimeout, maxEvictRetries or machinePreserveTimeout
// during the drain changes neither.
func planPreserveDrain(obs observation, m *v1alpha1.Machine, node string, drained corev1.NodeCondition) *preserveDrain {
	rec := frozenDrain(m, PreserveDrainCondition, func() time.Time {
		until, _ := machinestate.PreservedUntil(m)
		timeout := v1alpha1.DefaultMachinePreserveTimeout
		if t := obs.Config.MachinePreserveTimeout; t != nil {
			timeout = t.Duration
		}
		if start := until.Add(-timeout); start.Before(obs.Now) {
			return start
		}
		return obs.Now
	}, obs.Config, obs.Now)
	return &preserveDrain{drainRules: planDrainRules(obs.Now, m, node, rec.Since.Time, rec.Drain), Drained: drained}
}

// drainedMessage reports whether a Preserved condition's message is one of
// a drain's (MCM's or ours).
func drainedMessage(msg string) bool {
	return strings.HasPrefix(msg, v1alpha1.PreservedNodeDrainSuccessful) ||
		strings.HasPrefix(msg, v1alpha1.PreservedNodeDrainUnsuccessful)
}
