package memdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/drivertest"
	"github.com/mcmkit/mcm/examples/bespoke/memdriver"
)

func class() *v1alpha1.MachineClass {
	return &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "small", Namespace: "drivertest"},
		Provider:     memdriver.ProviderName,
		ProviderSpec: runtime.RawExtension{Raw: []byte(`{"flavor":"small"}`)},
	}
}

func secret() *corev1.Secret {
	return &corev1.Secret{Data: map[string][]byte{v1alpha1.UserDataKey: []byte("#cloud-config")}}
}

// TestConformance is the one test every driver should have: the contract
// of package driver, checked by the conformance kit.
func TestConformance(t *testing.T) {
	drivertest.Run(t, func(drivertest.TB) (driver.Driver, drivertest.Fixture) {
		return memdriver.New(memdriver.Options{}), drivertest.Fixture{
			MachineClass:        class(),
			Secret:              secret(),
			InvalidProviderSpec: &runtime.RawExtension{Raw: []byte(`{"flavour":"small"}`)}, // misspelled field
		}
	}, drivertest.Options{SupportsListMachines: true})
}

// The kit again, with a round-trip latency: results are still immediate
// after the call returns, and nothing depends on instant calls.
func TestConformanceWithLatency(t *testing.T) {
	drivertest.Run(t, func(drivertest.TB) (driver.Driver, drivertest.Fixture) {
		return memdriver.New(memdriver.Options{Latency: time.Millisecond}), drivertest.Fixture{
			MachineClass: class(), Secret: secret(),
		}
	}, drivertest.Options{SupportsListMachines: true})
}

func machine(name string) *v1alpha1.Machine {
	return &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "test"}}
}

func TestCreateInFlightWhenContextEndsCreatesNothing(t *testing.T) {
	d := memdriver.New(memdriver.Options{Latency: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := d.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: machine("m"), MachineClass: class(), Secret: secret()})
	if code := driver.CodeOf(err); code != driver.DeadlineExceeded {
		t.Fatalf("code %s (%v), want DeadlineExceeded", code, err)
	}
	if vms := d.VMs(); len(vms) != 0 {
		t.Errorf("VMs after a create that timed out: %v", vms)
	}
}

func TestTypedFailures(t *testing.T) {
	ctx := t.Context()
	d := memdriver.New(memdriver.Options{MaxVMs: 1})
	create := func(name string, c *v1alpha1.MachineClass, s *corev1.Secret) driver.Code {
		_, err := d.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: machine(name), MachineClass: c, Secret: s})
		return driver.CodeOf(err)
	}
	big := class()
	big.ProviderSpec.Raw = []byte(`{"flavor":"big"}`)
	other := class()
	other.Provider = "aws"
	for _, tc := range []struct {
		what string
		got  driver.Code
		want driver.Code
	}{
		{"first create", create("a", class(), secret()), driver.OK},
		{"create again", create("a", class(), secret()), driver.OK},
		{"same machine, other flavor", create("a", big, secret()), driver.AlreadyExists},
		{"beyond the quota", create("b", class(), secret()), driver.ResourceExhausted},
		{"no user data", create("c", class(), &corev1.Secret{}), driver.InvalidArgument},
		{"other provider", create("c", other, secret()), driver.InvalidArgument},
		{"no flavor", create("c", &v1alpha1.MachineClass{ProviderSpec: runtime.RawExtension{Raw: []byte(`{}`)}}, secret()), driver.InvalidArgument},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: code %s, want %s", tc.what, tc.got, tc.want)
		}
	}
	if vms := d.VMs(); len(vms) != 1 || vms[0].MachineName != "a" || vms[0].Flavor != "small" {
		t.Errorf("VMs %+v, want a's only", vms)
	}
}

func TestDeleteByStaleProviderIDKeepsTheCurrentVM(t *testing.T) {
	ctx := t.Context()
	d := memdriver.New(memdriver.Options{})
	req := &driver.CreateMachineRequest{Machine: machine("m"), MachineClass: class(), Secret: secret()}
	first, err := d.CreateMachine(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: machine("m")}); err != nil {
		t.Fatal(err)
	}
	second, err := d.CreateMachine(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if second.ProviderID == first.ProviderID {
		t.Fatalf("provider ID %s reused", first.ProviderID)
	}
	stale := machine("m")
	stale.Spec.ProviderID = first.ProviderID
	if _, err := d.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: stale}); err != nil {
		t.Fatal(err)
	}
	if vms := d.VMs(); len(vms) != 1 || vms[0].ProviderID != second.ProviderID {
		t.Errorf("VMs %+v, want %s only", vms, second.ProviderID)
	}
}

// Orphan collection deletes what a class lists and no Machine claims, so a
// class lists its own VMs only.
func TestListMachinesReturnsTheClassesVMsOnly(t *testing.T) {
	ctx := t.Context()
	d := memdriver.New(memdriver.Options{})
	other := class()
	other.Namespace = "elsewhere"
	want := map[string]map[string]string{"own": {}, "other": {}}
	for label, c := range map[string]*v1alpha1.MachineClass{"own": class(), "other": other} {
		name := label + "-machine"
		resp, err := d.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: machine(name), MachineClass: c, Secret: secret()})
		if err != nil {
			t.Fatal(err)
		}
		want[label][resp.ProviderID] = name
	}
	got := map[string]map[string]string{}
	for label, c := range map[string]*v1alpha1.MachineClass{"own": class(), "other": other} {
		resp, err := d.ListMachines(ctx, &driver.ListMachinesRequest{MachineClass: c, Secret: secret()})
		if err != nil {
			t.Fatal(err)
		}
		got[label] = resp.Machines
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListMachines by class (-want +got):\n%s", diff)
	}
}
