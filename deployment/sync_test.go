package deployment

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/internal/testsupport/fakeapi"
	"github.com/mcmkit/mcm/machineset"
)

var machineGVR = v1alpha1.SchemeGroupVersion.WithResource("machines")

// fakeWorld runs the deployment controller and the MachineSet controller
// on a fake clientset whose machines are Running (and available) the
// moment they are created, unless held.
type fakeWorld struct {
	t      testing.TB
	client *fake.Clientset
	ctrl   *Controller
	events *fakeapi.Events

	names atomic.Int32
	// pending makes new machines Pending instead of Running.
	pending atomic.Bool
	// target is the target cluster, nil when there is none.
	target *k8sfake.Clientset
}

func testDeployment(replicas int32) *v1alpha1.MachineDeployment {
	labels := map[string]string{"pool": "a"}
	return &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "d-uid", Generation: 1},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "small"}},
			},
			Strategy: v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge: ptrTo(intstr.FromInt32(1)), MaxUnavailable: ptrTo(intstr.FromInt32(0))}}},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

func startFakeWorld(t testing.TB, opts Options, objs ...runtime.Object) *fakeWorld {
	t.Helper()
	return startFakeWorldWith(t, opts, nil, objs...)
}

// startFakeWorldWith is startFakeWorld with target as the target cluster
// (nil: none).
func startFakeWorldWith(t testing.TB, opts Options, target *k8sfake.Clientset, objs ...runtime.Object) *fakeWorld {
	t.Helper()
	w := &fakeWorld{t: t, client: fake.NewSimpleClientset(objs...), events: &fakeapi.Events{}, target: target}
	fakeapi.VersionWrites(&w.client.Fake, w.client.Tracker())
	w.client.PrependReactor("create", "machines", func(a k8stesting.Action) (bool, runtime.Object, error) {
		m := a.(k8stesting.CreateAction).GetObject().(*v1alpha1.Machine)
		n := w.names.Add(1)
		m.Name = fmt.Sprintf("%s%d", m.GenerateName, n)
		m.UID = types.UID("uid-" + m.Name)
		m.CreationTimestamp = metav1.NewTime(time.Unix(int64(n), 0))
		m.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning, LastUpdateTime: metav1.NewTime(time.Unix(0, 0))}
		if w.pending.Load() {
			m.Status.CurrentStatus.Phase = v1alpha1.MachinePending
		}
		return false, nil, nil
	})
	w.client.PrependReactor("create", "machinesets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*v1alpha1.MachineSet)
		s.UID = types.UID("uid-" + s.Name) // the fake API server assigns none
		return false, nil, nil
	})
	// The fake API server does not run the garbage collector; sets carry
	// no finalizer of the machine controller, so deletions are immediate.
	f := externalversions.NewSharedInformerFactory(w.client, 0)
	opts.Recorder = w.events
	inf := Informers{
		Deployments: f.Machine().V1alpha1().MachineDeployments(),
		MachineSets: f.Machine().V1alpha1().MachineSets(),
		Machines:    f.Machine().V1alpha1().Machines(),
	}
	var tf informers.SharedInformerFactory
	var targetClient kubernetes.Interface
	if target != nil {
		tf = informers.NewSharedInformerFactory(target, 0)
		inf.Nodes, targetClient = tf.Core().V1().Nodes(), target
	}
	ctrl, err := NewController(w.client, targetClient, inf, opts)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := machineset.NewController(w.client, machineset.Informers{
		MachineSets: f.Machine().V1alpha1().MachineSets(),
		Machines:    f.Machine().V1alpha1().Machines(),
	}, machineset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.ctrl = ctrl
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logr.Discard()))
	f.Start(ctx.Done())
	if tf != nil {
		tf.Start(ctx.Done())
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = ctrl.Run(ctx, 2) })
	wg.Go(func() { _ = sets.Run(ctx, 2) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		f.Shutdown()
		if tf != nil {
			tf.Shutdown()
		}
	})
	return w
}

