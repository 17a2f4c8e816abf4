package sim_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

// TestCloudStateMachine drives a Cloud with random sequences of creates,
// deletes, lookups, faults, lost responses, duplicates, orphans, vanishing
// VMs, quota changes, orphan collection and clock steps, playing the
// machine controller's part with a model of which machines exist. It
// checks that
//
//   - every error is a *driver.Error;
//   - a machine never has more than one VM, except after duplicates were
//     injected for it or a delete by provider ID left another VM behind;
//   - a failed create never leaves a VM, except through an injected lost
//     response;
//   - lookups and lists that no fault hit report exactly the cloud's VMs
//     of the class, and never a VM of another class or cluster;
//   - the only leaked VMs are injected orphans and the surplus VMs above,
//     and an orphan collection that no fault disturbs leaves none;
//   - VMs of other classes or clusters are never deleted.
func TestCloudStateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newCloudModel(t)
		t.Repeat(rapid.StateMachineActions(m))
	})
}

type cloudModel struct {
	w *world
	// machines that exist, by name, with the provider ID the controller
	// recorded from a successful create.
	machines map[string]*v1alpha1.Machine
	// tainted names may have surplus or leaked VMs on purpose: duplicates
	// were injected, or a delete by provider ID left another VM of the
	// machine behind. Orphan collection untaints them.
	tainted map[string]bool
	// orphans are names of injected orphan VMs (no machine ever had them).
	orphans map[string]bool
	// lostCreates are the after-effect create faults injected per name.
	lostCreates map[string]sim.FaultID
	maxVMs      int // the quota set last; 0 for none
	nextOrphan  int
	// foreign are the provider IDs of VMs of other classes or clusters,
	// which the model's class must neither list nor delete.
	foreign map[string]bool
}

// foreignClasses share the cloud with the model's class: the same class
// in another cluster, and another class of the same cluster.
var foreignClasses = []*v1alpha1.MachineClass{
	simClass(sim.ProviderSpec{Zone: "zone-a", InstanceType: "small", Cluster: "other-cluster"}),
	renamed(simClass(sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}), "shoot", "large"),
}

var machineNames = []string{"m0", "m1", "m2", "m3"}

func newCloudModel(t *rapid.T) *cloudModel {
	clk := clocktesting.NewFakeClock(epoch)
	delay := rapid.SampledFrom([]time.Duration{0, 10 * time.Second, time.Minute})
	cloud, err := sim.New(sim.Options{
		Clock:        clk,
		Seed:         rapid.Uint64().Draw(t, "seed"),
		BootDelay:    delay.Draw(t, "bootDelay"),
		BootJitter:   delay.Draw(t, "bootJitter"),
		DeleteDelay:  delay.Draw(t, "deleteDelay"),
		DeleteJitter: delay.Draw(t, "deleteJitter"),
	})
	if err != nil {
		t.Fatalf("sim.New: %v", err)
	}
	return &cloudModel{
		w: &world{
			clock: clk, cloud: cloud, d: cloud.Driver(),
			class: simClass(sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}), secret: simSecret(),
		},
		machines:    map[string]*v1alpha1.Machine{},
		tainted:     map[string]bool{},
		orphans:     map[string]bool{},
		lostCreates: map[string]sim.FaultID{},
		foreign:     map[string]bool{},
	}
}

// vmSpec is the VMSpec of a VM of the model's class for the machine.
func (m *cloudModel) vmSpec(t *rapid.T, name string) sim.VMSpec {
	spec, err := sim.VMSpecFor(m.w.class, name)
	if err != nil {
		t.Fatalf("VMSpecFor(%s): %v", name, err)
	}
	return spec
}

// ownVMs returns the VMs of the model's class.
func (m *cloudModel) ownVMs(vms []sim.VM) []sim.VM {
	return slices.DeleteFunc(vms, func(v sim.VM) bool { return m.foreign[v.ProviderID] })
}

