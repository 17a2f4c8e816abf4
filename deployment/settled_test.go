package deployment

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/testsupport/fakeapi"
	"github.com/mcmkit/mcm/workqueue"
)

// settledWorld is a deployment whose rollout is complete, with n Running
// machines on n nodes, held in the informers' caches (filled directly, no
// informer runs) and a controller whose queues are worked by hand: an
// event's cost is then the handler's and the syncs it queues, nothing else.
type settledWorld struct {
	tb       testing.TB
	ctx      context.Context
	client   *fake.Clientset
	target   *k8sfake.Clientset
	ctrl     *Controller
	inf      Informers
	key      string
	machines []*v1alpha1.Machine
	rv       int
}

func newSettledWorld(tb testing.TB, n int) *settledWorld {
	tb.Helper()
	d := testDeployment(int32(n))
	w := &settledWorld{tb: tb, ctx: logr.NewContext(context.Background(), logr.Discard()),
		client: fake.NewSimpleClientset(d), target: k8sfake.NewSimpleClientset(), key: "ns/pool", rv: 1}
	fakeapi.VersionWrites(&w.client.Fake, w.client.Tracker())
	w.client.PrependReactor("create", "machinesets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*v1alpha1.MachineSet)
		s.UID = types.UID("uid-" + s.Name)
		return false, nil, nil
	})
	f := externalversions.NewSharedInformerFactory(w.client, 0)
	tf := informers.NewSharedInformerFactory(w.target, 0)
	w.inf = Informers{Deployments: f.Machine().V1alpha1().MachineDeployments(), MachineSets: f.Machine().V1alpha1().MachineSets(),
		Machines: f.Machine().V1alpha1().Machines(), Nodes: tf.Core().V1().Nodes()}
	var err error
	// The clock stands half an hour after the machines' epoch, so that
	// drawn times fall either side of it.
	opts := Options{Clock: clocktesting.NewFakeClock(epoch.Add(30 * time.Minute))}
	if w.ctrl, err = NewController(w.client, w.target, w.inf, opts); err != nil {
		tb.Fatal(err)
	}
	w.refresh()
	w.settle() // creates the new set
	sets := w.inf.MachineSets.Informer().GetStore().List()
	if len(sets) != 1 {
		tb.Fatalf("want one set, have %d", len(sets))
	}
	set := sets[0].(*v1alpha1.MachineSet)
	for i := range n {
		m := machinestate.NewMachine(set)
		m.Name = fmt.Sprintf("%s-%05d", set.Name, i)
		m.UID = types.UID("uid-" + m.Name)
		m.ResourceVersion = "1"
		node := "node-" + strconv.Itoa(i)
		m.Labels[v1alpha1.NodeLabelKey] = node
		m.Spec.ProviderID = "sim://" + node
		m.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning, LastUpdateTime: metav1.NewTime(epoch)}
		m.Status.LastOperation = v1alpha1.LastOperation{State: v1alpha1.MachineStateSuccessful, Type: v1alpha1.MachineOperationHealthCheck,
			Description: "Machine is running", LastUpdateTime: metav1.NewTime(epoch)}
		w.add(m)
		w.add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, ResourceVersion: "1",
			Annotations: map[string]string{v1alpha1.MachineUIDAnnotation: string(m.UID)}}, Spec: corev1.NodeSpec{ProviderID: m.Spec.ProviderID}})
		w.machines = append(w.machines, m)
	}
	w.settle()
	return w
}

func (w *settledWorld) add(obj runtime.Object) {
	var err error
	switch obj.(type) {
	case *v1alpha1.Machine:
		err = w.inf.Machines.Informer().GetIndexer().Add(obj)
	case *corev1.Node:
		err = w.inf.Nodes.Informer().GetIndexer().Add(obj)
	}
	if err != nil {
		w.tb.Fatal(err)
	}
}

