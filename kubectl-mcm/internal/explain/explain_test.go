package explain

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/machine"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func drainingMachine() MachineState {
	yes := true
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "web-a", Namespace: "shop", CreationTimestamp: at(2 * time.Hour),
		DeletionTimestamp: &metav1.Time{Time: now.Add(-45 * time.Second)},
		OwnerReferences:   []metav1.OwnerReference{{Kind: "MachineSet", Name: "web-1", Controller: &yes}},
		Labels:            map[string]string{v1alpha1.NodeLabelKey: "web-a"},
		Annotations: map[string]string{machine.DeletionStepAnnotation: string(machine.StepDrain),
			"mcmkit.io/drain-blocked-by": "shop/web"}}}
	m.Spec.ProviderID = "sim:///zone-a/web-a"
	m.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachineTerminating, LastUpdateTime: at(45 * time.Second)}
	m.Status.LastOperation = v1alpha1.LastOperation{Type: v1alpha1.MachineOperationDelete, State: v1alpha1.MachineStateProcessing,
		LastUpdateTime: at(10 * time.Second), Description: "Draining node: 1 pod left: shop/web-0 blocked by shop/web (needs 2 healthy, has 2)"}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "web-a"}, Spec: corev1.NodeSpec{Unschedulable: true},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	events := []corev1.Event{
		{Type: corev1.EventTypeNormal, Reason: "Created", Message: "Created machine web-a", LastTimestamp: at(2 * time.Hour)},
		{Type: corev1.EventTypeWarning, Reason: "DrainBlocked", Message: "shop/web-0 blocked", LastTimestamp: at(5 * time.Second), Count: 4},
	}
	return MachineState{Machine: m, Node: node, NodeName: "web-a", Events: events}
}

func TestGolden(t *testing.T) {
	creating := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "web-b", Namespace: "shop", CreationTimestamp: at(40 * time.Second)}}
	plan := drain.Plan{Node: "web-a", Remaining: map[drain.Action]int{drain.ActionBlocked: 1}, Message: "1 pod left: shop/web-0 blocked by shop/web",
		Decisions: []drain.Decision{
			{Pod: drain.PodRef{Namespace: "kube-system", Name: "proxy-x"}, Action: drain.ActionSkip, Cause: drain.CauseDaemonSet, Reason: "DaemonSet pod"},
			{Pod: drain.PodRef{Namespace: "shop", Name: "web-0"}, Action: drain.ActionBlocked, Cause: drain.CauseDisruptionBudget,
				Reason: "PodDisruptionBudget allows no disruption", PDBs: []drain.PDBStatus{{Name: "shop/web", DesiredHealthy: 2, CurrentHealthy: 2}}},
		}}
	for _, tc := range []struct{ name, got string }{
		{"why-draining", Machine(drainingMachine(), now)},
		{"why-creating", Machine(MachineState{Machine: creating}, now)},
		{"drain-plan", Plan(plan)},
		{"drain-plan-empty", Plan(drain.Plan{Node: "web-c", Done: true})},
	} {
		path := filepath.Join("testdata", tc.name+".golden")
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tc.got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if diff := cmp.Diff(string(want), tc.got); diff != "" {
			t.Errorf("%s differs (-want +got):\n%s", path, diff)
		}
	}
}
