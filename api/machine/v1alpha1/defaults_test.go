package v1alpha1_test

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func intOrString(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

// defaultRollingUpdate is the strategy an empty one defaults to.
func defaultRollingUpdate() v1alpha1.MachineDeploymentStrategy {
	return v1alpha1.MachineDeploymentStrategy{
		Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
		RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
			MaxSurge:       new(intstr.FromInt32(1)),
			MaxUnavailable: new(intstr.FromInt32(0)),
		}},
	}
}

func TestSetMachineDeploymentDefaults(t *testing.T) {
	template := v1alpha1.MachineTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"name": "web"}},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Name: "small"}},
	}
	cases := []struct {
		name string
		in   v1alpha1.MachineDeploymentSpec
		want v1alpha1.MachineDeploymentSpec
	}{{
		name: "everything unset",
		in:   v1alpha1.MachineDeploymentSpec{Template: template},
		want: v1alpha1.MachineDeploymentSpec{
			Template:                     template,
			Strategy:                     defaultRollingUpdate(),
			RevisionHistoryLimit:         new(int32(10)),
			ProgressDeadlineSeconds:      new(int32(600)),
			AutoPreserveFailedMachineMax: new(int32(0)),
		},
	}, {
		name: "progress deadline counts on top of minReadySeconds",
		in:   v1alpha1.MachineDeploymentSpec{MinReadySeconds: 900},
		want: v1alpha1.MachineDeploymentSpec{
			MinReadySeconds:              900,
			Strategy:                     defaultRollingUpdate(),
			RevisionHistoryLimit:         new(int32(10)),
			ProgressDeadlineSeconds:      new(int32(1500)),
			AutoPreserveFailedMachineMax: new(int32(0)),
		},
	}, {
		name: "progress deadline saturates instead of overflowing",
		in:   v1alpha1.MachineDeploymentSpec{MinReadySeconds: math.MaxInt32 - 1},
		want: v1alpha1.MachineDeploymentSpec{
			MinReadySeconds:              math.MaxInt32 - 1,
			Strategy:                     defaultRollingUpdate(),
			RevisionHistoryLimit:         new(int32(10)),
			ProgressDeadlineSeconds:      new(int32(math.MaxInt32)),
			AutoPreserveFailedMachineMax: new(int32(0)),
		},
	}, {
		name: "set values are kept, zeros included",
		in: v1alpha1.MachineDeploymentSpec{
			Strategy:                     v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RecreateMachineDeploymentStrategyType},
			RevisionHistoryLimit:         new(int32(0)),
			ProgressDeadlineSeconds:      new(int32(60)),
			AutoPreserveFailedMachineMax: new(int32(2)),
		},
		want: v1alpha1.MachineDeploymentSpec{
			Strategy:                     v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RecreateMachineDeploymentStrategyType},
			RevisionHistoryLimit:         new(int32(0)),
			ProgressDeadlineSeconds:      new(int32(60)),
			AutoPreserveFailedMachineMax: new(int32(2)),
		},
	}, {
		name: "a partly set rolling update gets the missing half",
		in: v1alpha1.MachineDeploymentSpec{Strategy: v1alpha1.MachineDeploymentStrategy{
			RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
				MaxUnavailable: intOrString("25%"),
			}},
		}},
		want: v1alpha1.MachineDeploymentSpec{
			Strategy: v1alpha1.MachineDeploymentStrategy{
				Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge:       new(intstr.FromInt32(1)),
					MaxUnavailable: intOrString("25%"),
				}},
			},
			RevisionHistoryLimit:         new(int32(10)),
			ProgressDeadlineSeconds:      new(int32(600)),
			AutoPreserveFailedMachineMax: new(int32(0)),
		},
	}, {
		name: "invalid values are left for validation",
		in: v1alpha1.MachineDeploymentSpec{
			Strategy: v1alpha1.MachineDeploymentStrategy{
				Type: "BlueGreen",
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge: intOrString("lots"),
				}},
			},
			RevisionHistoryLimit: new(int32(-1)),
		},
		want: v1alpha1.MachineDeploymentSpec{
			Strategy: v1alpha1.MachineDeploymentStrategy{
				Type: "BlueGreen",
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge: intOrString("lots"),
				}},
			},
			RevisionHistoryLimit:         new(int32(-1)),
			ProgressDeadlineSeconds:      new(int32(600)),
			AutoPreserveFailedMachineMax: new(int32(0)),
		},
	}, {
		name: "in-place update gets an orchestration type and nothing else",
		in: v1alpha1.MachineDeploymentSpec{Strategy: v1alpha1.MachineDeploymentStrategy{
			Type:          v1alpha1.InPlaceUpdateMachineDeploymentStrategyType,
			InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{},
		}},
		want: v1alpha1.MachineDeploymentSpec{
			Strategy: v1alpha1.MachineDeploymentStrategy{
				Type:          v1alpha1.InPlaceUpdateMachineDeploymentStrategyType,
				InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{OrchestrationType: v1alpha1.OrchestrationTypeAuto},
			},
			RevisionHistoryLimit:         new(int32(10)),
			ProgressDeadlineSeconds:      new(int32(600)),
			AutoPreserveFailedMachineMax: new(int32(0)),
		},
	}, {
		name: "in-place update keeps Manual",
		in: v1alpha1.MachineDeploymentSpec{Strategy: v1alpha1.MachineDeploymentStrategy{
			Type:          v1alpha1.InPlaceUpdateMachineDeploymentStrategyType,
			InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{OrchestrationType: v1alpha1.OrchestrationTypeManual},
		}},
		want: v1alpha1.MachineDeploymentSpec{
			Strategy: v1alpha1.MachineDeploymentStrategy{
				Type:          v1alpha1.InPlaceUpdateMachineDeploymentStrategyType,
				InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{OrchestrationType: v1alpha1.OrchestrationTypeManual},
			},
			RevisionHistoryLimit:         new(int32(10)),
			ProgressDeadlineSeconds:      new(int32(600)),
			AutoPreserveFailedMachineMax: new(int32(0)),
		},
	}, {
		name: "a missing inPlaceUpdate is not invented",
		in: v1alpha1.MachineDeploymentSpec{Strategy: v1alpha1.MachineDeploymentStrategy{
			Type: v1alpha1.InPlaceUpdateMachineDeploymentStrategyType,
		}},
		want: v1alpha1.MachineDeploymentSpec{
			Strategy:                     v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.InPlaceUpdateMachineDeploymentStrategyType},
			RevisionHistoryLimit:         new(int32(10)),
			ProgressDeadlineSeconds:      new(int32(600)),
			AutoPreserveFailedMachineMax: new(int32(0)),
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			md := &v1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: *tc.in.DeepCopy()}
			v1alpha1.SetMachineDeploymentDefaults(md)
			want := &v1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: tc.want}
			if diff := cmp.Diff(want, md); diff != "" {
				t.Errorf("defaulted deployment (-want +got):\n%s", diff)
			}

			again := md.DeepCopy()
			v1alpha1.SetMachineDeploymentDefaults(again)
			if diff := cmp.Diff(md, again); diff != "" {
				t.Errorf("defaulting twice differs from once (-once +twice):\n%s", diff)
			}
		})
	}
}

