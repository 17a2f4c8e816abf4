package machine

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"

	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/internal/testsupport/registrationstest"
	"github.com/mcmkit/mcm/workqueue"
)

// TestRunRemovesHandlers: the informers may outlive the controller (a
// manager shares them between controllers that stop at different times):
// once Run returned, none of its handlers is left on them.
func TestRunRemovesHandlers(t *testing.T) {
	f := newFakeCluster(t)
	inf := registrationstest.New(externalversions.NewSharedInformerFactory(f.mc, 0), informers.NewSharedInformerFactory(f.core, 0))
	ctrl, err := NewController(f.mc, f.core, f.core, Informers{Machines: inf.Machines, Classes: inf.Classes, Secrets: inf.Secrets, Nodes: inf.Nodes}, f.driver, Options{})
	if err != nil {
		t.Fatal(err)
	}
	registrationstest.CheckRunRemovesHandlers(t, inf, 4, ctrl.Run)
}

// TestPreserveAnnotationsSyncAtOnce: a change of a Node's preserve
// annotation syncs its machine through the node queue, and a change of a
// Machine's preserve annotation or of its record of the Node's value
// syncs the machine, at once rather than at a periodic resync; a node's
// heartbeat alone does not.
func TestPreserveAnnotationsSyncAtOnce(t *testing.T) {
	f := newFakeCluster(t)
	c, err := NewController(f.mc, f.core, f.core, f.inf, f.driver, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "ns",
		Labels: map[string]string{v1alpha1.NodeLabelKey: "n1"}}}
	if err := f.inf.Machines.Informer().GetIndexer().Add(m); err != nil {
		t.Fatal(err)
	}
	old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	if err := f.inf.Nodes.Informer().GetIndexer().Add(old); err != nil {
		t.Fatal(err)
	}
	heartbeat := old.DeepCopy()
	heartbeat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		LastHeartbeatTime: metav1.Now()}}
	old.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	c.onNode(old, heartbeat)
	if n := c.nodeQueue.Len(); n != 0 {
		t.Fatalf("a heartbeat queued %d nodes", n)
	}
	annotated := heartbeat.DeepCopy()
	annotated.Annotations = map[string]string{v1alpha1.PreserveAnnotation: "when-failed"}
	c.onNode(heartbeat, annotated)
	if n := c.nodeQueue.Len(); n != 1 {
		t.Fatalf("the Node's preserve annotation queued %d nodes, want 1", n)
	}
	if _, err := c.ReconcileNode(context.Background(), "n1"); err != nil {
		t.Fatal(err)
	}
	if n := c.machineQueue.Len(); n != 1 {
		t.Fatalf("the node's sync queued %d machines, want its machine", n)
	}
	for _, key := range []string{v1alpha1.PreserveAnnotation, v1alpha1.LastAppliedNodePreserveValueAnnotation} {
		c2, err := NewController(f.mc, f.core, f.core, f.inf, f.driver, Options{})
		if err != nil {
			t.Fatal(err)
		}
		changed := m.DeepCopy()
		changed.Annotations = map[string]string{key: "now"}
		c2.onMachine(m, changed)
		if n := c2.machineQueue.Len(); n != 1 {
			t.Errorf("a change of %s queued %d machines, want 1", key, n)
		}
	}
}

