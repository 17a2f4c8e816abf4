package machineset

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// write is one API write, as the fake clientset records it and as a plan
// names it.
type write struct {
	Verb, Resource, Subresource, Name string
	// Fields names what a patch writes: the members of its metadata but
	// the resourceVersion guard, or else its top-level members.
	Fields string
}

// planWrites are the writes p names, in apply's order.
func planWrites(set *v1alpha1.MachineSet, p syncPlan) []write {
	var out []write
	patchSet := func(fields string) {
		out = append(out, write{Verb: "patch", Resource: "machinesets", Name: set.Name, Fields: fields})
	}
	patchMachine := func(m *v1alpha1.Machine, fields string) {
		out = append(out, write{Verb: "patch", Resource: "machines", Name: m.Name, Fields: fields})
	}
	if p.AddFinalizer {
		patchSet("metadata.finalizers")
	}
	for _, m := range slices.Concat(p.Adopt, p.Release) {
		patchMachine(m, "metadata.ownerReferences")
	}
	for _, m := range p.Propagate {
		patchMachine(m, "spec")
	}
	for _, m := range slices.Concat(p.AutoPreserve.Mark, p.AutoPreserve.Unmark) {
		patchMachine(m, "metadata.annotations")
	}
	if p.RecordForeign {
		patchSet("metadata.annotations")
	}
	for _, m := range p.Replicas.Delete {
		out = append(out, write{Verb: "delete", Resource: "machines", Name: m.Name})
	}
	for range p.Replicas.Create {
		out = append(out, write{Verb: "create", Resource: "machines"}) // named at creation
	}
	if p.RemoveFinalizer {
		patchSet("metadata.finalizers")
	}
	return out
}

// isWrite tells an action that changes something from a read.
func isWrite(a k8stesting.Action) bool {
	return !slices.Contains([]string{"get", "list", "watch"}, a.GetVerb())
}

// recordedWrites are the writes among actions, and the status writes
// apart.
func recordedWrites(t *testing.T, actions []k8stesting.Action) (writes, status []write) {
	t.Helper()
	for _, a := range actions {
		if !isWrite(a) {
			continue
		}
		w := write{Verb: a.GetVerb(), Resource: a.GetResource().Resource, Subresource: a.GetSubresource()}
		switch a := a.(type) {
		case k8stesting.PatchAction:
			w.Name, w.Fields = a.GetName(), patchedFields(t, a.GetPatch())
		case k8stesting.DeleteAction:
			w.Name = a.GetName()
		}
		if w.Subresource == "status" {
			status = append(status, w)
		} else {
			writes = append(writes, w)
		}
	}
	return writes, status
}

// patchedFields is write.Fields of a merge patch.
func patchedFields(t *testing.T, data []byte) string {
	t.Helper()
	var p map[string]map[string]any
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatalf("patch %s: %v", data, err)
	}
	var fields []string
	for top, members := range p {
		if top != "metadata" {
			fields = append(fields, top)
			continue
		}
		for k := range members {
			if k != "resourceVersion" {
				fields = append(fields, "metadata."+k)
			}
		}
	}
	slices.Sort(fields)
	return strings.Join(fields, ",")
}

