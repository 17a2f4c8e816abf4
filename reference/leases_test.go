package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/reference/manager"
)

// Short leases, so that the tests wait seconds for a takeover.
const (
	testLeaseDuration = 4 * time.Second
	testRenewDeadline = 3 * time.Second
	testRetryPeriod   = 500 * time.Millisecond
)

var shortLeases = []string{
	"--leader-elect-lease-duration=" + testLeaseDuration.String(), "--leader-elect-renew-deadline=" + testRenewDeadline.String(),
	"--leader-elect-retry-period=" + testRetryPeriod.String(),
}

// mcmProcess plays one of MCM's processes in leader election: it holds
// lease in ns under identity, as MCM's process does, and runs nothing.
// stop releases the lease, as a process shut down does.
func mcmProcess(t *testing.T, env *testenv.Env, ns, lease, identity string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	leading := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: lease},
			Client:     env.Client().CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		},
		LeaseDuration: testLeaseDuration, RenewDeadline: testRenewDeadline, RetryPeriod: testRetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(leading) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		le.Run(ctx)
	}()
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not get lease %s", identity, lease)
	}
	stop = sync.OnceFunc(func() {
		cancel()
		<-done
	})
	t.Cleanup(stop)
	return stop
}

func createMachineSet(t *testing.T, mc versioned.Interface, ns, name string, replicas int32) {
	t.Helper()
	set := &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.MachineSetSpec{Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"set": name}},
			Template: v1alpha1.MachineTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"set": name}},
				Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "sim"}}}},
	}
	if _, err := mc.MachineV1alpha1().MachineSets(ns).Create(context.Background(), set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// machinesOfSet returns the set's machines, and how many of them run.
func machinesOfSet(ctx context.Context, mc versioned.Interface, ns, set string) (total, running int, err error) {
	list, err := mc.MachineV1alpha1().Machines(ns).List(ctx, metav1.ListOptions{LabelSelector: "set=" + set})
	if err != nil {
		return 0, 0, err
	}
	for _, m := range list.Items {
		if m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
			running++
		}
	}
	return len(list.Items), running, nil
}

func waitSetRunning(t *testing.T, mc versioned.Interface, ns, set string, replicas int) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		total, running, err := machinesOfSet(ctx, mc, ns, set)
		if err != nil {
			return false, err.Error()
		}
		return total == replicas && running == replicas, fmt.Sprintf("set %s: %d machines, %d Running; want %d Running", set, total, running, replicas)
	})
}

// waitGroups waits until in runs exactly the groups want says.
func waitGroups(t *testing.T, in *instance, want map[string]string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		got := map[string]string{}
		for group := range want {
			got[group] = in.groupRunning(group)
		}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("%s runs groups %v, want %v", in.name, got, want)
	})
}

func holder(t *testing.T, env *testenv.Env, ns, lease string) string {
	t.Helper()
	l, err := env.Client().CoordinationV1().Leases(ns).Get(context.Background(), lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// started counts the log lines in which in started the controllers of
// group.
func (in *instance) started(group string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return strings.Count(in.log.String(), `"msg"="Leading; starting controllers" "group"="`+group+`"`)
}

// Next to a running machine-controller-manager of MCM, which holds its
// lease, the manager runs only what MCM's machine-controller would: it
// makes a Machine Running, and leaves a MachineSet to MCM (whose stand-in
// here reconciles nothing, so the set stays without machines). Once MCM's
// process is gone, its lease released, the manager runs the MachineSet
// controller too. Next to MCM's machine-controller, the other way round.
func TestLeasesNextToAnMCMProcess(t *testing.T) {
	t.Parallel()
	env := testenv.Get(t)
	bin := binary(t)
	mc := versioned.NewForConfigOrDie(env.Config())

	t.Run("machine-controller-manager", func(t *testing.T) {
		ns := env.Namespace(t)
		createMachineObjects(t, env, mc, ns)
		stopMCM := mcmProcess(t, env, ns, "machine-controller-manager", "machine-controller-manager-6f7d8-abcde")
		set := "set-" + randomSuffix(t)
		createMachineSet(t, mc, ns, set, 1)
		in := start(t, bin, "manager", append([]string{"--control-kubeconfig", env.Kubeconfig(), "--target-kubeconfig", env.Kubeconfig(),
			"--namespace", ns, "--driver", "sim", "-v", "1"}, shortLeases...)...)
		waitGroups(t, in, map[string]string{"machine-controller": "1", "machine-controller-manager": "0"})

		machine := "single-" + randomSuffix(t)
		createMachine(t, mc, ns, machine)
		waitPhase(t, mc, ns, machine, v1alpha1.MachineRunning, 2*time.Minute)
		// As long as the machine took, the set was MCM's alone.
		if total, _, err := machinesOfSet(context.Background(), mc, ns, set); err != nil || total != 0 {
			t.Fatalf("set %s has %d machines (%v) while MCM's process holds its lease, want none", set, total, err)
		}
		if n := in.started("machine-controller-manager"); n != 0 {
			t.Fatalf("the manager started the MachineSet controllers %d times while MCM's process held their lease", n)
		}
		if code, body := in.get("/readyz"); code != http.StatusOK ||
			!strings.Contains(body, "leader of machine-controller (standby for machine-controller-manager, lease held by machine-controller-manager-6f7d8-abcde)") {
			t.Errorf("/readyz = %d %q, want ready, standing by for MCM's process", code, body)
		}

		stopped := time.Now()
		stopMCM()
		waitGroups(t, in, map[string]string{"machine-controller": "1", "machine-controller-manager": "1"})
		t.Logf("took over the MachineSet controllers %v after MCM's process released their lease", time.Since(stopped).Round(10*time.Millisecond))
		waitSetRunning(t, mc, ns, set, 1)
	})

	t.Run("machine-controller", func(t *testing.T) {
		ns := env.Namespace(t)
		createMachineObjects(t, env, mc, ns)
		stopMC := mcmProcess(t, env, ns, "machine-controller", "machine-controller-manager-6f7d8-abcde")
		in := start(t, bin, "manager", append([]string{"--control-kubeconfig", env.Kubeconfig(), "--target-kubeconfig", env.Kubeconfig(),
			"--namespace", ns, "--driver", "sim", "-v", "1"}, shortLeases...)...)
		// Not standing by forever behind a process that runs other
		// controllers: the MachineSet controller runs.
		waitGroups(t, in, map[string]string{"machine-controller": "0", "machine-controller-manager": "1"})
		set := "set-" + randomSuffix(t)
		createMachineSet(t, mc, ns, set, 1)
		testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
			total, _, err := machinesOfSet(ctx, mc, ns, set)
			return err == nil && total == 1, fmt.Sprintf("set %s has %d machines (%v), want 1", set, total, err)
		})
		// Its machine is MCM's machine-controller's to create: no VM here.
		time.Sleep(4 * testRetryPeriod)
		if _, running, _ := machinesOfSet(context.Background(), mc, ns, set); running != 0 || in.metric("mcm_machine_items_total") != "" {
			t.Fatalf("the manager ran the machine controller while MCM's machine-controller held its lease")
		}

		stopMC()
		waitGroups(t, in, map[string]string{"machine-controller": "1", "machine-controller-manager": "1"})
		waitSetRunning(t, mc, ns, set, 1)
	})
}

