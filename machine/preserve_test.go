package machine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/internal/apitime"
)

const testPreserveTimeout = 96 * time.Hour

// preserveObs is the observation planPreservation reads, at now.
func preserveObs(m *v1alpha1.Machine, node *corev1.Node, now time.Time) observation {
	return observation{Now: now, Machine: m, Node: node, Config: v1alpha1.MachineConfiguration{
		MachinePreserveTimeout: &metav1.Duration{Duration: testPreserveTimeout},
		MachineDrainTimeout:    &metav1.Duration{Duration: 2 * time.Hour},
	}}
}

// planPreserveOnly plans the preservation alone of m with node.
func planPreserveOnly(m *v1alpha1.Machine, node *corev1.Node, now time.Time, o *Options) machinePlan {
	p := machinePlan{Machine: m.DeepCopy()}
	planPreservation(&p, preserveObs(m, node, now), node, o)
	return p
}

// applyPreservePlan returns the machine and node as p leaves them.
func applyPreservePlan(node *corev1.Node, p machinePlan) (*v1alpha1.Machine, *corev1.Node) {
	m := p.Machine.DeepCopy()
	if node == nil {
		return m, nil
	}
	n := node.DeepCopy()
	if p.Node != nil {
		n = p.Node.DeepCopy()
	}
	if c := p.NodeCondition; c != nil {
		i := slices.IndexFunc(n.Status.Conditions, func(x corev1.NodeCondition) bool { return x.Type == c.Type })
		if i < 0 {
			n.Status.Conditions = append(n.Status.Conditions, *c)
		} else {
			n.Status.Conditions[i] = *c
		}
	}
	return m, n
}

// settlePreservation applies p, and the plans after it until one writes
// nothing (a drain planned is found done), as syncs one after the other
// do; it returns the machine and node they leave.
func settlePreservation(t *testing.T, node *corev1.Node, p machinePlan, now time.Time) (*v1alpha1.Machine, *corev1.Node) {
	t.Helper()
	for range 4 {
		if p.PreserveDrain != nil {
			p = planPreserveDrainOutcome(p, node, drain.Result{Plan: drain.Plan{Done: true}}, nil, now)
		}
		m, n := applyPreservePlan(node, p)
		node = n
		p = planPreserveOnly(m, node, now, &Options{})
		if cmp.Equal(m, p.Machine) && p.Node == nil && p.NodeCondition == nil && p.PreserveDrain == nil {
			return m, node
		}
	}
	t.Fatalf("plans keep writing")
	return nil, nil
}

func preserveMachine(phase v1alpha1.MachinePhase, annotations map[string]string, expiry *time.Time) *v1alpha1.Machine {
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "ns", Annotations: annotations,
		Labels: map[string]string{v1alpha1.NodeLabelKey: "n1"}}}
	m.Status.CurrentStatus.Phase = phase
	if expiry != nil {
		t := apitime.Of(*expiry)
		m.Status.CurrentStatus.PreserveExpiryTime = &t
	}
	return m
}

func preserveNode(annotations map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: annotations},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionTrue)}}}
}

// markPreserved gives node the marks of a preservation of a machine in
// phase until until, as this controller leaves them.
func markPreserved(node *corev1.Node, phase v1alpha1.MachinePhase, until time.Time) {
	setMapKey(&node.Annotations, v1alpha1.ScaleDownDisabledAnnotation, "true")
	setMapKey(&node.Annotations, v1alpha1.ScaleDownDisabledByMCMAnnotation, "true")
	c := corev1.NodeCondition{Type: v1alpha1.NodePreserved, Status: corev1.ConditionTrue, Reason: v1alpha1.PreservedByUser,
		Message: "Machine preserved until " + preserveTime(until) + "."}
	if phase == v1alpha1.MachineFailed {
		node.Spec.Taints = append(node.Spec.Taints, preservedTaint)
		c.Message = v1alpha1.PreservedNodeDrainSuccessful + " " + c.Message
	}
	node.Status.Conditions = append(node.Status.Conditions, c)
}