// deploymentSpecs generates specs that set, leave unset or set invalid
// values in every field the defaults touch.
func deploymentSpecs() *rapid.Generator[v1alpha1.MachineDeploymentSpec] {
	intOrPercents := rapid.SampledFrom([]string{"0", "1", "3", "0%", "25%", "100%", "-1", "lots"})
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
		return new(rapid.Int32Range(-5, 5000).Draw(t, label))
	}
	return rapid.Custom(func(t *rapid.T) v1alpha1.MachineDeploymentSpec {
		spec := v1alpha1.MachineDeploymentSpec{
			MinReadySeconds: rapid.OneOf(rapid.Int32Range(-5, 5000), rapid.Just[int32](math.MaxInt32)).Draw(t, "minReadySeconds"),
			Strategy: v1alpha1.MachineDeploymentStrategy{
				Type: rapid.SampledFrom([]v1alpha1.MachineDeploymentStrategyType{
					"",
					v1alpha1.RecreateMachineDeploymentStrategyType,
					v1alpha1.RollingUpdateMachineDeploymentStrategyType,
					v1alpha1.InPlaceUpdateMachineDeploymentStrategyType,
					"BlueGreen",
				}).Draw(t, "type"),
			},
			RevisionHistoryLimit:         optionalInt32(t, "revisionHistoryLimit"),
			ProgressDeadlineSeconds:      optionalInt32(t, "progressDeadlineSeconds"),
			AutoPreserveFailedMachineMax: optionalInt32(t, "autoPreserveFailedMachineMax"),
		}
		if rapid.Bool().Draw(t, "rollingUpdate") {
			spec.Strategy.RollingUpdate = &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
				MaxSurge:       optionalIntOrPercent(t, "rollingMaxSurge"),
				MaxUnavailable: optionalIntOrPercent(t, "rollingMaxUnavailable"),
			}}
		}
		if rapid.Bool().Draw(t, "inPlaceUpdate") {
			spec.Strategy.InPlaceUpdate = &v1alpha1.InPlaceUpdateMachineDeployment{
				UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge:       optionalIntOrPercent(t, "inPlaceMaxSurge"),
					MaxUnavailable: optionalIntOrPercent(t, "inPlaceMaxUnavailable"),
				},
				OrchestrationType: rapid.SampledFrom([]v1alpha1.OrchestrationType{"", v1alpha1.OrchestrationTypeAuto, v1alpha1.OrchestrationTypeManual, "Sometimes"}).Draw(t, "orchestrationType"),
			}
		}
		return spec
	})
}

