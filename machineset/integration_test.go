package machineset_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/simcluster"
	"github.com/mcmkit/mcm/internal/testenv"
	"github.com/mcmkit/mcm/machine"
	"github.com/mcmkit/mcm/machineset"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Setup: []func(context.Context, *rest.Config) error{crds.Install}})
}

// TestIntegrationScaleFreezeAndDelete runs the MachineSet controller with
// the machine controller, a simulated cloud and its kubelet against the
// real control plane: the set reaches each count with Running machines,
// freeze=True stops scale-up only, and a deleted set leaves no machine, VM
// or node behind.
func TestIntegrationScaleFreezeAndDelete(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	mc := versioned.NewForConfigOrDie(env.Config())
	core := env.Client()
	cluster := simcluster.Start(t, core, simcluster.Options{})

	// A class and its secret for the sim driver.
	_, class, secret := cluster.MachineObjects("")
	secret.Name, secret.Namespace = "sim", ns
	if _, err := core.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class.Namespace = ns
	class.SecretRef = &corev1.SecretReference{Name: "sim", Namespace: ns}
	if _, err := mc.MachineV1alpha1().MachineClasses(ns).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	mf := externalversions.NewSharedInformerFactoryWithOptions(mc, 0, externalversions.WithNamespace(ns))
	cf := informers.NewSharedInformerFactoryWithOptions(core, 0, informers.WithNamespace(ns))
	tf := informers.NewSharedInformerFactory(core, 0)
	mctrl, err := machine.NewController(mc, core, core, machine.Informers{
		Machines: mf.Machine().V1alpha1().Machines(),
		Classes:  mf.Machine().V1alpha1().MachineClasses(),
		Secrets:  cf.Core().V1().Secrets(),
		Nodes:    tf.Core().V1().Nodes(),
		Target:   tf,
	}, cluster.Cloud.Driver(), machine.Options{HealthCheckPeriod: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sctrl, err := machineset.NewController(mc, machineset.Informers{
		MachineSets: mf.Machine().V1alpha1().MachineSets(),
		Machines:    mf.Machine().V1alpha1().Machines(),
	}, machineset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	mf.Start(runCtx.Done())
	cf.Start(runCtx.Done())
	tf.Start(runCtx.Done())
	done := make(chan error, 2)
	go func() { done <- mctrl.Run(runCtx, 4) }()
	go func() { done <- sctrl.Run(runCtx, 2) }()
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
		mf.Shutdown()
		cf.Shutdown()
		tf.Shutdown()
	})

	labels := map[string]string{"pool": "workers"}
	set := &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: ns},
		Spec: v1alpha1.MachineSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: class.Name}},
			},
		},
	}
	if _, err := mc.MachineV1alpha1().MachineSets(ns).Create(ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scale := func(replicas int32, frozen bool) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
		if frozen {
			patch = fmt.Sprintf(`{"metadata":{"labels":{"freeze":"True"}},"spec":{"replicas":%d}}`, replicas)
		}
		if _, err := mc.MachineV1alpha1().MachineSets(ns).Patch(ctx, "workers", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	running := func(want int) func(context.Context) (bool, string) {
		return func(ctx context.Context) (bool, string) {
			list, err := mc.MachineV1alpha1().Machines(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			total, run := 0, 0
			for _, m := range list.Items {
				if m.DeletionTimestamp != nil {
					continue
				}
				total++
				if m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
					run++
				}
			}
			return total == want && run == want, fmt.Sprintf("%d machines, %d Running, want %d", total, run, want)
		}
	}
	for _, n := range []int32{6, 2} {
		scale(n, false)
		testenv.Eventually(t, 2*time.Minute, running(int(n)))
	}
	// Frozen: scaling up does nothing, scaling down still works.
	scale(5, true)
	time.Sleep(3 * time.Second)
	testenv.Eventually(t, time.Minute, running(2))
	scale(1, true)
	testenv.Eventually(t, 2*time.Minute, running(1))

	if err := mc.MachineV1alpha1().MachineSets(ns).Delete(ctx, "workers", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		sets, _ := mc.MachineV1alpha1().MachineSets(ns).List(ctx, metav1.ListOptions{})
		machines, _ := mc.MachineV1alpha1().Machines(ns).List(ctx, metav1.ListOptions{})
		vms := 0
		for _, vm := range cluster.Cloud.VMs() {
			if vm.State != sim.VMTerminating {
				vms++
			}
		}
		nodes := 0
		list, _ := core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		for _, n := range list.Items {
			if strings.HasPrefix(n.Labels[v1alpha1.MachineNameLabelKey], "workers-") {
				nodes++
			}
		}
		return len(sets.Items) == 0 && len(machines.Items) == 0 && vms == 0 && nodes == 0,
			fmt.Sprintf("%d sets, %d machines, %d VMs, %d nodes left", len(sets.Items), len(machines.Items), vms, nodes)
	})
}
