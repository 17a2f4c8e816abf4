package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// TestKilledManagerConverges kills the reference binary with SIGKILL at
// seeded random moments of a MachineDeployment's scale-up, rollouts and
// scale-downs, restarting it at once on the same simulated cloud (its
// state file), as a crashing pod would be. After each step, with the
// manager left running, the deployment converges and the cloud holds
// exactly one VM per machine and no other: nothing leaked, nothing
// created twice, and the orphan collection deleted nothing. The seed is
// logged; MCM_CHAOS_SEED replays one.
func TestKilledManagerConverges(t *testing.T) {
	t.Parallel()
	seed := uint64(1)
	if s := os.Getenv("MCM_CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("MCM_CHAOS_SEED: %v", err)
		}
	}
	t.Logf("seed %d (MCM_CHAOS_SEED replays it)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	env := testenv.Get(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	mc := versioned.NewForConfigOrDie(env.Config())
	createMachineObjects(t, env, mc, ns)
	createWebDeployment(t, mc, ns, 0, 2)

	state := filepath.Join(t.TempDir(), "cloud.json")
	bin := binary(t)
	args := []string{"--control-kubeconfig", env.Kubeconfig(), "--target-kubeconfig", env.Kubeconfig(),
		"--namespace", ns, "--driver", "sim", "--sim-state-file", state, "--leader-elect=false",
		"--kube-api-qps=100", "--kube-api-burst=200",
		// The orphan collection runs often and deletes at once, so that a
		// restart with a cache that does not show every machine yet would
		// cost a healthy VM here (MCM's #657).
		"--machine-safety-orphan-vms-period=2s", "--machine-safety-orphan-vms-grace-period=1ms"}
	steps := []struct {
		name, patch string
		replicas    int
		class       string
	}{
		{"scale up", `{"spec":{"replicas":8}}`, 8, "sim"},
		{"rollout", `{"spec":{"template":{"spec":{"class":{"name":"sim-next"}}}}}`, 8, "sim-next"},
		{"scale down", `{"spec":{"replicas":3}}`, 3, "sim-next"},
		{"rollout back while scaling up", `{"spec":{"replicas":6,"template":{"spec":{"class":{"name":"sim"}}}}}`, 6, "sim"},
		{"scale to zero", `{"spec":{"replicas":0}}`, 0, "sim"},
	}
	const killsPerStep = 4
	var instances []*instance
	kills := 0
	for _, step := range steps {
		if _, err := mc.MachineV1alpha1().MachineDeployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(step.patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		for range killsPerStep {
			in := start(t, bin, fmt.Sprintf("manager-%d", len(instances)), args...)
			instances = append(instances, in)
			time.Sleep(time.Duration(300+rng.IntN(4700)) * time.Millisecond)
			kill(in)
			kills++
		}
		in := start(t, bin, fmt.Sprintf("manager-%d", len(instances)), args...)
		instances = append(instances, in)
		converged(t, mc, ns, step.name, step.replicas, step.class)
		checkVMs(t, mc, ns, state, step.name)
		kill(in)
		kills++
	}
	t.Logf("%d kills", kills)
	for _, in := range instances {
		in.mu.Lock()
		log := in.log.String()
		in.mu.Unlock()
		if strings.Contains(log, "Deleted an orphan VM") {
			t.Errorf("%s deleted an orphan VM; every VM belonged to a machine:\n%s", in.name, log)
		}
	}
}

// kill ends in with SIGKILL and waits for it; its cleanup still finds the
// exit status.
func kill(in *instance) {
	_ = in.cmd.Process.Kill()
	err := <-in.done
	in.done <- err
}

// converged waits until the deployment has replicas Running machines of
// class, no other machine, and a status for its generation that says so.
func converged(t *testing.T, mc versioned.Interface, ns, step string, replicas int, class string) {
	t.Helper()
	seen := "no list yet"
	testenv.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
		list, err := mc.MachineV1alpha1().Machines(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, fmt.Sprintf("%s: %v; last seen: %s", step, err, seen)
		}
		d, err := mc.MachineV1alpha1().MachineDeployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, fmt.Sprintf("%s: %v; last seen: %s", step, err, seen)
		}
		running := 0
		for _, m := range list.Items {
			if m.DeletionTimestamp == nil && m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning && m.Spec.Class.Name == class {
				running++
			}
		}
		st := d.Status
		seen = fmt.Sprintf("%s: %d machines, %d Running of class %s, want %d; deployment generation %d observed %d, updated %d available %d",
			step, len(list.Items), running, class, replicas, d.Generation, st.ObservedGeneration, st.UpdatedReplicas, st.AvailableReplicas)
		return len(list.Items) == replicas && running == replicas && st.ObservedGeneration == d.Generation &&
			int(st.UpdatedReplicas) == replicas && int(st.AvailableReplicas) == replicas, seen
	})
}

// checkVMs reads the simulated cloud from its state file: every machine
// has exactly one VM that is not being deleted, and no such VM is without
// a machine.
func checkVMs(t *testing.T, mc versioned.Interface, ns, state, step string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		list, err := mc.MachineV1alpha1().Machines(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		cloud, err := sim.New(sim.Options{StateFile: state})
		if err != nil {
			return false, err.Error()
		}
		vms := map[string]int{}
		for _, vm := range cloud.VMs() {
			if vm.State != sim.VMTerminating {
				vms[vm.MachineName]++
			}
		}
		var problems []string
		for _, m := range list.Items {
			if n := vms[m.Name]; n != 1 {
				problems = append(problems, fmt.Sprintf("machine %s has %d VMs", m.Name, n))
			}
			delete(vms, m.Name)
		}
		for name, n := range vms {
			problems = append(problems, fmt.Sprintf("%d VMs of %s, which is no machine (leaked)", n, name))
		}
		return len(problems) == 0, fmt.Sprintf("%s: %v", step, problems)
	})
}

// createWebDeployment creates MachineClass sim-next beside
// createMachineObjects' sim, and MachineDeployment web of class sim (its
// machines labelled name=web, as MCM's budget groups them) rolled out
// with maxSurge surge and maxUnavailable 0.
func createWebDeployment(t *testing.T, mc versioned.Interface, ns string, replicas int32, surge int32) {
	t.Helper()
	ctx := context.Background()
	next := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "sim-next", Namespace: ns},
		Provider:     sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "medium"}.RawExtension(),
		SecretRef:    &corev1.SecretReference{Name: "cloud", Namespace: ns},
	}
	if _, err := mc.MachineV1alpha1().MachineClasses(ns).Create(ctx, next, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{v1alpha1.MachineDeploymentNameLabelKey: "web"}
	maxSurge, maxUnavailable := intstr.FromInt32(surge), intstr.FromInt32(0)
	d := &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "sim"}},
			},
			Strategy: v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge: &maxSurge, MaxUnavailable: &maxUnavailable}}},
		},
	}
	if _, err := mc.MachineV1alpha1().MachineDeployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
