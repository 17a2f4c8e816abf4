package machineset

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/internal/testsupport/fakeapi"
	"github.com/mcmkit/mcm/safety"
)

func testSet(replicas int32) *v1alpha1.MachineSet {
	labels := map[string]string{"pool": "a"}
	return &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "set-uid", Generation: 1},
		Spec: v1alpha1.MachineSetSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "c"}},
			},
		},
	}
}

// harness runs a controller on a fake clientset with started informers.
type harness struct {
	c       *Controller
	client  *fake.Clientset
	creates atomic.Int32
}

func newHarness(t *testing.T, opts Options, objs ...runtime.Object) *harness {
	t.Helper()
	// The world has the class testSet's template names.
	class := &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	h := &harness{client: fake.NewSimpleClientset(append(objs, class)...)}
	// The fake tracker generates neither names nor UIDs.
	var n atomic.Int32
	h.client.PrependReactor("create", "machines", func(a k8stesting.Action) (bool, runtime.Object, error) {
		m := a.(k8stesting.CreateAction).GetObject().(*v1alpha1.Machine)
		if m.Name == "" {
			m.Name = fmt.Sprintf("%s%d", m.GenerateName, n.Add(1))
		}
		if m.UID == "" {
			m.UID = types.UID("uid-" + m.Name)
		}
		h.creates.Add(1)
		return false, nil, nil
	})
	f := externalversions.NewSharedInformerFactory(h.client, 0)
	c, err := NewController(h.client, Informers{MachineSets: f.Machine().V1alpha1().MachineSets(),
		Machines: f.Machine().V1alpha1().Machines(), Classes: f.Machine().V1alpha1().MachineClasses()}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); f.Shutdown() })
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.handlers.Synced()...) {
		t.Fatal("caches did not sync")
	}
	h.c = c
	return h
}

// settle reconciles the set until its machines reach want (by count of
// non-deleting machines), and returns them.
func (h *harness) settle(t *testing.T, want int) []*v1alpha1.Machine {
	t.Helper()
	var live []*v1alpha1.Machine
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := h.c.Reconcile(context.Background(), "ns/pool"); err != nil {
			t.Logf("reconcile: %v", err)
		}
		list, _ := h.client.MachineV1alpha1().Machines("ns").List(context.Background(), metav1.ListOptions{})
		live = live[:0]
		for i := range list.Items {
			if list.Items[i].DeletionTimestamp == nil {
				live = append(live, &list.Items[i])
			}
		}
		if len(live) == want {
			return live
		}
	}
	t.Fatalf("set has %d machines, want %d", len(live), want)
	return nil
}

func TestScaleUpAndDown(t *testing.T) {
	h := newHarness(t, Options{}, testSet(5))
	got := h.settle(t, 5)
	if n := h.creates.Load(); n != 5 {
		t.Fatalf("%d creates for 5 machines: expectations did not hold", n)
	}
	for _, m := range got {
		if ref := metav1.GetControllerOf(m); ref == nil || ref.UID != "set-uid" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("machine %s owner %+v", m.Name, ref)
		}
	}
	// More reconciles of a settled set create nothing.
	for range 5 {
		if _, err := h.c.Reconcile(context.Background(), "ns/pool"); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.creates.Load(); n != 5 {
		t.Fatalf("%d creates after settling, want 5", n)
	}
	set, _ := h.client.MachineV1alpha1().MachineSets("ns").Get(context.Background(), "pool", metav1.GetOptions{})
	if !slices.Contains(set.Finalizers, Finalizer) {
		t.Error("set has no finalizer")
	}
	set.Spec.Replicas = 2
	if _, err := h.client.MachineV1alpha1().MachineSets("ns").Update(context.Background(), set, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.settle(t, 2)
}

// TestDeletionsInParallel: a scale-down issues its deletions at once, not
// one after the other, and failed deletions are told in the order of the
// machines' names, whatever order the answers came in. The fake clientset
// runs one call at a time, so the requests go to an HTTP server that
// answers none before all are in flight.
func TestDeletionsInParallel(t *testing.T) {
	const n = 4
	var inFlight atomic.Int32
	var timedOut atomic.Bool
	all := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodDelete {
			http.Error(w, "only deletions expected", http.StatusBadRequest)
			return
		}
		if inFlight.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(2 * time.Second):
			timedOut.Store(true)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","code":500,"message":"refused %s"}`, path.Base(r.URL.Path))
	}))
	t.Cleanup(srv.Close)
	client, err := versioned.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	f := externalversions.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)
	c, err := NewController(client, Informers{MachineSets: f.Machine().V1alpha1().MachineSets(), Machines: f.Machine().V1alpha1().Machines()}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var machines []*v1alpha1.Machine
	for i := n; i > 0; i-- {
		name := fmt.Sprintf("pool-%d", i)
		machines = append(machines, &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}})
	}

	deleted, failure := c.deleteMachines(context.Background(), "ns/pool", testSet(0), machines)
	if timedOut.Load() {
		t.Errorf("a deletion waited 2s for the other %d to be in flight: they were issued one after the other", n-1)
	}
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprintf("deleting machine pool-%d: refused pool-%d", i, i))
	}
	if len(deleted) != 0 || failure != strings.Join(want, "; ") {
		t.Errorf("deleted %v, failure %q; want none, %q", deleted, failure, strings.Join(want, "; "))
	}
}