func (w *fakeWorld) deployment() *v1alpha1.MachineDeployment {
	d, err := w.client.MachineV1alpha1().MachineDeployments("ns").Get(context.Background(), "pool", metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return d
}

func (w *fakeWorld) update(change func(d *v1alpha1.MachineDeployment)) {
	w.t.Helper()
	for range 10 {
		d := w.deployment()
		change(d)
		d.Generation++
		if _, err := w.client.MachineV1alpha1().MachineDeployments("ns").Update(context.Background(), d, metav1.UpdateOptions{}); err == nil {
			return
		}
	}
	w.t.Fatal("could not update the deployment")
}

func (w *fakeWorld) sets() []v1alpha1.MachineSet {
	list, _ := w.client.MachineV1alpha1().MachineSets("ns").List(context.Background(), metav1.ListOptions{})
	return list.Items
}

func (w *fakeWorld) machines() []v1alpha1.Machine {
	list, _ := w.client.MachineV1alpha1().Machines("ns").List(context.Background(), metav1.ListOptions{})
	return slices.DeleteFunc(list.Items, func(m v1alpha1.Machine) bool { return m.DeletionTimestamp != nil })
}

// eventually polls cond until it holds, failing the test after 10 s with
// cond's last word.
func (w *fakeWorld) eventually(cond func() (bool, string)) {
	w.t.Helper()
	var why string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var ok bool
		if ok, why = cond(); ok {
			return
		}
	}
	w.t.Fatalf("timed out: %s", why)
}

// settled: the deployment has replicas Running machines, all of one set,
// and its status says so for its generation.
func (w *fakeWorld) settled(replicas int32) func() (bool, string) {
	return func() (bool, string) {
		d := w.deployment()
		owners := map[string]int{}
		for _, m := range w.machines() {
			owner := "<none>"
			if ref := metav1.GetControllerOf(&m); ref != nil {
				owner = ref.Name
			}
			owners[owner]++
		}
		st := d.Status
		ok := len(owners) == 1 && st.Replicas == replicas && st.UpdatedReplicas == replicas && st.AvailableReplicas == replicas &&
			st.ObservedGeneration == d.Generation
		return ok, fmt.Sprintf("machines by set %v; status %d/%d/%d observed %d of %d", owners,
			st.Replicas, st.UpdatedReplicas, st.AvailableReplicas, st.ObservedGeneration, d.Generation)
	}
}

func TestRollingUpdateReplacesEveryMachine(t *testing.T) {
	w := startFakeWorld(t, Options{}, testDeployment(3))
	w.eventually(w.settled(3))
	first := w.machines()
	w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.Template.Spec.Class.Name = "big" })
	w.eventually(w.settled(3))
	for _, m := range w.machines() {
		if m.Spec.Class.Name != "big" {
			t.Errorf("machine %s still has class %s", m.Name, m.Spec.Class.Name)
		}
		for _, old := range first {
			if old.Name == m.Name {
				t.Errorf("machine %s survived the rollout", m.Name)
			}
		}
	}
	d := w.deployment()
	if got := d.Annotations[v1alpha1.RevisionAnnotation]; got != "2" {
		t.Errorf("deployment revision %q, want 2", got)
	}
	if c, _ := conditionOf(d.Status.Conditions, v1alpha1.MachineDeploymentProgressing); c.Reason != v1alpha1.NewMachineSetAvailableReason {
		t.Errorf("Progressing %+v, want %s", c, v1alpha1.NewMachineSetAvailableReason)
	}
	var active int
	for _, s := range w.sets() {
		if s.Spec.Replicas > 0 {
			active++
			if !strings.HasPrefix(s.Name, "pool-") || s.Labels[v1alpha1.MachineTemplateHashLabelKey] == "" {
				t.Errorf("new set %s labels %v", s.Name, s.Labels)
			}
		}
	}
	if active != 1 {
		t.Errorf("%d active sets after the rollout", active)
	}
}

