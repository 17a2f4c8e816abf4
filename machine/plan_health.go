package machine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// planHealth plans join and health transitions of a machine whose VM
// exists; obs.Node is its node if it owns one.
func planHealth(p *machinePlan, obs observation, o *Options) {
	m := p.Machine
	node := obs.Node
	healthy, why := nodeHealth(node, conditionTypes(obs.Config.NodeConditions))
	joined := healthy && !hasTaint(node, v1alpha1.CriticalComponentsNotReadyTaintKey)
	if m.Status.CurrentStatus.Phase == "" && !joined {
		// The VM was created and its status not written yet
		// (Options.PendingDelay).
		if wait := o.PendingDelay - obs.Now.Sub(creationStart(m, obs.Now)); wait > 0 {
			p.RequeueAfter = wait
			return
		}
		report(m, obs.Now, pendingTransition)
	}
	if node != nil {
		copyNodeConditions(m, node)
	}
	switch m.Status.CurrentStatus.Phase {
	case "", v1alpha1.MachinePending, v1alpha1.MachineAvailable:
		planJoin(p, obs, joined, o)
	case v1alpha1.MachineRunning:
		if healthy {
			p.RequeueAfter = o.LongRetry
			return
		}
		msg := fmt.Sprintf("Machine %s is unhealthy - changing MachineState to Unknown. %s", m.Name, why)
		setAnnotation(m, UnhealthySinceAnnotation, formatTime(obs.Now))
		p.Event = report(m, obs.Now, transition{
			Phase: v1alpha1.MachineUnknown, TimeoutActive: true,
			Op:     v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateProcessing, Type: v1alpha1.MachineOperationHealthCheck},
			Reason: ReasonUnhealthy, Warning: true,
		})
		p.RequeueAfter = min(o.HealthCheckPeriod, obs.Config.MachineHealthTimeout.Duration+time.Millisecond)
	case v1alpha1.MachineUnknown:
		if healthy {
			markRunning(p, obs.Now, v1alpha1.MachineOperationHealthCheck, ReasonRecovered,
				fmt.Sprintf("Machine %s successfully re-joined the cluster", m.Name), o)
			return
		}
		planUnhealthy(p, obs, why, o)
	case v1alpha1.MachineInPlaceUpdating, v1alpha1.MachineInPlaceUpdateFailed:
		// The update's own step (planInPlace) moves it: an updating node
		// is drained and may restart, so neither Unknown nor the health
		// timeout apply; a failed update waits for its agent or a
		// person, and is never Failed by the controller.
		p.RequeueAfter = o.LongRetry
	case v1alpha1.MachineInPlaceUpdateSuccessful:
		if healthy {
			markRunning(p, obs.Now, v1alpha1.MachineOperationHealthCheck, ReasonRecovered,
				fmt.Sprintf("Machine %s successfully re-joined the cluster", m.Name), o)
			return
		}
		planUpdatedUnhealthy(p, obs, why, o)
	case v1alpha1.MachineFailed:
		// A Failed machine is replaced by its set, unless its preservation
		// keeps it: then, as in MCM, a healthy node brings it back, and
		// the preservation step stops a when-failed preservation in the
		// same write.
		if healthy && machinestate.Preserved(m, obs.Now) {
			markRunning(p, obs.Now, v1alpha1.MachineOperationHealthCheck, ReasonRecovered,
				fmt.Sprintf("Machine %s successfully re-joined the cluster", m.Name), o)
			return
		}
		p.RequeueAfter = o.LongRetry
	default: // CrashLoopBackOff: left to the creation flow.
		p.RequeueAfter = o.LongRetry
	}
}

// planJoin plans a machine whose node has not joined yet: Running once it
// has, Failed when the creation timeout passes first (a join timeout: not
// gated, as in MCM).
func planJoin(p *machinePlan, obs observation, joined bool, o *Options) {
	m, now := p.Machine, obs.Now
	if joined {
		// The join duration is the lastOperation's and the join metric's;
		// MCM's machine-join-duration annotation would cost a write of its
		// own.
		took := now.Sub(creationStart(m, now)).Round(time.Millisecond)
		markRunning(p, now, v1alpha1.MachineOperationCreate, "",
			fmt.Sprintf("Machine %s successfully joined the cluster in %v", m.Name, took), o)
		p.Joined, p.JoinTook = true, took
		return
	}
	timeout := obs.Config.MachineCreationTimeout.Duration
	elapsed := now.Sub(creationStart(m, now))
	if elapsed > timeout {
		msg := fmt.Sprintf("Machine %s failed to join the cluster in %v", m.Name, timeout)
		p.Event = report(m, now, transition{
			Phase:  v1alpha1.MachineFailed,
			Op:     v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationCreate},
			Reason: ReasonJoinTimeout, Warning: true,
		})
		p.FailedJoin = true
		p.RequeueAfter = o.LongRetry
		return
	}
	p.RequeueAfter = min(o.HealthCheckPeriod, timeout-elapsed+time.Millisecond)
}

