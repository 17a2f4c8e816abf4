package validation_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/api/machine/v1alpha1/validation"
)

// A deployment stored before the CRDs' rules existed: its selector does not
// select its own machines and its rollout could never make progress. A
// controller reports the errors instead of acting on it.
func ExampleValidateMachineDeployment() {
	md := &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: 3,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": "api"}},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"name": "web"}},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Name: "small"}},
			},
			Strategy: v1alpha1.MachineDeploymentStrategy{
				Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge: new(intstr.FromInt32(0)),
				}},
			},
		},
	}

	for _, err := range validation.ValidateMachineDeployment(md) {
		fmt.Println(err.Field)
		fmt.Println("  ", err.Detail)
	}
	// Output:
	// spec.strategy.rollingUpdate.maxSurge
	//    maxSurge and maxUnavailable must not both be 0 (an unset maxUnavailable is 0): the rollout could never make progress
	// spec.selector.matchLabels[name]
	//    selector.matchLabels must match template.metadata.labels: machines created from the template would not be selected
}
