package machine

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/driver/sim"
)

// TestSyncInPlaceUpdate: through the controller's own writes on fake
// clusters, a selected candidate node is drained in passes (the machine
// Running meanwhile, the drain's start recorded before its first pass, its
// deadline counted from it), the machine goes InPlaceUpdating with the node ReadyForUpdate; the
// in-place timeout fails it; the agent's failure then gives the
// condition and lastOperation its reason; its later success brings the
// machine back to Running. The node's own conditions survive the
// condition's patches, and the metrics count each step.
func TestSyncInPlaceUpdate(t *testing.T) {
	w := newSyncWorld(t, "", func(cloud *sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node) {
		vm := addVM(t, cloud)
		m := syncMachineObj(func(m *v1alpha1.Machine) { withVM(m, vm, v1alpha1.MachineRunning) })
		n := syncNode(vm, true, corev1.ConditionTrue)
		m.Status.Conditions = n.Status.Conditions
		n = planNodeSync(n, m, nil)
		n.Labels[v1alpha1.CandidateForUpdateLabel] = "true"
		n.Labels[v1alpha1.SelectedForUpdateLabel] = "true"
		return []*v1alpha1.Machine{m}, []*corev1.Node{n}
	})
	ctx := context.Background()
	clk := w.c.opts.Clock.(*testingclock.FakeClock)
	draining := &scriptedDrainer{res: drain.Result{Plan: drain.Plan{NextCheck: t0.Add(5 * time.Second)}}}
	w.c.drainer = draining
	// The first sync records the drain's start and parameters and sends
	// no eviction; the next one drains.
	res, err := w.c.ReconcileMachine(ctx, "ns/m1")
	if err != nil || res.RequeueAfter != recordedDrainDelay || draining.passes != 0 {
		t.Fatalf("recording the drain: %v %+v, %d passes; want none and a requeue at once", err, res, draining.passes)
	}
	waitForCaches(t, w)
	res, err = w.c.ReconcileMachine(ctx, "ns/m1")
	if err != nil || res.RequeueAfter != 5*time.Second {
		t.Fatalf("drain pass: %v %+v, want a requeue at the next check", err, res)
	}
	waitForCaches(t, w)
	if got := draining.state.Deadline(); !got.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("drain deadline %v, want the drain timeout after the selection", got)
	}
	m, n := w.settle(t)
	if m.Status.CurrentStatus.Phase != v1alpha1.MachineRunning || m.Annotations[InPlaceDrainStartedAnnotation] != formatTime(t0) {
		t.Errorf("while draining: phase %s, annotations %v", m.Status.CurrentStatus.Phase, m.Annotations)
	}
	wantCondition(t, n, v1alpha1.SelectedForUpdate, v1alpha1.SelectedForUpdateMessage)

	w.c.drainer = &scriptedDrainer{res: drain.Result{Plan: drain.Plan{Done: true}}}
	if _, err := w.c.ReconcileMachine(ctx, "ns/m1"); err != nil {
		t.Fatal(err)
	}
	waitForCaches(t, w)
	m, n = w.settle(t)
	wantStatus(t, m, v1alpha1.MachineInPlaceUpdating, "Machine m1 is undergoing an in-place update")
	wantCondition(t, n, v1alpha1.ReadyForUpdate, v1alpha1.ReadyForUpdateMessage)
	if _, ok := m.Annotations[InPlaceDrainStartedAnnotation]; ok {
		t.Errorf("drain records left: %v", m.Annotations)
	}
	if c := nodeCondition(n, corev1.NodeReady); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("the node's Ready condition went: %+v", n.Status.Conditions)
	}

	clk.Step(21 * time.Minute)
	if _, err := w.c.ReconcileMachine(ctx, "ns/m1"); err != nil {
		t.Fatal(err)
	}
	waitForCaches(t, w)
	m, _ = w.settle(t)
	wantStatus(t, m, v1alpha1.MachineInPlaceUpdateFailed, "Machine m1 failed to in-place update in 20m0s minutes.")

	setNodeLabels(t, w, n.Name, func(n *corev1.Node) {
		n.Labels[v1alpha1.UpdateResultLabel] = v1alpha1.UpdateResultFailed
		setMapKey(&n.Annotations, v1alpha1.UpdateFailedReasonAnnotation, "os update failed")
	})
	m, n = w.settle(t)
	wantStatus(t, m, v1alpha1.MachineInPlaceUpdateFailed, "Machine m1 failed to update dependencies: os update failed")
	wantCondition(t, n, v1alpha1.UpdateFailed, v1alpha1.UpdateFailedMessage+"os update failed")

	setNodeLabels(t, w, n.Name, func(n *corev1.Node) { n.Labels[v1alpha1.UpdateResultLabel] = v1alpha1.UpdateResultSuccessful })
	m, n = w.settle(t)
	wantStatus(t, m, v1alpha1.MachineRunning, "Machine m1 successfully re-joined the cluster")
	wantCondition(t, n, v1alpha1.UpdateSuccessful, v1alpha1.UpdateSuccessfulMessage)
	if !conditionsEquivalent(m.Status.Conditions, n.Status.Conditions) {
		t.Errorf("machine conditions %+v, want the node's %+v", m.Status.Conditions, n.Status.Conditions)
	}
	for result, want := range map[string]float64{inPlaceStarted: 1, inPlaceFailed: 1, inPlaceSuccessful: 1} {
		if got := testutil.ToFloat64(w.c.metrics.inPlaceUpdates.WithLabelValues("ns", result)); got != want {
			t.Errorf("mcm_machine_inplace_updates_total{result=%q} = %v, want %v", result, got, want)
		}
	}
}

