package machine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/patch"
)

// syncWorld is a controller on fake control and target clusters with a sim
// cloud and a fake clock. While observing is set, every API write and
// every driver call that changes the cloud fails and is recorded as a
// violation; otherwise the cloud's changes are recorded as calls.
type syncWorld struct {
	c                  *Controller
	mc                 *fake.Clientset
	core, target       *k8sfake.Clientset
	cloud              *sim.Cloud
	gate               *recordingGate
	observing          atomic.Bool
	mu                 sync.Mutex
	violations, calls  []string
	afterCreateMachine func(t *testing.T, resp *driver.CreateMachineResponse)
	// registered is the node registerNode registered, as cached.
	registered *corev1.Node
}

func (w *syncWorld) record(list *[]string, s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	*list = append(*list, s)
}

// guardedDriver is the sim's driver, guarded by the world.
type guardedDriver struct {
	driver.Driver
	w *syncWorld
	t *testing.T
}

func (d guardedDriver) mutate(op driver.Operation) error {
	if d.w.observing.Load() {
		d.w.record(&d.w.violations, "driver "+string(op))
		return driver.NewError(driver.Internal, "called while observing")
	}
	d.w.record(&d.w.calls, string(op))
	return nil
}

func (d guardedDriver) CreateMachine(ctx context.Context, r *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	if err := d.mutate(driver.OperationCreateMachine); err != nil {
		return nil, err
	}
	resp, err := d.Driver.CreateMachine(ctx, r)
	if err == nil && d.w.afterCreateMachine != nil {
		d.w.afterCreateMachine(d.t, resp)
	}
	return resp, err
}

func (d guardedDriver) InitializeMachine(ctx context.Context, r *driver.InitializeMachineRequest) (*driver.InitializeMachineResponse, error) {
	if err := d.mutate(driver.OperationInitializeMachine); err != nil {
		return nil, err
	}
	return d.Driver.InitializeMachine(ctx, r)
}

func (d guardedDriver) DeleteMachine(ctx context.Context, r *driver.DeleteMachineRequest) (*driver.DeleteMachineResponse, error) {
	if err := d.mutate(driver.OperationDeleteMachine); err != nil {
		return nil, err
	}
	return d.Driver.DeleteMachine(ctx, r)
}

// recordingGate answers MayReplace with deny ("" agrees) and records the
// questions and the outcomes it is told.
type recordingGate struct {
	deny     string
	asked    int
	replaced []bool
}

func (g *recordingGate) MayReplace(context.Context, *v1alpha1.Machine) (bool, string) {
	g.asked++
	return g.deny == "", g.deny
}

func (g *recordingGate) Replaced(_ context.Context, _ *v1alpha1.Machine, marked bool) {
	g.replaced = append(g.replaced, marked)
}

