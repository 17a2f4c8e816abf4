package machine_test

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/crashtest"
	"github.com/mcmkit/mcm/machine"
)

var (
	machineGVR = v1alpha1.SchemeGroupVersion.WithResource("machines")
	nodeGVR    = corev1.SchemeGroupVersion.WithResource("nodes")
)

// crashDriver fails every call once its incarnation is dead.
type crashDriver struct {
	driver.Driver
	s *crashtest.Switch
}

func (d crashDriver) check() error {
	if d.s.Dead() {
		return driver.NewError(driver.Canceled, "crashed")
	}
	return nil
}

func (d crashDriver) CreateMachine(ctx context.Context, r *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.Driver.CreateMachine(ctx, r)
}

func (d crashDriver) DeleteMachine(ctx context.Context, r *driver.DeleteMachineRequest) (*driver.DeleteMachineResponse, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.Driver.DeleteMachine(ctx, r)
}

func (d crashDriver) GetMachineStatus(ctx context.Context, r *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.Driver.GetMachineStatus(ctx, r)
}

// fakeWorld plays the API server's finalizer handling and the kubelets on
// fake clientsets, writing through the trackers (so crashes do not hit it).
func fakeWorld(ctx context.Context, mc *fake.Clientset, core *k8sfake.Clientset, cloud *sim.Cloud, ns string) {
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		// Finalizers done: the object goes.
		if list, err := mc.Tracker().List(machineGVR, v1alpha1.SchemeGroupVersion.WithKind("Machine"), ns); err == nil {
			for _, m := range list.(*v1alpha1.MachineList).Items {
				if m.DeletionTimestamp != nil && len(m.Finalizers) == 0 {
					_ = mc.Tracker().Delete(machineGVR, ns, m.Name)
				}
			}
		}
		// Kubelets: a Ready node per running VM, none for gone VMs.
		live := map[string]sim.VM{}
		for _, vm := range cloud.VMs() {
			if vm.State == sim.VMRunning {
				live[vm.NodeName] = vm
			}
		}
		nodes, _ := core.Tracker().List(nodeGVR, corev1.SchemeGroupVersion.WithKind("Node"), "")
		existing := map[string]bool{}
		if nodes != nil {
			for _, n := range nodes.(*corev1.NodeList).Items {
				existing[n.Name] = true
				if _, ok := live[n.Name]; !ok {
					_ = core.Tracker().Delete(nodeGVR, "", n.Name)
				}
			}
		}
		for name, vm := range live {
			if existing[name] {
				continue
			}
			_ = core.Tracker().Add(&corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.MachineNameLabelKey: vm.MachineName}},
				Spec:       corev1.NodeSpec{ProviderID: vm.ProviderID},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
					Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
				}}},
			})
		}
	}
}

// runIncarnation runs one controller until it crashes, until(writes) holds
// (writes: how many API writes it has made) or within has passed.
func runIncarnation(t *rapid.T, mc *fake.Clientset, core *k8sfake.Clientset, cloud *sim.Cloud, ns string, crashAt int32, within time.Duration, until func(writes int32) bool) {
	ctx, cancel := context.WithCancel(context.Background())
	s := crashtest.New(crashAt, cancel)
	s.Attach(&mc.Fake, &core.Fake)
	defer s.Detach()
	mf := externalversions.NewSharedInformerFactoryWithOptions(mc, 0, externalversions.WithNamespace(ns))
	kf := informers.NewSharedInformerFactory(core, 0)
	ctrl, err := machine.NewController(mc, core, core, machine.Informers{
		Machines: mf.Machine().V1alpha1().Machines(),
		Classes:  mf.Machine().V1alpha1().MachineClasses(),
		Secrets:  kf.Core().V1().Secrets(),
		Nodes:    kf.Core().V1().Nodes(),
	}, crashDriver{cloud.Driver(), s}, machine.Options{
		ShortRetry: 10 * time.Millisecond, MediumRetry: 20 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond,
		HealthCheckPeriod: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	mf.Start(ctx.Done())
	kf.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(logr.NewContext(ctx, logr.Discard()), 4) }()
	_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, within, true, func(context.Context) (bool, error) {
		return until(s.Writes()), nil
	})
	cancel()
	<-done
	mf.Shutdown()
	kf.Shutdown()
}

// settled returns an until for runIncarnation that holds once converged
// has held, with no API write of the controller's, for quiet: the world is
// where the machines are meant to be and the controller has nothing left
// to do, so a crash at a later write would not come. It ends an
// incarnation whose crash point lies beyond its last write without waiting
// out the 3 s.
func settled(converged func() (bool, string), quiet time.Duration) func(int32) bool {
	last, since := int32(-1), time.Now()
	return func(writes int32) bool {
		if ok, _ := converged(); !ok || writes != last {
			last, since = writes, time.Now()
			return false
		}
		return time.Since(since) >= quiet
	}
}

