package v1alpha1_test

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// A controller defaults a copy of the deployment it read and acts on the
// copy; the cached object keeps what was stored.
func ExampleSetMachineDeploymentDefaults() {
	cached := &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas:        3,
			MinReadySeconds: 300,
		},
	}

	md := cached.DeepCopy()
	v1alpha1.SetMachineDeploymentDefaults(md)

	rolling := md.Spec.Strategy.RollingUpdate
	fmt.Println("strategy:", md.Spec.Strategy.Type)
	fmt.Println("maxSurge:", rolling.MaxSurge.String(), "maxUnavailable:", rolling.MaxUnavailable.String())
	fmt.Println("revisionHistoryLimit:", *md.Spec.RevisionHistoryLimit)
	fmt.Println("progressDeadlineSeconds:", *md.Spec.ProgressDeadlineSeconds)
	fmt.Println("cached strategy still unset:", cached.Spec.Strategy.Type == "")
	// Output:
	// strategy: RollingUpdate
	// maxSurge: 1 maxUnavailable: 0
	// revisionHistoryLimit: 10
	// progressDeadlineSeconds: 900
	// cached strategy still unset: true
}

// The machine controller resolves a machine's timeouts from the machine,
// then its own flags, then the package defaults.
func ExampleEffectiveMachineConfiguration() {
	// Flags start from the package defaults; here an operator shortened the
	// health timeout.
	flags := v1alpha1.DefaultMachineConfiguration()
	flags.MachineHealthTimeout = &metav1.Duration{Duration: 5 * time.Minute}

	machine := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc12"},
		Spec: v1alpha1.MachineSpec{
			Class: v1alpha1.ClassSpec{Name: "small"},
			MachineConfiguration: &v1alpha1.MachineConfiguration{
				MachineDrainTimeout: &metav1.Duration{Duration: 30 * time.Minute},
			},
		},
	}

	config := v1alpha1.EffectiveMachineConfiguration(machine, &flags)
	fmt.Println("drain:", config.MachineDrainTimeout.Duration)
	fmt.Println("health:", config.MachineHealthTimeout.Duration)
	fmt.Println("creation:", config.MachineCreationTimeout.Duration)
	fmt.Println("max evict retries:", *config.MaxEvictRetries)
	// Output:
	// drain: 30m0s
	// health: 5m0s
	// creation: 20m0s
	// max evict retries: 360
}
