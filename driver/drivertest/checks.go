package drivertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

// check is one rule of the contract. slug goes into machine names, so it
// is short and DNS-safe.
type check struct {
	name string
	slug string
	run  func(k *kit)
}

// checks are run in this order; each gets a fresh driver.
var checks = []check{
	{"CreateIsIdempotent", "idem", checkCreateIsIdempotent},
	{"StatusOfUnknownMachineIsNotFound", "unknown", checkStatusOfUnknownMachineIsNotFound},
	{"DeleteOfUnknownMachineSucceeds", "delunknown", checkDeleteOfUnknownMachineSucceeds},
	{"DeleteIsIdempotent", "delidem", checkDeleteIsIdempotent},
	{"ListShowsExactlyTheCreatedMachines", "list", checkListShowsExactlyTheCreatedMachines},
	{"ListIsScopedToTheClass", "scope", checkListIsScopedToTheClass},
	{"ContextCancellationIsHonoured", "ctx", checkContextCancellationIsHonoured},
	{"ErrorsAreTyped", "typed", checkErrorsAreTyped},
	{"InvalidProviderSpecIsInvalidArgument", "invalid", checkInvalidProviderSpecIsInvalidArgument},
	{"ConcurrentCreatesDoNotInterfere", "conc", checkConcurrentCreatesDoNotInterfere},
	{"InitializeMachineAfterCreate", "init", checkInitializeMachineAfterCreate},
	{"GetVolumeIDsSkipsForeignVolumes", "vol", checkGetVolumeIDsSkipsForeignVolumes},
	{"UnsupportedOperationsAreUnimplemented", "unimpl", checkUnsupportedOperationsAreUnimplemented},
}

// CheckNames returns the names of the checks Run runs, in order; they are
// the names of its subtests.
func CheckNames() []string {
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = c.name
	}
	return names
}

func checkCreateIsIdempotent(k *kit) {
	ctx := k.t.Context()
	m := k.newMachine()
	first := k.mustCreate(ctx, m)
	second, err := k.create(ctx, m)
	if err != nil {
		k.t.Fatalf("second CreateMachine(%s): %v; a create of an existing machine must return its VM", m.Name, err)
	}
	if second.ProviderID != first.ProviderID {
		k.t.Errorf("second CreateMachine(%s) returned provider ID %q, the first %q: create is not idempotent",
			m.Name, second.ProviderID, first.ProviderID)
	}
	k.eventuallyStatus(m, first.ProviderID)
	if k.opts.SupportsListMachines {
		k.eventuallyList(map[string]string{first.ProviderID: m.Name})
	}
}

func checkStatusOfUnknownMachineIsNotFound(k *kit) {
	m := k.newMachine()
	_, err := k.status(k.t.Context(), m)
	if code := driver.CodeOf(err); code != driver.NotFound {
		k.t.Errorf("GetMachineStatus of a machine never created: code %s (%v), want NotFound", code, err)
	}
}

func checkDeleteOfUnknownMachineSucceeds(k *kit) {
	m := k.newMachine()
	if err := k.delete(k.t.Context(), m); err != nil {
		k.t.Errorf("DeleteMachine of a machine never created: %v; want success, there is nothing to delete", err)
	}
}

func checkDeleteIsIdempotent(k *kit) {
	ctx := k.t.Context()
	m := k.newMachine()
	created := k.mustCreate(ctx, m)
	k.eventuallyStatus(m, created.ProviderID)
	if err := k.delete(ctx, m); err != nil {
		k.t.Fatalf("DeleteMachine(%s): %v", m.Name, err)
	}
	if err := k.delete(ctx, m); err != nil {
		k.t.Errorf("second DeleteMachine(%s): %v; deleting a deleted machine must succeed", m.Name, err)
	}
	k.eventually(fmt.Sprintf("GetMachineStatus(%s) reporting NotFound after the delete", m.Name), func(ctx context.Context) (bool, string) {
		_, err := k.status(ctx, m)
		return driver.CodeOf(err) == driver.NotFound, fmt.Sprintf("code %s (%v)", driver.CodeOf(err), err)
	})
	if k.opts.SupportsListMachines {
		k.eventuallyList(map[string]string{})
	}
}

func checkListShowsExactlyTheCreatedMachines(k *kit) {
	if !k.opts.SupportsListMachines {
		k.t.Skipf("the driver does not claim ListMachines")
	}
	ctx := k.t.Context()
	want := map[string]string{}
	var machines []*v1alpha1.Machine
	for range 3 {
		m := k.newMachine()
		want[k.mustCreate(ctx, m).ProviderID] = m.Name
		machines = append(machines, m)
	}
	if !k.eventuallyList(want) {
		return
	}
	gone := machines[1]
	if err := k.delete(ctx, gone); err != nil {
		k.t.Fatalf("DeleteMachine(%s): %v", gone.Name, err)
	}
	for id, name := range want {
		if name == gone.Name {
			delete(want, id)
		}
	}
	k.eventuallyList(want)
}