// TestCrashSafety kills the controller after random API writes during
// create and delete flows and restarts it: no VM leaks, none is created
// twice, and every machine ends Running or gone.
func TestCrashSafety(t *testing.T) {
	// In parallel with the integration tests: it needs no cluster. No
	// other test that runs in parallel may use rapid, whose flags this
	// one sets.
	t.Parallel()
	// Each check runs several controller incarnations; unless asked for
	// more with -rapid.checks, run fewer than rapid's default 100.
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		_ = flag.Set("rapid.checks", "15")
		defer func() { _ = flag.Set("rapid.checks", f.DefValue) }()
	}
	rapid.Check(t, func(t *rapid.T) {
		const ns = "crash"
		n := rapid.IntRange(1, 3).Draw(t, "machines")
		crashes := rapid.SliceOfN(rapid.Int32Range(1, 12), 1, 4).Draw(t, "crashAfterWrites")
		deleteAfter := rapid.IntRange(-1, len(crashes)-1).Draw(t, "deleteAfterIncarnation")
		toDelete := rapid.IntRange(1, n).Draw(t, "deleteCount")
		lostCreate := rapid.Bool().Draw(t, "lostCreateResponse")

		cloud, err := sim.New(sim.Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if lostCreate {
			_, _ = cloud.InjectFault(sim.Fault{Operation: driver.OperationCreateMachine, Code: driver.DeadlineExceeded, Times: 1, AfterEffect: true})
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns},
			Data: map[string][]byte{"userData": []byte("x"), sim.CredentialsKey: []byte("t")}}
		class := &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}, Provider: sim.ProviderName,
			ProviderSpec: sim.ProviderSpec{Zone: "z", InstanceType: "m"}.RawExtension(),
			SecretRef:    &corev1.SecretReference{Name: "s", Namespace: ns}}
		var objs []runtime.Object
		objs = append(objs, class)
		for i := range n {
			objs = append(objs, newMachine(ns, fmt.Sprintf("m%d", i), "c", nil))
		}
		mc := fake.NewSimpleClientset(objs...)
		core := k8sfake.NewSimpleClientset(secret)
		wctx, wcancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { fakeWorld(wctx, mc, core, cloud, ns) })
		defer func() { wcancel(); wg.Wait() }()

		machines := func() []*v1alpha1.Machine {
			list, _ := mc.Tracker().List(machineGVR, v1alpha1.SchemeGroupVersion.WithKind("Machine"), ns)
			var out []*v1alpha1.Machine
			for i := range list.(*v1alpha1.MachineList).Items {
				out = append(out, &list.(*v1alpha1.MachineList).Items[i])
			}
			return out
		}
		deleted := map[string]bool{}
		converged := func() (bool, string) {
			ms := machines()
			for _, m := range ms {
				if deleted[m.Name] {
					return false, fmt.Sprintf("machine %s not gone (step %q)", m.Name, m.Annotations[machine.DeletionStepAnnotation])
				}
				if m.Status.CurrentStatus.Phase != v1alpha1.MachineRunning {
					return false, fmt.Sprintf("machine %s is %q: %+v", m.Name, m.Status.CurrentStatus.Phase, m.Status.LastOperation)
				}
			}
			if len(ms) != n-len(deleted) {
				return false, fmt.Sprintf("%d machines, want %d", len(ms), n-len(deleted))
			}
			return true, ""
		}
		for i, crashAt := range crashes {
			runIncarnation(t, mc, core, cloud, ns, crashAt, 3*time.Second, settled(converged, 300*time.Millisecond))
			if i == deleteAfter {
				for j := range toDelete {
					name := fmt.Sprintf("m%d", j)
					obj, err := mc.Tracker().Get(machineGVR, ns, name)
					if err != nil {
						continue
					}
					m := obj.(*v1alpha1.Machine).DeepCopy()
					if len(m.Finalizers) == 0 {
						_ = mc.Tracker().Delete(machineGVR, ns, name)
					} else {
						m.DeletionTimestamp = &metav1.Time{Time: time.Now()}
						_ = mc.Tracker().Update(machineGVR, m, ns)
					}
					deleted[name] = true
				}
			}
		}
		// The last incarnation ends as soon as the machines have
		// converged; its bound is for a machine loaded by the tests
		// running beside this one, not a limit on the controller.
		var why string
		runIncarnation(t, mc, core, cloud, ns, 0, 30*time.Second, func(int32) bool {
			ok, w := converged()
			why = w
			return ok
		})
		if ok, w := converged(); !ok {
			t.Fatalf("did not converge: %s (last: %s)", w, why)
		}
		if leaked := cloud.LeakedVMs(machines()); len(leaked) > 0 {
			t.Fatalf("leaked or duplicate VMs: %+v", leaked)
		}
		perMachine := map[string]int{}
		for _, vm := range cloud.VMs() {
			if vm.State != sim.VMTerminating {
				perMachine[vm.MachineName]++
			}
		}
		for name, c := range perMachine {
			if c > 1 || deleted[name] {
				t.Fatalf("machine %s has %d live VMs (deleted: %v)", name, c, deleted[name])
			}
		}
	})
}