// newSyncWorld builds the world; setup adds VMs to the cloud and returns
// the machines and nodes the clusters start with.
func newSyncWorld(t *testing.T, deny string, setup func(*sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node)) *syncWorld {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	cloud, err := sim.New(sim.Options{Seed: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	machines, nodes := setup(cloud)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"},
		Data: map[string][]byte{v1alpha1.UserDataKey: []byte("x"), sim.CredentialsKey: []byte("t")}}
	control := []runtime.Object{&v1alpha1.MachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Finalizers: []string{v1alpha1.MachineFinalizer}},
		Provider:   sim.ProviderName, ProviderSpec: sim.ProviderSpec{Zone: "z", InstanceType: "m"}.RawExtension(),
		SecretRef: &corev1.SecretReference{Name: "s"}}}
	for _, m := range machines {
		control = append(control, m)
	}
	var targetObjs []runtime.Object
	for _, n := range nodes {
		targetObjs = append(targetObjs, n)
	}
	w := &syncWorld{mc: fake.NewSimpleClientset(control...), core: k8sfake.NewSimpleClientset(secret),
		target: k8sfake.NewSimpleClientset(targetObjs...), cloud: cloud, gate: &recordingGate{deny: deny}}
	for _, cs := range []*k8stesting.Fake{&w.mc.Fake, &w.core.Fake, &w.target.Fake} {
		cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			switch a.GetVerb() {
			case "get", "list", "watch":
				return false, nil, nil
			}
			if w.observing.Load() {
				w.record(&w.violations, fmt.Sprintf("%s %s/%s", a.GetVerb(), a.GetResource().Resource, a.GetSubresource()))
				return true, nil, errors.New("written while observing")
			}
			return false, nil, nil
		})
	}
	mf := externalversions.NewSharedInformerFactoryWithOptions(w.mc, 0, externalversions.WithNamespace("ns"))
	kf := informers.NewSharedInformerFactoryWithOptions(w.core, 0, informers.WithNamespace("ns"))
	tf := informers.NewSharedInformerFactory(w.target, 0)
	w.c, err = NewController(w.mc, w.core, w.target, Informers{
		Machines: mf.Machine().V1alpha1().Machines(),
		Classes:  mf.Machine().V1alpha1().MachineClasses(),
		Secrets:  kf.Core().V1().Secrets(),
		Nodes:    tf.Core().V1().Nodes(),
	}, guardedDriver{Driver: cloud.Driver(), w: w, t: t}, Options{Clock: clk, ReplacementGate: w.gate,
		Drainer: &scriptedDrainer{res: drain.Result{Plan: drain.Plan{Done: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); mf.Shutdown(); kf.Shutdown(); tf.Shutdown() })
	mf.Start(ctx.Done())
	kf.Start(ctx.Done())
	tf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), w.c.synced()...) {
		t.Fatal("caches did not sync")
	}
	return w
}

// write is one API write, as recorded or as a plan implies it; patch
// bodies without their resourceVersion guard, which only the API server's
// answers tell.
type write struct {
	Cluster, Verb, Resource, Subresource, Name, Type, Body string
}

func normalized(t *testing.T, data []byte) string {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		t.Fatalf("patch %s: %v", data, err)
	}
	if meta, ok := body["metadata"].(map[string]any); ok {
		delete(meta, "resourceVersion")
		if len(meta) == 0 {
			delete(body, "metadata")
		}
	}
	out, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// writes returns the writes the clusters saw since their actions were
// last cleared.
func (w *syncWorld) writes(t *testing.T) []write {
	t.Helper()
	var out []write
	for _, cs := range []struct {
		name string
		fake *k8stesting.Fake
	}{{"control", &w.mc.Fake}, {"control", &w.core.Fake}, {"target", &w.target.Fake}} {
		for _, a := range cs.fake.Actions() {
			switch a.GetVerb() {
			case "get", "list", "watch":
				continue
			}
			wr := write{Cluster: cs.name, Verb: a.GetVerb(), Resource: a.GetResource().Resource, Subresource: a.GetSubresource()}
			switch a := a.(type) {
			case k8stesting.PatchAction:
				wr.Name, wr.Type, wr.Body = a.GetName(), string(a.GetPatchType()), normalized(t, a.GetPatch())
			case k8stesting.DeleteAction:
				wr.Name = a.GetName()
			}
			out = append(out, wr)
		}
	}
	return out
}

func (w *syncWorld) clearActions() {
	w.mc.ClearActions()
	w.core.ClearActions()
	w.target.ClearActions()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = nil
}