func TestFrozenSetDoesNotScaleUp(t *testing.T) {
	set := testSet(3)
	set.Labels = map[string]string{v1alpha1.FreezeLabelKey: v1alpha1.FreezeLabelValue}
	h := newHarness(t, Options{}, set)
	for range 5 {
		if _, err := h.c.Reconcile(context.Background(), "ns/pool"); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.creates.Load(); n != 0 {
		t.Fatalf("frozen set created %d machines", n)
	}
	// The Frozen condition is the safety controller's to write.
	got, _ := h.client.MachineV1alpha1().MachineSets("ns").Get(context.Background(), "pool", metav1.GetOptions{})
	if c := conditionOf(&got.Status, v1alpha1.MachineSetFrozen); c != nil {
		t.Errorf("the set controller wrote a Frozen condition: %+v", c)
	}
}

func TestSlowStartStopsAtFirstFailedBatch(t *testing.T) {
	h := newHarness(t, Options{}, testSet(50))
	h.client.PrependReactor("create", "machines", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("quota exceeded")
	})
	if _, err := h.c.Reconcile(context.Background(), "ns/pool"); err == nil {
		t.Fatal("failed creations did not fail the sync")
	}
	// Batch 1 fails: one request, not 50.
	if n := h.creates.Load(); n != 0 {
		t.Fatalf("%d creates reached the tracker", n)
	}
	var attempts int
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "create" {
			attempts++
		}
	}
	if attempts != 1 {
		t.Errorf("%d create requests after a failing first batch, want 1", attempts)
	}
	if !h.c.exp.Satisfied("ns/pool") {
		t.Error("skipped creations still expected")
	}
	got, _ := h.client.MachineV1alpha1().MachineSets("ns").Get(context.Background(), "pool", metav1.GetOptions{})
	if conditionOf(&got.Status, v1alpha1.MachineSetReplicaFailure) == nil {
		t.Errorf("no ReplicaFailure condition: %+v", got.Status.Conditions)
	}
	if got.Status.ObservedGeneration != 0 {
		t.Errorf("observedGeneration %d after a failed sync", got.Status.ObservedGeneration)
	}
}

func TestSlowStartBatches(t *testing.T) {
	c := &Controller{opts: Options{SlowStartInitialBatch: 1}}
	var calls atomic.Int32
	tally := c.slowStart(context.Background(), newCreationRun(testSet(10), 0, 10), func(context.Context) error {
		calls.Add(1)
		return nil
	})
	if tally.Err != nil || tally.Created != 10 || calls.Load() != 10 {
		t.Fatalf("created %d (%d calls), %v; want 10", tally.Created, calls.Load(), tally.Err)
	}
	// Batches of 1, 2, 4, 3 for 10: a failure in the third batch (calls 4
	// to 7) ends the creations after it.
	calls.Store(0)
	tally = c.slowStart(context.Background(), newCreationRun(testSet(10), 0, 10), func(context.Context) error {
		if calls.Add(1) == 5 {
			return fmt.Errorf("boom")
		}
		return nil
	})
	if tally.Err == nil || tally.Created != 6 || calls.Load() != 7 {
		t.Errorf("after a failure in batch 3: created %d, calls %d, err %v; want 6, 7", tally.Created, calls.Load(), tally.Err)
	}
}

