package sim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

func TestCreateIsIdempotentAndBootsByTheClock(t *testing.T) {
	w := newWorld(t, sim.Options{BootDelay: time.Minute, DeleteDelay: 30 * time.Second})
	first, err := w.create("m1")
	if err != nil {
		t.Fatalf("first create: %v", err)
	}
	second, err := w.create("m1")
	if err != nil {
		t.Fatalf("second create: %v", err)
	}
	want := &driver.CreateMachineResponse{
		ProviderID: "sim:///zone-a/m1",
		NodeName:   "m1",
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "10.0.0.1"},
			{Type: corev1.NodeHostName, Address: "m1"},
		},
	}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("first create (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("second create differs from the first (-first +second):\n%s", diff)
	}

	id := first.ProviderID
	steps := []struct {
		advance time.Duration
		act     func()
		want    map[string]sim.VMState
	}{
		{0, nil, map[string]sim.VMState{id: sim.VMProvisioning}},
		{59 * time.Second, nil, map[string]sim.VMState{id: sim.VMProvisioning}},
		{time.Second, nil, map[string]sim.VMState{id: sim.VMRunning}},
		{0, func() { mustSucceed(t, w.delete(machine("m1"))) }, map[string]sim.VMState{id: sim.VMTerminating}},
		{29 * time.Second, nil, map[string]sim.VMState{id: sim.VMTerminating}},
		{time.Second, nil, map[string]sim.VMState{}},
	}
	for i, s := range steps {
		w.clock.Step(s.advance)
		if s.act != nil {
			s.act()
		}
		if diff := cmp.Diff(s.want, w.states()); diff != "" {
			t.Errorf("step %d (-want +got):\n%s", i, diff)
		}
	}
}

