package manager

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/internal/testsupport/fakeapi"
	"github.com/mcmkit/mcm/safety"
	"github.com/mcmkit/mcm/safety/outage"
)

// TestControllersShareTheManagersGateAndBudget: the manager builds one
// outage gate and one replacement budget, and the controllers of both
// groups get the same ones, whatever the order they are built in. With
// no safety controller running the gate's check, the gate freezes nobody,
// as a gate whose provider does not run did before.
func TestControllersShareTheManagersGateAndBudget(t *testing.T) {
	var mu sync.Mutex
	got := map[string]ControllerContext{}
	probe := func(name string, g Group) Controller {
		return Controller{Group: g, Resources: []string{"machines"}, New: func(_ context.Context, cc ControllerContext) (Runnable, error) {
			mu.Lock()
			got[name] = cc
			mu.Unlock()
			return func(ctx context.Context) error { <-ctx.Done(); return nil }, nil
		}}
	}
	names := []string{"zz-machine", "aa-machine", "set"}
	cfg := DefaultConfig()
	cfg.ControlKubeconfig, cfg.TargetKubeconfig, cfg.Port, cfg.LeaderElect = kubeconfigFile(t), NoTarget, 0, false
	opts := testLogger(t)
	opts.Registry = prometheus.NewRegistry()
	opts.Controllers = Controllers{"zz-machine": probe("zz-machine", MachineControllerGroup),
		"aa-machine": probe("aa-machine", MachineControllerGroup), "set": probe("set", MachineControllerManagerGroup)}
	m, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := m.buildSafety(ControllerContext{Config: cfg, Machines: fake.NewSimpleClientset(), ControlCore: k8sfake.NewSimpleClientset(), Logger: m.log}, names)
	if err != nil {
		t.Fatal(err)
	}
	m.state.setWaiting("") // as after Run's startup checks
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.runGroups(ctx, cc, names) }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == len(names) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("built %d of %d controllers", n, len(names))
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range names {
		c := got[name]
		if c.Outage == nil || c.Outage != m.safety.outage {
			t.Errorf("%s: outage gate %p, want the manager's %p", name, c.Outage, m.safety.outage)
		}
		if c.Replacement == nil || c.Replacement != got[names[0]].Replacement {
			t.Errorf("%s: replacement budget %v, want the one every controller gets", name, c.Replacement)
		}
	}
	if m.safety.outage.Frozen(context.Background()) {
		t.Error("frozen, though no safety controller runs the gate's check")
	}
	if m.state.outage != safety.Gate(m.safety.outage) {
		t.Error("/readyz does not ask the manager's gate")
	}
}

// TestSafetyEntriesSplitTheWork runs the table's "overshoot" entry (MCM's
// machine-controller-manager's) and its "safety" entry (MCM's provider
// machine-controller's) on the same world — a set over its limit and a
// node no machine claims — and each does its own part only. Both checks
// run as soon as the caches synced, so once one kind's work shows, the
// other kind's would have too.
func TestSafetyEntriesSplitTheWork(t *testing.T) {
	for _, entry := range []string{"overshoot", "safety"} {
		t.Run(entry, func(t *testing.T) {
			client, core, cc := splitWorld(t)
			ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logr.Discard()))
			run, err := DefaultControllers()[entry].New(ctx, cc)
			if err != nil {
				t.Fatal(err)
			}
			cc.MachineInformers.Start(ctx.Done())
			cc.ControlInformers.Start(ctx.Done())
			cc.TargetInformers.Start(ctx.Done())
			var wg sync.WaitGroup
			wg.Go(func() { _ = run(ctx) })
			t.Cleanup(func() {
				cancel()
				wg.Wait()
				cc.MachineInformers.Shutdown()
				cc.ControlInformers.Shutdown()
				cc.TargetInformers.Shutdown()
			})
			state := func() (setFrozen, nodeMarked bool) {
				s, _ := client.MachineV1alpha1().MachineSets("ns").Get(ctx, "a", metav1.GetOptions{})
				n, _ := core.CoreV1().Nodes().Get(ctx, "stray", metav1.GetOptions{})
				_, nodeMarked = n.Annotations[v1alpha1.NotManagedByMCMAnnotation]
				return s.Labels[v1alpha1.FreezeLabelKey] == v1alpha1.FreezeLabelValue, nodeMarked
			}
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if frozen, marked := state(); frozen || marked {
					break
				}
			}
			// A moment for the other check's write, had it run.
			time.Sleep(200 * time.Millisecond)
			frozen, marked := state()
			if want := entry == "overshoot"; frozen != want || marked == want {
				t.Errorf("entry %s: set frozen %v, node marked %v", entry, frozen, marked)
			}
		})
	}
}

// splitWorld is a deployment of 10 replicas with a set of 14 machines
// (over its limit of 10 + maxSurge 1 + safety-up 2) in namespace ns, and
// an hour-old node no machine claims, with the context a manager would
// build its controllers from (and the manager's outage gate).
func splitWorld(t *testing.T) (*fake.Clientset, *k8sfake.Clientset, ControllerContext) {
	t.Helper()
	d := &v1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", UID: "uid-d"},
		Spec: v1alpha1.MachineDeploymentSpec{Replicas: 10}}
	s := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "uid-a",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, v1alpha1.SchemeGroupVersion.WithKind("MachineDeployment"))}},
		Spec: v1alpha1.MachineSetSpec{Replicas: 10, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"set": "a"}},
			Template: v1alpha1.MachineTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"set": "a"}}}}}
	objs := []runtime.Object{d, s}
	for i := range 14 {
		objs = append(objs, &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("a-%d", i), Namespace: "ns", Labels: s.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))}}})
	}
	client := fake.NewSimpleClientset(objs...)
	fakeapi.VersionWrites(&client.Fake, client.Tracker())
	core := k8sfake.NewSimpleClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "stray", CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))}})
	gate, err := outage.New(client, core, outage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Namespace = "ns"
	return client, core, ControllerContext{Config: cfg, Machines: client, ControlCore: k8sfake.NewSimpleClientset(), TargetCore: core,
		MachineInformers: externalversions.NewSharedInformerFactory(client, 0),
		ControlInformers: informers.NewSharedInformerFactory(k8sfake.NewSimpleClientset(), 0),
		TargetInformers:  informers.NewSharedInformerFactory(core, 0),
		Logger:           logr.Discard(), Registerer: prometheus.NewRegistry(), Outage: gate}
}