// TestPlanPreservationMatrix: every preserve value (none, MCM's four, an
// unknown one), from the Node or the Machine, in every phase that
// matters, with no expiry, a future one or a past one, with and without
// the node: the expiry and the node's marks after the plan.
func TestPlanPreservationMatrix(t *testing.T) {
	now := t0
	future, past := now.Add(time.Hour), now.Add(-time.Hour)
	started := apitime.Of(now.Add(testPreserveTimeout)).Time
	// want[value][expiry] is the action, for Running/Unknown and Failed.
	type outcome struct{ notFailed, failed string }
	want := map[string]map[string]outcome{
		"":               {"none": {"nothing", "nothing"}, "future": {"stop", "stop"}, "past": {"expired", "expired"}},
		"now":            {"none": {"start", "start"}, "future": {"keep", "keep"}, "past": {"expired", "expired"}},
		"when-failed":    {"none": {"nothing", "start"}, "future": {"stop", "keep"}, "past": {"expired", "expired"}},
		"auto-preserved": {"none": {"nothing", "start"}, "future": {"stop", "keep"}, "past": {"expired", "expired"}},
		"false":          {"none": {"nothing", "nothing"}, "future": {"stop", "stop"}, "past": {"expired", "expired"}},
		"bogus":          {"none": {"nothing", "nothing"}, "future": {"keep", "keep"}, "past": {"expired", "expired"}},
	}
	for value, byExpiry := range want {
		for expiry, out := range byExpiry {
			for _, phase := range []v1alpha1.MachinePhase{v1alpha1.MachineRunning, v1alpha1.MachineUnknown, v1alpha1.MachineFailed} {
				for _, onNode := range []bool{false, true} {
					for _, withNode := range []bool{false, true} {
						if onNode && !withNode {
							continue // a Node's value is read from the node
						}
						name := fmt.Sprintf("%s/%s/%s/onNode=%v/node=%v", value, expiry, phase, onNode, withNode)
						t.Run(name, func(t *testing.T) {
							action := out.notFailed
							if phase == v1alpha1.MachineFailed {
								action = out.failed
							}
							var until *time.Time
							switch expiry {
							case "future":
								until = &future
							case "past":
								until = &past
							}
							checkMatrixCase(t, value, phase, until, onNode, withNode, action, started, now)
						})
					}
				}
			}
		}
	}
}

// Long: one check per observable outcome of the matrix, kept together so
// that a failing case shows every difference at once.
func checkMatrixCase(t *testing.T, value string, phase v1alpha1.MachinePhase, until *time.Time, onNode, withNode bool,
	action string, started, now time.Time) {
	t.Helper()
	ann := map[string]string{}
	nodeAnn := map[string]string{}
	if value != "" {
		if onNode {
			nodeAnn[v1alpha1.PreserveAnnotation] = value
			ann[v1alpha1.LastAppliedNodePreserveValueAnnotation] = value
		} else {
			ann[v1alpha1.PreserveAnnotation] = value
		}
	}
	m := preserveMachine(phase, ann, until)
	var node *corev1.Node
	if withNode {
		node = preserveNode(nodeAnn)
		if until != nil {
			markPreserved(node, phase, *until)
		}
	}
	p := planPreserveOnly(m, node, now, &Options{})
	got, gotNode := settlePreservation(t, node, p, now)

	var wantExpiry *time.Time
	switch action {
	case "start":
		wantExpiry = &started
	case "keep":
		wantExpiry = until
	case "expired":
		if phase == v1alpha1.MachineFailed {
			wantExpiry = until
		}
	}
	var gotExpiry *time.Time
	if e := got.Status.CurrentStatus.PreserveExpiryTime; e != nil {
		gotExpiry = &e.Time
	}
	if diff := cmp.Diff(wantExpiry, gotExpiry); diff != "" {
		t.Errorf("expiry (-want +got):\n%s", diff)
	}
	active := action == "start" || action == "keep"
	// An expired annotation is removed where it came from; false and
	// unknown values never are.
	removed := action == "expired" && (value == "now" || value == "when-failed" || value == "auto-preserved")
	if value == "auto-preserved" && action == "stop" {
		removed = true
	}
	if value != "" && withNode && onNode {
		if _, ok := gotNode.Annotations[v1alpha1.PreserveAnnotation]; ok == removed {
			t.Errorf("node's preserve annotation present=%v, want removed=%v", ok, removed)
		}
	}
	if value != "" && !onNode {
		if _, ok := got.Annotations[v1alpha1.PreserveAnnotation]; ok == removed {
			t.Errorf("machine's preserve annotation present=%v, want removed=%v", ok, removed)
		}
	}
	if active {
		due := got.Status.CurrentStatus.PreserveExpiryTime.Sub(now)
		if p.RequeueAfter <= 0 || p.RequeueAfter > due+time.Millisecond {
			t.Errorf("requeue after %v, want by the expiry in %v", p.RequeueAfter, due)
		}
	}
	if !withNode {
		if p.Node != nil || p.NodeCondition != nil || p.PreserveDrain != nil {
			t.Errorf("node writes without a node: %+v %+v %+v", p.Node, p.NodeCondition, p.PreserveDrain)
		}
		return
	}
	checkNodeMarks(t, gotNode, active, phase == v1alpha1.MachineFailed, until != nil || action == "start")
}