// healthTimer is the health timeout of an Unknown machine whose node is
// unhealthy.
type healthTimer struct {
	// Since is when the machine was found unhealthy; Restarted is set
	// when no time was stored (Unknown set by another controller, or a
	// crash between two writes): the timer starts now.
	Since     time.Time
	Restarted bool
	// Reset is set when the machine was unhealthy since before the last
	// outage ended; Disabled when the machine's health timeout is off.
	Reset, Disabled bool
	Timeout         time.Duration
	// Due is set when the timeout ran out: the machine is to be Failed,
	// if the replacement gate agrees.
	Due bool
}

// healthTimerOf reads the health timer of m, an Unknown machine whose node
// is unhealthy.
func healthTimerOf(m *v1alpha1.Machine, obs observation) healthTimer {
	t := healthTimer{Timeout: obs.Config.MachineHealthTimeout.Duration}
	since, ok := storedTime(m, UnhealthySinceAnnotation, time.Time{}, obs.Now)
	if !ok {
		since, t.Restarted = obs.Now, true
	}
	t.Since = since
	switch {
	case !obs.OutageEnded.IsZero() && since.Before(obs.OutageEnded):
		t.Reset = true
	case *obs.Config.DisableHealthTimeout:
		t.Disabled = true
	default:
		t.Due = obs.Now.Sub(since) > t.Timeout
	}
	return t
}

// replacementDue reports whether the sync would mark the machine Failed
// by its health timeout, if the replacement gate agreed: observe asks the
// gate then, and only then, since a yes holds one of its slots.
func replacementDue(obs observation) bool {
	m := obs.Machine
	d := decide(obs)
	phase := m.Status.CurrentStatus.Phase
	if d.Step != stepHealth || (phase != v1alpha1.MachineUnknown && phase != v1alpha1.MachineInPlaceUpdateSuccessful) {
		return false
	}
	node := obs.Node
	if !d.Binding.ownsNode() {
		node = nil
	}
	if healthy, _ := nodeHealth(node, conditionTypes(obs.Config.NodeConditions)); healthy {
		return false
	}
	if phase == v1alpha1.MachineInPlaceUpdateSuccessful {
		return !*obs.Config.DisableHealthTimeout &&
			obs.Now.Sub(inPlaceHealthSince(m, obs)) > obs.Config.MachineHealthTimeout.Duration
	}
	return healthTimerOf(m, obs).Due
}

// planUpdatedUnhealthy plans an updated machine (InPlaceUpdateSuccessful)
// whose node is not healthy: the health timeout, counted from the
// success, applies as to an Unknown machine (unless disableHealthTimeout):
// Failed once it ran out and the replacement gate agrees, for its
// MachineSet to replace. MCM has no timeout there: such a machine stays
// InPlaceUpdateSuccessful, unavailable, for ever.
func planUpdatedUnhealthy(p *machinePlan, obs observation, why string, o *Options) {
	m, now, period := p.Machine, obs.Now, o.HealthCheckPeriod
	timeout := obs.Config.MachineHealthTimeout.Duration
	elapsed := now.Sub(inPlaceHealthSince(m, obs))
	switch {
	case *obs.Config.DisableHealthTimeout:
		p.RequeueAfter = period
	case elapsed <= timeout:
		p.RequeueAfter = min(period, timeout-elapsed+time.Millisecond)
	case obs.ReplacementDenied != "":
		msg := fmt.Sprintf("Machine %s is unhealthy for more than %v after its in-place update, but %s; waiting", m.Name, timeout, obs.ReplacementDenied)
		p.Event = report(m, now, transition{
			Op:     v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateProcessing, Type: v1alpha1.MachineOperationHealthCheck},
			Reason: ReasonReplacementLimited, Warning: true,
		})
		p.RequeueAfter = period
	default:
		msg := fmt.Sprintf("Machine %s health checks failed for %v after its in-place update (%s) - changing MachineState to Failed", m.Name, timeout, why)
		p.Event = report(m, now, transition{
			Phase:  v1alpha1.MachineFailed,
			Op:     v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationHealthCheck},
			Reason: ReasonHealthTimeout, Warning: true,
		})
		p.MarkedFailed = true
		p.RequeueAfter = o.LongRetry
	}
}