// failUntilReported reconciles a set that cannot work until its status
// shows the ReplicaFailure condition, failing the test if a sync succeeds,
// then syncs it three more times (which must not tell the problem again)
// and returns the set as the cache last showed it with the condition.
func (h *harness) failUntilReported(t *testing.T) *v1alpha1.MachineSet {
	t.Helper()
	var got *v1alpha1.MachineSet
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := h.c.Reconcile(context.Background(), "ns/pool"); err == nil {
			t.Fatal("a set that cannot work synced without error")
		}
		got, _ = h.c.sets.MachineSets("ns").Get("pool")
		if got != nil && conditionOf(&got.Status, v1alpha1.MachineSetReplicaFailure) != nil {
			break
		}
	}
	for range 3 {
		_, _ = h.c.Reconcile(context.Background(), "ns/pool")
	}
	if got == nil || conditionOf(&got.Status, v1alpha1.MachineSetReplicaFailure) == nil {
		t.Fatal("the set never reported ReplicaFailure")
	}
	return got
}

// TestFrozenIsToldOnce: a frozen set reports the held-back creations by
// an event when it becomes frozen, not at every sync, and again when it is
// frozen anew.
func TestFrozenIsToldOnce(t *testing.T) {
	set := testSet(3)
	set.Labels = map[string]string{v1alpha1.FreezeLabelKey: v1alpha1.FreezeLabelValue}
	rec := &fakeapi.Events{}
	frozen := atomic.Bool{}
	h := newHarness(t, Options{Recorder: rec, SafetyGate: safety.GateFunc(func(context.Context) bool { return frozen.Load() })}, set)
	for range 5 {
		if _, err := h.c.Reconcile(context.Background(), "ns/pool"); err != nil {
			t.Fatal(err)
		}
	}
	if n := rec.Count(ReasonFrozen); n != 1 {
		t.Errorf("%d Frozen events, want 1", n)
	}
	// The gate freezes too: a new reason, told once more.
	frozen.Store(true)
	for range 3 {
		if _, err := h.c.Reconcile(context.Background(), "ns/pool"); err != nil {
			t.Fatal(err)
		}
	}
	if n := rec.Count(ReasonFrozen); n != 2 {
		t.Errorf("%d Frozen events after the gate froze too, want 2", n)
	}
}

// TestTemplateChangesReachMachines: the node template, the machine
// configuration and the class kind are patched into existing machines;
// the class name (which needs a new machine) is not.
func TestTemplateChangesReachMachines(t *testing.T) {
	h := newHarness(t, Options{}, testSet(2), &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "bigger", Namespace: "ns"}})
	h.settle(t, 2)
	set, _ := h.client.MachineV1alpha1().MachineSets("ns").Get(context.Background(), "pool", metav1.GetOptions{})
	set.Spec.Template.Spec.NodeTemplateSpec.Labels = map[string]string{"role": "worker"}
	set.Spec.Template.Spec.MachineConfiguration = &v1alpha1.MachineConfiguration{MachineDrainTimeout: &metav1.Duration{Duration: time.Minute}}
	set.Spec.Template.Spec.Class.Name = "bigger"
	if _, err := h.client.MachineV1alpha1().MachineSets("ns").Update(context.Background(), set, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var machines []v1alpha1.Machine
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := h.c.Reconcile(context.Background(), "ns/pool"); err != nil {
			t.Fatal(err)
		}
		list, _ := h.client.MachineV1alpha1().Machines("ns").List(context.Background(), metav1.ListOptions{})
		machines = list.Items
		done := len(machines) == 2
		for _, m := range machines {
			done = done && m.Spec.NodeTemplateSpec.Labels["role"] == "worker"
		}
		if done {
			break
		}
	}
	for _, m := range machines {
		if m.Spec.NodeTemplateSpec.Labels["role"] != "worker" || m.Spec.MachineConfiguration == nil ||
			m.Spec.MachineDrainTimeout == nil || m.Spec.MachineDrainTimeout.Duration != time.Minute {
			t.Errorf("machine %s not updated from the template: %+v", m.Name, m.Spec)
		}
		if m.Spec.Class.Name != "c" {
			t.Errorf("machine %s class changed to %q in place", m.Name, m.Spec.Class.Name)
		}
	}
	if n := h.creates.Load(); n != 2 {
		t.Errorf("%d machines created, want the 2 kept", n)
	}
}