// checkNodeMarks checks the preservation's marks on node: present while
// active (the taint for a Failed machine only), gone otherwise, and a
// Preserved condition for every preservation there was.
func checkNodeMarks(t *testing.T, node *corev1.Node, active, failed, hadPreservation bool) {
	t.Helper()
	if got := node.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] == "true" &&
		node.Annotations[v1alpha1.ScaleDownDisabledAnnotation] == "true"; got != active {
		t.Errorf("scale-down-disabled with marker = %v, want %v", got, active)
	}
	if got := hasTaint(node, v1alpha1.PreservedTaintKey); got != (active && failed) {
		t.Errorf("preserved taint = %v, want %v", got, active && failed)
	}
	c := preservedCondition(node)
	switch {
	case !hadPreservation:
		if c != nil {
			t.Errorf("Preserved condition %+v without a preservation", c)
		}
	case c == nil:
		t.Errorf("no Preserved condition")
	case active && failed:
		// Not drained by this controller yet: MCM's unsuccessful-drain
		// message, False — or MCM's drain, which it adopts.
		if !(c.Status == corev1.ConditionFalse && strings.HasPrefix(c.Message, v1alpha1.PreservedNodeDrainUnsuccessful)) &&
			!(c.Status == corev1.ConditionTrue && strings.HasPrefix(c.Message, v1alpha1.PreservedNodeDrainSuccessful)) {
			t.Errorf("condition %+v", c)
		}
	case active:
		if c.Status != corev1.ConditionTrue {
			t.Errorf("condition %+v, want True", c)
		}
	default:
		if c.Status != corev1.ConditionFalse || c.Reason != v1alpha1.PreservationStopped {
			t.Errorf("condition %+v, want stopped", c)
		}
	}
}

