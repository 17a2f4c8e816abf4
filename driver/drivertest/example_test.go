package drivertest_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/drivertest"
	"github.com/mcmkit/mcm/driver/sim"
)

// newSimDriver is the one function a provider writes: a fresh driver and
// what the kit needs to exercise it. Here the driver is the simulated cloud.
func newSimDriver(t drivertest.TB) (driver.Driver, drivertest.Fixture) {
	cloud, err := sim.New(sim.Options{})
	if err != nil {
		t.Fatalf("sim.New: %v", err)
	}
	return cloud.Driver(), drivertest.Fixture{
		MachineClass: &v1alpha1.MachineClass{
			ObjectMeta:   metav1.ObjectMeta{Name: "small", Namespace: "test"},
			Provider:     sim.ProviderName,
			ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}.RawExtension(),
		},
		Secret: &corev1.Secret{Data: map[string][]byte{
			v1alpha1.UserDataKey: []byte("#cloud-config"),
			sim.CredentialsKey:   []byte("token"),
		}},
		// A typo in a field name must be refused, not ignored.
		InvalidProviderSpec: &runtime.RawExtension{Raw: []byte(`{"zone":"zone-a","instanceTyp":"small"}`)},
	}
}

// This is how a provider's test runs the kit: one line, in a Test function.
func TestSimConforms(t *testing.T) {
	drivertest.Run(t, newSimDriver, drivertest.Options{
		SupportsInitializeMachine: true,
		SupportsListMachines:      true,
		SupportsGetVolumeIDs:      true,
	})
}

// ExampleRun shows the test a provider writes; the checks run as its
// subtests, named as CheckNames lists them.
func ExampleRun() {
	// In a _test.go file of the provider:
	//
	//	func TestConformance(t *testing.T) {
	//		drivertest.Run(t, newDriver, drivertest.Options{SupportsListMachines: true})
	//	}
	for _, name := range drivertest.CheckNames()[:3] {
		fmt.Println("TestConformance/" + name)
	}
	// Output:
	// TestConformance/CreateIsIdempotent
	// TestConformance/StatusOfUnknownMachineIsNotFound
	// TestConformance/DeleteOfUnknownMachineSucceeds
}