// TestInvalidSetCreatesNothing: a set whose selector does not match its
// template (past admission) creates nothing, says why once, and keeps
// counting the machines it controls.
func TestInvalidSetCreatesNothing(t *testing.T) {
	set := testSet(3)
	set.Spec.Template.Labels = map[string]string{"pool": "b"}
	mine := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "pool-old", Namespace: "ns",
		Labels: map[string]string{"pool": "a"}, OwnerReferences: []metav1.OwnerReference{controllerRef(set)}}}
	rec := &fakeapi.Events{}
	h := newHarness(t, Options{Recorder: rec}, set, mine)
	got := h.failUntilReported(t)
	if n := h.creates.Load(); n != 0 {
		t.Errorf("invalid set created %d machines", n)
	}
	if got.Status.Replicas != 1 {
		t.Errorf("status replicas %d, want the 1 machine the set controls", got.Status.Replicas)
	}
	if n := rec.Count(ReasonInvalid); n != 1 {
		t.Errorf("%d InvalidMachineSet events, want 1", n)
	}
}

// TestNegativeSelectorAdoptsNothing: a set stored with a selector of only
// DoesNotExist (past admission) is invalid: a standalone machine it
// matches is neither adopted nor deleted, and nothing is created.
func TestNegativeSelectorAdoptsNothing(t *testing.T) {
	set := testSet(0)
	set.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist},
	}}
	standalone := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "db1",
		Labels: map[string]string{"app": "db"}}}
	h := newHarness(t, Options{}, set, standalone)
	got := h.failUntilReported(t)
	if c := conditionOf(&got.Status, v1alpha1.MachineSetReplicaFailure); c == nil || !strings.Contains(c.Message, "positive requirement") {
		t.Errorf("ReplicaFailure condition %+v, want one about the selector's positive requirement", c)
	}
	m, err := h.client.MachineV1alpha1().Machines("ns").Get(context.Background(), "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.OwnerReferences) > 0 || m.DeletionTimestamp != nil {
		t.Errorf("standalone machine touched: owners %v, deletion %v", m.OwnerReferences, m.DeletionTimestamp)
	}
	if n := h.creates.Load(); n != 0 {
		t.Errorf("invalid set created %d machines", n)
	}
}

// TestAdoptAndRelease: a matching orphan is adopted (and counts toward the
// replicas, so nothing is created for it); a controlled machine that no
// longer matches is released.
func TestAdoptAndRelease(t *testing.T) {
	set := testSet(1)
	orphan := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "ns", UID: "o1",
		Labels: map[string]string{"pool": "a"}}}
	strayed := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "strayed", Namespace: "ns", UID: "s1",
		Labels: map[string]string{"pool": "elsewhere"}, OwnerReferences: []metav1.OwnerReference{controllerRef(set)}}}
	h := newHarness(t, Options{}, set, orphan, strayed)
	get := func(name string) *v1alpha1.Machine {
		m, _ := h.client.MachineV1alpha1().Machines("ns").Get(context.Background(), name, metav1.GetOptions{})
		return m
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := h.c.Reconcile(context.Background(), "ns/pool"); err != nil {
			t.Logf("reconcile: %v", err)
		}
		if ref := metav1.GetControllerOf(get("orphan")); ref != nil && metav1.GetControllerOf(get("strayed")) == nil {
			break
		}
	}
	if ref := metav1.GetControllerOf(get("orphan")); ref == nil || ref.UID != set.UID {
		t.Errorf("orphan not adopted: %+v", ref)
	}
	if ref := metav1.GetControllerOf(get("strayed")); ref != nil {
		t.Errorf("strayed machine still controlled: %+v", ref)
	}
	if n := h.creates.Load(); n != 0 {
		t.Errorf("%d machines created for a set whose one replica was adopted", n)
	}
}

// TestMissingClassHoldsCreations: a template naming a class that does not
// exist creates nothing, says so once on the set, fails the sync (so it is
// retried with backoff), and scales up once the class appears.
func TestMissingClassHoldsCreations(t *testing.T) {
	set := testSet(3)
	set.Spec.Template.Spec.Class.Name = "absent"
	rec := &fakeapi.Events{}
	h := newHarness(t, Options{Recorder: rec}, set)
	got := h.failUntilReported(t)
	if n := h.creates.Load(); n != 0 {
		t.Fatalf("created %d machines from a missing class", n)
	}
	if c := conditionOf(&got.Status, v1alpha1.MachineSetReplicaFailure); c == nil || !strings.Contains(c.Message, `MachineClass "absent"`) {
		t.Errorf("ReplicaFailure condition does not name the class: %+v", c)
	}
	if n := rec.Count(ReasonClassNotFound); n != 1 {
		t.Errorf("%d %s events, want 1", n, ReasonClassNotFound)
	}
	class := &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "absent", Namespace: "ns"}}
	if _, err := h.client.MachineV1alpha1().MachineClasses("ns").Create(context.Background(), class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.settle(t, 3)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := h.c.Reconcile(context.Background(), "ns/pool"); err != nil {
			t.Logf("reconcile: %v", err)
		}
		got, _ = h.client.MachineV1alpha1().MachineSets("ns").Get(context.Background(), "pool", metav1.GetOptions{})
		if conditionOf(&got.Status, v1alpha1.MachineSetReplicaFailure) == nil {
			return
		}
	}
	t.Errorf("ReplicaFailure left after the class appeared: %+v", got.Status.Conditions)
}