// TestInPlaceLabelsSyncAtOnce: a node agent's or the deployment
// controller's change of a node's in-place labels or failed-reason
// annotation queues the node, whose sync queues its machine.
func TestInPlaceLabelsSyncAtOnce(t *testing.T) {
	f := newFakeCluster(t)
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "ns",
		Labels: map[string]string{v1alpha1.NodeLabelKey: "n1"}}}
	if err := f.inf.Machines.Informer().GetIndexer().Add(m); err != nil {
		t.Fatal(err)
	}
	old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{v1alpha1.CandidateForUpdateLabel: "true"}}}
	if err := f.inf.Nodes.Informer().GetIndexer().Add(old); err != nil {
		t.Fatal(err)
	}
	changes := map[string]func(*corev1.Node){
		"candidate removed": func(n *corev1.Node) { delete(n.Labels, v1alpha1.CandidateForUpdateLabel) },
		"selected":          func(n *corev1.Node) { n.Labels[v1alpha1.SelectedForUpdateLabel] = "true" },
		"result":            func(n *corev1.Node) { n.Labels[v1alpha1.UpdateResultLabel] = v1alpha1.UpdateResultFailed },
		"failed reason": func(n *corev1.Node) {
			n.Annotations = map[string]string{v1alpha1.UpdateFailedReasonAnnotation: "disk full"}
		},
	}
	for name, change := range changes {
		c, err := NewController(f.mc, f.core, f.core, f.inf, f.driver, Options{})
		if err != nil {
			t.Fatal(err)
		}
		changed := old.DeepCopy()
		change(changed)
		c.onNode(old, changed)
		if n := c.nodeQueue.Len(); n != 1 {
			t.Fatalf("%s queued %d nodes, want 1", name, n)
		}
		if _, err := c.ReconcileNode(context.Background(), "n1"); err != nil {
			t.Fatal(err)
		}
		if n := c.machineQueue.Len(); n != 1 {
			t.Fatalf("%s: the node's sync queued %d machines, want its machine", name, n)
		}
	}
}

