package machine

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/fakeapi"
	"github.com/mcmkit/mcm/safety"
	"github.com/mcmkit/mcm/workqueue"
)

// fakeController is a controller without a target cluster on fake
// clientsets, with started informers and a safety gate the test flips.
type fakeController struct {
	c      *Controller
	mc     *fake.Clientset
	core   *k8sfake.Clientset
	cloud  *sim.Cloud
	frozen *atomic.Bool
	mf     externalversions.SharedInformerFactory
}

func newFakeController(t *testing.T) *fakeController {
	t.Helper()
	const ns = "ns"
	cloud, err := sim.New(sim.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns},
		Data: map[string][]byte{v1alpha1.UserDataKey: []byte("x"), sim.CredentialsKey: []byte("t")}}
	class := &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}, Provider: sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{Zone: "z", InstanceType: "m"}.RawExtension(),
		SecretRef:    &corev1.SecretReference{Name: "s"}}
	mc := fake.NewSimpleClientset(class)
	core := k8sfake.NewSimpleClientset(secret)
	mf := externalversions.NewSharedInformerFactoryWithOptions(mc, 0, externalversions.WithNamespace(ns))
	kf := informers.NewSharedInformerFactoryWithOptions(core, 0, informers.WithNamespace(ns))
	frozen := &atomic.Bool{}
	c, err := NewController(mc, core, nil, Informers{
		Machines: mf.Machine().V1alpha1().Machines(),
		Classes:  mf.Machine().V1alpha1().MachineClasses(),
		Secrets:  kf.Core().V1().Secrets(),
	}, cloud.Driver(), Options{SafetyGate: safety.GateFunc(func(context.Context) bool { return frozen.Load() })})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); mf.Shutdown(); kf.Shutdown() })
	mf.Start(ctx.Done())
	kf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced()...) {
		t.Fatal("caches did not sync")
	}
	return &fakeController{c: c, mc: mc, core: core, cloud: cloud, frozen: frozen, mf: mf}
}

// eventually runs reconcile until cond holds (the informer caches lag the
// fake clientsets' writes).
func eventually(t *testing.T, what string, reconcile func() error, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err := reconcile(); err != nil {
			t.Logf("reconcile: %v", err)
		}
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func (f *fakeController) machine(t *testing.T, name string) (*v1alpha1.Machine, bool) {
	t.Helper()
	obj, err := f.mc.Tracker().Get(v1alpha1.SchemeGroupVersion.WithResource("machines"), "ns", name)
	if err != nil {
		return nil, false
	}
	return obj.(*v1alpha1.Machine), true
}

// createMachine creates a machine of class "c" and waits until the class
// reconciler has added the class finalizer the creation waits for.
func (f *fakeController) createMachine(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "c"}}}
	if _, err := f.mc.MachineV1alpha1().Machines("ns").Create(ctx, m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "class finalizer", func() error { _, err := f.c.ReconcileMachineClass(ctx, "ns/c"); return err }, func() bool {
		cl, err := f.mc.MachineV1alpha1().MachineClasses("ns").Get(ctx, "c", metav1.GetOptions{})
		return err == nil && slices.Contains(cl.Finalizers, v1alpha1.MachineFinalizer)
	})
}

// waitAvailable syncs machine name until it is Available.
func (f *fakeController) waitAvailable(t *testing.T, name string, reconcile func() error) {
	t.Helper()
	eventually(t, "machine Available", reconcile, func() bool {
		got, ok := f.machine(t, name)
		return ok && got.Status.CurrentStatus.Phase == v1alpha1.MachineAvailable
	})
}

// markDeleted marks machine name deleted as the API server does with an
// object that has finalizers (the fake clientset would keep it as it is)
// and returns it as stored.
func (f *fakeController) markDeleted(t *testing.T, name string) *v1alpha1.Machine {
	t.Helper()
	got, _ := f.machine(t, name)
	del := got.DeepCopy()
	del.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if err := f.mc.Tracker().Update(v1alpha1.SchemeGroupVersion.WithResource("machines"), del, "ns"); err != nil {
		t.Fatal(err)
	}
	return del
}

// deleteAndSync marks machine name deleted and syncs it until the
// controller removed its finalizer.
func (f *fakeController) deleteAndSync(t *testing.T, name string, reconcile func() error) {
	t.Helper()
	f.markDeleted(t, name)
	eventually(t, "machine finalizer removed", reconcile, func() bool {
		got, ok := f.machine(t, name)
		return !ok || !slices.Contains(got.Finalizers, v1alpha1.MachineFinalizer)
	})
}

