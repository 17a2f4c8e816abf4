package budget_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
	"github.com/mcmkit/mcm/safety/budget"
	"github.com/mcmkit/mcm/safety/overshoot"
)

// TestIntegrationRemediationShortCircuit: with MaxUnhealthy 40%, half of a
// deployment's nodes going NotReady at once replaces none of them, however
// long the health timeout has run out, and the deployment's condition and
// an event say why; once only one is NotReady, that one is replaced after
// its health timeout.
func TestIntegrationRemediationShortCircuit(t *testing.T) {
	t.Parallel()
	const healthTimeout = 5 * time.Second
	maxUnhealthy := intstr.FromString("40%")
	rec := record.NewFakeRecorder(100)
	s := simstack.Start(t, simstack.Options{
		Deployments: true, Safety: true,
		Budget:    budget.Options{MaxUnhealthy: &maxUnhealthy},
		Overshoot: overshoot.Options{MaxUnhealthy: &maxUnhealthy, Recorder: rec},
		Machine: machine.Options{Machine: v1alpha1.MachineConfiguration{
			MachineHealthTimeout: &metav1.Duration{Duration: healthTimeout},
		}},
	})
	ctx := context.Background()
	mc := s.Machines.MachineV1alpha1()
	labels := map[string]string{v1alpha1.MachineDeploymentNameLabelKey: "zonal"} // the budget groups machines by it, as MCM
	d := rollingDeployment(s, "zonal", 6, labels)
	if _, err := mc.MachineDeployments(s.NS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// running waits for want Running machines and no other, and returns
	// their names, sorted.
	running := func(want int) []string {
		t.Helper()
		var names []string
		testenv.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
			list, err := mc.Machines(s.NS).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			names = names[:0]
			for _, m := range list.Items {
				if m.DeletionTimestamp == nil && m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
					names = append(names, m.Name)
				}
			}
			return len(names) == want && len(list.Items) == want, fmt.Sprintf("%d of %d machines Running, want %d", len(names), len(list.Items), want)
		})
		slices.Sort(names)
		return slices.Clone(names)
	}
	condition := func(status v1alpha1.ConditionStatus, reason string) {
		t.Helper()
		seen := "no " + string(overshoot.ConditionRemediationAllowed) + " condition"
		testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
			got, err := mc.MachineDeployments(s.NS).Get(ctx, d.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error() + "; last seen: " + seen
			}
			for _, c := range got.Status.Conditions {
				if c.Type == overshoot.ConditionRemediationAllowed {
					seen = fmt.Sprintf("condition %s %s: %s", c.Status, c.Reason, c.Message)
					return c.Status == status && c.Reason == reason, seen
				}
			}
			return false, seen
		})
	}
	before := running(6)
	condition(v1alpha1.ConditionTrue, overshoot.ReasonWithinMaxUnhealthy)

	notReady := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "ZoneOutage"}
	for _, name := range before[:3] { // the node of a sim machine has its name
		s.Cluster.Kubelet.SetCondition(name, notReady)
	}
	condition(v1alpha1.ConditionFalse, overshoot.ReasonTooManyUnhealthy)
	// Three health timeouts later, still nobody is Failed or replaced.
	deadline := time.Now().Add(3 * healthTimeout)
	for time.Now().Before(deadline) {
		list, err := mc.Machines(s.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range list.Items {
			if m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed || m.DeletionTimestamp != nil || !slices.Contains(before, m.Name) {
				t.Fatalf("machine %s (%s) replaced during a short-circuit: %s", m.Name, m.Status.CurrentStatus.Phase, m.Status.LastOperation.Description)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	var held []string
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, overshoot.ReasonRemediationHeld) {
			held = append(held, e)
		}
	}
	if len(held) != 1 || !strings.Contains(held[0], `3 of 6 machines of deployment "zonal" are unhealthy, more than the 2 allowed`) {
		t.Errorf("want one %s event saying why, got %q", overshoot.ReasonRemediationHeld, held)
	}

	// Two nodes recover: one unhealthy machine of six is replaced.
	for _, name := range before[1:3] {
		s.Cluster.Kubelet.ClearCondition(name, corev1.NodeReady)
	}
	condition(v1alpha1.ConditionTrue, overshoot.ReasonWithinMaxUnhealthy)
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		_, err := mc.Machines(s.NS).Get(ctx, before[0], metav1.GetOptions{})
		return err != nil, "the unhealthy machine " + before[0] + " is still there"
	})
	after := running(6)
	for _, name := range before[1:] {
		if !slices.Contains(after, name) {
			t.Errorf("healthy machine %s replaced", name)
		}
	}
}