// machineWrites are the writes from cur to desired, as writeMachine makes
// them: the metadata, then the status, each only if it changed.
func machineWrites(t *testing.T, cur, desired *v1alpha1.Machine) []write {
	t.Helper()
	var out []write
	meta, err := patch.Diff(machineMetaFields, cur, desired, cur.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	if meta != nil {
		out = append(out, write{"control", "patch", "machines", "", cur.Name, "application/merge-patch+json", normalized(t, meta)})
	}
	status, err := machineStatusPatch(cur, desired)
	if err != nil {
		t.Fatal(err)
	}
	if status != nil {
		out = append(out, write{"control", "patch", "machines", "status", cur.Name, "application/merge-patch+json", normalized(t, status)})
	}
	return out
}

// nodeWrites are the writes from cur to desired, as patchNode makes them.
func nodeWrites(t *testing.T, cur, desired *corev1.Node) []write {
	t.Helper()
	if desired == nil {
		return nil
	}
	var out []write
	status, err := patch.Diff(nodeStatusFields, cur, desired, cur.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	if status != nil {
		out = append(out, write{"target", "patch", "nodes", "status", cur.Name, "application/merge-patch+json", normalized(t, status)})
	}
	meta, strategic, err := nodeMetaPatch(cur, desired, cur.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	if meta != nil {
		typ := "application/merge-patch+json"
		if strategic {
			typ = "application/strategic-merge-patch+json"
		}
		out = append(out, write{"target", "patch", "nodes", "", cur.Name, typ, normalized(t, meta)})
	}
	return out
}

// The machines and nodes of the table below.
func syncMachineObj(mutate func(*v1alpha1.Machine)) *v1alpha1.Machine {
	m := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "ns", UID: "uid-m1", CreationTimestamp: metav1.NewTime(t0.Add(-time.Minute))},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "c"}},
	}
	if mutate != nil {
		mutate(m)
	}
	return m
}

// withVM makes m a machine whose VM vm exists, in phase phase.
func withVM(m *v1alpha1.Machine, vm sim.VM, phase v1alpha1.MachinePhase) {
	m.Finalizers = []string{v1alpha1.MachineFinalizer}
	m.Annotations = map[string]string{v1alpha1.MachinePriorityAnnotation: "3", CreationStartedAnnotation: formatTime(t0.Add(-time.Minute))}
	m.Labels = map[string]string{v1alpha1.NodeLabelKey: vm.NodeName}
	m.Spec.ProviderID = vm.ProviderID
	m.Status.CurrentStatus.Phase = phase
}

func syncNode(vm sim.VM, bound bool, ready corev1.ConditionStatus) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: vm.NodeName, ResourceVersion: "1"},
		Spec:       corev1.NodeSpec{ProviderID: vm.ProviderID},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{cond(corev1.NodeReady, ready)}},
	}
	if bound {
		n.Annotations = map[string]string{v1alpha1.MachineUIDAnnotation: "uid-m1"}
	}
	return n
}

