package budget_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// TestIntegrationForeignTerminatingMachineDoesNotHoldRemediation: a
// machine forged into a deployment's set (the set's controller reference
// and labels) with a finalizer of its own is deleted by the set as
// foreign and stays Terminating for as long as that finalizer does. The
// set did not create it, so it is no replacement of the deployment in
// flight: the deployment's machine whose node goes NotReady is replaced
// after its health timeout while the forged machine is still there.
func TestIntegrationForeignTerminatingMachineDoesNotHoldRemediation(t *testing.T) {
	t.Parallel()
	const healthTimeout = 5 * time.Second
	s := simstack.Start(t, simstack.Options{
		Deployments: true, Safety: true,
		Machine: machine.Options{Machine: v1alpha1.MachineConfiguration{
			MachineHealthTimeout: &metav1.Duration{Duration: healthTimeout},
		}},
	})
	ctx := context.Background()
	mc := s.Machines.MachineV1alpha1()
	labels := map[string]string{"pool": "fh"}
	if _, err := mc.MachineDeployments(s.NS).Create(ctx, rollingDeployment(s, "fh", 2, labels), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := runningOf(t, s, "fh", 2)
	sets, err := mc.MachineSets(s.NS).List(ctx, metav1.ListOptions{})
	if err != nil || len(sets.Items) != 1 {
		t.Fatalf("want the deployment's one set: %v, %v", sets, err)
	}
	set := &sets.Items[0]

	// The forgery: no VM (its creation fails), the set's reference and
	// labels, and a finalizer nobody but its creator removes.
	const forgedName = "forged-hold"
	if _, err := s.Cluster.Cloud.InjectFault(sim.Fault{Operation: driver.OperationCreateMachine, MachineName: forgedName, Code: driver.Internal}); err != nil {
		t.Fatal(err)
	}
	forged := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: forgedName, Namespace: s.NS, Labels: maps.Clone(set.Spec.Template.Labels),
			Finalizers:      []string{"evil.example/hold"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))}},
		Spec: v1alpha1.MachineSpec{Class: set.Spec.Template.Spec.Class},
	}
	if _, err := mc.Machines(s.NS).Create(ctx, forged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	release := func() {
		_, _ = mc.Machines(s.NS).Patch(context.Background(), forgedName, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
	t.Cleanup(release)
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		m, err := mc.Machines(s.NS).Get(ctx, forgedName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return m.DeletionTimestamp != nil, fmt.Sprintf("the forged machine is %q, not deleted by its set yet", m.Status.CurrentStatus.Phase)
	})

	victim, seen := before[0], ""
	s.Cluster.Kubelet.SetCondition(victim, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"})
	testenv.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, string) {
		m, err := mc.Machines(s.NS).Get(ctx, victim, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return true, "" // replaced
		case err != nil:
			return false, seen + "; then " + err.Error()
		}
		seen = fmt.Sprintf("machine %s is %s: %s", victim, m.Status.CurrentStatus.Phase, m.Status.LastOperation.Description)
		return m.DeletionTimestamp != nil, seen
	})
	m, err := mc.Machines(s.NS).Get(ctx, forgedName, metav1.GetOptions{})
	if err != nil || m.DeletionTimestamp == nil {
		t.Fatalf("the forged machine should still be Terminating, held by its finalizer: %v", err)
	}
	release() // runningOf counts every machine of the deployment's sets
	after := runningOf(t, s, "fh", 2)
	if slices.Contains(after, victim) || !slices.Contains(after, before[1]) {
		t.Errorf("fh's Running machines %v after replacing %s of %v", after, victim, before)
	}
}
