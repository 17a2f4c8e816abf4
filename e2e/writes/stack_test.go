package writes

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/deployment"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/fakeapi"
	"github.com/mcmkit/mcm/machine"
	"github.com/mcmkit/mcm/machineset"
	"github.com/mcmkit/mcm/workqueue"
)

const (
	ns = "ns"
	// testManager is the field manager of the test's own writes, which
	// are not counted.
	testManager = "writes-test"
)

// stack is the three controllers on a fake API (one core clientset is
// both the control cluster's and the target's, as when they are one
// cluster) and the simulated cloud, with the test as the kubelet. The controllers do
// not Run: settle calls their reconcilers, one key at a time in a fixed
// order, and after every write waits until the caches show it, so that
// each sync sees every write before it and the writes a scenario takes
// are the same on every run. Run's workers, racing their informers, now
// and then sync from a cache that shows one write and not yet the next:
// with Run, the rollout of TestRolloutWrites took 10 to 12 status writes
// of the deployment (10 here), and once in 15 runs a second create of the
// new set (refused: it existed), all its other counts as here.
type stack struct {
	t        *testing.T
	machines *fake.Clientset
	core     *k8sfake.Clientset
	// reconcilers are the controllers' reconcile functions with the keys
	// each reconciles, in the order settle calls them.
	reconcilers []reconciler
	// caches are the informers' stores with how to list what they cache
	// from the fake API.
	caches []cached
	// registered are the nodes the test registered, by name.
	registered map[string]bool

	mu sync.Mutex
	// log is every write either fake API has seen, in order.
	log []k8stesting.Action
}

type reconciler struct {
	keys      func() []string
	reconcile func(context.Context, string) (workqueue.Result, error)
}

type cached struct {
	store cache.Store
	list  func(context.Context) (runtime.Object, error)
}

// classes are the secret and the MachineClasses of names the stack starts
// with. The secret, which the classes use, carries the finalizer the
// machine controller gives it; the classes, which no machine uses yet, do
// not, so their first machine's creation adds theirs.
func classes(userData string, names ...string) (*corev1.Secret, []runtime.Object) {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sim", Namespace: ns, Finalizers: []string{v1alpha1.SecretFinalizer}},
		Data:       map[string][]byte{sim.CredentialsKey: []byte("token"), v1alpha1.UserDataKey: []byte(userData)},
	}
	var objs []runtime.Object
	for _, name := range names {
		objs = append(objs, &v1alpha1.MachineClass{
			ObjectMeta:   metav1.ObjectMeta{Name: name, Namespace: ns},
			Provider:     sim.ProviderName,
			ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: name}.RawExtension(),
			SecretRef:    &corev1.SecretReference{Name: "sim", Namespace: ns},
		})
	}
	return secret, objs
}

