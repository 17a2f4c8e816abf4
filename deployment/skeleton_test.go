package deployment

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/internal/ownership"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/safety"
)

// apiWrite is one write to an API server, as a fake clientset records it.
// Body is the patch of a machine set, the one the step or an adoption
// computes from the cached set; other writes are named only.
type apiWrite struct {
	Verb, Resource, Subresource, Name string
	Body                              string
}

func (w apiWrite) String() string {
	s := w.Verb + " " + w.Resource + "/" + w.Name
	if w.Subresource != "" {
		s += "/" + w.Subresource
	}
	return s
}

var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// skeletonWorld is a deployment controller on fake clientsets (the control
// cluster's, and the target cluster's for nodes) whose caches have synced
// and whose workers do not run: a test drives one sync at a time. Any
// write while observing is refused and fails the test.
type skeletonWorld struct {
	t         *testing.T
	client    *fake.Clientset
	core      *k8sfake.Clientset
	ctrl      *Controller
	observing atomic.Bool
}

func newSkeletonWorld(t *testing.T, opts Options, objs, nodes []runtime.Object) *skeletonWorld {
	t.Helper()
	w := &skeletonWorld{t: t, client: fake.NewSimpleClientset(objs...), core: k8sfake.NewSimpleClientset(nodes...)}
	refuse := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if !w.observing.Load() || !slices.Contains(writeVerbs, a.GetVerb()) {
			return false, nil, nil
		}
		t.Errorf("observe wrote: %s", recordedWrite(a))
		return true, nil, fmt.Errorf("%s while observing", a.GetVerb())
	}
	w.client.PrependReactor("*", "*", refuse)
	w.core.PrependReactor("*", "*", refuse)
	mf, cf := externalversions.NewSharedInformerFactory(w.client, 0), informers.NewSharedInformerFactory(w.core, 0)
	opts.Clock = clocktesting.NewFakeClock(epoch.Add(time.Hour))
	ctrl, err := NewController(w.client, w.core, Informers{
		Deployments: mf.Machine().V1alpha1().MachineDeployments(), MachineSets: mf.Machine().V1alpha1().MachineSets(),
		Machines: mf.Machine().V1alpha1().Machines(), Nodes: cf.Core().V1().Nodes(),
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); mf.Shutdown(); cf.Shutdown() })
	mf.Start(ctx.Done())
	cf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), ctrl.handlers.Synced()...) {
		t.Fatal("caches did not sync")
	}
	w.ctrl = ctrl
	return w
}

// recordedWrite is a recorded action as an apiWrite.
func recordedWrite(a k8stesting.Action) apiWrite {
	w := apiWrite{Verb: a.GetVerb(), Resource: a.GetResource().Resource, Subresource: a.GetSubresource()}
	switch a := a.(type) {
	case k8stesting.CreateAction:
		if m, err := metaOf(a.GetObject()); err == nil {
			w.Name = m.GetName()
		}
	case k8stesting.PatchAction:
		w.Name = a.GetName()
		if w.Resource == "machinesets" {
			w.Body = string(a.GetPatch())
		}
	case k8stesting.DeleteAction:
		w.Name = a.GetName()
	case k8stesting.UpdateAction:
		if m, err := metaOf(a.GetObject()); err == nil {
			w.Name = m.GetName()
		}
	}
	return w
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", obj)
	}
	return m, nil
}

// writes are the writes both clientsets recorded since the last call, node
// patches sorted by name (they go out in parallel).
func (w *skeletonWorld) writes() []apiWrite {
	var out, nodes []apiWrite
	for _, a := range w.client.Actions() {
		if slices.Contains(writeVerbs, a.GetVerb()) {
			out = append(out, recordedWrite(a))
		}
	}
	for _, a := range w.core.Actions() {
		if slices.Contains(writeVerbs, a.GetVerb()) {
			nodes = append(nodes, recordedWrite(a))
		}
	}
	w.client.ClearActions()
	w.core.ClearActions()
	slices.SortFunc(nodes, func(a, b apiWrite) int { return strings.Compare(a.Name, b.Name) })
	return append(out, nodes...)
}