// TestSetMachineDeploymentDefaultsOnlyFillsUnsetFields checks, for any spec,
// that defaulting is idempotent and that un-setting exactly the fields that
// were unset before gives back the original: nothing that was set changed.
func TestSetMachineDeploymentDefaultsOnlyFillsUnsetFields(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		original := deploymentSpecs().Draw(t, "spec")
		md := &v1alpha1.MachineDeployment{Spec: *original.DeepCopy()}
		v1alpha1.SetMachineDeploymentDefaults(md)

		again := md.DeepCopy()
		v1alpha1.SetMachineDeploymentDefaults(again)
		if diff := cmp.Diff(md, again); diff != "" {
			t.Fatalf("defaulting twice differs from once (-once +twice):\n%s", diff)
		}

		undone := md.Spec.DeepCopy()
		strategy := &undone.Strategy
		if original.Strategy.Type == "" {
			strategy.Type = ""
		}
		if original.Strategy.RollingUpdate == nil {
			strategy.RollingUpdate = nil
		} else {
			if original.Strategy.RollingUpdate.MaxSurge == nil {
				strategy.RollingUpdate.MaxSurge = nil
			}
			if original.Strategy.RollingUpdate.MaxUnavailable == nil {
				strategy.RollingUpdate.MaxUnavailable = nil
			}
		}
		if original.Strategy.InPlaceUpdate != nil && original.Strategy.InPlaceUpdate.OrchestrationType == "" {
			strategy.InPlaceUpdate.OrchestrationType = ""
		}
		if original.RevisionHistoryLimit == nil {
			undone.RevisionHistoryLimit = nil
		}
		if original.ProgressDeadlineSeconds == nil {
			undone.ProgressDeadlineSeconds = nil
		}
		if original.AutoPreserveFailedMachineMax == nil {
			undone.AutoPreserveFailedMachineMax = nil
		}
		if diff := cmp.Diff(&original, undone); diff != "" {
			t.Fatalf("defaulting changed a field that was set (-original +defaulted, unset fields cleared):\n%s", diff)
		}
	})
}

func TestSetMachineSetDefaults(t *testing.T) {
	template := v1alpha1.MachineTemplateSpec{Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Name: "small"}}}
	cases := []struct {
		name    string
		in      *int32
		wantMax int32
	}{
		{"unset", nil, 0},
		{"set", new(int32(3)), 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := &v1alpha1.MachineSet{Spec: v1alpha1.MachineSetSpec{
				Replicas:                     2,
				Template:                     *template.DeepCopy(),
				AutoPreserveFailedMachineMax: tc.in,
			}}
			v1alpha1.SetMachineSetDefaults(ms)
			want := &v1alpha1.MachineSet{Spec: v1alpha1.MachineSetSpec{
				Replicas:                     2,
				Template:                     template,
				AutoPreserveFailedMachineMax: new(tc.wantMax),
			}}
			if diff := cmp.Diff(want, ms); diff != "" {
				t.Errorf("defaulted set (-want +got):\n%s", diff)
			}
			again := ms.DeepCopy()
			v1alpha1.SetMachineSetDefaults(again)
			if diff := cmp.Diff(ms, again); diff != "" {
				t.Errorf("defaulting twice differs from once (-once +twice):\n%s", diff)
			}
		})
	}
}

func duration(d time.Duration) *metav1.Duration {
	return &metav1.Duration{Duration: d}
}

func TestDefaultMachineConfiguration(t *testing.T) {
	want := v1alpha1.MachineConfiguration{
		MachineDrainTimeout:         duration(2 * time.Hour),
		MachineHealthTimeout:        duration(10 * time.Minute),
		MachineCreationTimeout:      duration(20 * time.Minute),
		MachineInPlaceUpdateTimeout: duration(20 * time.Minute),
		MachinePreserveTimeout:      duration(96 * time.Hour),
		DisableHealthTimeout:        new(false),
		MaxEvictRetries:             new(int32(360)),
		NodeConditions:              new("KernelDeadlock,ReadonlyFilesystem,DiskPressure,NetworkUnavailable"),
	}
	first := v1alpha1.DefaultMachineConfiguration()
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("DefaultMachineConfiguration (-want +got):\n%s", diff)
	}

	// Callers own the result: changing it must not change the next one.
	first.MachineDrainTimeout.Duration = time.Second
	*first.MaxEvictRetries = 1
	if diff := cmp.Diff(want, v1alpha1.DefaultMachineConfiguration()); diff != "" {
		t.Errorf("modifying one result changed the next (-want +got):\n%s", diff)
	}
}

