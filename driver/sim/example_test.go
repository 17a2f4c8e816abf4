package sim_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

// Example creates a machine's VM, watches it boot on a fake clock, and
// deletes it.
func Example() {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cloud, err := sim.New(sim.Options{Clock: clk, BootDelay: time.Minute, DeleteDelay: 30 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	d := cloud.Driver()
	ctx := context.Background()

	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "small", Namespace: "shoot"},
		Provider:     sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}.RawExtension(),
	}
	secret := &corev1.Secret{Data: map[string][]byte{
		v1alpha1.UserDataKey: []byte("#cloud-config"),
		sim.CredentialsKey:   []byte("token"),
	}}
	machine := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Namespace: "shoot"}}

	created, err := d.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: machine, MachineClass: class, Secret: secret})
	if err != nil {
		fmt.Println(err)
		return
	}
	vm, _ := cloud.VM(created.ProviderID)
	fmt.Println(vm.ProviderID, vm.State, "until", vm.StateUntil.Format(time.TimeOnly))

	clk.Step(time.Minute)
	vm, _ = cloud.VM(created.ProviderID)
	fmt.Println(vm.State, "since", vm.StateSince.Format(time.TimeOnly))

	_, err = d.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: machine, MachineClass: class, Secret: secret})
	vm, _ = cloud.VM(created.ProviderID)
	fmt.Println("delete:", driver.CodeOf(err), "->", vm.State)

	_, err = d.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: machine, MachineClass: class, Secret: secret})
	fmt.Println("status:", driver.CodeOf(err))

	clk.Step(30 * time.Second)
	fmt.Println("VMs left:", len(cloud.VMs()))
	// Output:
	// sim:///zone-a/worker-1 Provisioning until 00:01:00
	// Running since 00:01:00
	// delete: OK -> Terminating
	// status: NotFound
	// VMs left: 0
}

// ExampleCloud_InjectFault makes the next two creates fail with
// ResourceExhausted, as a zone out of capacity would.
func ExampleCloud_InjectFault() {
	cloud, _ := sim.New(sim.Options{})
	_, err := cloud.InjectFault(sim.Fault{
		Operation: driver.OperationCreateMachine,
		Code:      driver.ResourceExhausted,
		Message:   "zone-a is out of small instances",
		Times:     2,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &driver.CreateMachineRequest{
		Machine: &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}},
		MachineClass: &v1alpha1.MachineClass{
			ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}.RawExtension(),
		},
		Secret: &corev1.Secret{Data: map[string][]byte{"userData": []byte("#!"), sim.CredentialsKey: []byte("t")}},
	}
	for range 3 {
		_, err := cloud.Driver().CreateMachine(context.Background(), req)
		fmt.Println(driver.CodeOf(err), len(cloud.VMs()))
	}
	// Output:
	// ResourceExhausted 0
	// ResourceExhausted 0
	// OK 1
}

// ExampleCloud_LeakedVMs injects an orphan VM and finds it.
func ExampleCloud_LeakedVMs() {
	cloud, _ := sim.New(sim.Options{})
	if _, err := cloud.AddVM(sim.VMSpec{MachineName: "deleted-long-ago", Zone: "zone-a", InstanceType: "small"}); err != nil {
		fmt.Println(err)
		return
	}
	existing := []*v1alpha1.Machine{{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}}}
	for _, vm := range cloud.LeakedVMs(existing) {
		fmt.Println(vm.ProviderID, vm.MachineName, vm.Injected)
	}
	// Output: sim:///zone-a/deleted-long-ago deleted-long-ago true
}

// ExampleOptions_stateFile keeps a cloud in a file: a second Cloud on the
// file, as a restarted process would make, has the VM that the first one
// was booting, and the boot completes when it was due.
func ExampleOptions_stateFile() {
	dir, err := os.MkdirTemp("", "sim-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	state := filepath.Join(dir, "cloud.json")
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

	before, err := sim.New(sim.Options{Clock: clk, BootDelay: time.Minute, StateFile: state})
	if err != nil {
		fmt.Println(err)
		return
	}
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "small", Namespace: "shoot"},
		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}.RawExtension(),
	}
	orphan, err := sim.VMSpecFor(class, "orphan-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := before.AddVM(orphan); err != nil {
		fmt.Println(err)
		return
	}
	secret := &corev1.Secret{Data: map[string][]byte{v1alpha1.UserDataKey: []byte("#!"), sim.CredentialsKey: []byte("t")}}
	machine := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Namespace: "shoot"}}
	if _, err := before.Driver().CreateMachine(context.Background(), &driver.CreateMachineRequest{Machine: machine, MachineClass: class, Secret: secret}); err != nil {
		fmt.Println(err)
		return
	}

	clk.Step(30 * time.Second) // the process dies half-way through the boot
	after, err := sim.New(sim.Options{Clock: clk, StateFile: state})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, vm := range after.VMs() {
		fmt.Println(vm.ProviderID, vm.State, vm.Class)
	}
	clk.Step(30 * time.Second)
	vm, _ := after.VM("sim:///zone-a/worker-1")
	fmt.Println(vm.ProviderID, vm.State)
	// Output:
	// sim:///zone-a/orphan-1 Running shoot/shoot/small
	// sim:///zone-a/worker-1 Provisioning shoot/shoot/small
	// sim:///zone-a/worker-1 Running
}
