package machine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// longNodeNames is a driver that names every VM's node with 70
// characters: a valid Node name, but not a label value.
type longNodeNames struct{ driver.Driver }

func longName(name string) string {
	if len(name) >= 70 {
		return name
	}
	return name + "-" + strings.Repeat("n", 69-len(name))
}

func (d longNodeNames) CreateMachine(ctx context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	resp, err := d.Driver.CreateMachine(ctx, req)
	if resp != nil {
		resp.NodeName = longName(resp.NodeName)
	}
	return resp, err
}

func (d longNodeNames) InitializeMachine(ctx context.Context, req *driver.InitializeMachineRequest) (*driver.InitializeMachineResponse, error) {
	resp, err := d.Driver.InitializeMachine(ctx, req)
	if resp != nil && resp.NodeName != "" {
		resp.NodeName = longName(resp.NodeName)
	}
	return resp, err
}

func (d longNodeNames) GetMachineStatus(ctx context.Context, req *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	resp, err := d.Driver.GetMachineStatus(ctx, req)
	if resp != nil {
		resp.NodeName = longName(resp.NodeName)
	}
	return resp, err
}

// TestIntegrationDriverNodeNameIsChecked: what a driver returns is checked
// before it is written. A node name that cannot be the machine's node
// label is a failed creation on lastOperation, and the machine is still
// deleted, VM included.
func TestIntegrationDriverNodeNameIsChecked(t *testing.T) {
	t.Parallel()
	w := integration(t, worldOptions{
		ctrl: machine.Options{MediumRetry: time.Second, MaxRetryDelay: 2 * time.Second},
		drv:  func(d driver.Driver) driver.Driver { return longNodeNames{d} },
	})
	ctx := context.Background()
	createClass(t, w.mc, w.core, w.ns, true)
	m := newMachine(w.ns, w.name(0), "sim", nil)
	createMachine(t, w.mc, m)
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		got, err := getMachine(ctx, w.mc, w.ns, m.Name)
		if err != nil {
			return false, err.Error()
		}
		op := got.Status.LastOperation
		return got.Status.CurrentStatus.Phase == v1alpha1.MachineCrashLoopBackOff && op.State == v1alpha1.MachineStateFailed &&
			op.ErrorCode == driver.Internal.String() && strings.Contains(op.Description, "cannot name a Node"), fmt.Sprintf("%+v", got.Status)
	})
	if vms := w.cloud.VMs(); len(vms) != 1 {
		t.Fatalf("VMs %v, want the machine's one", vms)
	}
	if err := w.mc.MachineV1alpha1().Machines(w.ns).Delete(ctx, m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, machineGone(w.mc, w.ns, m.Name))
	testenv.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		live := 0
		for _, vm := range w.cloud.VMs() {
			if vm.State != sim.VMTerminating {
				live++
			}
		}
		return live == 0, fmt.Sprintf("VMs left: %v", w.cloud.VMs())
	})
}

// TestIntegrationLongNameRecreated: a machine whose name has 63
// characters, deleted and created again under the same name, gets a VM
// and node whose name still fits a label, runs, and is deleted.
func TestIntegrationLongNameRecreated(t *testing.T) {
	t.Parallel()
	w := integration(t, worldOptions{})
	ctx := context.Background()
	createClass(t, w.mc, w.core, w.ns, true)
	name := w.name(0) + "-" + strings.Repeat("x", 62-len(w.name(0)))
	if len(name) != 63 {
		t.Fatalf("name of %d characters", len(name))
	}
	machines := w.mc.MachineV1alpha1().Machines(w.ns)
	var nodes []string
	for round := range 2 {
		createMachine(t, w.mc, newMachine(w.ns, name, "sim", nil))
		testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, name, v1alpha1.MachineRunning))
		m, err := machines.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node := m.Labels[v1alpha1.NodeLabelKey]
		if problems := validation.IsValidLabelValue(node); len(problems) > 0 {
			t.Fatalf("round %d: node %q: %v", round, node, problems)
		}
		nodes = append(nodes, node)
		if err := machines.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, time.Minute, machineGone(w.mc, w.ns, name))
	}
	if nodes[0] == nodes[1] {
		t.Errorf("both VMs got node %s", nodes[0])
	}
}

// TestIntegrationInvalidProviderSpecMachineIsDeleted: a machine whose
// class the driver refuses never got a VM, and its deletion does not wait
// for the class to be fixed.
func TestIntegrationInvalidProviderSpecMachineIsDeleted(t *testing.T) {
	t.Parallel()
	w := integration(t, worldOptions{ctrl: machine.Options{MediumRetry: time.Second, MaxRetryDelay: 2 * time.Second}})
	ctx := context.Background()
	createClass(t, w.mc, w.core, w.ns, true)
	bad := []byte(`{"providerSpec":{"zone":"zone-a","instanceType":"m1","cpuCount":4}}`)
	if _, err := w.mc.MachineV1alpha1().MachineClasses(w.ns).Patch(ctx, "sim", types.MergePatchType, bad, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	m := newMachine(w.ns, w.name(0), "sim", nil)
	createMachine(t, w.mc, m)
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		got, err := getMachine(ctx, w.mc, w.ns, m.Name)
		if err != nil {
			return false, err.Error()
		}
		return got.Status.LastOperation.ErrorCode == driver.InvalidArgument.String(), fmt.Sprintf("%+v", got.Status.LastOperation)
	})
	if err := w.mc.MachineV1alpha1().Machines(w.ns).Delete(ctx, m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, machineGone(w.mc, w.ns, m.Name))
}