func TestEffectiveMachineConfiguration(t *testing.T) {
	defaults := v1alpha1.DefaultMachineConfiguration
	with := func(change func(*v1alpha1.MachineConfiguration)) v1alpha1.MachineConfiguration {
		c := defaults()
		change(&c)
		return c
	}
	cases := []struct {
		name        string
		annotations map[string]string
		machine     *v1alpha1.MachineConfiguration
		controller  *v1alpha1.MachineConfiguration
		want        v1alpha1.MachineConfiguration
	}{{
		name: "nothing set anywhere",
		want: defaults(),
	}, {
		name:       "an empty controller configuration",
		machine:    &v1alpha1.MachineConfiguration{},
		controller: &v1alpha1.MachineConfiguration{},
		want:       defaults(),
	}, {
		name:       "the controller overrides the defaults",
		controller: &v1alpha1.MachineConfiguration{MachineHealthTimeout: duration(5 * time.Minute), NodeConditions: new("KernelDeadlock")},
		want: with(func(c *v1alpha1.MachineConfiguration) {
			c.MachineHealthTimeout = duration(5 * time.Minute)
			c.NodeConditions = new("KernelDeadlock")
		}),
	}, {
		name:       "the machine overrides the controller",
		machine:    &v1alpha1.MachineConfiguration{MachineDrainTimeout: duration(30 * time.Minute)},
		controller: &v1alpha1.MachineConfiguration{MachineDrainTimeout: duration(time.Hour), MachineHealthTimeout: duration(5 * time.Minute)},
		want: with(func(c *v1alpha1.MachineConfiguration) {
			c.MachineDrainTimeout = duration(30 * time.Minute)
			c.MachineHealthTimeout = duration(5 * time.Minute)
		}),
	}, {
		name:       "zero values on the machine are values",
		machine:    &v1alpha1.MachineConfiguration{MaxEvictRetries: new(int32(0)), DisableHealthTimeout: new(false), MachineDrainTimeout: duration(0)},
		controller: &v1alpha1.MachineConfiguration{MaxEvictRetries: new(int32(10)), DisableHealthTimeout: new(true)},
		want: with(func(c *v1alpha1.MachineConfiguration) {
			c.MaxEvictRetries = new(int32(0))
			c.DisableHealthTimeout = new(false)
			c.MachineDrainTimeout = duration(0)
		}),
	}, {
		name:        "the effective creation timeout annotation wins",
		annotations: map[string]string{v1alpha1.EffectiveCreationTimeoutAnnotation: "45m"},
		machine:     &v1alpha1.MachineConfiguration{MachineCreationTimeout: duration(15 * time.Minute)},
		want:        with(func(c *v1alpha1.MachineConfiguration) { c.MachineCreationTimeout = duration(45 * time.Minute) }),
	}, {
		name:        "a malformed annotation is ignored",
		annotations: map[string]string{v1alpha1.EffectiveCreationTimeoutAnnotation: "soon"},
		machine:     &v1alpha1.MachineConfiguration{MachineCreationTimeout: duration(15 * time.Minute)},
		want:        with(func(c *v1alpha1.MachineConfiguration) { c.MachineCreationTimeout = duration(15 * time.Minute) }),
	}, {
		name:        "a negative annotation is ignored",
		annotations: map[string]string{v1alpha1.EffectiveCreationTimeoutAnnotation: "-5m"},
		want:        defaults(),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			machine := &v1alpha1.Machine{
				ObjectMeta: metav1.ObjectMeta{Name: "m", Annotations: tc.annotations},
				Spec:       v1alpha1.MachineSpec{MachineConfiguration: tc.machine},
			}
			machineBefore := machine.DeepCopy()
			controllerBefore := tc.controller.DeepCopy()

			got := v1alpha1.EffectiveMachineConfiguration(machine, tc.controller)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("effective configuration (-want +got):\n%s", diff)
			}

			// The result must not alias the inputs: scribble over it and
			// check that neither input changed.
			got.MachineDrainTimeout.Duration = 42
			got.MachineCreationTimeout.Duration = 42
			*got.MaxEvictRetries = 42
			*got.DisableHealthTimeout = !*got.DisableHealthTimeout
			*got.NodeConditions = "scribbled"
			if diff := cmp.Diff(machineBefore, machine); diff != "" {
				t.Errorf("machine changed (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(controllerBefore, tc.controller); diff != "" {
				t.Errorf("controller configuration changed (-before +after):\n%s", diff)
			}
		})
	}
}