func addVM(t *testing.T, cloud *sim.Cloud) sim.VM {
	t.Helper()
	vm, err := cloud.AddVM(sim.VMSpec{MachineName: "m1", Zone: "z", InstanceType: "m"})
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// TestSyncObservesWithoutWritingAndWritesItsPlan: for each kind of sync of
// a machine, observe makes no API write and no driver call that changes
// the cloud (the fakes fail and record any), and the sync's writes are
// exactly those of its plan: the write-ahead and the machine, node and
// status writes of the plan it applied, which for a creation is the one
// planCreation made of the driver's answer.
func TestSyncObservesWithoutWritingAndWritesItsPlan(t *testing.T) {
	unhealthy := func(m *v1alpha1.Machine) {
		m.Annotations[UnhealthySinceAnnotation] = formatTime(t0.Add(-11 * time.Minute))
	}
	tests := []struct {
		name  string
		deny  string
		setup func(*testing.T, *sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node)
		// afterCreate registers the node of a VM just created.
		afterCreate bool
		wantKind    planKind
		wantAhead   bool
		wantWrites  []string // cluster verb resource/subresource
		wantCalls   []string // driver calls that change the cloud
		wantPhase   v1alpha1.MachinePhase
		wantGate    string // asked/replaced
	}{
		{name: "new machine: the write-ahead, then the VM; the status waits for the node",
			setup: func(*testing.T, *sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node) {
				return []*v1alpha1.Machine{syncMachineObj(nil)}, nil
			},
			wantKind: planCreate, wantAhead: true,
			wantWrites: []string{"control patch machines/", "control patch machines/"},
			wantCalls:  []string{"CreateMachine", "InitializeMachine"}, wantPhase: ""},
		{name: "new machine of a MachineSet: no write-ahead",
			setup: func(*testing.T, *sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node) {
				m := machinestate.NewMachine(&v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "set", Namespace: "ns", UID: "uid-set"},
					Spec: v1alpha1.MachineSetSpec{Template: v1alpha1.MachineTemplateSpec{Spec: syncMachineObj(nil).Spec}}})
				m.Name, m.UID, m.CreationTimestamp = "m1", "uid-m1", metav1.NewTime(t0.Add(-time.Minute))
				return []*v1alpha1.Machine{m}, nil
			},
			wantKind:   planCreate,
			wantWrites: []string{"control patch machines/"},
			wantCalls:  []string{"CreateMachine", "InitializeMachine"}, wantPhase: ""},
		{name: "new machine whose node is Ready at once: Running in the same sync",
			setup: func(*testing.T, *sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node) {
				return []*v1alpha1.Machine{syncMachineObj(nil)}, nil
			},
			afterCreate: true, wantKind: planCreate, wantAhead: true,
			wantWrites: []string{"control patch machines/", "control patch machines/", "control patch machines/status", "target patch nodes/"},
			wantCalls:  []string{"CreateMachine", "InitializeMachine"}, wantPhase: v1alpha1.MachineRunning},
		{name: "creation after a failed one: Pending at once",
			setup: func(*testing.T, *sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node) {
				return []*v1alpha1.Machine{syncMachineObj(func(m *v1alpha1.Machine) {
					m.Finalizers = []string{v1alpha1.MachineFinalizer}
					m.Annotations = map[string]string{CreationStartedAnnotation: formatTime(t0.Add(-time.Minute))}
					m.Status.CurrentStatus.Phase = v1alpha1.MachineCrashLoopBackOff
					m.Status.LastOperation = v1alpha1.LastOperation{Description: "quota", State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationCreate}
				})}, nil
			},
			wantKind:   planCreate,
			wantWrites: []string{"control patch machines/", "control patch machines/status"},
			wantCalls:  []string{"CreateMachine", "InitializeMachine"}, wantPhase: v1alpha1.MachinePending},
		{name: "machine whose VM exists: adopted by its name, not created again",
			setup: func(t *testing.T, cloud *sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node) {
				addVM(t, cloud)
				return []*v1alpha1.Machine{syncMachineObj(nil)}, nil
			},
			wantKind: planCreate, wantAhead: true,
			wantWrites: []string{"control patch machines/", "control patch machines/"},
			wantPhase:  ""},
		{name: "running machine: nothing to write",
			setup: func(t *testing.T, cloud *sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node) {
				vm := addVM(t, cloud)
				m := syncMachineObj(func(m *v1alpha1.Machine) { withVM(m, vm, v1alpha1.MachineRunning) })
				n := syncNode(vm, true, corev1.ConditionTrue)
				m.Status.Conditions = n.Status.Conditions
				return []*v1alpha1.Machine{m}, []*corev1.Node{planNodeSync(n, m, nil)}
			},
			wantKind: planUpdate, wantPhase: v1alpha1.MachineRunning},
		{name: "node joins later: the driver is asked who the VM is, then Running",
			setup: func(t *testing.T, cloud *sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node) {
				vm := addVM(t, cloud)
				return []*v1alpha1.Machine{syncMachineObj(func(m *v1alpha1.Machine) { withVM(m, vm, v1alpha1.MachinePending) })},
					[]*corev1.Node{syncNode(vm, false, corev1.ConditionTrue)}
			},
			wantKind:   planUpdate,
			wantWrites: []string{"control patch machines/status", "target patch nodes/"},
			wantPhase:  v1alpha1.MachineRunning},
		{name: "health timeout: Failed, the gate agreeing",
			setup: func(t *testing.T, cloud *sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node) {
				vm := addVM(t, cloud)
				m := syncMachineObj(func(m *v1alpha1.Machine) { withVM(m, vm, v1alpha1.MachineUnknown); unhealthy(m) })
				n := syncNode(vm, true, corev1.ConditionFalse)
				m.Status.Conditions = n.Status.Conditions
				return []*v1alpha1.Machine{m}, []*corev1.Node{planNodeSync(n, m, nil)}
			},
			wantKind:   planUpdate,
			wantWrites: []string{"control patch machines/status"},
			wantPhase:  v1alpha1.MachineFailed, wantGate: "asked 1, replaced [true]"},
		{name: "health timeout known once the driver vouched: the gate is asked all the same",
			setup: func(t *testing.T, cloud *sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node) {
				vm := addVM(t, cloud)
				m := syncMachineObj(func(m *v1alpha1.Machine) { withVM(m, vm, v1alpha1.MachineUnknown); unhealthy(m) })
				n := syncNode(vm, false, corev1.ConditionFalse)
				m.Status.Conditions = n.Status.Conditions
				return []*v1alpha1.Machine{m}, []*corev1.Node{n}
			},
			wantKind:   planUpdate,
			wantWrites: []string{"control patch machines/status", "target patch nodes/"},
			wantPhase:  v1alpha1.MachineFailed, wantGate: "asked 1, replaced [true]"},
		{name: "health timeout: the gate says wait",
			deny: "1 of at most 1 machines are being replaced",
			setup: func(t *testing.T, cloud *sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node) {
				vm := addVM(t, cloud)
				m := syncMachineObj(func(m *v1alpha1.Machine) { withVM(m, vm, v1alpha1.MachineUnknown); unhealthy(m) })
				n := syncNode(vm, true, corev1.ConditionFalse)
				m.Status.Conditions = n.Status.Conditions
				return []*v1alpha1.Machine{m}, []*corev1.Node{planNodeSync(n, m, nil)}
			},
			wantKind:   planUpdate,
			wantWrites: []string{"control patch machines/status"},
			wantPhase:  v1alpha1.MachineUnknown, wantGate: "asked 1, replaced []"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newSyncWorld(t, tc.deny, func(cloud *sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node) { return tc.setup(t, cloud) })
			if tc.afterCreate {
				w.afterCreateMachine = w.registerNode
			}
			ctx := context.Background()
			cached, err := w.c.machines.Machines("ns").Get("m1")
			if err != nil {
				t.Fatal(err)
			}

			w.observing.Store(true)
			obs, secret, err := w.c.observe(ctx, cached)
			w.observing.Store(false)
			if err != nil {
				t.Fatalf("observe: %v", err)
			}
			if len(w.violations) > 0 {
				t.Fatalf("observe wrote: %v", w.violations)
			}
			p := planMachine(obs, &w.c.opts)
			if p.Kind != tc.wantKind || (p.WriteAhead != nil) != tc.wantAhead {
				t.Fatalf("plan %s with write-ahead %v, want %s with %v", p.Kind, p.WriteAhead != nil, tc.wantKind, tc.wantAhead)
			}

			w.clearActions()
			done, err := w.c.apply(ctx, obs, secret, p)
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			got := w.writes(t)

			// The writes the plan implies.
			var want []write
			cur := cached
			if p.WriteAhead != nil {
				want = append(want, machineWrites(t, cur, p.WriteAhead)...)
				cur = p.WriteAhead
			}
			if p.Kind != planCreate {
				if diff := cmp.Diff(p, done.Plan, cmp.Comparer(func(a, b error) bool { return errors.Is(a, b) })); diff != "" {
					t.Errorf("apply wrote another plan than the sync's (-planned +applied):\n%s", diff)
				}
			}
			// The node as observed: before the sync, or for a creation
			// right after the driver's call.
			base := obs.Node
			if p.Kind == planCreate {
				base = w.registered
			}
			// The writes are listed cluster by cluster (the fakes do not
			// tell their order across clusters).
			want = append(want, machineWrites(t, cur, done.Plan.Machine)...)
			switch {
			case done.Plan.Node != nil && base.Annotations[v1alpha1.MachineUIDAnnotation] != string(cur.UID):
				// The binding goes first, guarded by the node's
				// resourceVersion, with the node's other changes.
				data, err := patch.Diff(nodeFields, base, done.Plan.Node, "")
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, write{"target", "patch", "nodes", "", base.Name, "application/merge-patch+json", string(data)})
			case done.Plan.Node != nil:
				want = append(want, nodeWrites(t, base, done.Plan.Node)...)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("writes (-planned +made):\n%s", diff)
			}

			var kinds []string
			for _, wr := range got {
				kinds = append(kinds, fmt.Sprintf("%s %s %s/%s", wr.Cluster, wr.Verb, wr.Resource, wr.Subresource))
			}
			if diff := cmp.Diff(tc.wantWrites, kinds); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCalls, w.calls); diff != "" {
				t.Errorf("driver calls (-want +got):\n%s", diff)
			}
			if phase := done.Machine.Status.CurrentStatus.Phase; phase != tc.wantPhase {
				t.Errorf("phase %q, want %q", phase, tc.wantPhase)
			}
			if tc.wantGate != "" {
				if got := fmt.Sprintf("asked %d, replaced %v", w.gate.asked, w.gate.replaced); got != tc.wantGate {
					t.Errorf("gate: %s, want %s", got, tc.wantGate)
				}
			} else if w.gate.asked != 0 {
				t.Errorf("the replacement gate was asked %d times", w.gate.asked)
			}
		})
	}
}

