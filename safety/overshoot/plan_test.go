package overshoot

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

var mcmThresholds = thresholds{up: DefaultSafetyUp, down: DefaultSafetyDown}

// osSet is a set of replicas, owned by deployment d when d is not nil.
func osSet(name string, replicas int32, d *v1alpha1.MachineDeployment) *v1alpha1.MachineSet {
	s := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: v1alpha1.MachineSetSpec{Replicas: replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"set": name}},
			Template: v1alpha1.MachineTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"set": name}}}}}
	if d != nil {
		s.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(d, v1alpha1.SchemeGroupVersion.WithKind("MachineDeployment"))}
	}
	return s
}

func osDeployment(name string, replicas, surge int32) *v1alpha1.MachineDeployment {
	s := intstr.FromInt32(surge)
	return &v1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: v1alpha1.MachineDeploymentSpec{Replicas: replicas, Strategy: v1alpha1.MachineDeploymentStrategy{
			Type:          v1alpha1.RollingUpdateMachineDeploymentStrategyType,
			RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{MaxSurge: &s}}}}}
}

// osMachines are n machines of set s.
func osMachines(s *v1alpha1.MachineSet, n int) []*v1alpha1.Machine {
	var out []*v1alpha1.Machine
	for i := range n {
		out = append(out, &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", s.Name, i), Labels: s.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))}}})
	}
	return out
}

func frozenBy[T interface {
	*v1alpha1.MachineSet | *v1alpha1.MachineDeployment
}](obj T, reason string) T {
	switch o := any(obj).(type) {
	case *v1alpha1.MachineSet:
		o.Labels = map[string]string{v1alpha1.FreezeLabelKey: v1alpha1.FreezeLabelValue}
		if reason != "" {
			o.Status.Conditions = []v1alpha1.MachineSetCondition{{Type: v1alpha1.MachineSetFrozen, Status: v1alpha1.ConditionTrue, Reason: reason}}
		}
	case *v1alpha1.MachineDeployment:
		o.Labels = map[string]string{v1alpha1.FreezeLabelKey: v1alpha1.FreezeLabelValue}
		if reason != "" {
			o.Status.Conditions = []v1alpha1.MachineDeploymentCondition{{Type: v1alpha1.MachineDeploymentFrozen, Status: v1alpha1.ConditionTrue, Reason: reason}}
		}
	}
	return obj
}

func withUnfreeze[T interface{ SetAnnotations(map[string]string) }](obj T) T {
	obj.SetAnnotations(map[string]string{v1alpha1.UnfreezeAnnotation: "true"})
	return obj
}

// change is a freezeChange without its message, for comparing.
type change struct {
	Kind, Name    string
	Freeze        bool
	Reason        string
	ClearUnfreeze bool
}

func TestPlanOvershoot(t *testing.T) {
	d := osDeployment("d", 10, 2) // high = 10 + 2 + 2 = 14, low 13
	tests := []struct {
		name        string
		sets        []*v1alpha1.MachineSet
		deployments []*v1alpha1.MachineDeployment
		machines    func(sets []*v1alpha1.MachineSet) []*v1alpha1.Machine
		want        []change
	}{
		{
			name: "within the limit",
			sets: []*v1alpha1.MachineSet{osSet("a", 10, d)}, deployments: []*v1alpha1.MachineDeployment{d},
			machines: func(s []*v1alpha1.MachineSet) []*v1alpha1.Machine { return osMachines(s[0], 13) },
		},
		{
			name: "at the limit: the set and its deployment freeze",
			sets: []*v1alpha1.MachineSet{osSet("a", 10, d)}, deployments: []*v1alpha1.MachineDeployment{d},
			machines: func(s []*v1alpha1.MachineSet) []*v1alpha1.Machine { return osMachines(s[0], 14) },
			want: []change{{Kind: "MachineSet", Name: "a", Freeze: true, Reason: ReasonOvershooting},
				{Kind: "MachineDeployment", Name: "d", Freeze: true, Reason: ReasonDeploymentStateSync}},
		},
		{
			// Stored before admission refused such selectors: it adopts
			// nothing, so machines it would match are not its overshoot.
			name: "orphans do not count for a set whose selector has no positive requirement",
			sets: []*v1alpha1.MachineSet{func() *v1alpha1.MachineSet {
				s := osSet("a", 3, nil)
				s.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "other", Operator: metav1.LabelSelectorOpDoesNotExist}}}
				return s
			}()},
			machines: func(s []*v1alpha1.MachineSet) []*v1alpha1.Machine {
				orphans := osMachines(s[0], 20)
				for _, m := range orphans {
					m.OwnerReferences = nil
				}
				return orphans
			},
		},
		{
			name:     "no deployment: twice the replicas plus safety-up",
			sets:     []*v1alpha1.MachineSet{osSet("a", 3, nil)},
			machines: func(s []*v1alpha1.MachineSet) []*v1alpha1.Machine { return osMachines(s[0], 8) },
			want:     []change{{Kind: "MachineSet", Name: "a", Freeze: true, Reason: ReasonOvershooting}},
		},
		{
			name: "frozen by overshoot, above low: stays",
			sets: []*v1alpha1.MachineSet{frozenBy(osSet("a", 10, d), ReasonOvershooting)}, deployments: []*v1alpha1.MachineDeployment{frozenBy(osDeployment("d", 10, 2), ReasonDeploymentStateSync)},
			machines: func(s []*v1alpha1.MachineSet) []*v1alpha1.Machine { return osMachines(s[0], 14) },
		},
		{
			name: "frozen by overshoot, at low: both unfreeze",
			sets: []*v1alpha1.MachineSet{frozenBy(osSet("a", 10, d), ReasonOvershooting)}, deployments: []*v1alpha1.MachineDeployment{frozenBy(osDeployment("d", 10, 2), ReasonDeploymentStateSync)},
			machines: func(s []*v1alpha1.MachineSet) []*v1alpha1.Machine { return osMachines(s[0], 13) },
			want: []change{{Kind: "MachineSet", Name: "a", Reason: "Unfrozen"},
				{Kind: "MachineDeployment", Name: "d", Reason: "Unfrozen"}},
		},
		{
			name:     "a person's freeze is not lifted by the count",
			sets:     []*v1alpha1.MachineSet{frozenBy(osSet("a", 10, nil), "")},
			machines: func(s []*v1alpha1.MachineSet) []*v1alpha1.Machine { return osMachines(s[0], 1) },
		},
		{
			name:     "the unfreeze annotation lifts any freeze, and goes",
			sets:     []*v1alpha1.MachineSet{withUnfreeze(frozenBy(osSet("a", 10, nil), ""))},
			machines: func(s []*v1alpha1.MachineSet) []*v1alpha1.Machine { return osMachines(s[0], 30) },
			want:     []change{{Kind: "MachineSet", Name: "a", Reason: "Unfrozen", ClearUnfreeze: true}},
		},
		{
			name:        "the deployment's unfreeze annotation unfreezes its sets",
			sets:        []*v1alpha1.MachineSet{frozenBy(osSet("a", 10, d), ReasonOvershooting)},
			deployments: []*v1alpha1.MachineDeployment{withUnfreeze(frozenBy(osDeployment("d", 10, 2), ReasonDeploymentStateSync))},
			machines:    func(s []*v1alpha1.MachineSet) []*v1alpha1.Machine { return osMachines(s[0], 30) },
			want: []change{{Kind: "MachineSet", Name: "a", Reason: "Unfrozen"},
				{Kind: "MachineDeployment", Name: "d", Reason: "Unfrozen", ClearUnfreeze: true}},
		},
		{
			name: "machines being deleted, or without the template's labels, do not count",
			sets: []*v1alpha1.MachineSet{osSet("a", 3, nil)},
			machines: func(s []*v1alpha1.MachineSet) []*v1alpha1.Machine {
				ms := osMachines(s[0], 9)
				ms[0].DeletionTimestamp = &metav1.Time{}
				ms[1].Labels = nil
				return ms
			},
		},
		{
			name: "orphans the set selects count: it adopts them next",
			sets: []*v1alpha1.MachineSet{osSet("a", 3, nil)},
			machines: func(s []*v1alpha1.MachineSet) []*v1alpha1.Machine {
				ms := osMachines(s[0], 8)
				for _, m := range ms[3:] {
					m.OwnerReferences = nil
				}
				return ms
			},
			want: []change{{Kind: "MachineSet", Name: "a", Freeze: true, Reason: ReasonOvershooting}},
		},
		{
			name: "a deployment frozen by its sets agrees with them",
			sets: []*v1alpha1.MachineSet{frozenBy(osSet("a", 10, d), ReasonOvershooting)}, deployments: []*v1alpha1.MachineDeployment{d},
			machines: func(s []*v1alpha1.MachineSet) []*v1alpha1.Machine { return osMachines(s[0], 14) },
			want:     []change{{Kind: "MachineDeployment", Name: "d", Freeze: true, Reason: ReasonDeploymentStateSync}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []change
			for _, c := range planOvershoot(tt.sets, tt.deployments, tt.machines(tt.sets), mcmThresholds) {
				got = append(got, change{c.Kind, c.Name, c.Freeze, c.Reason, c.ClearUnfreeze})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMaxSurge(t *testing.T) {
	pct := intstr.FromString("25%")
	tests := []struct {
		name string
		d    *v1alpha1.MachineDeployment
		want int
	}{
		{"number", osDeployment("d", 10, 3), 3},
		{"percentage rounds up", func() *v1alpha1.MachineDeployment {
			d := osDeployment("d", 10, 0)
			d.Spec.Strategy.RollingUpdate.MaxSurge = &pct
			return d
		}(), 3},
		{"unset is the API's 1", func() *v1alpha1.MachineDeployment {
			d := osDeployment("d", 10, 0)
			d.Spec.Strategy.RollingUpdate = nil
			return d
		}(), 1},
		{"recreate surges none", func() *v1alpha1.MachineDeployment {
			d := osDeployment("d", 10, 3)
			d.Spec.Strategy.Type = v1alpha1.RecreateMachineDeploymentStrategyType
			return d
		}(), 0},
	}
	for _, tt := range tests {
		if got := maxSurge(tt.d); got != tt.want {
			t.Errorf("%s: maxSurge = %d, want %d", tt.name, got, tt.want)
		}
	}
}