// A manager restricted to the machine controller's group and a full one:
// the full one runs the MachineSet controller and never the machine
// controller while the first holds its lease; together they bring a
// MachineSet's machine up. When the first stops (SIGTERM: its lease
// released), the second runs both.
func TestLeasesSplitBetweenTwoManagers(t *testing.T) {
	t.Parallel()
	env := testenv.Get(t)
	ns := env.Namespace(t)
	mc := versioned.NewForConfigOrDie(env.Config())
	createMachineObjects(t, env, mc, ns)
	bin := binary(t)
	args := append([]string{"--control-kubeconfig", env.Kubeconfig(), "--target-kubeconfig", env.Kubeconfig(),
		"--namespace", ns, "--driver", "sim", "-v", "1"}, shortLeases...)

	first := start(t, bin, "machine-only", append(args, "--controllers=machine,safety")...)
	waitGroups(t, first, map[string]string{"machine-controller": "1"})
	second := start(t, bin, "full", args...)
	waitGroups(t, second, map[string]string{"machine-controller": "0", "machine-controller-manager": "1"})
	if h := holder(t, env, ns, manager.DefaultMachineLeaseName); h == "" || h != leaseHolderIn(first) {
		t.Errorf("lease %s held by %q, want the first manager", manager.DefaultMachineLeaseName, h)
	}

	set := "set-" + randomSuffix(t)
	createMachineSet(t, mc, ns, set, 2)
	waitSetRunning(t, mc, ns, set, 2)
	if n := second.started("machine-controller"); n != 0 || second.metric("mcm_machine_items_total") != "" {
		t.Fatalf("the full manager ran the machine controller (%d starts) while the first held its lease", n)
	}
	if first.groupRunning("machine-controller-manager") != "" || first.started("machine-controller-manager") != 0 {
		t.Fatalf("the manager restricted to the machine controller ran the MachineSet controllers")
	}

	terminate(t, first)
	stopped := time.Now()
	waitGroups(t, second, map[string]string{"machine-controller": "1", "machine-controller-manager": "1"})
	t.Logf("took over the machine controller %v after the first manager stopped", time.Since(stopped).Round(10*time.Millisecond))
	machine := "after-" + randomSuffix(t)
	createMachine(t, mc, ns, machine)
	waitPhase(t, mc, ns, machine, v1alpha1.MachineRunning, 2*time.Minute)
	if h := holder(t, env, ns, manager.DefaultMachineLeaseName); h != leaseHolderIn(second) {
		t.Errorf("lease %s held by %q, want the second manager", manager.DefaultMachineLeaseName, h)
	}

	terminate(t, second)
	for _, lease := range []string{manager.DefaultLeaseName, manager.DefaultMachineLeaseName} {
		if h := holder(t, env, ns, lease); h != "" {
			t.Errorf("lease %s held by %q after both stopped, want it released", lease, h)
		}
	}
}

// leaseHolderIn returns, from its log, the identity in campaigns for its
// leases with.
func leaseHolderIn(in *instance) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	_, rest, ok := strings.Cut(in.log.String(), `"msg"="Campaigning for leadership"`)
	if !ok {
		return ""
	}
	_, rest, ok = strings.Cut(rest, `"identity"="`)
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, `"`)
	return id
}