// plannedWrites are the writes of p, in the order apply makes them, as
// the fake clientsets record them.
func plannedWrites(t *testing.T, d *v1alpha1.MachineDeployment, p syncPlan) []apiWrite {
	t.Helper()
	deployment := apiWrite{Verb: "patch", Resource: "machinedeployments", Name: d.Name}
	setPatch := func(s *v1alpha1.MachineSet, refs []metav1.OwnerReference) apiWrite {
		data, err := patch.Diff(ownership.Fields, s.OwnerReferences, refs, s.ResourceVersion)
		if err != nil {
			t.Fatal(err)
		}
		return apiWrite{Verb: "patch", Resource: "machinesets", Name: s.Name, Body: string(data)}
	}
	var out []apiWrite
	if p.addFinalizer {
		out = append(out, deployment)
	}
	for _, s := range p.adopt {
		out = append(out, setPatch(s, ownership.With(s.OwnerReferences, controllerRef(d))))
	}
	for _, s := range p.release {
		out = append(out, setPatch(s, ownership.Without(s.OwnerReferences, d)))
	}
	for _, mk := range p.marks {
		out = append(out, apiWrite{Verb: "patch", Resource: "machines", Name: mk.Machine.Name})
	}
	if p.annotations != nil {
		out = append(out, deployment)
	}
	deleteSets := func(sets []*v1alpha1.MachineSet) {
		for _, s := range sets {
			out = append(out, apiWrite{Verb: "delete", Resource: "machinesets", Name: s.Name})
		}
	}
	switch p.phase {
	case phaseDelete:
		if p.removeFinalizer {
			out = append(out, deployment)
		}
		deleteSets(p.deleteSets)
	case phaseRollback:
		out = append(out, deployment)
	case phaseStep:
		if p.create != nil {
			out = append(out, apiWrite{Verb: "create", Resource: "machinesets", Name: p.create.Name})
		}
		for _, sp := range p.setPatches {
			out = append(out, apiWrite{Verb: "patch", Resource: "machinesets", Name: sp.Set.Name, Body: string(sp.Data)})
		}
		if p.revision != "" {
			out = append(out, deployment)
		}
		deleteSets(p.cleanup)
	}
	return out
}

// skeletonSet is a set of d, labelled for its selector, with the
// deployment's bookkeeping annotations for replicas machines; opts may
// change it.
func skeletonSet(d *v1alpha1.MachineDeployment, name, revision string, replicas int32, opts ...msOpt) *v1alpha1.MachineSet {
	s := newSet(name, replicas, 0, withRevision(revision), withDesired(int(d.Spec.Replicas)), withMax(int(d.Spec.Replicas)+1))
	s.Labels = map[string]string{"pool": "workers"}
	s.OwnerReferences = []metav1.OwnerReference{controllerRef(d)}
	s.ResourceVersion = "3"
	for _, o := range opts {
		o(s)
	}
	return s
}

func orphaned() msOpt { return func(s *v1alpha1.MachineSet) { s.OwnerReferences = nil } }

func relabelled() msOpt {
	return func(s *v1alpha1.MachineSet) { s.Labels = map[string]string{"pool": "elsewhere"} }
}

// skeletonMachines are n Running machines of s, named <set>-<i>; with
// nodes, each on a node of its name bound to it.
func skeletonMachines(s *v1alpha1.MachineSet, n int, nodes *[]runtime.Object) []runtime.Object {
	var out []runtime.Object
	for _, m := range machines(s.Name, n) {
		m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(s, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))}
		m.Labels = map[string]string{"pool": "workers"}
		m.ResourceVersion = "5"
		if nodes != nil {
			m.Labels[v1alpha1.NodeLabelKey] = "node-" + m.Name
			m.Spec.ProviderID = nmVM("node-" + m.Name)
			*nodes = append(*nodes, nmNode("node-"+m.Name, nmBound(m)))
		}
		out = append(out, m)
	}
	return out
}