// startStack builds the controllers on caches of the fake API and settles
// the world they start with.
func startStack(t *testing.T, secret runtime.Object, control ...runtime.Object) *stack {
	t.Helper()
	s := &stack{t: t, machines: fake.NewSimpleClientset(control...), core: k8sfake.NewSimpleClientset(secret), registered: map[string]bool{}}
	fakeapi.ServeLifecycle(&s.machines.Fake, s.machines.Tracker())
	fakeapi.ServeLifecycle(&s.core.Fake, s.core.Tracker())
	for _, f := range []*k8stesting.Fake{&s.machines.Fake, &s.core.Fake} {
		f.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if isWrite(a) {
				s.mu.Lock()
				s.log = append(s.log, a.DeepCopy())
				s.mu.Unlock()
			}
			return false, nil, nil
		})
	}
	mf := externalversions.NewSharedInformerFactoryWithOptions(s.machines, 0, externalversions.WithNamespace(ns))
	cf := informers.NewSharedInformerFactoryWithOptions(s.core, 0, informers.WithNamespace(ns))
	tf := informers.NewSharedInformerFactory(s.core, 0)
	machines, sets := mf.Machine().V1alpha1().Machines(), mf.Machine().V1alpha1().MachineSets()
	deployments, machineClasses := mf.Machine().V1alpha1().MachineDeployments(), mf.Machine().V1alpha1().MachineClasses()
	secrets, nodes := cf.Core().V1().Secrets(), tf.Core().V1().Nodes()
	cloud, err := sim.New(sim.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	mctrl, err := machine.NewController(s.machines, s.core, s.core, machine.Informers{
		Machines: machines, Classes: machineClasses, Secrets: secrets, Nodes: nodes, Target: tf,
	}, cloud.Driver(), machine.Options{Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	sctrl, err := machineset.NewController(s.machines, machineset.Informers{
		MachineSets: sets, Machines: machines, Classes: machineClasses,
	}, machineset.Options{Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	dctrl, err := deployment.NewController(s.machines, s.core, deployment.Informers{
		Deployments: deployments, MachineSets: sets, Machines: machines, Nodes: nodes,
	}, deployment.Options{Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	keys := func(i cache.SharedIndexInformer) func() []string {
		return func() []string { return slices.Sorted(slices.Values(i.GetStore().ListKeys())) }
	}
	s.reconcilers = []reconciler{
		{keys(deployments.Informer()), dctrl.Reconcile},
		{keys(deployments.Informer()), dctrl.ReconcileNodes},
		{keys(sets.Informer()), sctrl.Reconcile},
		{keys(machineClasses.Informer()), mctrl.ReconcileMachineClass},
		{keys(secrets.Informer()), mctrl.ReconcileSecret},
		{keys(machines.Informer()), mctrl.ReconcileMachine},
		{keys(nodes.Informer()), mctrl.ReconcileNode},
	}
	s.caches = s.cachesOf(mf, cf, tf)
	ctx, cancel := context.WithCancel(context.Background())
	mf.Start(ctx.Done())
	cf.Start(ctx.Done())
	tf.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		mf.Shutdown()
		cf.Shutdown()
		tf.Shutdown()
	})
	mf.WaitForCacheSync(ctx.Done())
	cf.WaitForCacheSync(ctx.Done())
	tf.WaitForCacheSync(ctx.Done())
	s.settle(func(context.Context) (bool, string) { return true, "" })
	return s
}

// cachesOf are the stores of the informers the controllers read, with
// how to list what each caches from the fake API.
func (s *stack) cachesOf(mf externalversions.SharedInformerFactory, cf, tf informers.SharedInformerFactory) []cached {
	mi, mc := mf.Machine().V1alpha1(), s.machines.MachineV1alpha1()
	return []cached{
		{mi.Machines().Informer().GetStore(), func(ctx context.Context) (runtime.Object, error) {
			return mc.Machines(ns).List(ctx, metav1.ListOptions{})
		}},
		{mi.MachineSets().Informer().GetStore(), func(ctx context.Context) (runtime.Object, error) {
			return mc.MachineSets(ns).List(ctx, metav1.ListOptions{})
		}},
		{mi.MachineDeployments().Informer().GetStore(), func(ctx context.Context) (runtime.Object, error) {
			return mc.MachineDeployments(ns).List(ctx, metav1.ListOptions{})
		}},
		{mi.MachineClasses().Informer().GetStore(), func(ctx context.Context) (runtime.Object, error) {
			return mc.MachineClasses(ns).List(ctx, metav1.ListOptions{})
		}},
		{cf.Core().V1().Secrets().Informer().GetStore(), func(ctx context.Context) (runtime.Object, error) {
			return s.core.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		}},
		{tf.Core().V1().Nodes().Informer().GetStore(), func(ctx context.Context) (runtime.Object, error) {
			return s.core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		}},
	}
}

func isWrite(a k8stesting.Action) bool {
	switch a.GetVerb() {
	case "create", "update", "patch", "delete":
		return true
	}
	return false
}

// written is how many writes the fake API has seen.
func (s *stack) written() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.log)
}

// settle reconciles every key of every controller, round after round,
// until a round writes nothing; then, playing the kubelet, registers the
// Node of one machine whose VM the machine controller recorded (provider
// ID and node label), and goes on, until no machine waits for its Node
// and cond holds. A round without writes whose reconcilers asked to wait
// (an error, a requeue) is repeated after a short sleep. It fails the
// test after a minute with cond's last word.
func (s *stack) settle(cond func(context.Context) (bool, string)) {
	s.t.Helper()
	ctx := logr.NewContext(context.Background(), logr.Discard())
	var why string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		before, waiting := s.written(), false
		for _, r := range s.reconcilers {
			for _, key := range r.keys() {
				n := s.written()
				res, err := r.reconcile(ctx, key)
				waiting = waiting || err != nil || res.Requeue || res.RequeueAfter > 0
				if s.written() != n {
					s.caughtUp(ctx)
				}
			}
		}
		if s.written() != before {
			continue
		}
		if s.registerNode(ctx) {
			s.caughtUp(ctx)
			continue
		}
		var ok bool
		if ok, why = cond(ctx); ok {
			return
		}
		if waiting {
			time.Sleep(10 * time.Millisecond)
		}
	}
	s.t.Fatalf("not settled within a minute: %s", why)
}

// caughtUp waits until every cache holds what the fake API holds, at the
// same resourceVersions.
func (s *stack) caughtUp(ctx context.Context) {
	s.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if s.cachesCurrent(ctx) {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatal("the caches did not catch up with the fake API within 10s")
		}
	}
}

