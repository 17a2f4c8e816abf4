package machineset

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/testsupport/fakeapi"
	"github.com/mcmkit/mcm/workqueue"
)

var settledEpoch = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// settledWorld is a set with n Running machines whose status says so, held
// in the informers' caches (filled directly, no informer runs), and a
// controller whose queue is worked by hand: an event's cost is then the
// handler's and the syncs it queues, nothing else.
type settledWorld struct {
	tb       testing.TB
	ctx      context.Context
	client   *fake.Clientset
	ctrl     *Controller
	inf      Informers
	machines []*v1alpha1.Machine
	rv       int
}

func newSettledWorld(tb testing.TB, n int) *settledWorld {
	tb.Helper()
	set := testSet(int32(n))
	w := &settledWorld{tb: tb, ctx: logr.NewContext(context.Background(), logr.Discard()), client: fake.NewSimpleClientset(set), rv: 1}
	fakeapi.VersionWrites(&w.client.Fake, w.client.Tracker())
	f := externalversions.NewSharedInformerFactory(w.client, 0)
	w.inf = Informers{MachineSets: f.Machine().V1alpha1().MachineSets(), Machines: f.Machine().V1alpha1().Machines()}
	var err error
	// The clock stands half an hour after the machines' epoch, so that
	// drawn times fall either side of it.
	opts := Options{Clock: clocktesting.NewFakeClock(settledEpoch.Add(30 * time.Minute))}
	if w.ctrl, err = NewController(w.client, w.inf, opts); err != nil {
		tb.Fatal(err)
	}
	w.refresh()
	for i := range n {
		m := machinestate.NewMachine(set)
		m.Name = fmt.Sprintf("%s-%05d", set.Name, i)
		m.UID = types.UID("uid-" + m.Name)
		m.ResourceVersion = "1"
		m.CreationTimestamp = metav1.NewTime(settledEpoch)
		m.Labels[v1alpha1.NodeLabelKey] = "node-" + strconv.Itoa(i)
		m.Spec.ProviderID = "sim://node-" + strconv.Itoa(i)
		m.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning, LastUpdateTime: metav1.NewTime(settledEpoch)}
		m.Status.LastOperation = v1alpha1.LastOperation{State: v1alpha1.MachineStateSuccessful, Type: v1alpha1.MachineOperationHealthCheck,
			Description: "Machine is running", LastUpdateTime: metav1.NewTime(settledEpoch)}
		if err := w.inf.Machines.Informer().GetIndexer().Add(m); err != nil {
			tb.Fatal(err)
		}
		w.ctrl.prov.initial(m) // as the informer's initial list tells the handler
		w.machines = append(w.machines, m)
	}
	w.settle()
	return w
}

// refresh copies the sets of the fake API server into the cache, as their
// informer would.
func (w *settledWorld) refresh() {
	ss, _ := w.client.Tracker().List(v1alpha1.SchemeGroupVersion.WithResource("machinesets"), v1alpha1.SchemeGroupVersion.WithKind("MachineSet"), "ns")
	for _, s := range ss.(*v1alpha1.MachineSetList).Items {
		_ = w.inf.MachineSets.Informer().GetIndexer().Update(s.DeepCopy())
	}
}

// settle syncs the set until a pass writes nothing.
func (w *settledWorld) settle() {
	for range 10 {
		before := len(w.client.Actions())
		if _, err := w.ctrl.Reconcile(w.ctx, "ns/pool"); err != nil {
			w.tb.Fatal(err)
		}
		w.refresh()
		if len(w.client.Actions()) == before {
			return
		}
	}
	w.tb.Fatal("the set did not settle")
}

// freshQueue gives the controller an empty queue, and returns the function
// that stops it.
func (w *settledWorld) freshQueue() (stop func()) {
	q, err := workqueue.New("", workqueue.ReconcilerFunc[string](w.ctrl.Reconcile), workqueue.Options{})
	if err != nil {
		w.tb.Fatal(err)
	}
	w.ctrl.queue = q
	return func() {
		ctx, cancel := context.WithCancel(w.ctx)
		cancel()
		_ = q.Run(ctx, 1) // builds and shuts down the queue's goroutines
	}
}

// unrelatedUpdate is the event of machine i's lastOperation time being
// refreshed and someone else's annotation being set: nothing the set
// decides on. The cache shows the new machine, as an informer's does
// before it calls the handlers.
func (w *settledWorld) unrelatedUpdate(i int) (old, updated *v1alpha1.Machine) {
	old = w.machines[i]
	updated = old.DeepCopy()
	w.rv++
	updated.ResourceVersion = strconv.Itoa(w.rv)
	updated.Status.LastOperation.LastUpdateTime = metav1.NewTime(settledEpoch.Add(time.Duration(w.rv) * time.Second))
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	updated.Annotations["example.com/last-seen"] = strconv.Itoa(w.rv)
	if err := w.inf.Machines.Informer().GetIndexer().Update(updated); err != nil {
		w.tb.Fatal(err)
	}
	w.machines[i] = updated
	return old, updated
}

// deliver hands an update to the controller's machine handler and runs the
// sync it queued, if any; it returns how many syncs ran.
func (w *settledWorld) deliver(old, updated *v1alpha1.Machine) (syncs int) {
	w.ctrl.onMachineUpdate(old, updated)
	if w.ctrl.queue.Len() == 0 {
		return 0
	}
	if _, err := w.ctrl.Reconcile(w.ctx, "ns/pool"); err != nil {
		w.tb.Fatal(err)
	}
	return 1
}

// BenchmarkSettledMachineEvent is the cost of one machine update that
// changes nothing the set decides on, in a settled set of 10 000
// machines: the handler and the sync it queues.
func BenchmarkSettledMachineEvent(b *testing.B) {
	w := newSettledWorld(b, 10000)
	b.ReportAllocs()
	b.ResetTimer()
	var syncs int
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		stop := w.freshQueue()
		old, updated := w.unrelatedUpdate(i % len(w.machines))
		b.StartTimer()
		syncs += w.deliver(old, updated)
		b.StopTimer()
		stop()
		b.StartTimer()
	}
	b.ReportMetric(float64(syncs)/float64(b.N), "syncs/event")
}