// TestSetPatchesAreUnguarded: during a rollout the deployment resizes its
// sets while the sets write their status, and neither write carries a
// resourceVersion (the deployment's spec patches may set annotations
// too): each writer is the only one of the fields it patches,
// and a guard made each fail with a conflict after the other's write.
func TestSetPatchesAreUnguarded(t *testing.T) {
	w := startFakeWorld(t, Options{}, testDeployment(3))
	w.eventually(w.settled(3))
	w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.Template.Spec.Class.Name = "big" })
	w.eventually(w.settled(3))
	seen := map[string]int{}
	for _, a := range w.client.Actions() {
		p, ok := a.(k8stesting.PatchAction)
		if !ok || a.GetResource().Resource != "machinesets" {
			continue
		}
		var body struct{ Spec, Status json.RawMessage }
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			t.Fatal(err)
		}
		if body.Spec == nil && body.Status == nil {
			continue // a finalizer list, replaced whole: that one is guarded
		}
		seen[a.GetSubresource()]++
		if strings.Contains(string(p.GetPatch()), "resourceVersion") {
			t.Errorf("patch of machine set %s (subresource %q) is guarded: %s", p.GetName(), a.GetSubresource(), p.GetPatch())
		}
	}
	if seen[""] == 0 || seen["status"] == 0 {
		t.Errorf("patches of machine sets by subresource %v; want spec and status patches", seen)
	}
}

func TestRecreateReplacesEveryMachine(t *testing.T) {
	d := testDeployment(3)
	d.Spec.Strategy = v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RecreateMachineDeploymentStrategyType}
	w := startFakeWorld(t, Options{}, d)
	w.eventually(w.settled(3))
	w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.Template.Spec.Class.Name = "big" })
	w.eventually(w.settled(3))
	for _, m := range w.machines() {
		if m.Spec.Class.Name != "big" {
			t.Errorf("machine %s still has class %s", m.Name, m.Spec.Class.Name)
		}
	}
}

// TestInPlaceChangesDoNotRoll: a new node template reaches the machines
// through the set, without a new set or machine.
func TestInPlaceChangesDoNotRoll(t *testing.T) {
	w := startFakeWorld(t, Options{}, testDeployment(2))
	w.eventually(w.settled(2))
	before := w.machines()
	w.update(func(d *v1alpha1.MachineDeployment) {
		d.Spec.Template.Spec.NodeTemplateSpec.Labels = map[string]string{"role": "db"}
	})
	w.eventually(func() (bool, string) {
		ms := w.machines()
		for _, m := range ms {
			if m.Spec.NodeTemplateSpec.Labels["role"] != "db" {
				return false, "machine " + m.Name + " has no new node label"
			}
		}
		return len(ms) == 2, fmt.Sprintf("%d machines", len(ms))
	})
	if diff := len(w.sets()); diff != 1 {
		t.Errorf("%d sets after an in-place change, want 1", diff)
	}
	for _, m := range before {
		if !slices.ContainsFunc(w.machines(), func(n v1alpha1.Machine) bool { return n.Name == m.Name }) {
			t.Errorf("machine %s was replaced", m.Name)
		}
	}
}

