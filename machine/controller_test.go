package machine

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

// fakeCluster is one cluster on fake clientsets, serving as control and
// target cluster, with informers that are not started and a sim driver.
type fakeCluster struct {
	mc     *fake.Clientset
	core   *k8sfake.Clientset
	target informers.SharedInformerFactory
	inf    Informers
	driver driver.Driver
}

func newFakeCluster(t *testing.T) fakeCluster {
	t.Helper()
	cloud, err := sim.New(sim.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	mc, core := fake.NewSimpleClientset(), k8sfake.NewSimpleClientset()
	mf := externalversions.NewSharedInformerFactory(mc, 0)
	kf := informers.NewSharedInformerFactory(core, 0)
	return fakeCluster{mc: mc, core: core, target: kf, driver: cloud.Driver(), inf: Informers{
		Machines: mf.Machine().V1alpha1().Machines(),
		Classes:  mf.Machine().V1alpha1().MachineClasses(),
		Secrets:  kf.Core().V1().Secrets(),
		Nodes:    kf.Core().V1().Nodes(),
	}}
}

// TestNewControllerLeaksNothing builds controllers that fail at each
// fallible step, and controllers that succeed but never run: none may leave
// a goroutine behind.
func TestNewControllerLeaksNothing(t *testing.T) {
	build := func(reg prometheus.Registerer, stoppedInformer bool) error {
		f := newFakeCluster(t)
		if stoppedInformer {
			// A machine informer that ran and stopped takes no index:
			// registering fails last.
			informer := f.inf.Machines.Informer()
			stop := make(chan struct{})
			close(stop)
			informer.Run(stop)
			if !informer.IsStopped() {
				t.Fatal("informer not stopped")
			}
		}
		_, err := NewController(f.mc, f.core, f.core, f.inf, f.driver, Options{Registerer: reg})
		return err
	}
	// A registry on which the work queues' metrics cannot be registered.
	queueConflict := prometheus.NewRegistry()
	queueConflict.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "mcm_workqueue_depth", Help: "Something else."}))

	before := runtime.NumGoroutine()
	for range 10 {
		if err := build(queueConflict, false); err == nil || !strings.Contains(err.Error(), "mcm_workqueue_depth") {
			t.Fatalf("construction with a conflicting queue metric: %v", err)
		}
		if err := build(prometheus.NewRegistry(), true); err == nil || !strings.Contains(err.Error(), "index") {
			t.Fatalf("construction with a stopped machine informer: %v", err)
		}
		if err := build(prometheus.NewRegistry(), false); err != nil {
			t.Fatalf("construction: %v", err)
		}
	}
	// Goroutines of other tests may still be ending: fewer is fine.
	deadline := time.Now().Add(time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before 30 constructions, %d after:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

// TestBudgetWakesBlockedDrains: a PodDisruptionBudget that allows a
// disruption again syncs the machines whose drain waits on it, and only
// those.
func TestBudgetWakesBlockedDrains(t *testing.T) {
	f := newFakeCluster(t)
	inf := f.inf
	inf.Target = f.target
	c, err := NewController(f.mc, f.core, f.core, inf, f.driver, Options{})
	if err != nil {
		t.Fatal(err)
	}
	draining := func(name string, blockedBy ...string) *v1alpha1.Machine {
		m := deletingMachine(StepDrain)
		m.Name = name
		raw, err := json.Marshal(map[string][]string{"blockedBy": blockedBy})
		if err != nil {
			t.Fatal(err)
		}
		var st drain.State // as a pass held back by the budgets leaves it
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatal(err)
		}
		storeDrainState(m, st)
		return m
	}
	for _, m := range []*v1alpha1.Machine{draining("waits-on-web", "ns/web"), draining("waits-on-db", "ns/db"), draining("not-blocked")} {
		if err := inf.Machines.Informer().GetIndexer().Add(m); err != nil {
			t.Fatal(err)
		}
	}
	pdb := func(name string, allowed int32) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
	}
	c.onBudget(pdb("web", 0))
	if n := c.machineQueue.Len(); n != 0 {
		t.Fatalf("%d machines queued for a budget that allows nothing", n)
	}
	c.onBudget(pdb("web", 1))
	if n := c.machineQueue.Len(); n != 1 {
		t.Fatalf("%d machines queued, want the one waiting on ns/web", n)
	}
}

func TestNewControllerRejectsTargetFactoryWithoutTarget(t *testing.T) {
	f := newFakeCluster(t)
	inf := f.inf
	inf.Nodes, inf.Target = nil, f.target
	if _, err := NewController(f.mc, f.core, nil, inf, f.driver, Options{}); err == nil {
		t.Fatal("a target factory without a target client was accepted")
	}
}
