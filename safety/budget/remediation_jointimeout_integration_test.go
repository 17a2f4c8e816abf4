package budget_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
	"github.com/mcmkit/mcm/safety/budget"
	"github.com/mcmkit/mcm/safety/overshoot"
)

// TestIntegrationJoinTimeoutsAreNotShortCircuited pins what the
// remediation short-circuit gates, and that it says so (issue 30, finding
// 9): while it holds a deployment's Unknown machines (more unhealthy than
// MaxUnhealthy), a machine of the same deployment whose node never joins
// is still marked Failed at its creation timeout and replaced, as MCM
// does; the condition, the event and the held machines' lastOperation say
// that join timeouts go on, and none claims that no machine is replaced.
func TestIntegrationJoinTimeoutsAreNotShortCircuited(t *testing.T) {
	t.Parallel()
	const healthTimeout = 5 * time.Second
	maxUnhealthy := intstr.FromInt32(1)
	rec := record.NewFakeRecorder(1000)
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
	labels := map[string]string{v1alpha1.MachineDeploymentNameLabelKey: "zonal"}
	if _, err := mc.MachineDeployments(s.NS).Create(ctx, rollingDeployment(s, "zonal", 3, labels), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := runningOf(t, s, "zonal", 3)

	// Every Failed phase any machine reaches, as a watch sees it: the set
	// deletes a Failed machine at once, a poll could miss it.
	w, err := mc.Machines(s.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	failed := map[string]v1alpha1.LastOperation{}
	go func() {
		for e := range w.ResultChan() {
			m, ok := e.Object.(*v1alpha1.Machine)
			if ok && e.Type != watch.Deleted && m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed {
				mu.Lock()
				failed[m.Name] = m.Status.LastOperation
				mu.Unlock()
			}
		}
	}()

	// Two of three nodes NotReady: more than one unhealthy, so the health
	// timeouts of both are held.
	for _, name := range before[:2] {
		s.Cluster.Kubelet.SetCondition(name, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "ZoneOutage"})
	}
	remediationCondition(t, s, "zonal", v1alpha1.ConditionFalse)
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		m, err := mc.Machines(s.NS).Get(ctx, before[0], metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		op := m.Status.LastOperation.Description
		return strings.Contains(op, "unhealthy for more than"), "lastOperation of " + before[0] + ": " + op
	})

	// A rollout to a class whose VMs never boot: the new machine's node
	// never joins, and its creation timeout marks it Failed all the same.
	class, err := mc.MachineClasses(s.NS).Get(ctx, s.Class, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slow := &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: s.NS},
		Provider: class.Provider, SecretRef: class.SecretRef, CredentialsSecretRef: class.CredentialsSecretRef,
		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "large", BootDelay: &metav1.Duration{Duration: time.Hour}}.RawExtension()}
	if _, err := mc.MachineClasses(s.NS).Create(ctx, slow, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d, err := mc.MachineDeployments(s.NS).Get(ctx, "zonal", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Class.Name = slow.Name
	d.Spec.Template.Spec.MachineConfiguration = &v1alpha1.MachineConfiguration{MachineCreationTimeout: &metav1.Duration{Duration: 5 * time.Second}}
	if _, err := mc.MachineDeployments(s.NS).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var joinTimedOut string
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		for name, op := range failed {
			if slices.Contains(before, name) {
				return false, fmt.Sprintf("machine %s Failed during the short-circuit: %s", name, op.Description)
			}
			if strings.Contains(op.Description, "failed to join") {
				joinTimedOut = name
				return true, ""
			}
		}
		return false, fmt.Sprintf("no machine Failed by its creation timeout yet; Failed: %v", failed)
	})
	// The set replaces it, short-circuit or not.
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		_, err := mc.Machines(s.NS).Get(ctx, joinTimedOut, metav1.GetOptions{})
		return err != nil, joinTimedOut + " is not replaced"
	})

	// The Unknown machines are still held, and everything that said so
	// tells the join timeouts apart.
	said := map[string]string{"condition": remediationCondition(t, s, "zonal", v1alpha1.ConditionFalse)}
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, overshoot.ReasonRemediationHeld) {
			said["event"] = e
		}
	}
	if said["event"] == "" {
		t.Errorf("no %s event", overshoot.ReasonRemediationHeld)
	}
	for _, name := range before[:2] {
		m, err := mc.Machines(s.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m.Status.CurrentStatus.Phase != v1alpha1.MachineUnknown {
			t.Fatalf("machine %s, held by the short-circuit, is %s: %s", name, m.Status.CurrentStatus.Phase, m.Status.LastOperation.Description)
		}
		said["lastOperation of "+name] = m.Status.LastOperation.Description
	}
	for what, text := range said {
		if !strings.Contains(text, "no health timeout marks a machine Failed") ||
			!strings.Contains(text, "does not join within its creation timeout is still marked Failed") {
			t.Errorf("%s does not say what the short-circuit holds and what it does not: %q", what, text)
		}
		if strings.Contains(text, "none is replaced") {
			t.Errorf("%s claims no machine is replaced, but %s was: %q", what, joinTimedOut, text)
		}
	}
}

// remediationCondition waits for the deployment's
// ConditionRemediationAllowed to have status, and returns its message.
func remediationCondition(t *testing.T, s *simstack.Stack, deployment string, status v1alpha1.ConditionStatus) string {
	t.Helper()
	var message string
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		d, err := s.Machines.MachineV1alpha1().MachineDeployments(s.NS).Get(ctx, deployment, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range d.Status.Conditions {
			if c.Type == overshoot.ConditionRemediationAllowed {
				message = c.Message
				return c.Status == status, fmt.Sprintf("condition %s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		return false, "no " + string(overshoot.ConditionRemediationAllowed) + " condition"
	})
	return message
}