func TestRollbackByAnnotation(t *testing.T) {
	w := startFakeWorld(t, Options{}, testDeployment(2))
	w.eventually(w.settled(2))
	w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.Template.Spec.Class.Name = "big" })
	w.eventually(w.settled(2))
	w.update(func(d *v1alpha1.MachineDeployment) { d.Annotations = map[string]string{RollbackAnnotation: "1"} })
	w.eventually(func() (bool, string) {
		d := w.deployment()
		return d.Spec.Template.Spec.Class.Name == "small" && d.Annotations[RollbackAnnotation] == "",
			fmt.Sprintf("class %s, annotations %v", d.Spec.Template.Spec.Class.Name, d.Annotations)
	})
	w.eventually(w.settled(2))
	for _, m := range w.machines() {
		if m.Spec.Class.Name != "small" {
			t.Errorf("machine %s has class %s after the rollback", m.Name, m.Spec.Class.Name)
		}
	}
	if n := len(w.sets()); n != 2 {
		t.Errorf("%d sets: the rollback should reuse revision 1's set", n)
	}
	if got := w.deployment().Annotations[v1alpha1.RevisionAnnotation]; got != "3" {
		t.Errorf("revision %q after the rollback, want 3", got)
	}
	if n := w.events.Count(ReasonRollbackDone); n != 1 {
		t.Errorf("%d %s events", n, ReasonRollbackDone)
	}
	// Rolling back to a revision that does not exist says so and changes
	// nothing.
	w.update(func(d *v1alpha1.MachineDeployment) { d.Annotations[RollbackAnnotation] = "9" })
	w.eventually(func() (bool, string) {
		return w.events.Count(ReasonRollbackRevisionNotFound) == 1 && w.deployment().Annotations[RollbackAnnotation] == "", "no RevisionNotFound"
	})
}

func TestPausedDeploymentScalesButDoesNotRoll(t *testing.T) {
	w := startFakeWorld(t, Options{}, testDeployment(2))
	w.eventually(w.settled(2))
	w.update(func(d *v1alpha1.MachineDeployment) {
		d.Spec.Paused = true
		d.Spec.Template.Spec.Class.Name = "big"
	})
	w.eventually(func() (bool, string) {
		c, _ := conditionOf(w.deployment().Status.Conditions, v1alpha1.MachineDeploymentProgressing)
		return c.Reason == v1alpha1.DeploymentPausedReason, "Progressing " + c.Reason
	})
	w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.Replicas = 4 })
	w.eventually(func() (bool, string) {
		ms := w.machines()
		return len(ms) == 4, fmt.Sprintf("%d machines", len(ms))
	})
	for _, m := range w.machines() {
		if m.Spec.Class.Name != "small" {
			t.Fatalf("paused deployment rolled machine %s", m.Name)
		}
	}
	w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.Paused = false })
	w.eventually(w.settled(4))
	for _, m := range w.machines() {
		if m.Spec.Class.Name != "big" {
			t.Errorf("machine %s not rolled after resume", m.Name)
		}
	}
}

func TestFrozenDeploymentOnlyScalesDown(t *testing.T) {
	w := startFakeWorld(t, Options{}, testDeployment(3))
	w.eventually(w.settled(3))
	w.update(func(d *v1alpha1.MachineDeployment) {
		d.Labels = map[string]string{v1alpha1.FreezeLabelKey: v1alpha1.FreezeLabelValue}
		d.Spec.Replicas = 5
	})
	w.eventually(func() (bool, string) {
		return w.events.Count(ReasonFrozen) == 1, "no Frozen event"
	})
	time.Sleep(100 * time.Millisecond)
	if n := len(w.machines()); n != 3 {
		t.Fatalf("frozen deployment grew to %d machines", n)
	}
	w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.Replicas = 1 })
	w.eventually(func() (bool, string) {
		n := len(w.machines())
		return n == 1, fmt.Sprintf("%d machines", n)
	})
}

// TestAutoscalerNamesTheMachinesToGo acts as the cluster-autoscaler's MCM
// provider: it names two machines in trigger-deletion-by-mcm and lowers the
// replicas in one update; exactly those machines go.
func TestAutoscalerNamesTheMachinesToGo(t *testing.T) {
	w := startFakeWorld(t, Options{}, testDeployment(5))
	w.eventually(w.settled(5))
	ms := w.machines()
	slices.SortFunc(ms, func(a, b v1alpha1.Machine) int { return strings.Compare(a.Name, b.Name) })
	// The newest two: the default order would delete the oldest.
	victims := []string{ms[3].Name, ms[4].Name}
	now := time.Now().UTC().Format(time.RFC3339)
	w.update(func(d *v1alpha1.MachineDeployment) {
		d.Annotations = map[string]string{
			v1alpha1.TriggerDeletionByMCMAnnotation:      victims[0] + "~" + now + "," + victims[1] + "~" + now,
			v1alpha1.LastReplicaChangeByScalerAnnotation: now,
		}
		d.Spec.Replicas = 3
	})
	w.eventually(w.settled(3))
	for _, m := range w.machines() {
		if slices.Contains(victims, m.Name) {
			t.Errorf("named machine %s survived", m.Name)
		}
	}
	w.eventually(func() (bool, string) {
		v, ok := w.deployment().Annotations[v1alpha1.TriggerDeletionByMCMAnnotation]
		return !ok, "annotation left: " + v
	})
}

