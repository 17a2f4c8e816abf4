package machine

import (
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
)

// inPlaceWorld is a machine and its node as the plans leave them, with
// what the deployment controller, a person and the node agent do to the
// node's labels, in any order.
type inPlaceWorld struct {
	m    *v1alpha1.Machine
	node *corev1.Node
	now  time.Time
}

func toggleLabel(n *corev1.Node, key, value string) {
	if _, ok := n.Labels[key]; ok {
		delete(n.Labels, key)
		return
	}
	setMapKey(&n.Labels, key, value)
}

// event lets one thing happen to the world.
func (w *inPlaceWorld) event(t *rapid.T) string {
	switch op := rapid.IntRange(0, 7).Draw(t, "op"); op {
	case 0:
		toggleLabel(w.node, v1alpha1.CandidateForUpdateLabel, "true")
		return "toggle candidate"
	case 1:
		toggleLabel(w.node, v1alpha1.SelectedForUpdateLabel, "true")
		return "toggle selected"
	case 2:
		setMapKey(&w.node.Labels, v1alpha1.UpdateResultLabel, v1alpha1.UpdateResultSuccessful)
		return "result successful"
	case 3:
		setMapKey(&w.node.Labels, v1alpha1.UpdateResultLabel, v1alpha1.UpdateResultFailed)
		why := rapid.SampledFrom([]string{"os update failed", "kubelet unhealthy"}).Draw(t, "why")
		setMapKey(&w.node.Annotations, v1alpha1.UpdateFailedReasonAnnotation, why)
		return "result failed: " + why
	case 4:
		delete(w.node.Labels, v1alpha1.UpdateResultLabel)
		return "result removed"
	case 5:
		c := nodeCondition(w.node, corev1.NodeReady)
		if c.Status == corev1.ConditionTrue {
			c.Status = corev1.ConditionFalse
		} else {
			c.Status = corev1.ConditionTrue
		}
		return "ready " + string(c.Status)
	case 6:
		d := rapid.SampledFrom([]time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 11 * time.Minute, 25 * time.Minute}).Draw(t, "advance")
		w.now = w.now.Add(d)
		return "advance " + d.String()
	default:
		if _, ok := w.m.Labels[v1alpha1.ForceDrainLabelKey]; ok {
			delete(w.m.Labels, v1alpha1.ForceDrainLabelKey)
		} else {
			setLabel(w.m, v1alpha1.ForceDrainLabelKey, "True")
		}
		return "toggle force-drain"
	}
}

// inPlaceEdges are the phase changes a sync may make while in-place
// updates go on: the protocol's, and the health rules' (which the
// in-place phases are exempt from, but for an updated machine's health
// timeout).
var inPlaceEdges = map[v1alpha1.MachinePhase][]v1alpha1.MachinePhase{
	v1alpha1.MachineRunning:                 {v1alpha1.MachineUnknown, v1alpha1.MachineInPlaceUpdating},
	v1alpha1.MachineUnknown:                 {v1alpha1.MachineRunning, v1alpha1.MachineFailed, v1alpha1.MachineInPlaceUpdating},
	v1alpha1.MachineInPlaceUpdating:         {v1alpha1.MachineInPlaceUpdateSuccessful, v1alpha1.MachineInPlaceUpdateFailed},
	v1alpha1.MachineInPlaceUpdateFailed:     {v1alpha1.MachineInPlaceUpdateSuccessful},
	v1alpha1.MachineInPlaceUpdateSuccessful: {v1alpha1.MachineRunning, v1alpha1.MachineFailed},
}

