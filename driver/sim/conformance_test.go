package sim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/drivertest"
	"github.com/mcmkit/mcm/driver/sim"
)

// TestConformance runs the driver contract against the sim, with boot and
// deletion delays on a fake clock that the Eventually hook steps.
func TestConformance(t *testing.T) {
	drivertest.Run(t, func(t drivertest.TB) (driver.Driver, drivertest.Fixture) {
		clk := clocktesting.NewFakeClock(epoch)
		cloud, err := sim.New(sim.Options{
			Clock:        clk,
			Seed:         1,
			BootDelay:    time.Minute,
			BootJitter:   10 * time.Second,
			DeleteDelay:  30 * time.Second,
			DeleteJitter: 5 * time.Second,
			Zones:        []string{"zone-a", "zone-b"},
			InstanceTypes: map[string]corev1.ResourceList{
				"small": {corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
			},
			APIToken: testToken,
		})
		if err != nil {
			t.Fatalf("sim.New: %v", err)
		}
		return cloud.Driver(), drivertest.Fixture{
			MachineClass: simClass(sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}),
			// The same class of another cluster: only the cluster tag
			// tells their VMs apart.
			OtherMachineClass:   simClass(sim.ProviderSpec{Zone: "zone-a", InstanceType: "small", Cluster: "other-cluster"}),
			Secret:              simSecret(),
			InvalidProviderSpec: &runtime.RawExtension{Raw: []byte(`{"zone":"zone-a","instanceType":"small","instancetype":"large"}`)},
			Eventually:          steppingClock(clk, 10*time.Second, 20),
			Volume: &corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: sim.CSIDriverName, VolumeHandle: "vol-42"},
			}},
			VolumeID: "vol-42",
		}
	}, drivertest.Options{
		SupportsInitializeMachine: true,
		SupportsListMachines:      true,
		SupportsGetVolumeIDs:      true,
	})
}

// TestConformanceWithInitialization runs the contract against VMs that
// wait for InitializeMachine, so GetMachineStatus reports Uninitialized.
func TestConformanceWithInitialization(t *testing.T) {
	drivertest.Run(t, func(t drivertest.TB) (driver.Driver, drivertest.Fixture) {
		cloud, err := sim.New(sim.Options{Clock: clocktesting.NewFakeClock(epoch)})
		if err != nil {
			t.Fatalf("sim.New: %v", err)
		}
		return cloud.Driver(), drivertest.Fixture{
			MachineClass: simClass(sim.ProviderSpec{Zone: "zone-a", InstanceType: "small", RequireInitialization: true}),
			Secret:       simSecret(),
		}
	}, drivertest.Options{SupportsInitializeMachine: true, SupportsListMachines: true, SupportsGetVolumeIDs: true})
}

// steppingClock is an Eventually hook for a cloud on a fake clock: between
// attempts it steps the clock instead of sleeping.
func steppingClock(clk *clocktesting.FakeClock, step time.Duration, attempts int) func(context.Context, func(context.Context) bool) error {
	return func(ctx context.Context, condition func(context.Context) bool) error {
		for range attempts {
			if condition(ctx) {
				return nil
			}
			clk.Step(step)
		}
		return errors.New("condition still false after stepping the clock")
	}
}
