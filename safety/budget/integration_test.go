package budget_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Setup: []func(context.Context, *rest.Config) error{crds.Install}})
}

// rollingDeployment is a MachineDeployment of s's class with replicas
// machines labelled labels, rolled out one surge machine at a time.
func rollingDeployment(s *simstack.Stack, name string, replicas int32, labels map[string]string) *v1alpha1.MachineDeployment {
	surge, unavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	return &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.NS},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: s.Class}},
			},
			Strategy: v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge: &surge, MaxUnavailable: &unavailable}}},
		},
	}
}