// liveIDs returns the provider IDs of the machine name's VMs that the
// driver sees.
func (m *cloudModel) liveIDs(name string) []string {
	var ids []string
	for _, v := range m.w.cloud.VMs() {
		if v.MachineName == name && v.State != sim.VMTerminating {
			ids = append(ids, v.ProviderID)
		}
	}
	return ids
}

// faultHit reports whether a fault hit a call between two snapshots of the
// faults: a fault's hits grew, or a limited fault was spent.
func faultHit(before, after []sim.ActiveFault) bool {
	now := map[sim.FaultID]int{}
	for _, f := range after {
		now[f.ID] = f.Hits
	}
	for _, f := range before {
		hits, ok := now[f.ID]
		if !ok || hits > f.Hits {
			return true
		}
	}
	return false
}

func requireTyped(t *rapid.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if _, ok := errors.AsType[*driver.Error](err); !ok {
		t.Fatalf("%s: untyped error %T: %v", what, err, err)
	}
}

func (m *cloudModel) machine(name string) *v1alpha1.Machine {
	if mc, ok := m.machines[name]; ok {
		return mc.DeepCopy()
	}
	return machine(name)
}

func (m *cloudModel) Create(t *rapid.T) {
	name := rapid.SampledFrom(machineNames).Draw(t, "name")
	before := m.liveIDs(name)
	total := len(m.w.cloud.VMs())
	lost, lostPending := m.lostCreates[name]
	faultsBefore := m.w.cloud.Faults()

	resp, err := m.w.d.CreateMachine(context.Background(), &driver.CreateMachineRequest{Machine: m.machine(name), MachineClass: m.w.class, Secret: m.w.secret})
	requireTyped(t, "CreateMachine", err)
	after := m.liveIDs(name)
	lostSpent := lostPending && !slices.ContainsFunc(m.w.cloud.Faults(), func(f sim.ActiveFault) bool { return f.ID == lost })
	if lostSpent {
		delete(m.lostCreates, name)
	}

	if _, ok := m.machines[name]; !ok {
		m.machines[name] = machine(name) // the controller holds the machine, whatever the outcome
	}
	switch {
	case err == nil:
		if len(after) != 1 || after[0] != resp.ProviderID {
			t.Fatalf("create of %s succeeded with %s, but its VMs are %v", name, resp.ProviderID, after)
		}
		m.machines[name].Spec.ProviderID = resp.ProviderID
		if len(before) == 0 && m.maxVMs > 0 && total >= m.maxVMs {
			t.Fatalf("create of %s made VM %d with a quota of %d VMs", name, total+1, m.maxVMs)
		}
	case lostSpent && driver.CodeOf(err) == driver.DeadlineExceeded:
		// The create went through (creating the VM or finding it) and only
		// its response was lost.
		if len(after) != 1 || len(before) > 1 || (len(before) == 1 && before[0] != after[0]) {
			t.Fatalf("create of %s with a lost response: VMs %v before, %v after", name, before, after)
		}
		if id := m.machines[name].Spec.ProviderID; id != "" && id != after[0] {
			// The machine records a VM that vanished; the new one counts as
			// an orphan until the controller adopts it, as in MCM.
			m.tainted[name] = true
		}
	default:
		if !slices.Equal(before, after) {
			t.Fatalf("failed create of %s (%v) changed its VMs from %v to %v", name, err, before, after)
		}
		if !faultHit(faultsBefore, m.w.cloud.Faults()) || lostSpent {
			switch code := driver.CodeOf(err); {
			case code == driver.OutOfRange && len(before) > 1:
			case code == driver.ResourceExhausted && len(before) == 0:
			default:
				t.Fatalf("create of %s failed with %v without a fault (VMs %v)", name, err, before)
			}
		}
	}
}

