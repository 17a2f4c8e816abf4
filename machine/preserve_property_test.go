package machine

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// preserveWorld is a machine and its node as the preservation's plans
// leave them, with what people did to them.
type preserveWorld struct {
	m    *v1alpha1.Machine
	node *corev1.Node
	now  time.Time
	// hidden: the node is out of sight (not in the cache).
	hidden bool
	// userCA: a person set the scale-down-disabled annotation, without
	// the marker; userCordon: a person cordoned the node.
	userCA, userCordon bool
}

var preserveValues = []string{"now", "when-failed", "auto-preserved", "false", "bogus"}

// step lets one thing happen to the world.
func (w *preserveWorld) step(t *rapid.T) string {
	switch op := rapid.IntRange(0, 6).Draw(t, "op"); op {
	case 0:
		v := rapid.SampledFrom(preserveValues).Draw(t, "nodeValue")
		setMapKey(&w.node.Annotations, v1alpha1.PreserveAnnotation, v)
		return "node preserve=" + v
	case 1:
		delete(w.node.Annotations, v1alpha1.PreserveAnnotation)
		return "node preserve removed"
	case 2:
		v := rapid.SampledFrom(preserveValues).Draw(t, "machineValue")
		setAnnotation(w.m, v1alpha1.PreserveAnnotation, v)
		return "machine preserve=" + v
	case 3:
		deleteAnnotation(w.m, v1alpha1.PreserveAnnotation)
		return "machine preserve removed"
	case 4:
		ph := rapid.SampledFrom([]v1alpha1.MachinePhase{v1alpha1.MachineRunning, v1alpha1.MachineUnknown, v1alpha1.MachineFailed}).Draw(t, "phase")
		w.m.Status.CurrentStatus.Phase = ph
		return "phase " + string(ph)
	case 5:
		d := rapid.SampledFrom([]time.Duration{time.Second, time.Minute, time.Hour, 50 * time.Hour, 97 * time.Hour}).Draw(t, "advance")
		w.now = w.now.Add(d)
		return "advance " + d.String()
	default:
		w.hidden = !w.hidden
		return fmt.Sprintf("node hidden=%v", w.hidden)
	}
}

// sync plans and applies until a plan writes nothing (a drain planned is
// found done), and returns that last plan. A plan that writes nothing
// must come within four rounds: start, taint, drain, quiet.
func (w *preserveWorld) sync(t *rapid.T) machinePlan {
	for round := 0; round < 4; round++ {
		var node *corev1.Node
		if !w.hidden {
			node = w.node
		}
		p := planPreserveOnly(w.m, node, w.now, &Options{})
		if p.PreserveDrain != nil {
			p = planPreserveDrainOutcome(p, node, drain.Result{Plan: drain.Plan{Done: true}}, nil, w.now)
		}
		quiet := cmp.Equal(w.m, p.Machine) && p.Node == nil && p.NodeCondition == nil && p.PreserveDrain == nil
		if quiet {
			if len(p.PreserveEvents) > 0 {
				t.Fatalf("events without a change: %+v", p.PreserveEvents)
			}
			return p
		}
		m, n := applyPreservePlan(node, p)
		w.m = m
		if n != nil {
			w.node = n
		}
	}
	t.Fatalf("plans keep writing: %s", cmp.Diff(w.m, planPreserveOnly(w.m, w.node, w.now, &Options{}).Machine))
	return machinePlan{}
}

// check checks the invariants after a sync that ended with plan p.
func (w *preserveWorld) check(t *rapid.T, p machinePlan) {
	m, now := w.m, w.now
	v, asked := machinestate.PreserveRequest(m)
	failed := m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed
	wants := v == v1alpha1.PreserveNow || (failed && (v == v1alpha1.PreserveWhenFailed || v == v1alpha1.PreserveAutoPreserved))
	invalid := asked && !machinestate.ValidPreserveValue(v)
	until, ever := machinestate.PreservedUntil(m)
	preserved := machinestate.Preserved(m, now)
	fromNode := m.Annotations[v1alpha1.LastAppliedNodePreserveValueAnnotation] != ""
	if wants && !ever {
		t.Fatalf("asked %q in phase %s, not preserved", v, m.Status.CurrentStatus.Phase)
	}
	if ever && !(preserved && (wants || invalid) || !preserved && (failed || fromNode && w.hidden)) {
		t.Fatalf("expiry %v at %v: asked %q, phase %s", until, now, v, m.Status.CurrentStatus.Phase)
	}
	if preserved && (p.RequeueAfter <= 0 || p.RequeueAfter > until.Sub(now)+time.Millisecond) {
		t.Fatalf("requeue after %v, expiry in %v", p.RequeueAfter, until.Sub(now))
	}
	if !preserved {
		for _, k := range []string{PreserveDrainStateAnnotation, PreserveDrainedAnnotation, PreserveCordonedAnnotation} {
			if _, ok := m.Annotations[k]; ok {
				t.Fatalf("%s left on a machine not preserved", k)
			}
		}
	}
	if w.hidden {
		return
	}
	n := w.node
	if hasTaint(n, v1alpha1.PreservedTaintKey) != (preserved && failed) {
		t.Fatalf("taint %v, preserved %v, failed %v", n.Spec.Taints, preserved, failed)
	}
	marker := n.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] == "true"
	if marker != (preserved && !w.userCA) {
		t.Fatalf("by-mcm marker %v, preserved %v, user's annotation %v", marker, preserved, w.userCA)
	}
	if (preserved || w.userCA) != (n.Annotations[v1alpha1.ScaleDownDisabledAnnotation] == "true") {
		t.Fatalf("scale-down-disabled %q, preserved %v, user's %v", n.Annotations[v1alpha1.ScaleDownDisabledAnnotation], preserved, w.userCA)
	}
	if n.Spec.Unschedulable != w.userCordon {
		t.Fatalf("cordon %v, the user's %v", n.Spec.Unschedulable, w.userCordon)
	}
	c := preservedCondition(n)
	if preserved && (c == nil || c.Status != corev1.ConditionTrue) || !preserved && c != nil && c.Status != corev1.ConditionFalse {
		t.Fatalf("condition %+v, preserved %v", c, preserved)
	}
}

// TestPreservationProperty: over random sequences of annotations set and
// removed on the Node and the Machine, phase changes, a node out of
// sight and time passing, each plan's writes applied: the expiry is set
// iff the preservation should hold (or a Failed machine's ran out); the
// node's marks follow it, a person's scale-down-disabled annotation and
// cordon are never touched; and plans come to rest — a plan over what
// the last one wrote writes nothing and reports nothing.
func TestPreservationProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := &preserveWorld{now: t0, userCA: rapid.Bool().Draw(t, "userCA"), userCordon: rapid.Bool().Draw(t, "userCordon")}
		w.m = preserveMachine(v1alpha1.MachineRunning, nil, nil)
		w.node = preserveNode(nil)
		if w.userCA {
			setMapKey(&w.node.Annotations, v1alpha1.ScaleDownDisabledAnnotation, "true")
		}
		w.node.Spec.Unschedulable = w.userCordon
		steps := rapid.IntRange(1, 30).Draw(t, "steps")
		for range steps {
			what := w.step(t)
			p := w.sync(t)
			t.Logf("%s: expiry %v", what, w.m.Status.CurrentStatus.PreserveExpiryTime)
			w.check(t, p)
		}
	})
}