func mustSucceed(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotTimes(t *testing.T) {
	w := newWorld(t, sim.Options{BootDelay: time.Minute})
	id := w.mustCreate("m1")
	vm, _ := w.cloud.VM(id)
	if diff := cmp.Diff([]time.Time{epoch, epoch, epoch.Add(time.Minute)}, []time.Time{vm.CreatedAt, vm.StateSince, vm.StateUntil}); diff != "" {
		t.Errorf("provisioning CreatedAt, StateSince, StateUntil (-want +got):\n%s", diff)
	}
	if next, ok := w.cloud.NextTransition(); !ok || !next.Equal(epoch.Add(time.Minute)) {
		t.Errorf("NextTransition = %v, %v; want the end of the boot", next, ok)
	}
	w.clock.Step(2 * time.Minute)
	vm, _ = w.cloud.VM(id)
	if vm.State != sim.VMRunning || !vm.StateSince.Equal(epoch.Add(time.Minute)) || !vm.StateUntil.IsZero() {
		t.Errorf("running VM: state %s since %v until %v; want Running since the end of the boot, no end", vm.State, vm.StateSince, vm.StateUntil)
	}
	if _, ok := w.cloud.NextTransition(); ok {
		t.Error("NextTransition reports a transition with every VM running")
	}
	if string(vm.UserData) != "#cloud-config" {
		t.Errorf("UserData = %q", vm.UserData)
	}
}

func TestChangedIsClosedByMutations(t *testing.T) {
	w := newWorld(t, sim.Options{})
	changed := w.cloud.Changed()
	select {
	case <-changed:
		t.Fatal("Changed closed before any change")
	default:
	}
	w.mustCreate("m1")
	select {
	case <-changed:
	default:
		t.Fatal("Changed not closed by a create")
	}
	again := w.cloud.Changed()
	if _, err := w.status("m1"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-again:
		t.Fatal("Changed closed by a read")
	default:
	}
}

func TestStatusNotFoundAndDeleteOfUnknownSucceeds(t *testing.T) {
	w := newWorld(t, sim.Options{})
	if _, err := w.status("ghost"); driver.CodeOf(err) != driver.NotFound {
		t.Errorf("status of unknown machine: %v, want NotFound", err)
	}
	if err := w.delete(machine("ghost")); err != nil {
		t.Errorf("delete of unknown machine: %v, want success", err)
	}
	if err := w.delete(withProviderID(machine("ghost"), "sim:///zone-a/ghost")); err != nil {
		t.Errorf("delete of unknown provider ID: %v, want success", err)
	}
}

func TestDuplicatesGiveOutOfRangeAndAreDeletedByProviderID(t *testing.T) {
	w := newWorld(t, sim.Options{})
	id := w.mustCreate("m1")
	dup, err := w.cloud.AddVM(w.vmSpec("m1"))
	if err != nil {
		t.Fatal(err)
	}
	if dup.ProviderID != "sim:///zone-a/m1-2" {
		t.Errorf("duplicate's provider ID = %s, want a suffixed one", dup.ProviderID)
	}

	for name, err := range map[string]error{
		"status": func() error { _, err := w.status("m1"); return err }(),
		"delete": w.delete(machine("m1")),
		"create": func() error { _, err := w.create("m1"); return err }(),
	} {
		if driver.CodeOf(err) != driver.OutOfRange {
			t.Errorf("%s with two VMs: %v, want OutOfRange", name, err)
		}
	}
	listed, err := w.list()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{id: "m1", dup.ProviderID: "m1"}, listed); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}

	// Orphan collection: the machine records id, so the duplicate is leaked
	// and is deleted by its provider ID without touching id.
	m := withProviderID(machine("m1"), id)
	leaked := w.cloud.LeakedVMs([]*v1alpha1.Machine{m})
	if len(leaked) != 1 || leaked[0].ProviderID != dup.ProviderID {
		t.Fatalf("LeakedVMs = %v, want the duplicate only", leaked)
	}
	mustSucceed(t, w.delete(withProviderID(machine("m1"), dup.ProviderID)))
	mustSucceed(t, w.delete(withProviderID(machine("m1"), dup.ProviderID))) // again: already gone
	resp, err := w.status("m1")
	if err != nil || resp.ProviderID != id {
		t.Errorf("status after removing the duplicate: %v, %v; want %s", resp, err, id)
	}
	if leaked := w.cloud.LeakedVMs([]*v1alpha1.Machine{m}); len(leaked) != 0 {
		t.Errorf("LeakedVMs after orphan collection = %v", leaked)
	}
}

func TestDeleteByProviderIDOfAnotherMachineIsRefused(t *testing.T) {
	w := newWorld(t, sim.Options{})
	id := w.mustCreate("m1")
	if err := w.delete(withProviderID(machine("m2"), id)); driver.CodeOf(err) != driver.InvalidArgument {
		t.Errorf("delete of m1's VM as m2: %v, want InvalidArgument", err)
	}
	if _, ok := w.cloud.VM(id); !ok {
		t.Error("m1's VM was deleted")
	}
}

