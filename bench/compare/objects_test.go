//go:build linux

// The objects a run creates: the secret, the classes and the deployment.

package compare

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver/sim"
)

// createClasses creates the run's secret and a class of each name whose
// VMs boot as boot says.
func (r *run) createClasses(ctx context.Context, boot bootTime, names ...string) error {
	var classes []namedClass
	for _, name := range names {
		classes = append(classes, namedClass{name, bootSpec(boot)})
	}
	return r.createClassesOf(ctx, classes)
}

// namedClass is a class to create: its name and providerSpec.
type namedClass struct {
	name string
	spec sim.ProviderSpec
}

// bootSpec is the providerSpec of a class of the simulated cloud whose
// VMs boot as boot says.
func bootSpec(boot bootTime) sim.ProviderSpec {
	return sim.ProviderSpec{
		Zone: "zone-a", InstanceType: "small",
		BootDelay: &metav1.Duration{Duration: boot.Delay}, BootJitter: &metav1.Duration{Duration: boot.Jitter},
	}
}

// createClassesOf creates the run's secret and the classes.
func (r *run) createClassesOf(ctx context.Context, classes []namedClass) error {
	ud := userData
	if r.spec.BootstrapToken {
		ud = tokenUserData
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: r.ns},
		Data: map[string][]byte{
			v1alpha1.UserDataKey: []byte(ud),
			sim.CredentialsKey:   []byte("token"),
		},
	}
	if _, err := r.genCore.CoreV1().Secrets(r.ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the secret: %w", err)
	}
	for _, c := range classes {
		class := &v1alpha1.MachineClass{
			ObjectMeta:   metav1.ObjectMeta{Name: c.name, Namespace: r.ns},
			Provider:     sim.ProviderName,
			ProviderSpec: c.spec.RawExtension(),
			SecretRef:    &corev1.SecretReference{Name: secretName, Namespace: r.ns},
		}
		if _, err := r.genMachines.MachineV1alpha1().MachineClasses(r.ns).Create(ctx, class, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating class %s: %w", c.name, err)
		}
	}
	return nil
}

// rollingStrategy is the deployments' strategy but I's: rolling updates
// with maxSurge 10 % and maxUnavailable 0.
func rollingStrategy() v1alpha1.MachineDeploymentStrategy {
	surge, unavailable := intstr.FromString("10%"), intstr.FromInt32(0)
	return v1alpha1.MachineDeploymentStrategy{
		Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
		RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{
			UpdateConfiguration: v1alpha1.UpdateConfiguration{MaxSurge: &surge, MaxUnavailable: &unavailable},
		},
	}
}

// createDeployment creates the run's deployment with n replicas of the
// first class and strategy.
func (r *run) createDeployment(ctx context.Context, n int, strategy v1alpha1.MachineDeploymentStrategy) error {
	labels := map[string]string{"bench": "compare"}
	md := &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: deploymentName, Namespace: r.ns},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: int32(n),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: className}},
			},
			Strategy: strategy,
		},
	}
	if _, err := r.genMachines.MachineV1alpha1().MachineDeployments(r.ns).Create(ctx, md, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the deployment: %w", err)
	}
	return nil
}