func TestInvalidDeploymentIsReportedOnce(t *testing.T) {
	d := testDeployment(2)
	d.Spec.Selector = &metav1.LabelSelector{}
	w := startFakeWorld(t, Options{}, d)
	w.eventually(func() (bool, string) {
		_, ok := conditionOf(w.deployment().Status.Conditions, v1alpha1.MachineDeploymentReplicaFailure)
		return ok, "no ReplicaFailure condition"
	})
	time.Sleep(200 * time.Millisecond)
	if n := w.events.Count(ReasonInvalid); n != 1 {
		t.Errorf("%d %s events, want 1", n, ReasonInvalid)
	}
	if n := len(w.sets()); n != 0 {
		t.Errorf("invalid deployment created %d sets", n)
	}
}

// TestMetricsUnderMCMNames: the scrape shows MCM's metric names for a
// deployment in the cache.
func TestMetricsUnderMCMNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	startFakeWorld(t, Options{Registerer: reg}, testDeployment(2))
	want := []string{"mcm_machine_deployment_items_total", "mcm_machine_deployment_info", "mcm_machine_deployment_info_spec_replicas",
		"mcm_machine_deployment_info_spec_rolling_update_max_surge", "mcm_machine_deployment_status_available_replicas",
		"mcm_machine_deployment_status_condition", "mcm_machine_deployment_status_replicas"}
	var missing []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, f := range families {
			have[f.GetName()] = true
		}
		missing = slices.DeleteFunc(slices.Clone(want), func(n string) bool { return have[n] })
		if len(missing) == 0 {
			return
		}
	}
	t.Errorf("metrics missing: %v", missing)
}

// TestScaleAndTemplateChangeTogether: a replica change and a template change
// in one update both take effect (MCM #816 lost the scale).
func TestScaleAndTemplateChangeTogether(t *testing.T) {
	w := startFakeWorld(t, Options{}, testDeployment(3))
	w.eventually(w.settled(3))
	w.update(func(d *v1alpha1.MachineDeployment) {
		d.Spec.Replicas = 5
		d.Spec.Template.Spec.Class.Name = "big"
	})
	w.eventually(w.settled(5))
	for _, m := range w.machines() {
		if m.Spec.Class.Name != "big" {
			t.Errorf("machine %s has class %s", m.Name, m.Spec.Class.Name)
		}
	}
}

// TestRevisionHistoryLimit: once a rollout completes, old sets beyond the
// limit go.
func TestRevisionHistoryLimit(t *testing.T) {
	d := testDeployment(2)
	d.Spec.RevisionHistoryLimit = ptrTo(int32(1))
	w := startFakeWorld(t, Options{}, d)
	w.eventually(w.settled(2))
	for _, class := range []string{"b", "c", "d"} {
		w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.Template.Spec.Class.Name = class })
		w.eventually(w.settled(2))
	}
	w.eventually(func() (bool, string) {
		n := len(w.sets())
		return n == 2, fmt.Sprintf("%d sets, want the current one and 1 old", n)
	})
}

