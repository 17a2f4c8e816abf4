package machine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// driverCall is a driver call as a lyingDriver records it: the operation,
// the machine of the request, and the provider ID the request carries.
type driverCall struct {
	Op                  driver.Operation
	Machine, ProviderID string
}

// lyingDriver wraps a driver and, for the machines named in lies, answers
// CreateMachine (when the value is "create") and InitializeMachine (always)
// with the victim's provider ID and node, after doing the real work. It
// records every call.
type lyingDriver struct {
	driver.Driver
	mu                    sync.Mutex
	lies                  map[string]string
	victimPID, victimNode string
	calls                 []driverCall
}

func (d *lyingDriver) record(op driver.Operation, m *v1alpha1.Machine) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, driverCall{op, m.Name, m.Spec.ProviderID})
	return d.lies[m.Name]
}

func (d *lyingDriver) victim() (string, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.victimPID, d.victimNode
}

func (d *lyingDriver) recorded() []driverCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

func (d *lyingDriver) CreateMachine(ctx context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	lie := d.record(driver.OperationCreateMachine, req.Machine)
	resp, err := d.Driver.CreateMachine(ctx, req)
	if err == nil && lie == "create" {
		out := *resp
		out.ProviderID, out.NodeName = d.victim()
		return &out, nil
	}
	return resp, err
}

func (d *lyingDriver) InitializeMachine(ctx context.Context, req *driver.InitializeMachineRequest) (*driver.InitializeMachineResponse, error) {
	lie := d.record(driver.OperationInitializeMachine, req.Machine)
	resp, err := d.Driver.InitializeMachine(ctx, req)
	if lie != "" {
		pid, node := d.victim()
		return &driver.InitializeMachineResponse{ProviderID: pid, NodeName: node}, nil
	}
	return resp, err
}

func (d *lyingDriver) GetMachineStatus(ctx context.Context, req *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	d.record(driver.OperationGetMachineStatus, req.Machine)
	return d.Driver.GetMachineStatus(ctx, req)
}

func (d *lyingDriver) DeleteMachine(ctx context.Context, req *driver.DeleteMachineRequest) (*driver.DeleteMachineResponse, error) {
	d.record(driver.OperationDeleteMachine, req.Machine)
	return d.Driver.DeleteMachine(ctx, req)
}

// TestIntegrationLyingDriverCannotAimAtAnotherMachinesVM: a driver answers
// for liar machines with the provider ID and node of a running victim —
// liar 1 from CreateMachine on, liar 2 from InitializeMachine. No driver
// call for a liar ever carries the victim's provider ID (a driver that
// deletes by provider ID, as the contract allows, would delete the
// victim's VM); the victim's VM, node and machine are untouched; each
// liar is Failed with the driver's fault on lastOperation and a ForeignVM
// event and keeps nothing of the answer; its own VM is deleted with it,
// by its name.
func TestIntegrationLyingDriverCannotAimAtAnotherMachinesVM(t *testing.T) {
	t.Parallel()
	rec := &eventLog{}
	var liar *lyingDriver
	w := integration(t, worldOptions{ctrl: machine.Options{Recorder: rec}, drv: func(d driver.Driver) driver.Driver {
		liar = &lyingDriver{Driver: d, lies: map[string]string{}}
		return liar
	}})
	ctx := context.Background()
	createClass(t, w.mc, w.core, w.ns, true)
	machines := w.mc.MachineV1alpha1().Machines(w.ns)

	victim := newMachine(w.ns, w.name(0), "sim", nil)
	createMachine(t, w.mc, victim)
	testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, victim.Name, v1alpha1.MachineRunning))
	v, err := machines.Get(ctx, victim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	victimNode, victimVM := v.Labels[v1alpha1.NodeLabelKey], v.Spec.ProviderID
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		n, err := w.core.CoreV1().Nodes().Get(ctx, victimNode, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := n.Annotations[v1alpha1.MachineUIDAnnotation]
		return got == string(v.UID), "node bound to " + got
	})

	liars := []string{w.name(1), w.name(2)}
	liar.mu.Lock()
	liar.victimPID, liar.victimNode = victimVM, victimNode
	liar.lies[liars[0]], liar.lies[liars[1]] = "create", "init"
	liar.mu.Unlock()
	for _, name := range liars {
		createMachine(t, w.mc, newMachine(w.ns, name, "sim", nil))
	}

	// aimed lists the calls for a liar that carry the victim's provider ID.
	aimed := func() []driverCall {
		var out []driverCall
		for _, c := range liar.recorded() {
			if slices.Contains(liars, c.Machine) && c.ProviderID == victimVM {
				out = append(out, c)
			}
		}
		return out
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		if got := aimed(); len(got) > 0 {
			return true, "" // reported below
		}
		var waiting []string
		for _, name := range liars {
			m, err := machines.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if m.Status.CurrentStatus.Phase != v1alpha1.MachineFailed || len(rec.of(name, machine.ReasonForeignVM)) == 0 {
				waiting = append(waiting, fmt.Sprintf("%s: phase %q, lastOperation %+v", name, m.Status.CurrentStatus.Phase, m.Status.LastOperation))
			}
		}
		return len(waiting) == 0, strings.Join(waiting, "; ")
	})
	if got := aimed(); len(got) > 0 {
		t.Fatalf("driver calls for the liars carry the victim's provider ID %s: %+v", victimVM, got)
	}
	for _, name := range liars {
		m, err := machines.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		op := m.Status.LastOperation
		if op.State != v1alpha1.MachineStateFailed || op.ErrorCode != driver.Internal.String() || !strings.Contains(op.Description, victimVM) {
			t.Errorf("%s: lastOperation %+v, want Failed, code Internal, naming VM %s", name, op, victimVM)
		}
		if m.Spec.ProviderID == victimVM || m.Labels[v1alpha1.NodeLabelKey] == victimNode {
			t.Errorf("%s stored the driver's answer: provider ID %q, node %q", name, m.Spec.ProviderID, m.Labels[v1alpha1.NodeLabelKey])
		}
		for _, e := range rec.of(name, machine.ReasonForeignVM) {
			if e.Type != corev1.EventTypeWarning {
				t.Errorf("%s: event %+v is not a warning", name, e)
			}
		}
	}
	untouched(t, w, victimNode, string(v.UID))

	for _, name := range liars {
		if err := machines.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range liars {
		testenv.Eventually(t, time.Minute, machineGone(w.mc, w.ns, name))
	}
	if got := aimed(); len(got) > 0 {
		t.Errorf("driver calls for the liars carry the victim's provider ID %s: %+v", victimVM, got)
	}
	untouched(t, w, victimNode, string(v.UID))
	if vm, ok := w.cloud.VM(victimVM); !ok || vm.State == sim.VMTerminating {
		t.Errorf("the victim's VM %s: %+v, found %v", victimVM, vm, ok)
	}
	if m, err := machines.Get(ctx, victim.Name, metav1.GetOptions{}); err != nil || m.DeletionTimestamp != nil ||
		m.Status.CurrentStatus.Phase != v1alpha1.MachineRunning {
		t.Errorf("victim: %v, err %v", m, err)
	}
	if leaked := w.cloud.LeakedVMs([]*v1alpha1.Machine{v}); len(leaked) > 0 {
		t.Errorf("the liars' VMs were left behind: %+v", leaked)
	}
}
