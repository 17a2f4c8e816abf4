package deployment

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/patch"
)

// preservedUntil records a preservation ending at t, as the machine
// controller does; asked puts the preserve annotation on the machine.
func preservedUntil(t time.Time) mOpt {
	return func(m *v1alpha1.Machine) { m.Status.CurrentStatus.PreserveExpiryTime = new(metav1.NewTime(t)) }
}

func asked(v v1alpha1.PreserveValue) mOpt {
	return func(m *v1alpha1.Machine) {
		m.Annotations = map[string]string{v1alpha1.PreserveAnnotation: string(v)}
	}
}

func withPreservedFailed(n int32) msOpt {
	return func(s *v1alpha1.MachineSet) { s.Status.PreservedFailedReplicas = n }
}

// TestStatusCountsPreservedFailed: the deployment's preservedFailedReplicas
// is the sum of its sets'; the Available condition needs that many fewer
// available machines (MCM's max(replicas - maxUnavailable - preserved, 0));
// failedMachines leaves out the Failed machines the sets keep.
func TestStatusCountsPreservedFailed(t *testing.T) {
	now := epoch.Add(time.Hour)
	failedKept := newMachine("n-kept", inPhase(v1alpha1.MachineFailed), failedOp(v1alpha1.MachineOperationHealthCheck, ""),
		asked(v1alpha1.PreserveWhenFailed), preservedUntil(now.Add(time.Hour)))
	failedStarting := newMachine("n-starting", inPhase(v1alpha1.MachineFailed), failedOp(v1alpha1.MachineOperationHealthCheck, ""),
		asked(v1alpha1.PreserveWhenFailed))
	failedExpired := newMachine("o-expired", inPhase(v1alpha1.MachineFailed), failedOp(v1alpha1.MachineOperationHealthCheck, ""),
		preservedUntil(now.Add(-time.Minute)))
	tests := []struct {
		name      string
		preserved [2]int32 // the new set's, the old set's
		wantAvail v1alpha1.ConditionStatus
	}{
		{name: "none preserved: 3 of at least 4 available", wantAvail: v1alpha1.ConditionFalse},
		{name: "one preserved: 3 of at least 3", preserved: [2]int32{1, 0}, wantAvail: v1alpha1.ConditionTrue},
		{name: "the sum of all sets, never below 0", preserved: [2]int32{4, 3}, wantAvail: v1alpha1.ConditionTrue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := statusInput{
				Deployment: newDeployment(5, withRolling("0", "1")),
				NewSet:     newSet("n", 4, 9, withPreservedFailed(tt.preserved[0])),
				OldSets:    []*v1alpha1.MachineSet{newSet("o", 1, 0, withClass("a"), withPreservedFailed(tt.preserved[1]))},
				Machines: map[string][]*v1alpha1.Machine{
					"n": {newMachine("n-0"), newMachine("n-1"), failedKept, failedStarting},
					"o": {newMachine("o-0"), failedExpired},
				},
				Counts: map[string]machineCounts{"n": counted(4, 2), "o": counted(2, 1)},
				Now:    now,
			}
			st, err := calculateStatus(in)
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.preserved[0] + tt.preserved[1]; st.PreservedFailedReplicas != want {
				t.Errorf("preservedFailedReplicas %d, want %d", st.PreservedFailedReplicas, want)
			}
			if c, _ := conditionOf(st.Conditions, v1alpha1.MachineDeploymentAvailable); c.Status != tt.wantAvail {
				t.Errorf("Available %s (%s), want %s", c.Status, c.Message, tt.wantAvail)
			}
			var failed []string
			for _, f := range st.FailedMachines {
				failed = append(failed, f.Name)
			}
			if diff := cmp.Diff([]string{"o-expired"}, failed); diff != "" {
				t.Errorf("failedMachines (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAutoPreserveMaxGoesToTheNewSet: the deployment's
// autoPreserveFailedMachineMax is written into its new set, when created
// and when changed later, never into an old set.
func TestAutoPreserveMaxGoesToTheNewSet(t *testing.T) {
	two := int32(2)
	d := newDeployment(3, func(d *v1alpha1.MachineDeployment) { d.Spec.AutoPreserveFailedMachineMax = &two })
	created, err := newSetOf(d, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := created.Spec.AutoPreserveFailedMachineMax; got == nil || *got != 2 || got == d.Spec.AutoPreserveFailedMachineMax {
		t.Errorf("new set's maximum %v, want a copy of 2", got)
	}
	stale := newSet("n", 3, 1)
	for _, tt := range []struct {
		isNew bool
		want  string // the patch's spec.autoPreserveFailedMachineMax
	}{{true, "2"}, {false, ""}} {
		want, err := wantedSet(d, stale, tt.isNew, 3, false, 1)
		if err != nil {
			t.Fatal(err)
		}
		data, err := patch.Diff(setFields, stale, want, "")
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Spec map[string]json.RawMessage `json:"spec"`
		}
		if data != nil {
			if err := json.Unmarshal(data, &body); err != nil {
				t.Fatal(err)
			}
		}
		if got := string(body.Spec["autoPreserveFailedMachineMax"]); got != tt.want {
			t.Errorf("new set %v: patch %s writes the maximum %q, want %q", tt.isNew, data, got, tt.want)
		}
	}
}

// TestRolloutCleanupSkipsPreservedNodes: when a rollout completes, the
// scale-down-disabled annotation stays on the nodes of preserved machines
// (the machine controller's, for the preservation) and goes from the
// others; a preservation that ran out protects nothing.
func TestRolloutCleanupSkipsPreservedNodes(t *testing.T) {
	now := epoch.Add(time.Hour)
	onNode := func(name string) mOpt {
		return func(m *v1alpha1.Machine) {
			m.Labels = map[string]string{v1alpha1.NodeLabelKey: name}
			m.Spec.ProviderID = nmVM(name)
		}
	}
	ms := []*v1alpha1.Machine{
		newMachine("kept", onNode("node-kept"), asked(v1alpha1.PreserveNow), preservedUntil(now.Add(time.Minute))),
		newMachine("expired", onNode("node-expired"), asked(v1alpha1.PreserveNow), preservedUntil(now)),
		newMachine("plain", onNode("node-plain")),
	}
	s := nodeScope{complete: true, newMachines: ms, nodes: map[string]*corev1.Node{
		"node-kept": nmNode("node-kept", nmOurs(), nmBound(ms[0])), "node-expired": nmNode("node-expired", nmOurs(), nmBound(ms[1])),
		"node-plain": nmNode("node-plain", nmOurs(), nmTainted(), nmBound(ms[2])),
	}, preserved: preservedNodes(ms, now)}
	want := []nodeChange{{Node: "node-expired", ScaleDown: -1}, {Node: "node-plain", Taint: -1, ScaleDown: -1}}
	if diff := cmp.Diff(want, s.plan(true), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("marks at completion (-want +got):\n%s", diff)
	}
	// A preserved node keeps the rollout taint's removal: only its
	// annotation is the preservation's.
	s.nodes["node-kept"] = nmNode("node-kept", nmOurs(), nmTainted(), nmBound(ms[0]))
	want = []nodeChange{{Node: "node-expired", ScaleDown: -1}, {Node: "node-kept", Taint: -1}, {Node: "node-plain", Taint: -1, ScaleDown: -1}}
	if diff := cmp.Diff(want, s.plan(true), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("marks at completion, the preserved node tainted (-want +got):\n%s", diff)
	}
}
