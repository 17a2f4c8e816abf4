package budget_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/simcluster"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// TestIntegrationForeignMachinesDoNotBlockRemediation is the repro of
// issue 30's finding 6: two standalone machines labelled name=mu, stuck in
// CrashLoopBackOff, used to fill deployment mu's replacement budget ("2 of
// at most 1 machines of deployment "mu" are being replaced"), so that mu's
// machine whose node went NotReady was never replaced. A set no deployment
// controls, whose machines carry the same label, must not either. Only the
// machines of mu's own sets count: the unhealthy machine is replaced after
// its health timeout, and the foreign machines are left as they are.
func TestIntegrationForeignMachinesDoNotBlockRemediation(t *testing.T) {
	t.Parallel()
	const healthTimeout = 5 * time.Second
	s := simstack.Start(t, simstack.Options{
		Deployments: true, Safety: true,
		// A class naming another zone fails every creation.
		Cluster: simcluster.Options{Cloud: sim.Options{Zones: []string{"zone-a"}}},
		Machine: machine.Options{Machine: v1alpha1.MachineConfiguration{
			MachineHealthTimeout: &metav1.Duration{Duration: healthTimeout},
		}},
	})
	ctx := context.Background()
	mc := s.Machines.MachineV1alpha1()
	mu := map[string]string{v1alpha1.MachineDeploymentNameLabelKey: "mu"}
	if _, err := mc.MachineDeployments(s.NS).Create(ctx, rollingDeployment(s, "mu", 2, mu), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := runningOf(t, s, "mu", 2)

	// The repro: two machines created by hand with mu's label, whose
	// creations fail.
	intruders := []string{"intruder-1", "intruder-2"}
	for _, name := range intruders {
		if _, err := s.Cluster.Cloud.InjectFault(sim.Fault{Operation: driver.OperationCreateMachine, MachineName: name, Code: driver.Internal}); err != nil {
			t.Fatal(err)
		}
		m := &v1alpha1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.NS, Labels: mu},
			Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: s.Class}},
		}
		if _, err := mc.Machines(s.NS).Create(ctx, m, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// And a set of no deployment, whose machines carry mu's label too.
	class, err := mc.MachineClasses(s.NS).Get(ctx, s.Class, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	broken := &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: s.NS},
		Provider: class.Provider, SecretRef: class.SecretRef, CredentialsSecretRef: class.CredentialsSecretRef,
		ProviderSpec: sim.ProviderSpec{Zone: "zone-x", InstanceType: "large"}.RawExtension()}
	if _, err := mc.MachineClasses(s.NS).Create(ctx, broken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lonelyLabels := map[string]string{v1alpha1.MachineDeploymentNameLabelKey: "mu", "set": "lonely"}
	lonely := &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "lonely", Namespace: s.NS},
		Spec: v1alpha1.MachineSetSpec{Replicas: 1,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"set": "lonely"}},
			Template: v1alpha1.MachineTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lonelyLabels},
				Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: broken.Name}}}},
	}
	if _, err := mc.MachineSets(s.NS).Create(ctx, lonely, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var foreign []string
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		list, err := mc.Machines(s.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		foreign = foreign[:0]
		var crashing []string
		for _, m := range list.Items {
			if slices.Contains(before, m.Name) {
				continue
			}
			foreign = append(foreign, m.Name)
			if m.Status.CurrentStatus.Phase == v1alpha1.MachineCrashLoopBackOff {
				crashing = append(crashing, m.Name)
			}
		}
		return len(crashing) == 3 && len(foreign) == 3, fmt.Sprintf("%v of foreign machines %v in CrashLoopBackOff, want 3", crashing, foreign)
	})

	// mu's first machine's node goes NotReady: once its health timeout has
	// run out it is replaced, whatever the foreign machines do.
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
	after := runningOf(t, s, "mu", 2)
	if slices.Contains(after, victim) || !slices.Contains(after, before[1]) {
		t.Errorf("mu's Running machines %v after replacing %s of %v", after, victim, before)
	}
	for _, name := range foreign {
		m, err := mc.Machines(s.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil || m.DeletionTimestamp != nil {
			t.Errorf("foreign machine %s was touched: %v", name, err)
		}
	}
}

// runningOf waits until the machines controlled by deployment's sets are
// want Running machines, none being deleted, and returns their names,
// sorted.
func runningOf(t *testing.T, s *simstack.Stack, deployment string, want int) []string {
	t.Helper()
	mc := s.Machines.MachineV1alpha1()
	var names []string
	var seen string // the last state seen, for a failure after a read was cut short
	testenv.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
		d, err := mc.MachineDeployments(s.NS).Get(ctx, deployment, metav1.GetOptions{})
		if err != nil {
			return false, seen + "; then " + err.Error()
		}
		sets, err := mc.MachineSets(s.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, seen + "; then " + err.Error()
		}
		owned := map[string]bool{}
		for _, set := range sets.Items {
			if ref := metav1.GetControllerOf(&set); ref != nil && ref.UID == d.UID {
				owned[string(set.UID)] = true
			}
		}
		list, err := mc.Machines(s.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, seen + "; then " + err.Error()
		}
		names = names[:0]
		total := 0
		for _, m := range list.Items {
			if ref := metav1.GetControllerOf(&m); ref == nil || !owned[string(ref.UID)] {
				continue
			}
			total++
			if m.DeletionTimestamp == nil && m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
				names = append(names, m.Name)
			}
		}
		seen = fmt.Sprintf("%d of %d machines of %s Running, want %d", len(names), total, deployment, want)
		return len(names) == want && total == want, seen
	})
	slices.Sort(names)
	return slices.Clone(names)
}
