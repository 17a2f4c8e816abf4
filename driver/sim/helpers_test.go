package sim_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const testToken = "t0ken"

// world bundles a cloud on a fake clock with a valid class and secret.
type world struct {
	t      *testing.T
	clock  *clocktesting.FakeClock
	cloud  *sim.Cloud
	d      driver.Driver
	class  *v1alpha1.MachineClass
	secret *corev1.Secret
}

func newWorld(t *testing.T, opts sim.Options) *world {
	t.Helper()
	clk := clocktesting.NewFakeClock(epoch)
	opts.Clock = clk
	cloud, err := sim.New(opts)
	if err != nil {
		t.Fatalf("sim.New: %v", err)
	}
	return &world{
		t: t, clock: clk, cloud: cloud, d: cloud.Driver(),
		class:  simClass(sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}),
		secret: simSecret(),
	}
}

func simClass(spec sim.ProviderSpec) *v1alpha1.MachineClass {
	return classWithRaw(spec.RawExtension())
}

func classWithRaw(raw runtime.RawExtension) *v1alpha1.MachineClass {
	return &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "small", Namespace: "shoot"},
		Provider:     sim.ProviderName,
		ProviderSpec: raw,
	}
}

// renamed returns class under another namespace and name.
func renamed(class *v1alpha1.MachineClass, namespace, name string) *v1alpha1.MachineClass {
	class = class.DeepCopy()
	class.Namespace, class.Name = namespace, name
	return class
}

func simSecret() *corev1.Secret {
	return &corev1.Secret{Data: map[string][]byte{
		v1alpha1.UserDataKey: []byte("#cloud-config"),
		sim.CredentialsKey:   []byte(testToken),
	}}
}

func machine(name string) *v1alpha1.Machine {
	return &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shoot"},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "small"}},
	}
}

func withProviderID(m *v1alpha1.Machine, id string) *v1alpha1.Machine {
	m = m.DeepCopy()
	m.Spec.ProviderID = id
	return m
}

func (w *world) create(name string) (*driver.CreateMachineResponse, error) {
	return w.d.CreateMachine(context.Background(), &driver.CreateMachineRequest{Machine: machine(name), MachineClass: w.class, Secret: w.secret})
}

func (w *world) mustCreate(name string) string {
	w.t.Helper()
	resp, err := w.create(name)
	if err != nil {
		w.t.Fatalf("CreateMachine(%s): %v", name, err)
	}
	return resp.ProviderID
}

func (w *world) status(name string) (*driver.GetMachineStatusResponse, error) {
	return w.d.GetMachineStatus(context.Background(), &driver.GetMachineStatusRequest{Machine: machine(name), MachineClass: w.class, Secret: w.secret})
}

func (w *world) delete(m *v1alpha1.Machine) error {
	_, err := w.d.DeleteMachine(context.Background(), &driver.DeleteMachineRequest{Machine: m, MachineClass: w.class, Secret: w.secret})
	return err
}

func (w *world) list() (map[string]string, error) {
	resp, err := w.d.ListMachines(context.Background(), &driver.ListMachinesRequest{MachineClass: w.class, Secret: w.secret})
	if err != nil {
		return nil, err
	}
	return resp.Machines, nil
}

// vmSpec is the VMSpec of a VM of the world's class for the machine, to
// add behind the driver's back.
func (w *world) vmSpec(machineName string) sim.VMSpec {
	w.t.Helper()
	spec, err := sim.VMSpecFor(w.class, machineName)
	if err != nil {
		w.t.Fatalf("VMSpecFor(%s): %v", machineName, err)
	}
	return spec
}

func (w *world) states() map[string]sim.VMState {
	out := map[string]sim.VMState{}
	for _, v := range w.cloud.VMs() {
		out[v.ProviderID] = v.State
	}
	return out
}
