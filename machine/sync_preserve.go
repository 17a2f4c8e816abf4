package machine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/patch"
)

// preserveDrainPass runs the drain pass p.PreserveDrain plans, one
// non-blocking pass as the deletion's drain runs, and returns p with its
// outcome folded in (planPreserveDrainOutcome).
func (c *Controller) preserveDrainPass(ctx context.Context, obs observation, p machinePlan) machinePlan {
	res, err := c.drainPass(ctx, c.preserveDrainer, p.Machine, PreserveDrainStateAnnotation, p.PreserveDrain.drainRules)
	return planPreserveDrainOutcome(p, obs.Node, res, err, c.opts.Clock.Now())
}

// drainPass runs one non-blocking pass of drainer over the node of r,
// from the state the last pass stored in the machine's annotation key.
func (c *Controller) drainPass(ctx context.Context, drainer Drainer, m *v1alpha1.Machine, key string, r drainRules) (drain.Result, error) {
	state := storedPassState(m, key, r.Start, c.opts.Clock.Now())
	// The deadline and the bound on refusals come from the machine's own
	// facts, never from the stored state, which anyone who may patch the
	// machine can write.
	if !r.Deadline.IsZero() {
		state.SetDeadline(r.Deadline)
	}
	state.SetMaxEvictRetries(r.MaxEvictRetries)
	return drainer.Pass(ctx, r.Node, state)
}

// planPreserveDrainOutcome folds a drain pass's outcome into p: the drain
// state stored on the machine while the drain goes on, and the next pass
// at its next check; on success the record that the node is drained and
// the Preserved condition saying so; on failure the state, an event, and
// a retry with the machine's backoff (the condition keeps saying the node
// could not be drained). It is pure.
func planPreserveDrainOutcome(p machinePlan, node *corev1.Node, res drain.Result, err error, now time.Time) machinePlan {
	m, pd := p.Machine, p.PreserveDrain
	switch {
	case errors.Is(err, drain.ErrNodeNotFound):
		// Gone: the health step and the node's event take it from here.
	case err != nil:
		storePassState(m, PreserveDrainStateAnnotation, res.State)
		msg := fmt.Sprintf("Drain of preserved node %s failed: %v", pd.Node, err)
		p.PreserveEvents = append(p.PreserveEvents, &event{Type: corev1.EventTypeWarning, Reason: ReasonDrainFailed, Message: msg})
		p.Retry, p.Err = retryShort, fmt.Errorf("draining preserved node %s: %w", pd.Node, err)
		if until, ok := machinestate.PreservedUntil(m); ok {
			p.TimeoutIn = max(until.Sub(now)+time.Millisecond, time.Millisecond)
		}
	case !res.Done:
		storePassState(m, PreserveDrainStateAnnotation, res.State)
		wait := max(res.NextCheck.Sub(now), 100*time.Millisecond)
		if p.RequeueAfter <= 0 || wait < p.RequeueAfter {
			p.RequeueAfter = wait
		}
	default:
		deleteAnnotation(m, PreserveDrainStateAnnotation)
		setPreserveDrained(m, now)
		if node != nil {
			p.NodeCondition = conditionUpdate(node, pd.Drained, now)
		}
		msg := "Drained preserved node " + pd.Node
		if res.ForceReason != "" || pd.ForceReason != "" {
			msg = fmt.Sprintf("Force-drained preserved node %s (%s)", pd.Node, firstOf(res.ForceReason, pd.ForceReason))
		}
		p.PreserveEvents = append(p.PreserveEvents, &event{Type: corev1.EventTypeNormal, Reason: ReasonPreservedNodeDrained, Message: msg})
	}
	return p
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// storedPassState is the drain state of the last pass of a drain that
// began at start, stored in the machine's annotation key; the zero State
// (a new drain) when there is none, when it cannot be read, or when its
// drain would have begun before start or after now: the annotation is
// anyone's to write.
func storedPassState(m *v1alpha1.Machine, key string, start, now time.Time) drain.State {
	raw := m.Annotations[key]
	var state drain.State
	if raw == "" || json.Unmarshal([]byte(raw), &state) != nil {
		return drain.State{}
	}
	if s := state.Start(); !s.IsZero() && (s.Before(start.Truncate(time.Second)) || s.After(now)) {
		return drain.State{}
	}
	return state
}

// storePassState stores a drain pass's state in the machine's
// annotation key.
func storePassState(m *v1alpha1.Machine, key string, state drain.State) {
	raw, err := json.Marshal(state)
	if err != nil {
		return // cannot fail for a drain.State
	}
	setAnnotation(m, key, string(raw))
}

// patchNodeCondition writes the node's Preserved condition. A strategic
// merge patch merges conditions by type, so the kubelet's own conditions
// are neither sent nor overwritten.
func (c *Controller) patchNodeCondition(ctx context.Context, name string, cond corev1.NodeCondition) error {
	data, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
	if err != nil {
		return fmt.Errorf("writing the %s condition of node %s: %w", cond.Type, name, err)
	}
	written, err := patch.SendStrategic(ctx, c.target.CoreV1().Nodes().Patch, name, data, c.opts.FieldManager, "status")
	if err != nil {
		return fmt.Errorf("writing the %s condition of node %s: %w", cond.Type, name, err)
	}
	c.nodeWrites.Wrote(name, written.ResourceVersion)
	return nil
}