// TestSyncWritesAreThePlans: observe makes no API write (a reactor fails
// any write while it runs), and a sync's writes, the status aside, are
// exactly those of its plan.
func TestSyncWritesAreThePlans(t *testing.T) {
	withFinalizer := func(set *v1alpha1.MachineSet) *v1alpha1.MachineSet {
		set.Finalizers = []string{Finalizer}
		return set
	}
	machine := func(set *v1alpha1.MachineSet, name string, minutes int, labels map[string]string) *v1alpha1.Machine {
		m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
			Labels: labels, CreationTimestamp: metav1.NewTime(time.Unix(int64(60*minutes), 0))},
			Spec: *set.Spec.Template.Spec.DeepCopy()}
		if set != nil {
			m.OwnerReferences = []metav1.OwnerReference{controllerRef(set)}
		}
		return m
	}
	pool := map[string]string{"pool": "a"}
	base := testSet(0)
	deleting := withFinalizer(testSet(2))
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1000, 0)}
	frozen := withFinalizer(testSet(2))
	frozen.Labels = map[string]string{v1alpha1.FreezeLabelKey: v1alpha1.FreezeLabelValue}
	lagging := machine(base, "pool-lagging", 3, pool)
	lagging.Spec.Class.Kind = "OtherClass"
	orphan := machine(base, "orphan", 2, pool)
	orphan.OwnerReferences = nil

	autoPreserving := func(replicas, max int32) *v1alpha1.MachineSet {
		set := withFinalizer(testSet(replicas))
		set.Spec.AutoPreserveFailedMachineMax = &max
		return set
	}
	failedMachine := func(m *v1alpha1.Machine) *v1alpha1.Machine {
		m.Status.CurrentStatus.Phase = v1alpha1.MachineFailed
		return m
	}
	autoMarked := func(m *v1alpha1.Machine) *v1alpha1.Machine {
		m.Annotations = map[string]string{v1alpha1.PreserveAnnotation: string(v1alpha1.PreserveAutoPreserved)}
		return m
	}
	tests := []struct {
		name string
		set  *v1alpha1.MachineSet
		objs []runtime.Object
		want []write // the plan's, which the sync must make
	}{
		{name: "adoption and release", set: withFinalizer(testSet(2)), objs: []runtime.Object{
			machine(base, "pool-kept", 1, pool), orphan, machine(base, "strayed", 3, map[string]string{"pool": "elsewhere"}),
		}, want: []write{
			{Verb: "patch", Resource: "machines", Name: "orphan", Fields: "metadata.ownerReferences"},
			{Verb: "patch", Resource: "machines", Name: "strayed", Fields: "metadata.ownerReferences"},
			{Verb: "patch", Resource: "machinesets", Name: "pool", Fields: "metadata.annotations"}, // the adopted orphan is foreign
		}},
		{name: "scale up", set: withFinalizer(testSet(3)), objs: []runtime.Object{machine(base, "pool-kept", 1, pool)},
			want: []write{{Verb: "create", Resource: "machines"}, {Verb: "create", Resource: "machines"}}},
		{name: "scale down and propagation", set: withFinalizer(testSet(1)), objs: []runtime.Object{
			machine(base, "pool-old", 1, pool), machine(base, "pool-new", 5, pool), lagging,
		}, want: []write{
			{Verb: "patch", Resource: "machines", Name: "pool-lagging", Fields: "spec"},
			{Verb: "delete", Resource: "machines", Name: "pool-old"},
			{Verb: "delete", Resource: "machines", Name: "pool-lagging"},
		}},
		{name: "finalizer added", set: testSet(0),
			want: []write{{Verb: "patch", Resource: "machinesets", Name: "pool", Fields: "metadata.finalizers"}}},
		{name: "frozen", set: frozen, objs: []runtime.Object{machine(base, "pool-kept", 1, pool)}},
		{name: "deletion", set: deleting, objs: []runtime.Object{machine(base, "pool-a", 1, pool), machine(base, "pool-b", 2, pool)},
			want: []write{{Verb: "delete", Resource: "machines", Name: "pool-a"}, {Verb: "delete", Resource: "machines", Name: "pool-b"}}},
		{name: "auto-preservation marks the newest Failed machine, which is kept; the other is replaced", set: autoPreserving(2, 1),
			objs: []runtime.Object{failedMachine(machine(base, "pool-old-failed", 1, pool)), failedMachine(machine(base, "pool-new-failed", 2, pool))},
			want: []write{
				{Verb: "patch", Resource: "machines", Name: "pool-new-failed", Fields: "metadata.annotations"},
				{Verb: "delete", Resource: "machines", Name: "pool-old-failed"},
			}},
		{name: "a lowered maximum releases the oldest mark", set: autoPreserving(2, 1),
			objs: []runtime.Object{autoMarked(failedMachine(machine(base, "pool-old-failed", 1, pool))), autoMarked(failedMachine(machine(base, "pool-new-failed", 2, pool)))},
			want: []write{
				{Verb: "patch", Resource: "machines", Name: "pool-old-failed", Fields: "metadata.annotations"},
				{Verb: "delete", Resource: "machines", Name: "pool-old-failed"}, // no preservation started yet: unmarked, it goes
			}},
		{name: "a lagging machine is marked too, after its propagation", set: autoPreserving(1, 1),
			objs: []runtime.Object{failedMachine(lagging.DeepCopy())},
			want: []write{
				{Verb: "patch", Resource: "machines", Name: "pool-lagging", Fields: "spec"},
				{Verb: "patch", Resource: "machines", Name: "pool-lagging", Fields: "metadata.annotations"},
			}},
		{name: "deletion done", set: deleting.DeepCopy(),
			want: []write{{Verb: "patch", Resource: "machinesets", Name: "pool", Fields: "metadata.finalizers"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkSyncWrites(t, tt.set, tt.objs, tt.want) })
	}
}