// TestDeletingClassHoldsCreations: a template naming a class whose deletion
// has started creates nothing and says why, as for a missing class.
func TestDeletingClassHoldsCreations(t *testing.T) {
	set := testSet(2)
	set.Spec.Template.Spec.Class.Name = "going"
	going := &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "going", Namespace: "ns",
		Finalizers: []string{v1alpha1.MachineFinalizer}, DeletionTimestamp: &metav1.Time{Time: time.Now()}}}
	rec := &fakeapi.Events{}
	h := newHarness(t, Options{Recorder: rec}, set, going)
	got := h.failUntilReported(t)
	if n := h.creates.Load(); n != 0 {
		t.Fatalf("created %d machines from a class being deleted", n)
	}
	if c := conditionOf(&got.Status, v1alpha1.MachineSetReplicaFailure); c == nil || !strings.Contains(c.Message, `MachineClass "going", which is being deleted`) {
		t.Errorf("ReplicaFailure condition does not say the class is being deleted: %+v", c)
	}
	if n := rec.Count(ReasonClassDeleting); n != 1 {
		t.Errorf("%d %s events, want 1", n, ReasonClassDeleting)
	}
}

// TestMetricsUnderMCMNames: the scrape shows MCM's metric names for a set
// in the cache, and a Failed machine the set deletes counts as stale.
func TestMetricsUnderMCMNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	failed := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "pool-failed", Namespace: "ns", UID: "f1",
		Labels: map[string]string{"pool": "a"}, OwnerReferences: []metav1.OwnerReference{controllerRef(testSet(1))}}}
	failed.Status.CurrentStatus.Phase = v1alpha1.MachineFailed
	failed.Status.LastOperation.State = v1alpha1.MachineStateFailed
	failed.Status.LastOperation.Type = v1alpha1.MachineOperationHealthCheck // marked Failed by the health timeout
	h := newHarness(t, Options{Registerer: reg}, testSet(1), failed)
	h.settle(t, 1)
	want := []string{"mcm_machine_set_items_total", "mcm_machine_set_info", "mcm_machine_set_info_spec_replicas",
		"mcm_machine_set_status_replicas", "mcm_machine_set_status_available_replicas",
		"mcm_machine_set_status_fully_labelled_replicas", "mcm_machine_set_status_ready_replicas", "mcm_machine_stale_machines_total"}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			have[f.GetName()] += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for _, name := range want {
		if _, ok := have[name]; !ok {
			t.Errorf("metric %s missing", name)
		}
	}
	if have["mcm_machine_stale_machines_total"] != 1 {
		t.Errorf("stale machines %v, want the 1 Failed machine the set deleted", have["mcm_machine_stale_machines_total"])
	}
}

// TestNewMachineCarriesFinalizerAndPriority: a set's machine is created
// with what the machine controller would otherwise write before creating
// its VM — the machine finalizer and the default deletion priority — and
// a priority the template sets is kept.
func TestNewMachineCarriesFinalizerAndPriority(t *testing.T) {
	set := testSet(1)
	m := newMachine(set)
	if !slices.Equal(m.Finalizers, []string{v1alpha1.MachineFinalizer}) {
		t.Errorf("finalizers %v, want [%s]", m.Finalizers, v1alpha1.MachineFinalizer)
	}
	if got := m.Annotations[v1alpha1.MachinePriorityAnnotation]; got != v1alpha1.MachinePriorityDefault {
		t.Errorf("priority %q, want the default %q", got, v1alpha1.MachinePriorityDefault)
	}
	if set.Spec.Template.Annotations != nil {
		t.Errorf("the set's template was changed: %v", set.Spec.Template.Annotations)
	}
	set.Spec.Template.Annotations = map[string]string{v1alpha1.MachinePriorityAnnotation: "1"}
	if got := newMachine(set).Annotations[v1alpha1.MachinePriorityAnnotation]; got != "1" {
		t.Errorf("priority %q, want the template's 1", got)
	}
}
