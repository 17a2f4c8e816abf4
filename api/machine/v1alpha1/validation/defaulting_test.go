package validation_test

import (
	"math"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/api/machine/v1alpha1/validation"
)

// TestDefaultingKeepsValidObjectsValid checks the promise that lets
// controllers validate the stored object and then act on a defaulted copy:
// defaulting never turns an accepted object into a rejected one.
func TestDefaultingKeepsValidObjectsValid(t *testing.T) {
	// Only valid values: the property is about objects validation accepts.
	intOrPercents := rapid.SampledFrom([]string{"0", "1", "3", "0%", "25%", "100%"})
	optionalIntOrPercent := func(t *rapid.T, label string) *intstr.IntOrString {
		if !rapid.Bool().Draw(t, label+"Set") {
			return nil
		}
		return intOrString(intOrPercents.Draw(t, label))
	}
	optionalInt32 := func(t *rapid.T, label string) *int32 {
		if !rapid.Bool().Draw(t, label+"Set") {
			return nil
		}
		return new(rapid.Int32Range(0, 2000).Draw(t, label))
	}
	strategyTypes := rapid.SampledFrom([]v1alpha1.MachineDeploymentStrategyType{
		"",
		v1alpha1.RecreateMachineDeploymentStrategyType,
		v1alpha1.RollingUpdateMachineDeploymentStrategyType,
		v1alpha1.InPlaceUpdateMachineDeploymentStrategyType,
	})
	orchestrationTypes := rapid.SampledFrom([]v1alpha1.OrchestrationType{"", v1alpha1.OrchestrationTypeAuto, v1alpha1.OrchestrationTypeManual})

	rapid.Check(t, func(t *rapid.T) {
		md := validMachineDeployment()
		spec := &md.Spec
		// minReadySeconds around the 600s of the default deadline matter
		// most; MaxInt32-1 is the largest that any deadline can exceed.
		spec.MinReadySeconds = rapid.OneOf(rapid.Int32Range(0, 2000), rapid.Just[int32](math.MaxInt32-1)).Draw(t, "minReadySeconds")
		spec.RevisionHistoryLimit = optionalInt32(t, "revisionHistoryLimit")
		spec.AutoPreserveFailedMachineMax = optionalInt32(t, "autoPreserveFailedMachineMax")
		spec.ProgressDeadlineSeconds = nil
		if rapid.Bool().Draw(t, "progressDeadlineSecondsSet") {
			spec.ProgressDeadlineSeconds = new(rapid.Int32Range(spec.MinReadySeconds+1, math.MaxInt32).Draw(t, "progressDeadlineSeconds"))
		}
		spec.Strategy = v1alpha1.MachineDeploymentStrategy{Type: strategyTypes.Draw(t, "type")}
		switch spec.Strategy.Type {
		case "", v1alpha1.RollingUpdateMachineDeploymentStrategyType:
			if rapid.Bool().Draw(t, "rollingUpdate") {
				spec.Strategy.RollingUpdate = &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge:       optionalIntOrPercent(t, "rollingMaxSurge"),
					MaxUnavailable: optionalIntOrPercent(t, "rollingMaxUnavailable"),
				}}
			}
		case v1alpha1.InPlaceUpdateMachineDeploymentStrategyType:
			spec.Strategy.InPlaceUpdate = &v1alpha1.InPlaceUpdateMachineDeployment{
				UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge:       optionalIntOrPercent(t, "inPlaceMaxSurge"),
					MaxUnavailable: optionalIntOrPercent(t, "inPlaceMaxUnavailable"),
				},
				OrchestrationType: orchestrationTypes.Draw(t, "orchestrationType"),
			}
		}
		if errs := validation.ValidateMachineDeployment(md); len(errs) > 0 {
			t.Skip("the generated deployment is invalid already")
		}

		defaulted := md.DeepCopy()
		v1alpha1.SetMachineDeploymentDefaults(defaulted)
		if errs := validation.ValidateMachineDeployment(defaulted); len(errs) > 0 {
			t.Fatalf("the defaulted deployment is rejected: %v\nstrategy before: %+v", errs, md.Spec.Strategy)
		}
	})
}

func TestDefaultingKeepsValidMachineSetsValid(t *testing.T) {
	set := validMachineSet()
	set.Spec.AutoPreserveFailedMachineMax = nil
	v1alpha1.SetMachineSetDefaults(set)
	checkErrors(t, validation.ValidateMachineSet(set))
}