func (m *cloudModel) Delete(t *rapid.T) {
	name := rapid.SampledFrom(machineNames).Draw(t, "name")
	mc := m.machine(name)
	before := m.liveIDs(name)
	faultsBefore := m.w.cloud.Faults()

	err := m.w.delete(mc)
	requireTyped(t, "DeleteMachine", err)
	after := m.liveIDs(name)
	if err != nil {
		if !faultHit(faultsBefore, m.w.cloud.Faults()) && !(driver.CodeOf(err) == driver.OutOfRange && mc.Spec.ProviderID == "" && len(before) > 1) {
			t.Fatalf("delete of %s failed with %v without a fault (VMs %v)", name, err, before)
		}
		return
	}
	if id := mc.Spec.ProviderID; id != "" {
		if slices.Contains(after, id) {
			t.Fatalf("delete of %s succeeded, but its VM %s is still live", name, id)
		}
		if len(after) > 0 {
			m.tainted[name] = true // the other VMs are leaks now, for orphan collection
		}
	} else if len(after) > 0 {
		t.Fatalf("delete of %s (no provider ID) succeeded, but VMs %v are live", name, after)
	}
	delete(m.machines, name)
}

func (m *cloudModel) Status(t *rapid.T) {
	name := rapid.SampledFrom(machineNames).Draw(t, "name")
	ids := m.liveIDs(name)
	faultsBefore := m.w.cloud.Faults()
	resp, err := m.w.status(name)
	requireTyped(t, "GetMachineStatus", err)
	if faultHit(faultsBefore, m.w.cloud.Faults()) {
		return
	}
	switch code := driver.CodeOf(err); {
	case len(ids) == 0 && code == driver.NotFound:
	case len(ids) == 1 && code == driver.OK && resp.ProviderID == ids[0]:
	case len(ids) > 1 && code == driver.OutOfRange:
	default:
		t.Fatalf("status of %s with VMs %v: %+v, %v", name, ids, resp, err)
	}
}

func (m *cloudModel) List(t *rapid.T) {
	faultsBefore := m.w.cloud.Faults()
	got, err := m.w.list()
	requireTyped(t, "ListMachines", err)
	if faultHit(faultsBefore, m.w.cloud.Faults()) {
		return
	}
	if err != nil {
		t.Fatalf("list failed without a fault: %v", err)
	}
	want := map[string]string{}
	for _, v := range m.ownVMs(m.w.cloud.VMs()) {
		if v.State != sim.VMTerminating {
			want[v.ProviderID] = v.MachineName
		}
	}
	if !maps.Equal(want, got) {
		t.Fatalf("list = %v, want %v (VMs of other classes: %v)", got, want, m.foreign)
	}
}

func (m *cloudModel) InjectFault(t *rapid.T) {
	f := sim.Fault{
		Operation: rapid.SampledFrom(append(driver.Operations(), "")).Draw(t, "operation"),
		Code: rapid.SampledFrom([]driver.Code{
			driver.Unavailable, driver.Internal, driver.ResourceExhausted, driver.DeadlineExceeded, driver.Unknown,
		}).Draw(t, "code"),
	}
	if rapid.Bool().Draw(t, "limited") {
		f.Times = rapid.IntRange(1, 3).Draw(t, "times")
	} else {
		f.Probability = rapid.Float64Range(0.1, 0.9).Draw(t, "probability")
	}
	if _, err := m.w.cloud.InjectFault(f); err != nil {
		t.Fatalf("InjectFault(%+v): %v", f, err)
	}
}

