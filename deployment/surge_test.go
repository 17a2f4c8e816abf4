package deployment

import (
	"math"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestScaledValue(t *testing.T) {
	tests := []struct {
		value    intstr.IntOrString
		replicas int32
		roundUp  bool
		want     int32
		wantErr  bool
	}{
		{value: intstr.FromInt32(3), replicas: 10, want: 3},
		{value: intstr.FromString("3"), replicas: 10, want: 3},
		{value: intstr.FromString("25%"), replicas: 10, roundUp: true, want: 3},
		{value: intstr.FromString("25%"), replicas: 10, want: 2},
		{value: intstr.FromString("20%"), replicas: 10, roundUp: true, want: 2},
		{value: intstr.FromString("1%"), replicas: 1, roundUp: true, want: 1},
		{value: intstr.FromString("1%"), replicas: 1, want: 0},
		{value: intstr.FromString("0%"), replicas: 10, roundUp: true, want: 0},
		{value: intstr.FromString("150%"), replicas: 10, want: 15},
		{value: intstr.FromString("50%"), replicas: 0, roundUp: true, want: 0},
		{value: intstr.FromString("99999999999"), replicas: 1, want: math.MaxInt32},
		{value: intstr.FromString("99999999999999999999999%"), replicas: 10, want: math.MaxInt32},
		{value: intstr.FromInt32(-1), replicas: 10, wantErr: true},
		{value: intstr.FromString("-1"), replicas: 10, wantErr: true},
		{value: intstr.FromString("%"), replicas: 10, wantErr: true},
		{value: intstr.FromString("x%"), replicas: 10, wantErr: true},
		{value: intstr.FromString(""), replicas: 10, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.value.String()+"/"+strconv.Itoa(int(tt.replicas))+"/"+strconv.FormatBool(tt.roundUp), func(t *testing.T) {
			got, err := scaledValue(tt.value, tt.replicas, tt.roundUp)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("scaledValue = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestResolveFenceposts(t *testing.T) {
	tests := []struct {
		name                      string
		surge, unavailable        *intstr.IntOrString
		replicas                  int32
		wantSurge, wantUnavailble int32
		wantErr                   bool
	}{
		{"numbers", intOrPercent("1"), intOrPercent("0"), 3, 1, 0, false},
		{"25% of 10", intOrPercent("25%"), intOrPercent("25%"), 10, 3, 2, false},
		{"both zero: one unavailable", intOrPercent("0"), intOrPercent("0"), 5, 0, 1, false},
		{"both round to zero", intOrPercent("10%"), intOrPercent("10%"), 0, 0, 1, false},
		{"surge rounds up, unavailable down", intOrPercent("30%"), intOrPercent("30%"), 1, 1, 0, false},
		{"nil counts as zero", nil, nil, 4, 0, 1, false},
		{"surge saturates", intOrPercent(strconv.Itoa(math.MaxInt32)), intOrPercent("0"), 10, math.MaxInt32 - 10, 0, false},
		{"bad surge", intOrPercent("x"), intOrPercent("0"), 3, 0, 0, true},
		{"bad unavailable", intOrPercent("1"), intOrPercent("5%%"), 3, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			surge, unavailable, err := resolveFenceposts(tt.surge, tt.unavailable, tt.replicas)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff([2]int32{tt.wantSurge, tt.wantUnavailble}, [2]int32{surge, unavailable}); diff != "" {
				t.Errorf("(surge, unavailable) (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRolloutBounds(t *testing.T) {
	inPlace := func(orchestration v1alpha1.OrchestrationType, surge, unavailable string) mdOpt {
		return func(d *v1alpha1.MachineDeployment) {
			d.Spec.Strategy = v1alpha1.MachineDeploymentStrategy{
				Type: v1alpha1.InPlaceUpdateMachineDeploymentStrategyType,
				InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{
					OrchestrationType: orchestration,
					UpdateConfiguration: v1alpha1.UpdateConfiguration{
						MaxSurge: intOrPercent(surge), MaxUnavailable: intOrPercent(unavailable),
					},
				},
			}
		}
	}
	tests := []struct {
		name                       string
		d                          *v1alpha1.MachineDeployment
		wantSurge, wantUnavailable int32
		wantErr                    bool
	}{
		{"rolling", newDeployment(10, withRolling("25%", "25%")), 3, 2, false},
		{"rolling, unset values take the API defaults", newDeployment(3, func(d *v1alpha1.MachineDeployment) {
			d.Spec.Strategy = v1alpha1.MachineDeploymentStrategy{}
		}), 1, 0, false},
		{"rolling, unavailable capped at replicas", newDeployment(2, withRolling("0", "5")), 0, 2, false},
		{"rolling, zero replicas: nothing unavailable", newDeployment(0, withRolling("0", "0")), 0, 0, false},
		{"rolling, invalid", newDeployment(2, withRolling("a", "1")), 0, 0, true},
		{"recreate", newDeployment(3, withRecreate()), 0, 0, false},
		{"in place auto", newDeployment(4, inPlace(v1alpha1.OrchestrationTypeAuto, "2", "0")), 0, 0, false},
		{"in place auto, unavailable", newDeployment(4, inPlace(v1alpha1.OrchestrationTypeAuto, "2", "50%")), 0, 2, false},
		{"in place manual: surge ignored", newDeployment(4, inPlace(v1alpha1.OrchestrationTypeManual, "2", "0")), 0, 1, false},
		{"in place without parameters", newDeployment(4, func(d *v1alpha1.MachineDeployment) {
			d.Spec.Strategy = v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.InPlaceUpdateMachineDeploymentStrategyType}
		}), 0, 0, true},
		{"unknown strategy", newDeployment(4, func(d *v1alpha1.MachineDeployment) { d.Spec.Strategy.Type = "Sideways" }), 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			surge, unavailable, err := rolloutBounds(tt.d)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff([2]int32{tt.wantSurge, tt.wantUnavailable}, [2]int32{surge, unavailable}); diff != "" {
				t.Errorf("(surge, unavailable) (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPercentRounding: a percentage of maxSurge is the smallest count at
// least that share of replicas, one of maxUnavailable the largest count at
// most that share.
func TestPercentRounding(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		replicas := rapid.Int32Range(0, 10000).Draw(t, "replicas")
		percent := rapid.IntRange(0, 300).Draw(t, "percent")
		v := intstr.FromString(strconv.Itoa(percent) + "%")
		share := int64(percent) * int64(replicas) // in hundredths of a machine
		up, err := scaledValue(v, replicas, true)
		if err != nil {
			t.Fatal(err)
		}
		if int64(up)*100 < share || (int64(up)-1)*100 >= share && up > 0 {
			t.Fatalf("%d%% of %d rounded up = %d", percent, replicas, up)
		}
		down, err := scaledValue(v, replicas, false)
		if err != nil {
			t.Fatal(err)
		}
		if int64(down)*100 > share || (int64(down)+1)*100 <= share {
			t.Fatalf("%d%% of %d rounded down = %d", percent, replicas, down)
		}
	})
}
