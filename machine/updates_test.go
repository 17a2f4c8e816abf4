package machine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

func TestUpdateQueues(t *testing.T) {
	old := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "ns", ResourceVersion: "10", Generation: 1,
			Labels: map[string]string{"pool": "a"}, Annotations: map[string]string{"a": "1"}, Finalizers: []string{v1alpha1.MachineFinalizer}},
		Spec:   v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "c"}},
		Status: v1alpha1.MachineStatus{CurrentStatus: v1alpha1.CurrentStatus{Phase: v1alpha1.MachineCrashLoopBackOff}},
	}
	// statusWrite is old after a status write: a new version, a new
	// description, new managed fields.
	statusWrite := func(mutate func(*v1alpha1.Machine)) *v1alpha1.Machine {
		m := old.DeepCopy()
		m.ResourceVersion = "11"
		m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: DefaultFieldManager, Subresource: "status"}}
		m.Status.LastOperation.Description = "Cloud provider message - request id 2"
		if mutate != nil {
			mutate(m)
		}
		return m
	}
	own, awaited := ownWrite{Status: true}, ownWrite{Status: true, Awaited: true}
	now := metav1.Now()
	cases := []struct {
		name string
		m    *v1alpha1.Machine
		own  ownWrite
	}{
		{"own status write", statusWrite(nil), own},
		{"own status write a sync waits for", statusWrite(nil), awaited},
		{"someone else's status write", statusWrite(nil), ownWrite{}},
		{"a resync", old, ownWrite{}},
		{"own status write that only moved the version", statusWrite(func(m *v1alpha1.Machine) { m.Status = old.Status }), own},
		// A relist joins others' changes with the controller's write.
		{"with a label", statusWrite(func(m *v1alpha1.Machine) { m.Labels["x"] = "y" }), own},
		{"with an annotation (a hook)", statusWrite(func(m *v1alpha1.Machine) { m.Annotations[PreDrainHookPrefix+"/x"] = "" }), own},
		{"with a finalizer", statusWrite(func(m *v1alpha1.Machine) { m.Finalizers = append(m.Finalizers, "x/y") }), own},
		{"with a deletion timestamp", statusWrite(func(m *v1alpha1.Machine) { m.DeletionTimestamp = &now }), own},
		{"with a new spec", statusWrite(func(m *v1alpha1.Machine) { m.Generation, m.Spec.Class.Name = 2, "d" }), own},
		{"with an owner", statusWrite(func(m *v1alpha1.Machine) {
			m.OwnerReferences = []metav1.OwnerReference{{Kind: "MachineSet", Name: "s"}}
		}), own},
	}
	got := map[string]bool{}
	for _, tc := range cases {
		got[tc.name] = updateQueues(old, tc.m, tc.own)
	}
	want := map[string]bool{
		"own status write":                             false,
		"own status write a sync waits for":            true,
		"someone else's status write":                  true,
		"a resync":                                     true,
		"own status write that only moved the version": false,
		"with a label":                                 true,
		"with an annotation (a hook)":                  true,
		"with a finalizer":                             true,
		"with a deletion timestamp":                    true,
		"with a new spec":                              true,
		"with an owner":                                true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("updateQueues (-want +got):\n%s", diff)
	}
}

func TestInputsChanged(t *testing.T) {
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	respec := m.DeepCopy()
	respec.Generation = 2
	relabel := m.DeepCopy()
	relabel.Labels = map[string]string{"a": "b"}
	cl := &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	finalized := cl.DeepCopy()
	finalized.Finalizers = []string{v1alpha1.MachineFinalizer}
	newSpec := cl.DeepCopy()
	newSpec.Generation = 4
	s := &corev1.Secret{Data: map[string][]byte{"k": []byte("v")}}
	sFinalized := s.DeepCopy()
	sFinalized.Finalizers = []string{v1alpha1.MachineFinalizer}
	sNewData := s.DeepCopy()
	sNewData.Data["k"] = []byte("w")
	got := map[string]bool{
		"new machine":            inputsChanged(nil, m),
		"machine spec":           inputsChanged(m, respec),
		"machine labels":         inputsChanged(m, relabel),
		"class added or deleted": classChanged(nil, cl),
		"class finalizer":        classChanged(cl, finalized),
		"class spec":             classChanged(cl, newSpec),
		"secret added":           secretChanged(nil, s),
		"secret finalizer":       secretChanged(s, sFinalized),
		"secret data":            secretChanged(s, sNewData),
	}
	want := map[string]bool{
		"new machine": true, "machine spec": true, "machine labels": false,
		"class added or deleted": true, "class finalizer": false, "class spec": true,
		"secret added": true, "secret finalizer": false, "secret data": true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what releases a failed creation's backoff (-want +got):\n%s", diff)
	}
}