// checkSyncWrites observes set in a world of objs with a reactor that
// fails any write meanwhile, checks that its plan's writes are want, then
// syncs it and compares the writes recorded with the plan's.
func checkSyncWrites(t *testing.T, set *v1alpha1.MachineSet, objs []runtime.Object, want []write) {
	h := newHarness(t, Options{}, append(objs, set)...)
	var observing atomic.Bool
	h.client.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if observing.Load() && isWrite(a) {
			return true, nil, fmt.Errorf("a %s of %s while observing", a.GetVerb(), a.GetResource().Resource)
		}
		return false, nil, nil
	})
	waitForCache(t, h, len(objs))
	cached, err := h.c.sets.MachineSets("ns").Get("pool")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	h.client.ClearActions()
	observing.Store(true)
	s, err := h.c.observe(ctx, "ns/pool", cached)
	observing.Store(false)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	if writes, status := recordedWrites(t, h.client.Actions()); len(writes)+len(status) > 0 {
		t.Errorf("observe wrote: %v", slices.Concat(writes, status))
	}
	p := plan(s, h.c.opts.BurstReplicas)
	if diff := cmp.Diff(want, planWrites(cached, p), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("the plan's writes (-want +got):\n%s", diff)
	}

	// The sync observes and plans again, from the same caches.
	h.client.ClearActions()
	if _, err := h.c.sync(ctx, "ns/pool", cached); err != nil {
		t.Fatalf("sync: %v", err)
	}
	writes, status := recordedWrites(t, h.client.Actions())
	sortWrites := cmpopts.SortSlices(func(a, b write) bool { return fmt.Sprint(a) < fmt.Sprint(b) })
	if diff := cmp.Diff(planWrites(cached, p), writes, sortWrites, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("the sync's writes but the status, against its plan's (-plan +sync):\n%s", diff)
	}
	wantStatus := []write{{Verb: "patch", Resource: "machinesets", Subresource: "status", Name: "pool", Fields: "status"}}
	if p.Finish {
		wantStatus = nil
	}
	if diff := cmp.Diff(wantStatus, status, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("status writes (-want +got):\n%s", diff)
	}
}

// waitForCache waits until the harness's machine cache holds n machines.
func waitForCache(t *testing.T, h *harness, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cached, _ := h.c.machines.Machines("ns").List(everything); len(cached) == n {
			return
		}
	}
	t.Fatalf("the cache never showed %d machines", n)
}

// TestFailedAdoptionIsPlannedAgain: an orphan whose adoption fails is
// neither counted nor deleted by the sync that tried: the set's machines
// are planned again without it.
func TestFailedAdoptionIsPlannedAgain(t *testing.T) {
	pool := map[string]string{"pool": "a"}
	orphan := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "ns", UID: "uid-orphan", Labels: pool,
		CreationTimestamp: metav1.NewTime(time.Unix(600, 0))}}
	set := testSet(1)
	set.Finalizers = []string{Finalizer}
	own := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "pool-own", Namespace: "ns", UID: "uid-own", Labels: pool,
		CreationTimestamp: metav1.NewTime(time.Unix(60, 0)), OwnerReferences: []metav1.OwnerReference{controllerRef(set)}}}
	orphan.Spec, own.Spec = set.Spec.Template.Spec, set.Spec.Template.Spec
	tests := []struct {
		name  string
		objs  []runtime.Object
		plan  []write // assuming the adoption succeeds
		after []write // what the sync does once it failed
	}{
		{name: "the orphan would have been the set's one machine", objs: []runtime.Object{orphan},
			plan: []write{
				{Verb: "patch", Resource: "machines", Name: "orphan", Fields: "metadata.ownerReferences"},
				{Verb: "patch", Resource: "machinesets", Name: "pool", Fields: "metadata.annotations"},
			},
			after: []write{
				{Verb: "patch", Resource: "machines", Name: "orphan", Fields: "metadata.ownerReferences"}, // refused
				{Verb: "create", Resource: "machines"},
			}},
		{name: "the foreign orphan would have been deleted first", objs: []runtime.Object{own, orphan},
			plan: []write{
				{Verb: "patch", Resource: "machines", Name: "orphan", Fields: "metadata.ownerReferences"},
				{Verb: "patch", Resource: "machinesets", Name: "pool", Fields: "metadata.annotations"},
				{Verb: "delete", Resource: "machines", Name: "orphan"},
			},
			after: []write{{Verb: "patch", Resource: "machines", Name: "orphan", Fields: "metadata.ownerReferences"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{}, append(tt.objs, set.DeepCopy())...)
			h.client.PrependReactor("patch", "machines", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.(k8stesting.PatchAction).GetName() == "orphan" {
					return true, nil, fmt.Errorf("refused")
				}
				return false, nil, nil
			})
			waitForCache(t, h, len(tt.objs))
			cached, err := h.c.sets.MachineSets("ns").Get("pool")
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			s, err := h.c.observe(ctx, "ns/pool", cached)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.plan, planWrites(cached, plan(s, h.c.opts.BurstReplicas))); diff != "" {
				t.Errorf("the plan's writes (-want +got):\n%s", diff)
			}
			h.client.ClearActions()
			if _, err := h.c.sync(ctx, "ns/pool", cached); err == nil || !strings.Contains(err.Error(), "refused") {
				t.Errorf("sync: %v, want the refused adoption", err)
			}
			writes, _ := recordedWrites(t, h.client.Actions())
			if diff := cmp.Diff(tt.after, writes); diff != "" {
				t.Errorf("the sync's writes but the status (-want +got):\n%s", diff)
			}
		})
	}
}