// checkListIsScopedToTheClass creates a machine with the fixture's class
// and one with the other class, and checks that each class lists its own
// VM only. Orphan collection deletes every VM that ListMachines of a class
// returns and no Machine claims, and it looks for the claims among the
// machines it manages: a VM of another class, namespace or cluster in the
// list is a healthy VM deleted.
func checkListIsScopedToTheClass(k *kit) {
	if !k.opts.SupportsListMachines {
		k.t.Skipf("the driver does not claim ListMachines")
	}
	ctx := k.t.Context()
	own, other := k.newMachine(), k.newMachine()
	ownID := k.mustCreate(ctx, own).ProviderID
	otherID := k.mustCreateInOther(ctx, other).ProviderID
	const why = "ListMachines must return the VMs of the requested class only: orphan collection deletes every listed VM that no Machine claims"
	// The other class's list first shows its VM: only then does the VM's
	// absence from the fixture's class's list mean anything.
	if !k.eventuallyListOf("the other class", k.otherClass(), map[string]string{otherID: other.Name}) {
		k.t.Logf("%s", why)
		return
	}
	if !k.eventuallyListOf("the fixture's class", k.class(), map[string]string{ownID: own.Name}) {
		k.t.Logf("%s", why)
	}
}

func checkContextCancellationIsHonoured(k *kit) {
	canceled, cancel := context.WithCancel(k.t.Context())
	cancel()
	m := k.newMachine()

	type call struct {
		op  driver.Operation
		run func() error
	}
	calls := []call{
		{driver.OperationCreateMachine, func() error { _, err := k.create(canceled, m); return err }},
		{driver.OperationGetMachineStatus, func() error { _, err := k.status(canceled, m); return err }},
		{driver.OperationDeleteMachine, func() error { return k.delete(canceled, m) }},
	}
	if k.opts.SupportsListMachines {
		calls = append(calls, call{driver.OperationListMachines, func() error { _, err := k.listOwn(canceled); return err }})
	}
	if k.opts.SupportsInitializeMachine {
		calls = append(calls, call{driver.OperationInitializeMachine, func() error { _, err := k.initialize(canceled, m); return err }})
	}
	for _, c := range calls {
		if err := c.run(); driver.CodeOf(err) != driver.Canceled {
			k.t.Errorf("%s with a canceled context: code %s (%v), want Canceled", c.op, driver.CodeOf(err), err)
		}
	}

	expired, cancelExpired := context.WithTimeout(k.t.Context(), -1)
	defer cancelExpired()
	if _, err := k.status(expired, m); driver.CodeOf(err) != driver.DeadlineExceeded {
		k.t.Errorf("GetMachineStatus with an expired deadline: code %s (%v), want DeadlineExceeded", driver.CodeOf(err), err)
	}

	if _, err := k.status(k.t.Context(), m); driver.CodeOf(err) != driver.NotFound {
		k.t.Errorf("GetMachineStatus(%s) after a canceled create: code %s (%v), want NotFound: a canceled create must not create",
			m.Name, driver.CodeOf(err), err)
	}
}

func checkErrorsAreTyped(k *kit) {
	ctx := k.t.Context()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	m := k.newMachine()

	provoked := map[string]error{}
	_, provoked["GetMachineStatus of an unknown machine"] = k.status(ctx, m)
	_, provoked["GetMachineStatus with a canceled context"] = k.status(canceled, m)
	provoked["DeleteMachine with a canceled context"] = k.delete(canceled, m)
	if k.fx.InvalidProviderSpec != nil {
		_, provoked["CreateMachine with an invalid providerSpec"] = k.createWithClass(ctx, m, k.invalidClass())
	}
	// Whether these calls should fail is for other checks to say; here only
	// the type of the errors they return matters.
	for _, what := range slices.Sorted(maps.Keys(provoked)) {
		err := provoked[what]
		if err == nil {
			k.t.Logf("%s succeeded; other checks judge that", what)
			continue
		}
		if _, ok := errors.AsType[*driver.Error](err); !ok {
			k.t.Errorf("%s: untyped error %T: %v", what, err, err)
		}
	}
}

func (k *kit) invalidClass() *v1alpha1.MachineClass {
	class := k.class()
	class.ProviderSpec = *k.fx.InvalidProviderSpec.DeepCopy()
	return class
}

func checkInvalidProviderSpecIsInvalidArgument(k *kit) {
	if k.fx.InvalidProviderSpec == nil {
		k.t.Skipf("the fixture has no InvalidProviderSpec")
	}
	ctx := k.t.Context()
	m := k.newMachine()
	_, err := k.createWithClass(ctx, m, k.invalidClass())
	if code := driver.CodeOf(err); code != driver.InvalidArgument {
		k.t.Errorf("CreateMachine with an invalid providerSpec: code %s (%v), want InvalidArgument", code, err)
	}
	if _, err := k.status(ctx, m); driver.CodeOf(err) != driver.NotFound {
		k.t.Errorf("GetMachineStatus(%s) after a refused create: code %s (%v), want NotFound: a failed create must not leave a VM",
			m.Name, driver.CodeOf(err), err)
	}
}