// TestJoinsNow: a machine event queues the machine first when its sync may
// turn it Running: it awaits a node, and the node it is bound to is Ready.
func TestJoinsNow(t *testing.T) {
	f := newFakeCluster(t)
	c, err := NewController(f.mc, f.core, f.core, f.inf, f.driver, Options{})
	if err != nil {
		t.Fatal(err)
	}
	addReadyAndNotReadyNodes(t, f)
	now := metav1.Now()
	machine := func(node string, phase v1alpha1.MachinePhase, deleting bool) *v1alpha1.Machine {
		m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns"}}
		if node != "" {
			m.Labels = map[string]string{v1alpha1.NodeLabelKey: node}
		}
		if deleting {
			m.DeletionTimestamp = &now
		}
		m.Status.CurrentStatus.Phase = phase
		return m
	}
	for _, tc := range []struct {
		name string
		m    *v1alpha1.Machine
		want bool
	}{
		{"created, its node Ready", machine("ready", "", false), true},
		{"Pending, its node Ready", machine("ready", v1alpha1.MachinePending, false), true},
		{"Unknown, its node Ready again", machine("ready", v1alpha1.MachineUnknown, false), true},
		{"updated in place, its node Ready again", machine("ready", v1alpha1.MachineInPlaceUpdateSuccessful, false), true},
		{"updating in place", machine("ready", v1alpha1.MachineInPlaceUpdating, false), false},
		{"Running already", machine("ready", v1alpha1.MachineRunning, false), false},
		{"Failed", machine("ready", v1alpha1.MachineFailed, false), false},
		{"being deleted", machine("ready", v1alpha1.MachinePending, true), false},
		{"its node not Ready", machine("not-ready", v1alpha1.MachinePending, false), false},
		{"its node not registered yet", machine("absent", v1alpha1.MachinePending, false), false},
		{"no node yet", machine("", v1alpha1.MachinePending, false), false},
	} {
		if got := c.joinsNow(tc.m); got != tc.want {
			t.Errorf("%s: joinsNow = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReadyNodeQueuesItsMachineFirst: the two places that decide a
// machine may turn Running now (a node sync that finds the node Ready, and
// the machine's own event when its node is Ready already) queue it ahead
// of the keys already waiting; a machine whose node is not Ready waits
// its turn.
func TestReadyNodeQueuesItsMachineFirst(t *testing.T) {
	f := newFakeCluster(t)
	addReadyAndNotReadyNodes(t, f)
	pending := func(name, node string) *v1alpha1.Machine {
		m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			Labels: map[string]string{v1alpha1.NodeLabelKey: node}}}
		m.Status.CurrentStatus.Phase = v1alpha1.MachinePending
		return m
	}
	onReady, onNotReady := pending("on-ready", "ready"), pending("on-not-ready", "not-ready")
	for _, m := range []*v1alpha1.Machine{onReady, onNotReady} {
		if err := f.inf.Machines.Informer().GetIndexer().Add(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		queue func(*Controller)
		want  []string
	}{
		{"node sync, node Ready", func(c *Controller) { reconcileNodeOrFail(t, c, "ready") },
			[]string{"ns/on-ready", "ns/waiting-1", "ns/waiting-2"}},
		{"node sync, node not Ready", func(c *Controller) { reconcileNodeOrFail(t, c, "not-ready") },
			[]string{"ns/waiting-1", "ns/waiting-2", "ns/on-not-ready"}},
		{"machine event, node Ready", func(c *Controller) { c.onMachine(nil, onReady) },
			[]string{"ns/on-ready", "ns/waiting-1", "ns/waiting-2"}},
		{"machine event, node not Ready", func(c *Controller) { c.onMachine(nil, onNotReady) },
			[]string{"ns/waiting-1", "ns/waiting-2", "ns/on-not-ready"}},
	} {
		c, err := NewController(f.mc, f.core, f.core, f.inf, f.driver, Options{})
		if err != nil {
			t.Fatal(err)
		}
		// The deadline only ends a run that lost a key: the diff then shows
		// which.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		var order []string
		record := func(_ context.Context, key string) (workqueue.Result, error) {
			if order = append(order, key); len(order) == len(tc.want) {
				cancel()
			}
			return workqueue.Result{}, nil
		}
		// The controller's queue, with a reconciler that records the
		// order in which it hands out keys.
		if c.machineQueue, err = workqueue.New("machine", workqueue.ReconcilerFunc[string](record), workqueue.Options{}); err != nil {
			t.Fatal(err)
		}
		c.machineQueue.Add("ns/waiting-1")
		c.machineQueue.Add("ns/waiting-2")
		tc.queue(c)
		if err := c.machineQueue.Run(ctx, 1); err != nil {
			t.Fatal(err)
		}
		cancel()
		if diff := cmp.Diff(tc.want, order); diff != "" {
			t.Errorf("%s: reconcile order (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestAwaitsReadyNodeIsWhatPlanHealthTurnsRunning: the machines a Ready
// node queues first are exactly those whose phase planHealth turns Running
// on that node, for every phase (a Failed machine here is not preserved:
// a preserved one is the documented exception).
func TestAwaitsReadyNodeIsWhatPlanHealthTurnsRunning(t *testing.T) {
	o := testOptions(t)
	for _, phase := range []v1alpha1.MachinePhase{"", v1alpha1.MachinePending, v1alpha1.MachineAvailable,
		v1alpha1.MachineRunning, v1alpha1.MachineTerminating, v1alpha1.MachineUnknown, v1alpha1.MachineFailed,
		v1alpha1.MachineCrashLoopBackOff, v1alpha1.MachineInPlaceUpdating, v1alpha1.MachineInPlaceUpdateSuccessful,
		v1alpha1.MachineInPlaceUpdateFailed} {
		m := withPhase(baseMachine(), phase, "p1")
		obs := obsFor(m)
		obs.Node = node(cond(corev1.NodeReady, corev1.ConditionTrue))
		p := machinePlan{Machine: m.DeepCopy()}
		planHealth(&p, obs, o)
		turnsRunning := phase != v1alpha1.MachineRunning && p.Machine.Status.CurrentStatus.Phase == v1alpha1.MachineRunning
		if got := awaitsReadyNode(m); got != turnsRunning {
			t.Errorf("phase %q: awaitsReadyNode %v, but planHealth on a Ready node turns it Running: %v", phase, got, turnsRunning)
		}
	}
}

func reconcileNodeOrFail(t *testing.T, c *Controller, name string) {
	t.Helper()
	if _, err := c.ReconcileNode(t.Context(), name); err != nil {
		t.Fatal(err)
	}
}

// addReadyAndNotReadyNodes caches two nodes, "ready" and "not-ready".
func addReadyAndNotReadyNodes(t *testing.T, f fakeCluster) {
	t.Helper()
	for name, ready := range map[string]corev1.ConditionStatus{"ready": corev1.ConditionTrue, "not-ready": corev1.ConditionFalse} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
		if err := f.inf.Nodes.Informer().GetIndexer().Add(n); err != nil {
			t.Fatal(err)
		}
	}
}