func wantStatus(t *testing.T, m *v1alpha1.Machine, phase v1alpha1.MachinePhase, desc string) {
	t.Helper()
	if m.Status.CurrentStatus.Phase != phase || m.Status.LastOperation.Description != desc {
		t.Errorf("machine %s %q, want %s %q", m.Status.CurrentStatus.Phase, m.Status.LastOperation.Description, phase, desc)
	}
}

func wantCondition(t *testing.T, n *corev1.Node, reason, message string) {
	t.Helper()
	c := nodeCondition(n, v1alpha1.NodeInPlaceUpdate)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != reason || c.Message != message {
		t.Errorf("InPlaceUpdate condition %+v, want True %s %q", c, reason, message)
	}
}

// waitForCaches waits until the controller's caches show the machine and
// its node as stored: the fake clusters keep no resource versions, by
// which a sync would otherwise know a cache that lags its own writes.
func waitForCaches(t *testing.T, w *syncWorld) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 500; i++ {
		m, err := w.mc.MachineV1alpha1().Machines("ns").Get(ctx, "m1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := w.target.CoreV1().Nodes().Get(ctx, m.Labels[v1alpha1.NodeLabelKey], metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm, errM := w.c.machines.Machines("ns").Get("m1")
		cn, errN := w.c.nodes.Get(n.Name)
		if errM == nil && errN == nil && apiequality.Semantic.DeepEqual(cm.Status, m.Status) &&
			apiequality.Semantic.DeepEqual(cm.Annotations, m.Annotations) &&
			apiequality.Semantic.DeepEqual(cn.Status.Conditions, n.Status.Conditions) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the caches do not show the writes")
}

// setNodeLabels changes the node as the node agent does.
func setNodeLabels(t *testing.T, w *syncWorld, name string, change func(*corev1.Node)) {
	t.Helper()
	n, err := w.target.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(n)
	updated, err := w.target.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The syncs read the cache: wait until it shows the change.
	for i := 0; i < 500; i++ {
		if cached, err := w.c.nodes.Get(name); err == nil && cached.ResourceVersion == updated.ResourceVersion {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the node cache does not show the change")
}