func (m *cloudModel) LoseCreateResponse(t *rapid.T) {
	name := rapid.SampledFrom(machineNames).Draw(t, "name")
	if _, pending := m.lostCreates[name]; pending {
		t.Skip("a lost create is already pending for " + name)
	}
	id, err := m.w.cloud.InjectFault(sim.Fault{
		Operation: driver.OperationCreateMachine, MachineName: name, Code: driver.DeadlineExceeded, Times: 1, AfterEffect: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	m.lostCreates[name] = id
}

func (m *cloudModel) ClearFaults(*rapid.T) {
	m.w.cloud.ClearFaults()
	clear(m.lostCreates)
}

func (m *cloudModel) StepClock(t *rapid.T) {
	m.w.clock.Step(rapid.SampledFrom([]time.Duration{time.Second, 30 * time.Second, 2 * time.Minute}).Draw(t, "step"))
}

func (m *cloudModel) InjectDuplicate(t *rapid.T) {
	name := rapid.SampledFrom(machineNames).Draw(t, "name")
	if len(m.liveIDs(name)) == 0 {
		t.Skip("no VM to duplicate")
	}
	if _, err := m.w.cloud.AddVM(m.vmSpec(t, name)); err != nil {
		t.Fatal(err)
	}
	m.tainted[name] = true
}

func (m *cloudModel) InjectOrphan(t *rapid.T) {
	name := fmt.Sprintf("orphan%d", m.nextOrphan)
	m.nextOrphan++
	if _, err := m.w.cloud.AddVM(m.vmSpec(t, name)); err != nil {
		t.Fatal(err)
	}
	m.orphans[name] = true
}

// InjectForeignVM adds a VM of another class or cluster, named like no
// machine of the model, which the model's class would delete as an orphan
// if it listed it.
func (m *cloudModel) InjectForeignVM(t *rapid.T) {
	class := rapid.SampledFrom(foreignClasses).Draw(t, "class")
	spec, err := sim.VMSpecFor(class, fmt.Sprintf("foreign%d", m.nextOrphan))
	m.nextOrphan++
	if err != nil {
		t.Fatal(err)
	}
	v, err := m.w.cloud.AddVM(spec)
	if err != nil {
		t.Fatal(err)
	}
	m.foreign[v.ProviderID] = true
}

func (m *cloudModel) VMVanishes(t *rapid.T) {
	vms := m.w.cloud.VMs()
	if len(vms) == 0 {
		t.Skip("no VM")
	}
	v := rapid.SampledFrom(vms).Draw(t, "vm")
	m.w.cloud.RemoveVM(v.ProviderID)
	delete(m.foreign, v.ProviderID)
}

func (m *cloudModel) SetQuota(t *rapid.T) {
	m.maxVMs = rapid.IntRange(0, 6).Draw(t, "maxVMs")
	if err := m.w.cloud.SetQuota(sim.Quota{MaxVMs: m.maxVMs}); err != nil {
		t.Fatal(err)
	}
}

// CollectOrphans plays MCM's orphan collection: list, then delete every VM
// whose machine is gone or records another provider ID, by provider ID.
func (m *cloudModel) CollectOrphans(t *rapid.T) {
	faultsBefore := m.w.cloud.Faults()
	listed, err := m.w.list()
	requireTyped(t, "ListMachines", err)
	if err != nil {
		return
	}
	for id, name := range listed {
		mc, ok := m.machines[name]
		if ok && (mc.Spec.ProviderID == "" || mc.Spec.ProviderID == id) {
			continue
		}
		err := m.w.delete(withProviderID(machine(name), id))
		requireTyped(t, "DeleteMachine of an orphan", err)
	}
	if faultHit(faultsBefore, m.w.cloud.Faults()) {
		return
	}
	if leaked := m.ownVMs(m.w.cloud.LeakedVMs(slices.Collect(maps.Values(m.machines)))); len(leaked) > 0 {
		t.Fatalf("VMs leaked after an undisturbed orphan collection: %v", leaked)
	}
	clear(m.orphans)
	for name := range m.tainted {
		if len(m.liveIDs(name)) <= 1 {
			delete(m.tainted, name)
		}
	}
}

func (m *cloudModel) Check(t *rapid.T) {
	for _, name := range machineNames {
		if ids := m.liveIDs(name); len(ids) > 1 && !m.tainted[name] {
			t.Fatalf("machine %s has VMs %v, but no duplicate was injected", name, ids)
		}
	}
	for _, v := range m.ownVMs(m.w.cloud.LeakedVMs(slices.Collect(maps.Values(m.machines)))) {
		if !m.orphans[v.MachineName] && !m.tainted[v.MachineName] {
			t.Fatalf("VM %s of machine %s leaked", v.ProviderID, v.MachineName)
		}
	}
	for id := range m.foreign {
		if v, ok := m.w.cloud.VM(id); !ok || v.State == sim.VMTerminating {
			t.Fatalf("VM %s of another class was deleted (%+v)", id, v)
		}
	}
}