// TestSyncWritesItsPlan is the reconcile skeleton's contract: observe only
// reads (a write while observing is refused and fails the test; the
// uncached read that confirms the deployment before an adoption is a
// read), and a sync of the deployment and of its nodes' marks writes
// exactly what its plan says, in the plan's order, and then the status
// when it changed.
func TestSyncWritesItsPlan(t *testing.T) {
	deployment := func(replicas int32, opts ...mdOpt) *v1alpha1.MachineDeployment {
		d := newDeployment(replicas, opts...)
		d.Finalizers = append(d.Finalizers, Finalizer)
		d.ResourceVersion = "2"
		withDeploymentAnnotation(v1alpha1.RevisionAnnotation, "1")(d)
		return d
	}
	gone := metav1.NewTime(epoch)
	patchDeployment := apiWrite{Verb: "patch", Resource: "machinedeployments", Name: "md"}
	patchStatus := apiWrite{Verb: "patch", Resource: "machinedeployments", Subresource: "status", Name: "md"}
	patchSet := func(name string) apiWrite { return apiWrite{Verb: "patch", Resource: "machinesets", Name: name} }
	deleteSet := func(name string) apiWrite { return apiWrite{Verb: "delete", Resource: "machinesets", Name: name} }
	patchNode := func(name string) apiWrite { return apiWrite{Verb: "patch", Resource: "nodes", Name: name} }

	tests := []struct {
		name string
		// world returns the control cluster's objects and the nodes.
		world func() (d *v1alpha1.MachineDeployment, objs, nodes []runtime.Object)
		opts  Options
		// want are the writes, bodies aside.
		want []apiWrite
	}{
		{
			name: "adopt and release sets",
			world: func() (*v1alpha1.MachineDeployment, []runtime.Object, []runtime.Object) {
				d := deployment(2)
				current := skeletonSet(d, "md-current", "1", 2)
				orphan := skeletonSet(d, "md-orphan", "", 0, orphaned(), withClass("class-old"))
				other := skeletonSet(d, "md-other", "", 0, relabelled())
				return d, append([]runtime.Object{d, current, orphan, other}, skeletonMachines(current, 2, nil)...), nil
			},
			want: []apiWrite{patchSet("md-orphan"), patchSet("md-other"), patchStatus},
		},
		{
			name: "a new template creates the new set",
			world: func() (*v1alpha1.MachineDeployment, []runtime.Object, []runtime.Object) {
				d := deployment(3)
				old := skeletonSet(d, "md-old", "1", 3, withClass("class-old"))
				return d, append([]runtime.Object{d, old}, skeletonMachines(old, 3, nil)...), nil
			},
			want: []apiWrite{
				{Verb: "create", Resource: "machinesets", Name: "md-" + templateHash(&newDeployment(3).Spec.Template, nil)},
				patchDeployment, // the revision
				patchStatus,
			},
		},
		{
			name: "a change of replicas scales the set",
			world: func() (*v1alpha1.MachineDeployment, []runtime.Object, []runtime.Object) {
				d := deployment(5)
				current := skeletonSet(d, "md-current", "1", 3, withDesired(3), withMax(4))
				return d, append([]runtime.Object{d, current}, skeletonMachines(current, 3, nil)...), nil
			},
			want: []apiWrite{patchSet("md-current"), patchStatus},
		},
		{
			name: "a rollout step shrinks the old set and marks the nodes",
			world: func() (*v1alpha1.MachineDeployment, []runtime.Object, []runtime.Object) {
				d := deployment(2)
				d.Annotations[v1alpha1.RevisionAnnotation] = "2"
				current := skeletonSet(d, "md-current", "2", 1)
				old := skeletonSet(d, "md-old", "1", 2, withClass("class-old"))
				var nodes []runtime.Object
				objs := append([]runtime.Object{d, current, old}, skeletonMachines(current, 1, &nodes)...)
				return d, append(objs, skeletonMachines(old, 2, &nodes)...), nodes
			},
			want: []apiWrite{
				patchSet("md-old"), patchStatus,
				patchNode("node-md-current-0"), patchNode("node-md-old-0"), patchNode("node-md-old-1"),
			},
		},
		{
			name: "a deployment without the finalizer gets it",
			world: func() (*v1alpha1.MachineDeployment, []runtime.Object, []runtime.Object) {
				d := deployment(2)
				d.Finalizers = nil
				current := skeletonSet(d, "md-current", "1", 2)
				return d, append([]runtime.Object{d, current}, skeletonMachines(current, 2, nil)...), nil
			},
			want: []apiWrite{patchDeployment, patchStatus},
		},
		{
			name: "a deployment being deleted deletes its sets",
			world: func() (*v1alpha1.MachineDeployment, []runtime.Object, []runtime.Object) {
				d := deployment(2)
				d.DeletionTimestamp = &gone
				current := skeletonSet(d, "md-current", "1", 2)
				return d, append([]runtime.Object{d, current}, skeletonMachines(current, 2, nil)...), nil
			},
			want: []apiWrite{deleteSet("md-current")},
		},
		{
			name: "a deployment being deleted without sets loses its finalizer",
			world: func() (*v1alpha1.MachineDeployment, []runtime.Object, []runtime.Object) {
				d := deployment(2)
				d.DeletionTimestamp = &gone
				return d, []runtime.Object{d}, nil
			},
			want: []apiWrite{patchDeployment},
		},
		{
			name: "a paused deployment does not roll",
			world: func() (*v1alpha1.MachineDeployment, []runtime.Object, []runtime.Object) {
				d := deployment(2, func(d *v1alpha1.MachineDeployment) { d.Spec.Paused = true })
				old := skeletonSet(d, "md-old", "1", 2, withClass("class-old"))
				return d, append([]runtime.Object{d, old}, skeletonMachines(old, 2, nil)...), nil
			},
			want: []apiWrite{patchStatus},
		},
		{
			name: "a rollback brings back the template of a revision",
			world: func() (*v1alpha1.MachineDeployment, []runtime.Object, []runtime.Object) {
				d := deployment(2, withDeploymentAnnotation(RollbackAnnotation, "1"))
				d.Annotations[v1alpha1.RevisionAnnotation] = "2"
				current := skeletonSet(d, "md-current", "2", 2)
				old := skeletonSet(d, "md-old", "1", 0, withClass("class-old"))
				return d, append([]runtime.Object{d, current, old}, skeletonMachines(current, 2, nil)...), nil
			},
			want: []apiWrite{patchDeployment},
		},
		{
			name: "machines the autoscaler names are marked, and nothing else",
			world: func() (*v1alpha1.MachineDeployment, []runtime.Object, []runtime.Object) {
				d := deployment(1, withDeploymentAnnotation(v1alpha1.TriggerDeletionByMCMAnnotation, "md-current-1"))
				current := skeletonSet(d, "md-current", "1", 2)
				return d, append([]runtime.Object{d, current}, skeletonMachines(current, 2, nil)...), nil
			},
			want: []apiWrite{{Verb: "patch", Resource: "machines", Name: "md-current-1"}, patchDeployment},
		},
		{
			name: "a frozen deployment adds no machines",
			world: func() (*v1alpha1.MachineDeployment, []runtime.Object, []runtime.Object) {
				d := deployment(3)
				current := skeletonSet(d, "md-current", "1", 2, withDesired(3), withMax(4))
				return d, append([]runtime.Object{d, current}, skeletonMachines(current, 2, nil)...), nil
			},
			opts: Options{SafetyGate: safety.GateFunc(func(context.Context) bool { return true })},
			want: []apiWrite{patchStatus},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, objs, nodes := tt.world()
			w := newSkeletonWorld(t, tt.opts, objs, nodes)
			ctx := context.Background()
			cached, err := w.ctrl.deployments.MachineDeployments(d.Namespace).Get(d.Name)
			if err != nil {
				t.Fatal(err)
			}
			w.writes() // the informers' lists and watches

			w.observing.Store(true)
			s, wait, err := w.ctrl.observe(ctx, cached)
			if err != nil || wait {
				t.Fatalf("observe: wait %v, %v", wait, err)
			}
			marks, err := w.ctrl.observeNodes(cached)
			if err != nil {
				t.Fatal(err)
			}
			w.observing.Store(false)
			p := plan(s, w.ctrl.opts.MaxReplicas)
			want := plannedWrites(t, cached, p)
			if p.phase == phaseStep {
				// Then the status, when it changed: computed from what
				// observe read and what apply did, here create the set.
				st, err := statusOf(s, p, applied{newSet: p.create})
				if err != nil {
					t.Fatal(err)
				}
				if !statusEqual(cached.Status, st) {
					want = append(want, patchStatus)
				}
			}
			if cached.DeletionTimestamp == nil { // ReconcileNodes leaves those alone
				for _, ch := range marks.plan(true) {
					want = append(want, patchNode(ch.Node))
				}
			}
			if len(w.writes()) != 0 {
				t.Fatal("observe or plan wrote")
			}

			if _, err := w.ctrl.Reconcile(ctx, "default/md"); err != nil {
				t.Fatalf("sync: %v", err)
			}
			if _, err := w.ctrl.ReconcileNodes(ctx, "default/md"); err != nil {
				t.Fatalf("node marks: %v", err)
			}
			got := w.writes()
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the sync's writes (-plan +sync):\n%s", diff)
			}
			names := func(ws []apiWrite) []string {
				var out []string
				for _, w := range ws {
					out = append(out, w.String())
				}
				return out
			}
			if diff := cmp.Diff(names(tt.want), names(got)); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}

// statusEqual tells whether two statuses are the same on the wire.
func statusEqual(a, b v1alpha1.MachineDeploymentStatus) bool {
	fields := func(st v1alpha1.MachineDeploymentStatus) patch.Fields { return patch.Fields{"status": st} }
	data, err := patch.Diff(fields, a, b, "")
	return err == nil && data == nil
}

// TestObserveWaitsForItsNewSet: once the controller has created the new
// set, a sync before the cache shows it waits rather than create it again
// (and fail with AlreadyExists); the set in the cache ends the wait.
func TestObserveWaitsForItsNewSet(t *testing.T) {
	d := newDeployment(3)
	d.Finalizers = []string{Finalizer}
	old := skeletonSet(d, "md-old", "1", 3, withClass("class-old"))
	w := newSkeletonWorld(t, Options{}, append([]runtime.Object{d, old}, skeletonMachines(old, 3, nil)...), nil)
	ctx := context.Background()
	if _, wait, err := w.ctrl.observe(ctx, d); err != nil || wait {
		t.Fatalf("observe before any write: wait %v, err %v", wait, err)
	}
	set, err := newSetOf(d, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	// The controller's create, as createNewSet records it, before the
	// cache shows the set.
	w.ctrl.writes.Wrote(d.Namespace+"/"+newSetName(d), "999")
	if _, wait, err := w.ctrl.observe(ctx, d); err != nil || !wait {
		t.Fatalf("observe with the created set not cached: wait %v, err %v; want a wait", wait, err)
	}
	set.ResourceVersion = "999" // the fake API server keeps the version it is given
	if _, err := w.client.MachineV1alpha1().MachineSets(d.Namespace).Create(ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, wait, err := w.ctrl.observe(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		if !wait && s.newSet != nil && s.newSet.Name == set.Name {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("observe still waits (%v) or has no new set (%v) after the cache showed it", wait, s.newSet)
		}
		time.Sleep(time.Millisecond)
	}
}
