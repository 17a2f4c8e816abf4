package manager

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/machineset"
	"github.com/mcmkit/mcm/tolerant"
)

// TestGroupsShareInformers: a group that starts while another runs gets
// the running informers, which keep running when the first group stops
// and stop with the last; the next group to start gets new ones. A
// controller can be built on the running informers and run.
func TestGroupsShareInformers(t *testing.T) {
	machines := fake.NewSimpleClientset(&v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: "ns"}})
	cc := ControllerContext{Config: DefaultConfig(), Machines: machines, ControlCore: k8sfake.NewSimpleClientset(), TargetCore: k8sfake.NewSimpleClientset()}
	cc.Config.Namespace = "ns"
	var pool sharedInformers
	first, err := pool.acquire(cc, tolerant.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sets := first.machines.Machine().V1alpha1().MachineSets().Informer()
	var seenByFirst atomic.Int32
	if _, err := sets.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) { seenByFirst.Add(1) }}); err != nil {
		t.Fatal(err)
	}
	first.start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !first.waitForCacheSync(ctx.Done()) {
		t.Fatal("first group's informers did not sync")
	}

	second, err := pool.acquire(cc, tolerant.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if second != first {
		t.Fatal("a group that started while another ran got informers of its own")
	}
	// The MachineSet controller, built on informers that already run.
	ctrl, err := machineset.NewController(machines, machineset.Informers{
		MachineSets: second.machines.Machine().V1alpha1().MachineSets(),
		Machines:    second.machines.Machine().V1alpha1().Machines(),
		Classes:     second.machines.Machine().V1alpha1().MachineClasses(),
	}, machineset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	second.start()
	if !second.waitForCacheSync(ctx.Done()) {
		t.Fatal("informers the second group added did not sync")
	}
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- ctrl.Run(runCtx, 1) }()
	stopRun()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	pool.release() // the second group stops
	select {
	case <-first.stop:
		t.Fatal("informers stopped while the first group runs")
	default:
	}
	if _, err := machines.MachineV1alpha1().MachineSets("ns").Create(ctx, &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "s2", Namespace: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for seenByFirst.Load() != 2 {
		select {
		case <-ctx.Done():
			t.Fatal("the first group's handler never saw the new set: informers stopped with the second group")
		case <-time.After(10 * time.Millisecond):
		}
	}

	pool.release() // the last group stops
	select {
	case <-first.stop:
	default:
		t.Fatal("informers still running after the last group stopped")
	}
	if !sets.IsStopped() {
		t.Error("machine set informer still running after the last group stopped")
	}
	third, err := pool.acquire(cc, tolerant.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.release()
	if third == first {
		t.Error("a group starting after all stopped got the stopped informers")
	}
}

// TestFailedBuildRunsTheBuiltControllers: when a controller of a group
// cannot be built, those built before it are run with an ended context,
// so that they remove the handlers they added to the shared informers,
// and the group lets go of the informers.
func TestFailedBuildRunsTheBuiltControllers(t *testing.T) {
	ran := make(chan bool, 1)
	controllers := Controllers{
		"built": {Group: MachineControllerGroup, Resources: []string{"machines"}, New: func(_ context.Context, cc ControllerContext) (Runnable, error) {
			return func(ctx context.Context) error { ran <- ctx.Err() != nil; return nil }, nil
		}},
		"broken": {Group: MachineControllerGroup, Resources: []string{"machines"}, New: func(context.Context, ControllerContext) (Runnable, error) {
			return nil, errors.New("cannot build")
		}},
	}
	m := &Manager{cfg: DefaultConfig(), opts: Options{Controllers: controllers}, log: logr.Discard(), state: &state{}}
	cc := ControllerContext{Machines: fake.NewSimpleClientset(), ControlCore: k8sfake.NewSimpleClientset()}
	err := m.runControllers(context.Background(), cc, groupPlan{group: MachineControllerGroup, names: []string{"built", "broken"}})
	if err == nil || !strings.Contains(err.Error(), "cannot build") {
		t.Fatalf("runControllers = %v, want the build error", err)
	}
	select {
	case ended := <-ran:
		if !ended {
			t.Error("the built controller ran with a context that had not ended")
		}
	default:
		t.Error("the built controller was not run, so its handlers stay on the informers")
	}
	if m.informers.set != nil {
		t.Error("the informers outlived the group that failed to build")
	}
}