// TestFrozenBlocksCreationButNotDeletion: while the safety gate is
// closed, no VM is created; a machine being deleted is still deleted.
func TestFrozenBlocksCreationButNotDeletion(t *testing.T) {
	f := newFakeController(t)
	ctx := context.Background()
	reconcile := func() error { _, err := f.c.ReconcileMachine(ctx, "ns/m1"); return err }
	f.createMachine(t, "m1")

	f.frozen.Store(true)
	eventually(t, "machine finalizer", reconcile, func() bool {
		got, ok := f.machine(t, "m1")
		return ok && slices.Contains(got.Finalizers, v1alpha1.MachineFinalizer)
	})
	for range 5 {
		if err := reconcile(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, op := range []driver.Operation{driver.OperationGetMachineStatus, driver.OperationCreateMachine} {
		if n := f.cloud.Calls(op); n != 0 {
			t.Fatalf("frozen controller called %s %d times", op, n)
		}
	}
	if got, _ := f.machine(t, "m1"); got.Spec.ProviderID != "" || got.Status.CurrentStatus.Phase != "" {
		t.Fatalf("frozen machine changed: providerID %q, phase %q", got.Spec.ProviderID, got.Status.CurrentStatus.Phase)
	}

	f.frozen.Store(false)
	f.waitAvailable(t, "m1", reconcile)
	if len(f.cloud.VMs()) != 1 {
		t.Fatalf("VMs %v, want one", f.cloud.VMs())
	}

	// Frozen again: the deletion runs all the same.
	f.frozen.Store(true)
	f.deleteAndSync(t, "m1", reconcile)
	if n := f.cloud.Calls(driver.OperationDeleteMachine); n == 0 {
		t.Error("DeleteMachine not called while frozen")
	}
	for _, vm := range f.cloud.VMs() {
		if vm.State == sim.VMRunning {
			t.Errorf("VM still running after deletion: %+v", vm)
		}
	}
}

// TestSecretAndClassFinalizers: the secret finalizer is there exactly
// while a class references the secret, the class finalizer exactly while
// a machine uses the class.
func TestSecretAndClassFinalizers(t *testing.T) {
	f := newFakeController(t)
	ctx := context.Background()
	secretHasFinalizer := func() bool {
		s, err := f.core.CoreV1().Secrets("ns").Get(ctx, "s", metav1.GetOptions{})
		return err == nil && slices.Contains(s.Finalizers, v1alpha1.SecretFinalizer)
	}
	classHasFinalizer := func() bool {
		cl, err := f.mc.MachineV1alpha1().MachineClasses("ns").Get(ctx, "c", metav1.GetOptions{})
		return err == nil && slices.Contains(cl.Finalizers, v1alpha1.MachineFinalizer)
	}
	reconcileSecret := func() error { _, err := f.c.ReconcileSecret(ctx, "ns/s"); return err }
	reconcileClass := func() error { _, err := f.c.ReconcileMachineClass(ctx, "ns/c"); return err }

	eventually(t, "secret finalizer added", reconcileSecret, secretHasFinalizer)
	// No machine uses the class yet: no class finalizer.
	if err := reconcileClass(); err != nil {
		t.Fatal(err)
	}
	if classHasFinalizer() {
		t.Fatal("class finalizer without machines")
	}
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "ns"},
		Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "c"}}}
	if _, err := f.mc.MachineV1alpha1().Machines("ns").Create(ctx, m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "class finalizer added", reconcileClass, classHasFinalizer)
	if err := f.mc.MachineV1alpha1().Machines("ns").Delete(ctx, "m1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "class finalizer removed", reconcileClass, func() bool { return !classHasFinalizer() })

	// The class stops referencing the secret: its finalizer goes.
	if _, err := f.mc.MachineV1alpha1().MachineClasses("ns").Patch(ctx, "c", types.MergePatchType,
		[]byte(`{"secretRef":null,"credentialsSecretRef":{"name":"other"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "secret finalizer removed", reconcileSecret, func() bool { return !secretHasFinalizer() })
}

// TestClassFinalizerPatchedOnce: a class sync whose cache does not show
// the controller's finalizer patch yet sends no second patch.
func TestClassFinalizerPatchedOnce(t *testing.T) {
	f := newFakeController(t)
	fakeapi.VersionWrites(&f.mc.Fake, f.mc.Tracker())
	ctx := context.Background()
	classIdx := f.mf.Machine().V1alpha1().MachineClasses().Informer().GetIndexer()
	stale, err := f.c.classes.MachineClasses("ns").Get("c")
	if err != nil {
		t.Fatal(err)
	}
	f.createMachine(t, "m1") // reconciles the class until its finalizer is stored
	patches := func() (n int) {
		for _, a := range f.mc.Actions() {
			if a.GetVerb() == "patch" && a.GetResource().Resource == "machineclasses" {
				n++
			}
		}
		return n
	}
	if n := patches(); n != 1 {
		t.Fatalf("%d class patches to add the finalizer, want 1", n)
	}
	if err := classIdx.Update(stale); err != nil { // the cache lags
		t.Fatal(err)
	}
	if _, err := f.c.ReconcileMachineClass(ctx, "ns/c"); err != nil {
		t.Fatal(err)
	}
	if n := patches(); n != 1 {
		t.Errorf("%d class patches after a sync on a lagging cache, want 1", n)
	}
}

// TestDriverFailureIsAnError: a failed CreateMachine is returned to the
// work queue as an error (so it is logged and counted), paced by the
// machine's own retry delay, and recorded on the machine.
func TestDriverFailureIsAnError(t *testing.T) {
	f := newFakeController(t)
	ctx := context.Background()
	if _, err := f.cloud.InjectFault(sim.Fault{Operation: driver.OperationCreateMachine, Code: driver.Unavailable}); err != nil {
		t.Fatal(err)
	}
	f.createMachine(t, "m1")
	var (
		res workqueue.Result
		err error
	)
	eventually(t, "a create attempt", func() error {
		res, err = f.c.ReconcileMachine(ctx, "ns/m1")
		return nil
	}, func() bool { return f.cloud.Calls(driver.OperationCreateMachine) > 0 })
	if driver.CodeOf(err) != driver.Unavailable {
		t.Fatalf("ReconcileMachine error %v, want the driver's Unavailable", err)
	}
	if res.RequeueAfter != DefaultShortRetry {
		t.Errorf("RequeueAfter %v, want %v", res.RequeueAfter, DefaultShortRetry)
	}
	got, _ := f.machine(t, "m1")
	if got.Status.CurrentStatus.Phase != v1alpha1.MachineCrashLoopBackOff || got.Status.LastOperation.ErrorCode != "Unavailable" {
		t.Errorf("machine status %+v, want CrashLoopBackOff with code Unavailable", got.Status)
	}
}

// finishedDeletion returns a controller whose machine m1 was created,
// became Available, was deleted and lost its finalizer, and the sync of m1.
func finishedDeletion(t *testing.T) (*fakeController, func() error) {
	t.Helper()
	f := newFakeController(t)
	reconcile := func() error { _, err := f.c.ReconcileMachine(context.Background(), "ns/m1"); return err }
	f.createMachine(t, "m1")
	f.waitAvailable(t, "m1", reconcile)
	f.deleteAndSync(t, "m1", reconcile)
	return f, reconcile
}

// TestFinishedDeletionIsNotRepeated: once the controller removed a
// machine's finalizer, a sync of the copy the cache still holds does
// nothing: no driver call, no write.
func TestFinishedDeletionIsNotRepeated(t *testing.T) {
	f, reconcile := finishedDeletion(t)
	deletes, writes := f.cloud.Calls(driver.OperationDeleteMachine), len(f.mc.Actions())
	// The fake clientset keeps the object; the cache may still show the
	// finalizer. Either way nothing more happens.
	for range 3 {
		if err := reconcile(); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.cloud.Calls(driver.OperationDeleteMachine); n != deletes {
		t.Errorf("DeleteMachine called %d more times after the finalizer was removed", n-deletes)
	}
	if extra := f.mc.Actions()[writes:]; len(extra) != 0 {
		t.Errorf("API calls after the finalizer was removed: %v", extra)
	}
}

// TestDeletionInOneSyncWritesOnce: a deletion whose steps all finish in
// one sync (no node to drain, the VM gone at once) writes the machine
// once — the PATCH that removes its finalizer — and no status on the way.
func TestDeletionInOneSyncWritesOnce(t *testing.T) {
	f := newFakeController(t)
	ctx := context.Background()
	reconcile := func() error { _, err := f.c.ReconcileMachine(ctx, "ns/m1"); return err }
	f.createMachine(t, "m1")
	f.waitAvailable(t, "m1", reconcile)
	del := f.markDeleted(t, "m1")
	// The sync must see the deletion, and the cache the last write.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		cached, err := f.c.machines.Machines("ns").Get("m1")
		if err == nil && cached.DeletionTimestamp != nil && cached.ResourceVersion == del.ResourceVersion {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache never showed the deletion")
		}
	}
	before := len(f.mc.Actions())
	if err := reconcile(); err != nil {
		t.Fatal(err)
	}
	var writes []string
	for _, a := range f.mc.Actions()[before:] {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			writes = append(writes, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
		}
	}
	if want := []string{"patch machines/"}; !slices.Equal(writes, want) {
		t.Errorf("writes of a one-sync deletion: %v, want %v", writes, want)
	}
	if after, ok := f.machine(t, "m1"); ok && slices.Contains(after.Finalizers, v1alpha1.MachineFinalizer) {
		t.Errorf("finalizer still there: %v", after.Finalizers)
	}
}

// TestMachineWithFinalizerStartsCreationInOneWrite: a machine created
// with the finalizer and priority (as the MachineSet controller creates
// them) needs no write before its VM is created: its creation start goes
// out in the same PATCH as its provider ID.
func TestMachineWithFinalizerStartsCreationInOneWrite(t *testing.T) {
	f := newFakeController(t)
	ctx := context.Background()
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "ns",
		Finalizers:  []string{v1alpha1.MachineFinalizer},
		Annotations: map[string]string{v1alpha1.MachinePriorityAnnotation: v1alpha1.MachinePriorityDefault}},
		Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "c"}}}
	before := len(f.mc.Actions())
	if _, err := f.mc.MachineV1alpha1().Machines("ns").Create(ctx, m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "class finalizer", func() error { _, err := f.c.ReconcileMachineClass(ctx, "ns/c"); return err }, func() bool {
		cl, err := f.mc.MachineV1alpha1().MachineClasses("ns").Get(ctx, "c", metav1.GetOptions{})
		return err == nil && slices.Contains(cl.Finalizers, v1alpha1.MachineFinalizer)
	})
	eventually(t, "provider ID", func() error { _, err := f.c.ReconcileMachine(ctx, "ns/m1"); return err }, func() bool {
		got, ok := f.machine(t, "m1")
		return ok && got.Spec.ProviderID != ""
	})
	var patches []string
	for _, a := range f.mc.Actions()[before:] {
		if p, ok := a.(k8stesting.PatchAction); ok && a.GetResource().Resource == "machines" && a.GetSubresource() == "" {
			patches = append(patches, string(p.GetPatch()))
		}
	}
	if len(patches) != 1 {
		t.Fatalf("machine PATCHes until the provider ID was stored: %d, want 1:\n%s", len(patches), strings.Join(patches, "\n"))
	}
	for _, want := range []string{CreationStartedAnnotation, `"providerID"`} {
		if !strings.Contains(patches[0], want) {
			t.Errorf("the one PATCH lacks %s: %s", want, patches[0])
		}
	}
	if got := f.cloud.Calls(driver.OperationCreateMachine); got != 1 {
		t.Errorf("CreateMachine called %d times, want 1", got)
	}
}

// TestMachineOfSameNameAfterDeletion: once the cache saw a finished
// deletion's machine go, a new machine of the same name is synced at once.
func TestMachineOfSameNameAfterDeletion(t *testing.T) {
	f, reconcile := finishedDeletion(t)
	// The API server drops the object once its finalizers are gone; the
	// fake clientset needs telling.
	if err := f.mc.Tracker().Delete(v1alpha1.SchemeGroupVersion.WithResource("machines"), "ns", "m1"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := f.c.machines.Machines("ns").Get("m1"); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache never dropped the machine")
		}
	}
	creates := f.cloud.Calls(driver.OperationCreateMachine)
	f.createMachine(t, "m1")
	f.waitAvailable(t, "m1", reconcile)
	if n := f.cloud.Calls(driver.OperationCreateMachine); n != creates+1 {
		t.Errorf("CreateMachine called %d times for the new machine, want 1", n-creates)
	}
}

// TestDeletionWithoutRecordStartsOver: a machine whose deletion an older
// version began (its step only in the annotation, no record in the
// status) and whose VM is gone already starts at the first step: every
// step runs again, DeleteMachine included, and each copes with what is
// already done.
func TestDeletionWithoutRecordStartsOver(t *testing.T) {
	f := newFakeController(t)
	reconcile := func() error { _, err := f.c.ReconcileMachine(context.Background(), "ns/m1"); return err }
	f.createMachine(t, "m1")
	f.waitAvailable(t, "m1", reconcile)
	got, _ := f.machine(t, "m1")
	if !f.cloud.RemoveVM(got.Spec.ProviderID) {
		t.Fatalf("no VM %s", got.Spec.ProviderID)
	}
	old := got.DeepCopy()
	old.Annotations[DeletionStepAnnotation] = string(StepDeleteNode)
	if err := f.mc.Tracker().Update(v1alpha1.SchemeGroupVersion.WithResource("machines"), old, "ns"); err != nil {
		t.Fatal(err)
	}
	deletes := f.cloud.Calls(driver.OperationDeleteMachine)
	f.deleteAndSync(t, "m1", reconcile)
	if n := f.cloud.Calls(driver.OperationDeleteMachine) - deletes; n != 1 {
		t.Errorf("DeleteMachine called %d times, want once: the flow starts over", n)
	}
}