// planUnhealthy plans an Unknown machine whose node is unhealthy: Failed
// once the health timeout ran out and the replacement gate agrees, for
// its MachineSet to replace.
func planUnhealthy(p *machinePlan, obs observation, why string, o *Options) {
	m, now, period := p.Machine, obs.Now, o.HealthCheckPeriod
	t := healthTimerOf(m, obs)
	if t.Restarted {
		setAnnotation(m, UnhealthySinceAnnotation, formatTime(now))
	}
	switch {
	case t.Reset:
		// Unhealthy across an outage, when nothing could be seen: back
		// to Running, as MCM does; the next health check starts a new
		// timeout if the node is still unhealthy.
		markRunning(p, now, v1alpha1.MachineOperationHealthCheck, ReasonHealthTimerReset,
			"Machine Health Timeout was reset due to APIServer being unreachable", o)
		p.RequeueAfter = period
	case t.Disabled:
		p.RequeueAfter = period
	case !t.Due:
		p.RequeueAfter = min(period, t.Timeout-now.Sub(t.Since)+time.Millisecond)
	case obs.ReplacementDenied != "":
		// The gate is polled again after period: it needs no event to
		// free a slot.
		msg := fmt.Sprintf("Machine %s is unhealthy for more than %v, but %s; waiting", m.Name, t.Timeout, obs.ReplacementDenied)
		p.Event = report(m, now, transition{
			Op:     v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateProcessing, Type: v1alpha1.MachineOperationHealthCheck},
			Reason: ReasonReplacementLimited, Warning: true,
		})
		p.RequeueAfter = period
	default:
		msg := fmt.Sprintf("Machine %s health checks failed for %v (%s) - changing MachineState to Failed", m.Name, t.Timeout, why)
		p.Event = report(m, now, transition{
			Phase:  v1alpha1.MachineFailed,
			Op:     v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationHealthCheck},
			Reason: ReasonHealthTimeout, Warning: true,
		})
		p.MarkedFailed = true
		p.RequeueAfter = o.LongRetry
	}
}

// markRunning moves a machine that joined (or re-joined) to Running: the
// timeout stops, the unhealthy-since mark goes, and a successful operation
// of the given type is reported with a Normal event.
func markRunning(p *machinePlan, now time.Time, opType v1alpha1.MachineOperationType, reason, msg string, o *Options) {
	deleteAnnotation(p.Machine, UnhealthySinceAnnotation)
	p.Event = report(p.Machine, now, transition{
		Phase:  v1alpha1.MachineRunning,
		Op:     v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateSuccessful, Type: opType},
		Reason: reason,
	})
	p.RequeueAfter = o.LongRetry
}

// nodeHealth reports whether node is healthy: Ready is True and none of
// the given condition types is True. why explains an unhealthy verdict.
func nodeHealth(node *corev1.Node, bad []corev1.NodeConditionType) (healthy bool, why string) {
	if node == nil {
		return false, "Node object went missing"
	}
	ready := false
	var problems []string
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
			if !ready {
				problems = append(problems, fmt.Sprintf("Ready=%s", c.Status))
			}
		} else if c.Status == corev1.ConditionTrue && slices.Contains(bad, c.Type) {
			problems = append(problems, fmt.Sprintf("%s=True", c.Type))
		}
	}
	if !ready && len(problems) == 0 {
		problems = append(problems, "Ready condition missing")
	}
	if len(problems) > 0 {
		return false, "Node conditions: " + strings.Join(problems, ", ")
	}
	return true, ""
}

// copyNodeConditions copies the node's conditions to the machine's status
// when they changed, keeping the controller's own (see ownCondition).
func copyNodeConditions(m *v1alpha1.Machine, node *corev1.Node) {
	copied := slices.DeleteFunc(slices.Clone(m.Status.Conditions), ownCondition)
	conds := boundedConditions(node.Status.Conditions)
	if conditionsEquivalent(copied, conds) {
		return
	}
	own := slices.DeleteFunc(slices.Clone(m.Status.Conditions), func(c corev1.NodeCondition) bool { return !ownCondition(c) })
	m.Status.Conditions = append(conds, own...)
}

// conditionTypes splits the comma-separated nodeConditions setting.
func conditionTypes(list *string) []corev1.NodeConditionType {
	if list == nil {
		return nil
	}
	var out []corev1.NodeConditionType
	for s := range strings.SplitSeq(*list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, corev1.NodeConditionType(s))
		}
	}
	return out
}

// conditionsEquivalent compares conditions ignoring heartbeat times, which
// the kubelet bumps all the time.
func conditionsEquivalent(a, b []corev1.NodeCondition) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.NodeCondition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason &&
			x.Message == y.Message && x.LastTransitionTime.Equal(&y.LastTransitionTime)
	})
}

func hasTaint(node *corev1.Node, key string) bool {
	return node != nil && slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}