func checkConcurrentCreatesDoNotInterfere(k *kit) {
	ctx := k.t.Context()
	n := k.opts.Concurrency
	machines := make([]*v1alpha1.Machine, n)
	for i := range machines {
		machines[i] = k.newMachine()
	}
	type result struct {
		resp *driver.CreateMachineResponse
		err  error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i, m := range machines {
		wg.Go(func() {
			resp, err := k.create(ctx, m)
			results[i] = result{resp, err}
		})
	}
	wg.Wait()

	owner := map[string]string{} // provider ID -> machine
	ok := true
	for i, r := range results {
		name := machines[i].Name
		switch {
		case r.err != nil:
			k.t.Errorf("concurrent CreateMachine(%s): %v", name, r.err)
			ok = false
		case r.resp.ProviderID == "":
			k.t.Errorf("concurrent CreateMachine(%s) returned no provider ID", name)
			ok = false
		case owner[r.resp.ProviderID] != "":
			k.t.Errorf("concurrent creates of %s and %s both returned provider ID %s", owner[r.resp.ProviderID], name, r.resp.ProviderID)
			ok = false
		default:
			owner[r.resp.ProviderID] = name
		}
	}
	if !ok {
		return
	}
	for i, m := range machines {
		k.eventuallyStatus(m, results[i].resp.ProviderID)
	}
	if k.opts.SupportsListMachines {
		k.eventuallyList(owner)
	}
}

func checkInitializeMachineAfterCreate(k *kit) {
	if !k.opts.SupportsInitializeMachine {
		k.t.Skipf("the driver does not claim InitializeMachine")
	}
	ctx := k.t.Context()
	m := k.newMachine()
	created := k.mustCreate(ctx, m)
	k.eventuallyStatus(m, created.ProviderID)
	resp, err := k.initialize(ctx, m)
	if err != nil {
		k.t.Fatalf("InitializeMachine(%s) after its create: %v", m.Name, err)
	}
	if resp.ProviderID != created.ProviderID {
		k.t.Errorf("InitializeMachine(%s) returned provider ID %q, CreateMachine %q", m.Name, resp.ProviderID, created.ProviderID)
	}
	k.eventually(fmt.Sprintf("GetMachineStatus(%s) reporting an initialized VM", m.Name), func(ctx context.Context) (bool, string) {
		_, err := k.status(ctx, m)
		return err == nil, fmt.Sprintf("code %s (%v)", driver.CodeOf(err), err)
	})
	if _, err := k.initialize(ctx, k.newMachine()); driver.CodeOf(err) != driver.NotFound {
		k.t.Errorf("InitializeMachine of a machine never created: code %s (%v), want NotFound", driver.CodeOf(err), err)
	}
}

func checkGetVolumeIDsSkipsForeignVolumes(k *kit) {
	if !k.opts.SupportsGetVolumeIDs {
		k.t.Skipf("the driver does not claim GetVolumeIDs")
	}
	foreign := &corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
		NFS: &corev1.NFSVolumeSource{Server: "nfs.example", Path: "/exports/drivertest"},
	}}
	specs := []*corev1.PersistentVolumeSpec{foreign}
	var want []string
	if k.fx.Volume != nil {
		specs = append(specs, k.fx.Volume.DeepCopy())
		want = append(want, k.fx.VolumeID)
	}
	resp, err := k.d.GetVolumeIDs(k.t.Context(), &driver.GetVolumeIDsRequest{PVSpecs: specs})
	if err != nil {
		k.t.Fatalf("GetVolumeIDs: %v", err)
	}
	// MCM's contract allows an empty ID in place of a foreign volume.
	got := slices.DeleteFunc(slices.Clone(resp.VolumeIDs), func(id string) bool { return id == "" })
	if !slices.Equal(got, want) {
		k.t.Errorf("GetVolumeIDs of %d volumes (an NFS one, then the fixture's if any) = %q, want %q", len(specs), got, want)
	}
}

func checkUnsupportedOperationsAreUnimplemented(k *kit) {
	ctx := k.t.Context()
	m := k.newMachine()
	var checked int
	if !k.opts.SupportsInitializeMachine {
		checked++
		if _, err := k.initialize(ctx, m); driver.CodeOf(err) != driver.Unimplemented {
			k.t.Errorf("InitializeMachine, not claimed: code %s (%v), want Unimplemented", driver.CodeOf(err), err)
		}
	}
	if !k.opts.SupportsListMachines {
		checked++
		if _, err := k.listOwn(ctx); driver.CodeOf(err) != driver.Unimplemented {
			k.t.Errorf("ListMachines, not claimed: code %s (%v), want Unimplemented", driver.CodeOf(err), err)
		}
	}
	if !k.opts.SupportsGetVolumeIDs {
		checked++
		if _, err := k.d.GetVolumeIDs(ctx, &driver.GetVolumeIDsRequest{}); driver.CodeOf(err) != driver.Unimplemented {
			k.t.Errorf("GetVolumeIDs, not claimed: code %s (%v), want Unimplemented", driver.CodeOf(err), err)
		}
	}
	if checked == 0 {
		k.t.Skipf("the driver claims every optional operation")
	}
}