// TestRollbackToByField: spec.rollbackTo to the current template changes
// nothing and is cleared with TemplateUnchanged; to revision 0 it goes back
// one revision.
func TestRollbackToByField(t *testing.T) {
	w := startFakeWorld(t, Options{}, testDeployment(2))
	w.eventually(w.settled(2))
	w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.Template.Spec.Class.Name = "big" })
	w.eventually(w.settled(2))
	w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.RollbackTo = &v1alpha1.RollbackConfig{Revision: 2} })
	w.eventually(func() (bool, string) {
		return w.events.Count(ReasonRollbackTemplateUnchanged) == 1 && w.deployment().Spec.RollbackTo == nil, "rollbackTo not handled"
	})
	w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.RollbackTo = &v1alpha1.RollbackConfig{} })
	w.eventually(func() (bool, string) {
		d := w.deployment()
		return d.Spec.RollbackTo == nil && d.Spec.Template.Spec.Class.Name == "small", "class " + d.Spec.Template.Spec.Class.Name
	})
	w.eventually(w.settled(2))
}

// TestNameCollisionRaisesCollisionCount: a set that already holds the new
// set's name with another template (not the deployment's) makes the
// controller raise status.collisionCount and create its set under the next
// name; the stranger is left alone.
func TestNameCollisionRaisesCollisionCount(t *testing.T) {
	d := testDeployment(2)
	stranger := &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "pool-" + templateHash(&d.Spec.Template, nil), Namespace: "ns",
			Labels: map[string]string{"other": "x"}},
		Spec: v1alpha1.MachineSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"other": "x"}},
			Template: v1alpha1.MachineTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"other": "x"}},
				Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "theirs"}}}},
	}
	w := startFakeWorld(t, Options{}, d, stranger)
	w.eventually(w.settled(2))
	got := w.deployment()
	if got.Status.CollisionCount == nil || *got.Status.CollisionCount != 1 {
		t.Errorf("collisionCount %v, want 1", got.Status.CollisionCount)
	}
	want := "pool-" + templateHash(&d.Spec.Template, got.Status.CollisionCount)
	var names []string
	for _, s := range w.sets() {
		names = append(names, s.Name)
		if s.Name == stranger.Name && (metav1.GetControllerOf(&s) != nil || s.Spec.Replicas != 0) {
			t.Errorf("the stranger set was taken over: %+v", s.ObjectMeta)
		}
	}
	if !slices.Contains(names, want) {
		t.Errorf("sets %v, want the new set %s", names, want)
	}
}

// TestInPlaceUpdateWithoutTargetIsScaledNotRolled: without a target
// cluster the controller cannot run an in-place rollout (it needs the
// nodes); it says so on Progressing and still scales.
func TestInPlaceUpdateWithoutTargetIsScaledNotRolled(t *testing.T) {
	d := testDeployment(2)
	w := startFakeWorld(t, Options{}, d)
	w.eventually(w.settled(2))
	one := intstr.FromInt32(1)
	w.update(func(d *v1alpha1.MachineDeployment) {
		d.Spec.Strategy = v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.InPlaceUpdateMachineDeploymentStrategyType,
			InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{MaxUnavailable: &one}}}
		d.Spec.Template.Spec.Class.Name = "big"
	})
	w.eventually(func() (bool, string) {
		c, _ := conditionOf(w.deployment().Status.Conditions, v1alpha1.MachineDeploymentProgressing)
		return c.Reason == ReasonUnsupported && c.Status == v1alpha1.ConditionFalse, fmt.Sprintf("Progressing %+v", c)
	})
	if n := w.events.Count(ReasonUnsupported); n != 1 {
		t.Errorf("%d %s events, want 1", n, ReasonUnsupported)
	}
	w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.Replicas = 3 })
	w.eventually(func() (bool, string) {
		n := len(w.machines())
		return n == 3, fmt.Sprintf("%d machines, want 3", n)
	})
	for _, m := range w.machines() {
		if m.Spec.Class.Name != "small" {
			t.Errorf("machine %s rolled to class %s", m.Name, m.Spec.Class.Name)
		}
	}
}