// registerNode registers a Ready node for the VM the driver just created,
// as a driver that waits for the node to register does, and waits until
// the controller's cache shows it.
func (w *syncWorld) registerNode(t *testing.T, resp *driver.CreateMachineResponse) {
	vm := sim.VM{ProviderID: resp.ProviderID, NodeName: resp.NodeName}
	if err := w.target.Tracker().Add(syncNode(vm, false, corev1.ConditionTrue)); err != nil {
		t.Error(err)
		return
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if n, err := w.c.nodes.Get(resp.NodeName); err == nil {
			w.registered = n
			return
		}
	}
	t.Error("the node never reached the cache")
}

// TestDeletionStartObservesWithoutWriting: the first sync of a deletion
// observes without writing, and writes what its plans say: the node's
// Terminating condition (terminationCondition) and the step it waits in
// (planDeletionWrite).
func TestDeletionStartObservesWithoutWriting(t *testing.T) {
	var vm sim.VM
	w := newSyncWorld(t, "", func(cloud *sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node) {
		vm = addVM(t, cloud)
		m := syncMachineObj(func(m *v1alpha1.Machine) { withVM(m, vm, v1alpha1.MachineRunning) })
		m.DeletionTimestamp = &metav1.Time{Time: t0.Add(-time.Second)}
		m.Annotations[PreDrainHookPrefix+"/backup"] = ""
		n := syncNode(vm, true, corev1.ConditionTrue)
		return []*v1alpha1.Machine{m}, []*corev1.Node{planNodeSync(n, m, nil)}
	})
	ctx := context.Background()
	cached, err := w.c.machines.Machines("ns").Get("m1")
	if err != nil {
		t.Fatal(err)
	}
	node, _ := w.c.cachedNode(vm.NodeName)
	w.observing.Store(true)
	in, _ := w.c.observeDeletion(cached, deletionClaim{NodeName: vm.NodeName, Binding: bindingOf(cached, node, vouch{}, false, nil)})
	w.observing.Store(false)
	if len(w.violations) > 0 {
		t.Fatalf("observe wrote: %v", w.violations)
	}
	d := decideDeletion(in)
	if d.Action != delWait {
		t.Fatalf("decision %+v, want to wait for the hook", d)
	}

	w.clearActions()
	if _, err := w.c.syncDeletion(ctx, cached); err != nil {
		t.Fatal(err)
	}
	cond := terminationCondition(cached, node, in.Now)
	data, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{*cond}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []write{{"target", "patch", "nodes", "status", vm.NodeName, "application/strategic-merge-patch+json", normalized(t, data)}}
	want = append(want, machineWrites(t, cached, planDeletionWrite(cached, in.Now, d, stepOutcome{RequeueAfter: d.RequeueAfter}))...)
	// The machine's writes come first in the recorded list (control
	// before target); the order across clusters is not what this checks.
	want = append(want[1:], want[0])
	if diff := cmp.Diff(want, w.writes(t)); diff != "" {
		t.Errorf("writes (-planned +made):\n%s", diff)
	}
	if len(w.calls) > 0 {
		t.Errorf("driver calls %v while waiting for a hook", w.calls)
	}
}