func TestRecreateWhileTerminatingGetsNewProviderID(t *testing.T) {
	w := newWorld(t, sim.Options{DeleteDelay: time.Minute})
	first := w.mustCreate("m1")
	mustSucceed(t, w.delete(machine("m1")))
	second := w.mustCreate("m1")
	if first == second {
		t.Fatalf("re-created VM reuses provider ID %s", first)
	}
	if diff := cmp.Diff(map[string]sim.VMState{first: sim.VMTerminating, second: sim.VMRunning}, w.states()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	w.clock.Step(time.Minute)
	if resp, err := w.status("m1"); err != nil || resp.ProviderID != second {
		t.Errorf("status = %v, %v; want %s", resp, err, second)
	}
}

func TestCreateInOtherZoneIsAlreadyExists(t *testing.T) {
	w := newWorld(t, sim.Options{})
	w.mustCreate("m1")
	w.class = simClass(sim.ProviderSpec{Zone: "zone-b", InstanceType: "small"})
	if _, err := w.create("m1"); driver.CodeOf(err) != driver.AlreadyExists {
		t.Errorf("create in another zone: %v, want AlreadyExists", err)
	}
}

func TestQuotas(t *testing.T) {
	tests := []struct {
		name    string
		quota   sim.Quota
		creates int
		wantOK  int
	}{
		{"max VMs", sim.Quota{MaxVMs: 2}, 3, 2},
		{"max VMs per zone", sim.Quota{MaxVMsPerZone: 1}, 3, 1},
		{"max cpu", sim.Quota{MaxResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")}}, 4, 2},
		{"no quota", sim.Quota{}, 4, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, sim.Options{Quota: tt.quota, InstanceTypes: map[string]corev1.ResourceList{
				"small": {corev1.ResourceCPU: resource.MustParse("2")},
			}})
			var codes []driver.Code
			for i := range tt.creates {
				_, err := w.create("m" + string(rune('a'+i)))
				codes = append(codes, driver.CodeOf(err))
			}
			var want []driver.Code
			for i := range tt.creates {
				want = append(want, map[bool]driver.Code{true: driver.OK, false: driver.ResourceExhausted}[i < tt.wantOK])
			}
			if diff := cmp.Diff(want, codes); diff != "" {
				t.Errorf("create codes (-want +got):\n%s", diff)
			}
			if got := len(w.cloud.VMs()); got != tt.wantOK {
				t.Errorf("%d VMs exist, want %d: a refused create must leave none", got, tt.wantOK)
			}
		})
	}
}

func TestTerminatingVMsCountAgainstQuota(t *testing.T) {
	w := newWorld(t, sim.Options{Quota: sim.Quota{MaxVMs: 1}, DeleteDelay: time.Minute})
	w.mustCreate("m1")
	mustSucceed(t, w.delete(machine("m1")))
	if _, err := w.create("m2"); driver.CodeOf(err) != driver.ResourceExhausted {
		t.Errorf("create while the only slot is terminating: %v, want ResourceExhausted", err)
	}
	w.clock.Step(time.Minute)
	if _, err := w.create("m2"); err != nil {
		t.Errorf("create after the deletion completed: %v", err)
	}
	mustSucceed(t, w.cloud.SetQuota(sim.Quota{MaxVMs: 5}))
	if _, err := w.create("m3"); err != nil {
		t.Errorf("create after raising the quota: %v", err)
	}
}

func TestInvalidProviderSpecReportsFieldPaths(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		opts sim.Options
		want []string // field paths
	}{
		{"empty", ``, sim.Options{}, []string{"providerSpec"}},
		{"null", `null`, sim.Options{}, []string{"providerSpec"}},
		{"not an object", `[1]`, sim.Options{}, []string{"providerSpec"}},
		{"missing required", `{}`, sim.Options{}, []string{"providerSpec.zone", "providerSpec.instanceType"}},
		{"unknown field", `{"zone":"a","instanceType":"s","zones":["b"]}`, sim.Options{}, []string{"providerSpec.zones"}},
		{"wrong type", `{"zone":1,"instanceType":"s"}`, sim.Options{}, []string{"providerSpec.zone"}},
		{"bad quantity", `{"zone":"a","instanceType":"s","capacity":{"cpu":"lots","memory":"1Gi"}}`, sim.Options{}, []string{"providerSpec.capacity[cpu]"}},
		{"negative quantity", `{"zone":"a","instanceType":"s","capacity":{"cpu":"-1"}}`, sim.Options{}, []string{"providerSpec.capacity[cpu]"}},
		{"label not a string", `{"zone":"a","instanceType":"s","labels":{"x":true}}`, sim.Options{}, []string{"providerSpec.labels[x]"}},
		{"bad duration", `{"zone":"a","instanceType":"s","bootDelay":"soon"}`, sim.Options{}, []string{"providerSpec.bootDelay"}},
		{"duration as number", `{"zone":"a","instanceType":"s","deleteDelay":30}`, sim.Options{}, []string{"providerSpec.deleteDelay"}},
		{"negative jitter", `{"zone":"a","instanceType":"s","bootJitter":"-1s"}`, sim.Options{}, []string{"providerSpec.bootJitter"}},
		{"bool as string", `{"zone":"a","instanceType":"s","requireInitialization":"yes"}`, sim.Options{}, []string{"providerSpec.requireInitialization"}},
		{"cluster as number", `{"zone":"a","instanceType":"s","cluster":7}`, sim.Options{}, []string{"providerSpec.cluster"}},
		{"unknown zone", `{"zone":"mars","instanceType":"s"}`, sim.Options{Zones: []string{"a"}}, []string{"providerSpec.zone"}},
		{"unknown instance type", `{"zone":"a","instanceType":"huge"}`, sim.Options{InstanceTypes: map[string]corev1.ResourceList{"s": nil}}, []string{"providerSpec.instanceType"}},
		{"several problems", `{"zone":"","instanceType":2,"extra":1}`, sim.Options{}, []string{"providerSpec.extra", "providerSpec.instanceType", "providerSpec.zone"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, tt.opts)
			w.class = classWithRaw(runtime.RawExtension{Raw: []byte(tt.raw)})
			_, err := w.create("m1")
			if driver.CodeOf(err) != driver.InvalidArgument {
				t.Fatalf("create: %v, want InvalidArgument", err)
			}
			if diff := cmp.Diff(tt.want, fieldPaths(err)); diff != "" {
				t.Errorf("field paths (-want +got):\n%s", diff)
			}
			if n := len(w.cloud.VMs()); n != 0 {
				t.Errorf("%d VMs after a refused create", n)
			}
		})
	}
}