// TestFailedCreationWaitsForItsBackoff: after a failed creation, a sync
// that comes sooner than its backoff (queued by an event) calls no
// driver and asks to come back when the backoff ends; a change of the
// class's spec ends the wait, a finalizer on it does not.
func TestFailedCreationWaitsForItsBackoff(t *testing.T) {
	f := newFakeController(t)
	ctx := context.Background()
	if _, err := f.cloud.InjectFault(sim.Fault{Operation: driver.OperationCreateMachine, Code: driver.Unavailable}); err != nil {
		t.Fatal(err)
	}
	f.createMachine(t, "m1")
	eventually(t, "a create attempt", func() error {
		_, err := f.c.ReconcileMachine(ctx, "ns/m1")
		return err
	}, func() bool { return f.cloud.Calls(driver.OperationCreateMachine) > 0 })
	failed, _ := f.machine(t, "m1")
	eventually(t, "the cache shows the failure", func() error { return nil }, func() bool {
		cached, err := f.c.machines.Machines("ns").Get("m1")
		return err == nil && cached.ResourceVersion == failed.ResourceVersion
	})
	for range 3 {
		res, err := f.c.ReconcileMachine(ctx, "ns/m1")
		if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > DefaultShortRetry {
			t.Fatalf("sync within the backoff: %+v, %v; want a requeue within %v and no error", res, err, DefaultShortRetry)
		}
	}
	if n := f.cloud.Calls(driver.OperationCreateMachine); n != 1 {
		t.Fatalf("CreateMachine called %d times within the backoff, want 1", n)
	}

	cl, err := f.c.classes.MachineClasses("ns").Get("c")
	if err != nil {
		t.Fatal(err)
	}
	finalized := cl.DeepCopy()
	finalized.Finalizers = append(finalized.Finalizers, "x/y")
	f.c.onClass(cl, finalized)
	if res, _ := f.c.ReconcileMachine(ctx, "ns/m1"); res.RequeueAfter <= 0 || f.cloud.Calls(driver.OperationCreateMachine) != 1 {
		t.Fatalf("a class finalizer ended the backoff: %+v, %d calls", res, f.cloud.Calls(driver.OperationCreateMachine))
	}
	respec := cl.DeepCopy()
	respec.Generation++
	f.c.onClass(cl, respec)
	if _, err := f.c.ReconcileMachine(ctx, "ns/m1"); driver.CodeOf(err) != driver.Unavailable {
		t.Fatalf("sync after the class changed: %v, want the driver's Unavailable", err)
	}
	if n := f.cloud.Calls(driver.OperationCreateMachine); n != 2 {
		t.Errorf("CreateMachine called %d times after the class changed, want 2", n)
	}
	if wait := f.c.failures.held("ns/m1", time.Now()); wait <= DefaultShortRetry {
		t.Errorf("backoff after the second failure %v, want longer than the first (%v)", wait, DefaultShortRetry)
	}
}

// TestFailedCreationHoldsWhenItsWriteFails: a failed creation whose
// status write fails (a conflict, a server error) still holds the
// machine's next creation for its backoff: the syncs that follow, queued
// by the worker's error, call no driver before the backoff ends.
func TestFailedCreationHoldsWhenItsWriteFails(t *testing.T) {
	machines := schema.GroupResource{Group: v1alpha1.SchemeGroupVersion.Group, Resource: "machines"}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"conflict", apierrors.NewConflict(machines, "m1", errors.New("the object has been modified"))},
		{"server error", apierrors.NewInternalError(errors.New("etcdserver: leader changed"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeController(t)
			ctx := context.Background()
			if _, err := f.cloud.InjectFault(sim.Fault{Operation: driver.OperationCreateMachine, Code: driver.Unavailable}); err != nil {
				t.Fatal(err)
			}
			f.createMachine(t, "m1")
			var refused atomic.Int32
			f.mc.PrependReactor("patch", "machines", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() == "status" && refused.CompareAndSwap(0, 1) {
					return true, nil, tc.err
				}
				return false, nil, nil
			})
			var err error
			eventually(t, "a create attempt", func() error {
				_, err = f.c.ReconcileMachine(ctx, "ns/m1")
				return nil
			}, func() bool { return f.cloud.Calls(driver.OperationCreateMachine) > 0 })
			if !errors.Is(err, tc.err) || f.cloud.Calls(driver.OperationCreateMachine) != 1 || refused.Load() != 1 {
				t.Fatalf("sync that created: %v after %d CreateMachine calls and %d refused status writes; want the write's error after 1 call",
					err, f.cloud.Calls(driver.OperationCreateMachine), refused.Load())
			}
			// The write-ahead (the finalizer) landed; the next syncs plan
			// from it, as the worker's retry would.
			eventually(t, "the cache shows the write-ahead", func() error { return nil }, func() bool {
				stored, _ := f.machine(t, "m1")
				cached, err := f.c.machines.Machines("ns").Get("m1")
				return err == nil && cached.ResourceVersion == stored.ResourceVersion
			})
			for range 3 {
				res, err := f.c.ReconcileMachine(ctx, "ns/m1")
				if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > DefaultShortRetry {
					t.Fatalf("sync within the backoff: %+v, %v; want a requeue within %v and no error", res, err, DefaultShortRetry)
				}
			}
			if n := f.cloud.Calls(driver.OperationCreateMachine); n != 1 {
				t.Errorf("CreateMachine called %d times within the backoff, want 1", n)
			}
		})
	}
}

// TestOwnStatusWriteQueuesNothing: the event of the controller's own
// status write does not queue the machine, unless a sync waits for it;
// someone else's status write does.
func TestOwnStatusWriteQueuesNothing(t *testing.T) {
	old := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "ns", ResourceVersion: "1"},
		Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Name: "c"}}}
	written := old.DeepCopy()
	written.ResourceVersion = "2"
	written.Status.CurrentStatus.Phase = v1alpha1.MachineCrashLoopBackOff
	for _, tc := range []struct {
		name  string
		wrote string // the version of the controller's status write
		await bool
		want  int
	}{
		{name: "own", wrote: "2", want: 0},
		{name: "own, awaited", wrote: "2", await: true, want: 1},
		{name: "someone else's", wrote: "", want: 1},
		{name: "after the controller's, someone else's", wrote: "3", want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t)
			c, err := NewController(f.mc, f.core, f.core, f.inf, f.driver, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.wrote != "" {
				c.statusWrites.wrote("ns/m1", tc.wrote)
			}
			if tc.await {
				c.statusWrites.await("ns/m1")
			}
			c.onMachine(old, written)
			if n := c.machineQueue.Len(); n != tc.want {
				t.Errorf("%d machines queued, want %d", n, tc.want)
			}
		})
	}
}