// sync plans a sync, runs the drain pass it plans with an outcome drawn,
// checks the plan against the protocol, and applies it to the world.
func (w *inPlaceWorld) sync(t *rapid.T, o *Options) {
	obs := obsFor(w.m)
	obs.Now, obs.Node = w.now, w.node
	p := planMachine(obs, o)
	if p.Kind != planUpdate {
		t.Fatalf("plan %s: an in-place update creates nothing", p.Kind)
	}
	drained := false
	if p.InPlaceDrain != nil {
		switch outcome := rapid.IntRange(0, 2).Draw(t, "drain"); outcome {
		case 0:
			p = planInPlaceDrainOutcome(p, w.node, obs.Config, drain.Result{Plan: drain.Plan{Done: true}}, nil, w.now)
			drained = true
		case 1:
			p = planInPlaceDrainOutcome(p, w.node, obs.Config, drain.Result{Plan: drain.Plan{NextCheck: w.now.Add(time.Second)}}, nil, w.now)
		default:
			p = planInPlaceDrainOutcome(p, w.node, obs.Config, drain.Result{}, errors.New("refused"), w.now)
		}
	}
	before, after := w.m.Status.CurrentStatus.Phase, p.Machine.Status.CurrentStatus.Phase
	result := w.node.Labels[v1alpha1.UpdateResultLabel]
	if before != after {
		ok := false
		for _, to := range inPlaceEdges[before] {
			ok = ok || to == after
		}
		switch {
		case !ok:
			t.Fatalf("phase %s -> %s is no edge of the protocol", before, after)
		case after == v1alpha1.MachineFailed && !p.MarkedFailed:
			t.Fatalf("%s -> Failed not by the health timeout", before)
		case after == v1alpha1.MachineInPlaceUpdating && !drained && !hasReason(w.node, v1alpha1.DrainSuccessful):
			t.Fatalf("%s -> InPlaceUpdating without a drain", before)
		case after == v1alpha1.MachineInPlaceUpdateSuccessful && result != v1alpha1.UpdateResultSuccessful:
			t.Fatalf("%s -> InPlaceUpdateSuccessful without the agent's success", before)
		case after == v1alpha1.MachineInPlaceUpdateFailed && result != v1alpha1.UpdateResultFailed &&
			w.now.Sub(w.m.Status.CurrentStatus.LastUpdateTime.Time) <= v1alpha1.DefaultMachineInPlaceUpdateTimeout:
			t.Fatalf("InPlaceUpdateFailed without the agent's failure, before the timeout")
		}
	}
	if c := p.InPlaceCondition; c != nil && c.Reason == v1alpha1.ReadyForUpdate && after != v1alpha1.MachineInPlaceUpdating {
		t.Fatalf("ReadyForUpdate written with the machine %s", after)
	}
	if p.Node != nil {
		w.node = p.Node
	}
	if c := p.InPlaceCondition; c != nil {
		w.node = w.node.DeepCopy()
		if cur := nodeCondition(w.node, c.Type); cur != nil {
			*cur = *c
		} else {
			w.node.Status.Conditions = append(w.node.Status.Conditions, *c)
		}
	}
	w.m = p.Machine
}

func hasReason(n *corev1.Node, reason string) bool {
	c := nodeCondition(n, v1alpha1.NodeInPlaceUpdate)
	return c != nil && c.Reason == reason
}

// TestInPlaceProtocolProperty: whatever the order of the node's label
// events, the drains' outcomes and the time, a machine's phase moves only
// along the protocol's edges (an in-place step never marks it Failed nor
// creates anything), ReadyForUpdate is written only with InPlaceUpdating,
// and a sync right after a sync writes no condition again.
func TestInPlaceProtocolProperty(t *testing.T) {
	o := testOptions(t)
	rapid.Check(t, func(t *rapid.T) {
		m := withPhase(baseMachine(), v1alpha1.MachineRunning, "p1")
		n := node(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))})
		w := &inPlaceWorld{m: m, node: n, now: t0}
		var log []string
		for i := range rapid.IntRange(1, 40).Draw(t, "steps") {
			log = append(log, fmt.Sprintf("%d: %s", i, w.event(t)))
			w.sync(t, o)
			if w.m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed {
				return // its MachineSet's now
			}
		}
		// Settled: a second sync at the same time writes no condition.
		obs := obsFor(w.m)
		obs.Now, obs.Node = w.now, w.node
		if p := planMachine(obs, o); p.InPlaceCondition != nil && p.InPlaceDrain == nil {
			first := *p.InPlaceCondition
			w.sync(t, o)
			obs := obsFor(w.m)
			obs.Now, obs.Node = w.now, w.node
			if p := planMachine(obs, o); p.InPlaceCondition != nil && p.InPlaceDrain == nil {
				t.Fatalf("condition written twice: %+v then %+v\n%v", first, *p.InPlaceCondition, log)
			}
		}
	})
}