func (s *stack) cachesCurrent(ctx context.Context) bool {
	for _, c := range s.caches {
		list, err := c.list(ctx)
		if err != nil {
			s.t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			s.t.Fatal(err)
		}
		if len(items) != len(c.store.ListKeys()) {
			return false
		}
		for _, item := range items {
			stored, _ := meta.Accessor(item)
			key, _ := cache.MetaNamespaceKeyFunc(item)
			obj, exists, _ := c.store.GetByKey(key)
			if !exists {
				return false
			}
			if m, _ := meta.Accessor(obj); m.GetResourceVersion() != stored.GetResourceVersion() {
				return false
			}
		}
	}
	return true
}

// registerNode registers a Ready Node for the first machine, by name,
// whose VM the machine controller recorded and that has none yet, and
// reports whether there was one.
func (s *stack) registerNode(ctx context.Context) bool {
	list, err := s.machines.MachineV1alpha1().Machines(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.Machine) int { return strings.Compare(a.Name, b.Name) })
	for _, m := range list.Items {
		name := m.Labels[v1alpha1.NodeLabelKey]
		if m.Spec.ProviderID == "" || name == "" || s.registered[name] {
			continue
		}
		now := metav1.Now()
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
			Spec:       corev1.NodeSpec{ProviderID: m.Spec.ProviderID},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now,
			}}},
		}
		if _, err := s.core.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{FieldManager: testManager}); err != nil {
			s.t.Fatalf("registering node %s: %v", name, err)
		}
		s.registered[name] = true
		return true
	}
	return false
}

// mark is where the writes a test counts start.
func (s *stack) mark() int { return s.written() }

// writes counts the controllers' writes since from by "<verb>
// <resource>[/<subresource>]", and logs each with its field manager.
func (s *stack) writes(from int) map[string]int {
	s.t.Helper()
	s.mu.Lock()
	log := slices.Clone(s.log[from:])
	s.mu.Unlock()
	counts := map[string]int{}
	for _, a := range log {
		if manager(a) == testManager {
			continue
		}
		key := a.GetVerb() + " " + a.GetResource().Resource
		if sub := a.GetSubresource(); sub != "" {
			key += "/" + sub
		}
		counts[key]++
		s.t.Logf("%-32s %-33s %s %s", key, manager(a), name(a), body(a))
	}
	return counts
}

// name is the name of the object a write is about.
func name(a k8stesting.Action) string {
	switch a := a.(type) {
	case k8stesting.CreateAction:
		if m, err := meta.Accessor(a.GetObject()); err == nil {
			return m.GetName()
		}
	case k8stesting.PatchAction:
		return a.GetName()
	case k8stesting.DeleteAction:
		return a.GetName()
	}
	return ""
}

// manager is the field manager of a write; deletions carry none.
func manager(a k8stesting.Action) string {
	switch a := a.(type) {
	case k8stesting.CreateActionImpl:
		return a.GetCreateOptions().FieldManager
	case k8stesting.UpdateActionImpl:
		return a.GetUpdateOptions().FieldManager
	case k8stesting.PatchActionImpl:
		return a.GetPatchOptions().FieldManager
	}
	return ""
}

// body is a patch's body, for the log.
func body(a k8stesting.Action) string {
	if p, ok := a.(k8stesting.PatchAction); ok {
		return string(p.GetPatch())
	}
	return ""
}

// pin fails the test with a diff when got differs from want.
func pin(t *testing.T, what string, want, got map[string]int) {
	t.Helper()
	total := 0
	for _, k := range slices.Sorted(maps.Keys(got)) {
		total += got[k]
	}
	t.Logf("%s: %d writes: %s", what, total, strings.Join(formatCounts(got), ", "))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: writes by verb and resource (-pinned +measured):\n%s", what, diff)
	}
}

func formatCounts(m map[string]int) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return out
}