// refresh copies the deployments and sets of the fake API server into the
// caches, as their informers would.
func (w *settledWorld) refresh() {
	ds, _ := w.client.Tracker().List(v1alpha1.SchemeGroupVersion.WithResource("machinedeployments"), v1alpha1.SchemeGroupVersion.WithKind("MachineDeployment"), "ns")
	for _, d := range ds.(*v1alpha1.MachineDeploymentList).Items {
		_ = w.inf.Deployments.Informer().GetIndexer().Update(d.DeepCopy())
	}
	ss, _ := w.client.Tracker().List(v1alpha1.SchemeGroupVersion.WithResource("machinesets"), v1alpha1.SchemeGroupVersion.WithKind("MachineSet"), "ns")
	for _, s := range ss.(*v1alpha1.MachineSetList).Items {
		_ = w.inf.MachineSets.Informer().GetIndexer().Update(s.DeepCopy())
	}
}

// settle syncs the deployment and its node marks until a pass writes
// nothing.
func (w *settledWorld) settle() {
	for range 10 {
		before := len(w.client.Actions()) + len(w.target.Actions())
		if _, err := w.ctrl.Reconcile(w.ctx, w.key); err != nil {
			w.tb.Fatal(err)
		}
		if _, err := w.ctrl.ReconcileNodes(w.ctx, w.key); err != nil {
			w.tb.Fatal(err)
		}
		w.refresh()
		if len(w.client.Actions())+len(w.target.Actions()) == before {
			return
		}
	}
	w.tb.Fatal("the deployment did not settle")
}

// freshQueues gives the controller empty queues, and returns the function
// that stops them.
func (w *settledWorld) freshQueues() (stop func()) {
	q, err := workqueue.New("", workqueue.ReconcilerFunc[string](w.ctrl.Reconcile), workqueue.Options{})
	if err != nil {
		w.tb.Fatal(err)
	}
	nq, err := workqueue.New("", workqueue.ReconcilerFunc[string](w.ctrl.ReconcileNodes), workqueue.Options{})
	if err != nil {
		w.tb.Fatal(err)
	}
	w.ctrl.queue, w.ctrl.nodeQueue = q, nq
	return func() {
		ctx, cancel := context.WithCancel(w.ctx)
		cancel()
		_ = q.Run(ctx, 1) // builds and shuts down the queue's goroutines
		_ = nq.Run(ctx, 1)
	}
}

// unrelatedUpdate is the event of machine i's lastOperation time being
// refreshed and someone else's annotation being set: nothing the
// deployment decides on. The cache shows the new machine, as an informer's
// does before it calls the handlers.
func (w *settledWorld) unrelatedUpdate(i int) (old, updated *v1alpha1.Machine) {
	old = w.machines[i]
	updated = old.DeepCopy()
	w.rv++
	updated.ResourceVersion = strconv.Itoa(w.rv)
	updated.Status.LastOperation.LastUpdateTime = metav1.NewTime(epoch.Add(time.Duration(w.rv) * time.Second))
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
// syncs it queued until none is left; it returns how many ran.
func (w *settledWorld) deliver(old, updated *v1alpha1.Machine) (syncs int) {
	w.ctrl.onMachineUpdate(old, updated)
	if w.ctrl.queue.Len() > 0 {
		syncs++
		if _, err := w.ctrl.Reconcile(w.ctx, w.key); err != nil {
			w.tb.Fatal(err)
		}
	}
	if w.ctrl.nodeQueue.Len() > 0 {
		syncs++
		if _, err := w.ctrl.ReconcileNodes(w.ctx, w.key); err != nil {
			w.tb.Fatal(err)
		}
	}
	return syncs
}

// BenchmarkSettledMachineEvent is the cost of one machine update that
// changes nothing the deployment decides on, in a settled deployment of
// 10 000 machines: the handler and every sync it queues (the deployment's
// and its nodes' marks).
func BenchmarkSettledMachineEvent(b *testing.B) {
	w := newSettledWorld(b, 10000)
	b.ReportAllocs()
	b.ResetTimer()
	var syncs int
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		stop := w.freshQueues()
		old, updated := w.unrelatedUpdate(i % len(w.machines))
		b.StartTimer()
		syncs += w.deliver(old, updated)
		b.StopTimer()
		stop()
		b.StartTimer()
	}
	b.ReportMetric(float64(syncs)/float64(b.N), "syncs/event")
}