// fieldPaths returns the paths of the *field.Errors joined in err's cause.
func fieldPaths(err error) []string {
	var paths []string
	var walk func(error)
	walk = func(err error) {
		if fe, ok := err.(*field.Error); ok {
			paths = append(paths, fe.Field)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return paths
}

func TestValidProviderSpecDefaultsCapacityFromInstanceType(t *testing.T) {
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	w := newWorld(t, sim.Options{InstanceTypes: map[string]corev1.ResourceList{"small": small}})
	w.class = classWithRaw(runtime.RawExtension{Raw: []byte(`{"zone":"zone-a","instanceType":"small","labels":{"pool":"blue"},"bootDelay":"1m"}`)})
	id := w.mustCreate("m1")
	vm, _ := w.cloud.VM(id)
	got := sim.VM{Capacity: vm.Capacity, Labels: vm.Labels, State: vm.State, StateUntil: vm.StateUntil}
	want := sim.VM{Capacity: small, Labels: map[string]string{"pool": "blue"}, State: sim.VMProvisioning, StateUntil: epoch.Add(time.Minute)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestProviderSpecBootJitter: a class's bootJitter replaces the cloud's, so
// "0s" boots every VM of the class after exactly its boot delay, and a
// class without one keeps the cloud's jitter.
func TestProviderSpecBootJitter(t *testing.T) {
	w := newWorld(t, sim.Options{BootDelay: time.Minute, BootJitter: time.Hour, Seed: 1})
	w.class = classWithRaw(runtime.RawExtension{Raw: []byte(`{"zone":"zone-a","instanceType":"small","bootJitter":"0s"}`)})
	for _, name := range []string{"m1", "m2", "m3"} {
		vm, _ := w.cloud.VM(w.mustCreate(name))
		if want := epoch.Add(time.Minute); !vm.StateUntil.Equal(want) {
			t.Errorf("%s boots at %v with bootJitter 0s; want %v", name, vm.StateUntil, want)
		}
	}
	w.class = classWithRaw(runtime.RawExtension{Raw: []byte(`{"zone":"zone-a","instanceType":"small"}`)})
	vm, _ := w.cloud.VM(w.mustCreate("m4"))
	if vm.StateUntil.Equal(epoch.Add(time.Minute)) {
		t.Errorf("m4 boots at exactly the boot delay; want the cloud's jitter of up to an hour on top")
	}
}

func TestProviderSpecInObjectForm(t *testing.T) {
	w := newWorld(t, sim.Options{})
	obj := &objectSpec{Zone: "zone-a", InstanceType: "small"}
	w.class = classWithRaw(runtime.RawExtension{Object: obj})
	if _, err := w.create("m1"); err != nil {
		t.Errorf("create with providerSpec.Object: %v", err)
	}
}

// objectSpec is a runtime.Object holding a providerSpec, as
// RawExtension.Object may.
type objectSpec struct {
	metav1.TypeMeta `json:",inline"`
	Zone            string `json:"zone"`
	InstanceType    string `json:"instanceType"`
}

func (o *objectSpec) DeepCopyObject() runtime.Object { c := *o; return &c }

func TestSecretAndClassChecks(t *testing.T) {
	tests := []struct {
		name     string
		opts     sim.Options
		secret   *corev1.Secret
		provider string
		want     driver.Code
		paths    []string
	}{
		{"no secret", sim.Options{}, nil, "", driver.InvalidArgument, []string{"secret.data[apiToken]", "secret.data[userData]"}},
		{"no user data", sim.Options{}, &corev1.Secret{Data: map[string][]byte{sim.CredentialsKey: []byte("x")}}, "", driver.InvalidArgument, []string{"secret.data[userData]"}},
		{"no token", sim.Options{}, &corev1.Secret{Data: map[string][]byte{"userData": []byte("x")}}, "", driver.InvalidArgument, []string{"secret.data[apiToken]"}},
		{"wrong token", sim.Options{APIToken: "other"}, simSecret(), "", driver.Unauthenticated, nil},
		{"right token", sim.Options{APIToken: testToken}, simSecret(), "", driver.OK, nil},
		{"other provider", sim.Options{}, simSecret(), "aws", driver.InvalidArgument, []string{"provider"}},
		{"empty provider", sim.Options{}, simSecret(), "", driver.OK, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, tt.opts)
			w.secret = tt.secret
			w.class.Provider = tt.provider
			_, err := w.create("m1")
			if got := driver.CodeOf(err); got != tt.want {
				t.Fatalf("create: %v, want code %s", err, tt.want)
			}
			if diff := cmp.Diff(tt.paths, fieldPaths(err)); diff != "" {
				t.Errorf("field paths (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUninitializedUntilInitializeMachine(t *testing.T) {
	w := newWorld(t, sim.Options{})
	w.class = simClass(sim.ProviderSpec{Zone: "zone-a", InstanceType: "small", RequireInitialization: true})
	id := w.mustCreate("m1")

	resp, err := w.status("m1")
	if driver.CodeOf(err) != driver.Uninitialized || resp == nil || resp.ProviderID != id {
		t.Fatalf("status before init = %+v, %v; want the response and Uninitialized", resp, err)
	}
	init, err := w.d.InitializeMachine(context.Background(), &driver.InitializeMachineRequest{Machine: machine("m1"), MachineClass: w.class, Secret: w.secret})
	if err != nil || init.ProviderID != id {
		t.Fatalf("InitializeMachine = %+v, %v", init, err)
	}
	if _, err := w.status("m1"); err != nil {
		t.Errorf("status after init: %v", err)
	}
	if _, err := w.d.InitializeMachine(context.Background(), &driver.InitializeMachineRequest{Machine: machine("ghost"), MachineClass: w.class, Secret: w.secret}); driver.CodeOf(err) != driver.NotFound {
		t.Errorf("InitializeMachine of unknown machine: %v, want NotFound", err)
	}
}

func TestStopStartAndRemove(t *testing.T) {
	w := newWorld(t, sim.Options{BootDelay: time.Minute})
	id := w.mustCreate("m1")
	w.clock.Step(time.Minute)
	mustSucceed(t, w.cloud.StopVM(id))
	if s := w.states()[id]; s != sim.VMStopped {
		t.Errorf("after StopVM: %s", s)
	}
	if _, err := w.status("m1"); err != nil {
		t.Errorf("status of a stopped VM: %v, want OK (it exists)", err)
	}
	mustSucceed(t, w.cloud.StartVM(id))
	if s := w.states()[id]; s != sim.VMProvisioning {
		t.Errorf("after StartVM: %s", s)
	}
	w.clock.Step(time.Minute)
	if s := w.states()[id]; s != sim.VMRunning {
		t.Errorf("after the reboot: %s", s)
	}
	if !w.cloud.RemoveVM(id) || w.cloud.RemoveVM(id) {
		t.Error("RemoveVM should report true once, then false")
	}
	if _, err := w.status("m1"); driver.CodeOf(err) != driver.NotFound {
		t.Errorf("status after RemoveVM: %v, want NotFound", err)
	}
	if err := w.cloud.StopVM(id); driver.CodeOf(err) != driver.NotFound {
		t.Errorf("StopVM of a removed VM: %v, want NotFound", err)
	}
}

func TestLeakedVMs(t *testing.T) {
	w := newWorld(t, sim.Options{DeleteDelay: time.Hour})
	a := w.mustCreate("a")
	b := w.mustCreate("b")
	w.mustCreate("c")
	mustSucceed(t, w.delete(machine("c"))) // terminating: never leaked
	orphan, err := w.cloud.AddVM(sim.VMSpec{MachineName: "gone", Zone: "zone-a", InstanceType: "small"})
	mustSucceed(t, err)

	machines := []*v1alpha1.Machine{
		withProviderID(machine("a"), a),                 // accounts for its VM
		machine("b"),                                    // no provider ID yet: accounts for b's VM
		withProviderID(machine("x"), "sim:///zone-a/x"), // has no VM; irrelevant
	}
	var got []string
	for _, v := range w.cloud.LeakedVMs(machines) {
		got = append(got, v.ProviderID)
	}
	if diff := cmp.Diff([]string{orphan.ProviderID}, got); diff != "" {
		t.Errorf("leaked (-want +got):\n%s", diff)
	}
	machines[1] = withProviderID(machine("b"), "sim:///zone-a/other") // b bound to another VM
	got = nil
	for _, v := range w.cloud.LeakedVMs(machines) {
		got = append(got, v.ProviderID)
	}
	if diff := cmp.Diff([]string{b, orphan.ProviderID}, got); diff != "" {
		t.Errorf("leaked after rebinding b (-want +got):\n%s", diff)
	}
}

func TestGetVolumeIDsSkipsForeignVolumes(t *testing.T) {
	w := newWorld(t, sim.Options{})
	resp, err := w.d.GetVolumeIDs(context.Background(), &driver.GetVolumeIDsRequest{PVSpecs: []*corev1.PersistentVolumeSpec{
		{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: sim.CSIDriverName, VolumeHandle: "vol-1"}}},
		{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-x"}}},
		{PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}}},
		nil,
		{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: sim.CSIDriverName, VolumeHandle: "vol-2"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"vol-1", "vol-2"}, resp.VolumeIDs); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for name, opts := range map[string]sim.Options{
		"negative boot delay": {BootDelay: -time.Second},
		"negative jitter":     {DeleteJitter: -time.Second},
		"negative quota":      {Quota: sim.Quota{MaxVMs: -1}},
	} {
		if _, err := sim.New(opts); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

func TestContextIsHonoured(t *testing.T) {
	w := newWorld(t, sim.Options{})
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := w.d.CreateMachine(canceled, &driver.CreateMachineRequest{Machine: machine("m1"), MachineClass: w.class, Secret: w.secret})
	if driver.CodeOf(err) != driver.Canceled || !errors.Is(err, context.Canceled) {
		t.Errorf("create with canceled context: %v, want Canceled wrapping context.Canceled", err)
	}
	if n := len(w.cloud.VMs()); n != 0 {
		t.Errorf("%d VMs after a canceled create", n)
	}
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	if _, err := w.d.ListMachines(expired, &driver.ListMachinesRequest{MachineClass: w.class, Secret: w.secret}); driver.CodeOf(err) != driver.DeadlineExceeded {
		t.Errorf("list with expired deadline: %v, want DeadlineExceeded", err)
	}
}