// TestDeploymentPatchesWriteOnlyOwnedAnnotations: of a deployment's
// annotations, the controller's patches carry only the ones it owns (the
// revision, the autoscaler's trigger and the scaler's time) through a
// rollout and a plain-name scale-down, never another writer's key, not even
// as null; the foreign annotation is still there at the end.
func TestDeploymentPatchesWriteOnlyOwnedAnnotations(t *testing.T) {
	const foreign = "autoscaler.gardener.cloud/scale-down-utilization-threshold"
	d := testDeployment(3)
	d.Annotations = map[string]string{foreign: "0.6"}
	w := startFakeWorld(t, Options{}, d)
	w.eventually(w.settled(3))
	w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.Template.Spec.Class.Name = "big" })
	w.eventually(w.settled(3))
	victim := w.machines()[0].Name
	w.update(func(d *v1alpha1.MachineDeployment) {
		d.Annotations[v1alpha1.TriggerDeletionByMCMAnnotation] = victim
		d.Spec.Replicas = 2
	})
	w.eventually(w.settled(2))

	owned := []string{v1alpha1.RevisionAnnotation, v1alpha1.TriggerDeletionByMCMAnnotation, v1alpha1.LastReplicaChangeByScalerAnnotation}
	written := map[string]bool{}
	for _, a := range w.client.Actions() {
		p, ok := a.(k8stesting.PatchAction)
		if !ok || a.GetResource().Resource != "machinedeployments" || a.GetSubresource() != "" {
			continue
		}
		var body struct {
			Metadata struct {
				Annotations map[string]*string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			t.Fatal(err)
		}
		for k := range body.Metadata.Annotations {
			written[k] = true
			if !slices.Contains(owned, k) {
				t.Errorf("a patch of the deployment writes annotation %s, which is not the controller's: %s", k, p.GetPatch())
			}
		}
	}
	for _, k := range owned {
		if !written[k] {
			t.Errorf("no patch wrote %s; the test did not exercise its writer", k)
		}
	}
	if got := w.deployment().Annotations[foreign]; got != "0.6" {
		t.Errorf("%s = %q at the end, want 0.6", foreign, got)
	}
	if slices.ContainsFunc(w.machines(), func(m v1alpha1.Machine) bool { return m.Name == victim }) {
		t.Errorf("machine %s, named by the autoscaler, is still there", victim)
	}
}

// TestInPlaceUpdateFromZero: an InPlaceUpdate deployment created from zero
// gets a set with spec.replicas and its machines, as MCM's does, and is
// not reported unsupported (acceptance 0 of the in-place rollout).
func TestInPlaceUpdateFromZero(t *testing.T) {
	for _, orchestration := range []v1alpha1.OrchestrationType{v1alpha1.OrchestrationTypeAuto, v1alpha1.OrchestrationTypeManual} {
		t.Run(string(orchestration), func(t *testing.T) {
			d := testDeployment(4)
			d.Spec.Strategy = v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.InPlaceUpdateMachineDeploymentStrategyType,
				InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{OrchestrationType: orchestration,
					UpdateConfiguration: v1alpha1.UpdateConfiguration{MaxSurge: ptrTo(intstr.FromInt32(0)), MaxUnavailable: ptrTo(intstr.FromInt32(1))}}}
			w := startFakeWorld(t, Options{}, d)
			w.eventually(w.settled(4))
			if sets := w.sets(); len(sets) != 1 || sets[0].Spec.Replicas != 4 {
				t.Errorf("sets %v, want one of 4 replicas", worldSets(sets))
			}
			if c, ok := conditionOf(w.deployment().Status.Conditions, v1alpha1.MachineDeploymentProgressing); ok && c.Reason == ReasonUnsupported {
				t.Errorf("Progressing %+v, want no %s", c, ReasonUnsupported)
			}
			if n := w.events.Count(ReasonUnsupported); n != 0 {
				t.Errorf("%d %s events, want none", n, ReasonUnsupported)
			}
		})
	}
}

func worldSets(sets []v1alpha1.MachineSet) []string {
	var out []string
	for _, s := range sets {
		out = append(out, fmt.Sprintf("%s=%d", s.Name, s.Spec.Replicas))
	}
	return out
}