// TestPlanPreservationWrites: the exact writes of the cases that matter
// most, migration from MCM v0.62.1 included.
func TestPlanPreservationWrites(t *testing.T) {
	now := t0
	until := apitime.Of(now.Add(testPreserveTimeout))
	mcmUntil := now.Add(10 * time.Hour)
	expiry := func(t time.Time) *metav1.Time { x := apitime.Of(t); return &x }
	for _, tc := range preserveWriteCases(now, until, mcmUntil, expiry) {
		t.Run(tc.name, func(t *testing.T) {
			o := &Options{}
			if tc.cordoningDrainer {
				o.Drainer = &scriptedDrainer{}
			}
			p := planPreserveOnly(tc.machine, tc.node, now, o)
			if diff := cmp.Diff(tc.wantMachine, p.Machine); diff != "" {
				t.Errorf("machine (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantNode, p.Node); diff != "" {
				t.Errorf("node (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCondition, p.NodeCondition); diff != "" {
				t.Errorf("condition (-want +got):\n%s", diff)
			}
			if (p.PreserveDrain != nil) != tc.wantDrain {
				t.Errorf("drain planned = %v, want %v", p.PreserveDrain != nil, tc.wantDrain)
			}
			var reasons []string
			for _, e := range p.PreserveEvents {
				reasons = append(reasons, e.Reason)
			}
			if diff := cmp.Diff(tc.wantEvents, reasons); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPreserveDrainOutcome: a pass that drained the node records it and
// says so in the condition; one that goes on keeps its state and comes
// back at its next check; a failure keeps the state and retries with
// backoff, the condition still False.
func TestPreserveDrainOutcome(t *testing.T) {
	now := t0
	until := now.Add(time.Hour)
	m := preserveMachine(v1alpha1.MachineFailed, map[string]string{v1alpha1.PreserveAnnotation: "now"}, &until)
	node := preserveNode(nil)
	markPreserved(node, v1alpha1.MachineRunning, until)
	node.Spec.Taints = []corev1.Taint{preservedTaint}
	p := planPreserveOnly(m, node, now, &Options{})
	// The outcome is folded into the plan's own machine: a fresh plan
	// for each outcome.
	plan := func() machinePlan { return planPreserveOnly(m, node, now, &Options{}) }
	if p.PreserveDrain == nil || p.NodeCondition == nil || p.NodeCondition.Status != corev1.ConditionFalse {
		t.Fatalf("want a drain and a False condition first, got %+v / %+v", p.PreserveDrain, p.NodeCondition)
	}

	done := planPreserveDrainOutcome(plan(), node, drain.Result{Plan: drain.Plan{Done: true}}, nil, now)
	if done.Machine.Annotations[PreserveDrainedAnnotation] == "" || done.NodeCondition.Status != corev1.ConditionTrue ||
		done.NodeCondition.Message != v1alpha1.PreservedNodeDrainSuccessful+" Machine preserved until "+preserveTime(until)+"." {
		t.Errorf("after the drain: %v, %+v", done.Machine.Annotations, done.NodeCondition)
	}
	// Drained: the next plan neither drains again nor rewrites anything.
	m2, n2 := applyPreservePlan(node, done)
	again := planPreserveOnly(m2, n2, now, &Options{})
	if again.PreserveDrain != nil || again.Node != nil || again.NodeCondition != nil {
		t.Errorf("after a drain: %+v %+v %+v", again.PreserveDrain, again.Node, again.NodeCondition)
	}
	// Nor when someone who may patch the machine removes the drained
	// annotation: the status records the drain (a new drain would count
	// from the preservation's start, long past, and force at once).
	delete(m2.Annotations, PreserveDrainedAnnotation)
	if again := planPreserveOnly(m2, n2, now.Add(time.Minute), &Options{}); again.PreserveDrain != nil {
		t.Errorf("drained again without the annotation: %+v", again.PreserveDrain)
	}

	going := planPreserveDrainOutcome(plan(), node, drain.Result{Plan: drain.Plan{NextCheck: now.Add(5 * time.Second)}}, nil, now)
	if going.Machine.Annotations[PreserveDrainStateAnnotation] == "" || going.RequeueAfter != 5*time.Second {
		t.Errorf("drain going on: %v, requeue %v", going.Machine.Annotations, going.RequeueAfter)
	}
	failed := planPreserveDrainOutcome(plan(), node, drain.Result{}, fmt.Errorf("boom"), now)
	if failed.Err == nil || failed.Retry == retryNone || failed.NodeCondition.Status != corev1.ConditionFalse ||
		failed.Machine.Annotations[PreserveDrainedAnnotation] != "" {
		t.Errorf("failed drain: err %v retry %v condition %+v", failed.Err, failed.Retry, failed.NodeCondition)
	}
}

// TestPreserveDrainRules: the drain's deadline counts from the start of
// the preservation; the force-drain label forces it now.
func TestPreserveDrainRules(t *testing.T) {
	now := t0
	until := now.Add(testPreserveTimeout - 3*time.Hour) // started 3h ago
	m := preserveMachine(v1alpha1.MachineFailed, map[string]string{v1alpha1.PreserveAnnotation: "now"}, &until)
	pd := planPreserveDrain(preserveObs(m, nil, now), m, "n1", corev1.NodeCondition{})
	if want := now.Add(-3 * time.Hour).Add(2 * time.Hour); !pd.Deadline.Equal(want) || pd.ForceReason == "" {
		t.Errorf("deadline %v (force %q), want %v, forced", pd.Deadline, pd.ForceReason, want)
	}
	m.Labels[v1alpha1.ForceDrainLabelKey] = "True"
	until = now.Add(testPreserveTimeout)
	m.Status.CurrentStatus.PreserveExpiryTime = &metav1.Time{Time: until}
	pd = planPreserveDrain(preserveObs(m, nil, now), m, "n1", corev1.NodeCondition{})
	if !pd.Deadline.Equal(now) || pd.ForceReason == "" {
		t.Errorf("force-drain label: deadline %v, force %q", pd.Deadline, pd.ForceReason)
	}
}
