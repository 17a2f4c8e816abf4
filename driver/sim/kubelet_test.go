package sim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDesiredNodeStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	earlier := metav1.NewTime(now.Add(-time.Hour))
	vm := VM{
		Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
	}
	type cond struct {
		Type       corev1.NodeConditionType
		Status     corev1.ConditionStatus
		Transition time.Time
	}
	summarize := func(s corev1.NodeStatus) []cond {
		var out []cond
		for _, c := range s.Conditions {
			out = append(out, cond{c.Type, c.Status, c.LastTransitionTime.Time})
		}
		return out
	}
	tests := []struct {
		name      string
		overrides map[corev1.NodeConditionType]corev1.NodeCondition
		current   []corev1.NodeCondition
		want      []cond
	}{
		{
			name: "healthy defaults on a new node",
			want: []cond{
				{corev1.NodeReady, corev1.ConditionTrue, now},
				{corev1.NodeMemoryPressure, corev1.ConditionFalse, now},
				{corev1.NodeDiskPressure, corev1.ConditionFalse, now},
				{corev1.NodePIDPressure, corev1.ConditionFalse, now},
			},
		},
		{
			name:    "unchanged status keeps its transition time",
			current: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: earlier}},
			want: []cond{
				{corev1.NodeReady, corev1.ConditionTrue, earlier.Time},
				{corev1.NodeMemoryPressure, corev1.ConditionFalse, now},
				{corev1.NodeDiskPressure, corev1.ConditionFalse, now},
				{corev1.NodePIDPressure, corev1.ConditionFalse, now},
			},
		},
		{
			name: "overrides replace defaults and add conditions",
			overrides: map[corev1.NodeConditionType]corev1.NodeCondition{
				corev1.NodeReady: {Type: corev1.NodeReady, Status: corev1.ConditionFalse},
				"KernelDeadlock": {Type: "KernelDeadlock", Status: corev1.ConditionTrue},
			},
			current: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: earlier}},
			want: []cond{
				{corev1.NodeReady, corev1.ConditionFalse, now},
				{corev1.NodeMemoryPressure, corev1.ConditionFalse, now},
				{corev1.NodeDiskPressure, corev1.ConditionFalse, now},
				{corev1.NodePIDPressure, corev1.ConditionFalse, now},
				{"KernelDeadlock", corev1.ConditionTrue, now},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := desiredNodeStatus(vm, tc.overrides, tc.current, now)
			if diff := cmp.Diff(tc.want, summarize(got)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if got.Capacity.Pods().String() != "110" {
				t.Errorf("pods capacity %s, want the kubelet's default 110", got.Capacity.Pods())
			}
		})
	}
}

func TestStatusEquivalentIgnoresHeartbeats(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	vm := VM{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	first := desiredNodeStatus(vm, nil, nil, now)
	later := desiredNodeStatus(vm, nil, first.Conditions, now.Add(time.Minute))
	if !statusEquivalent(first, later) {
		t.Error("a status that differs only in heartbeat times needs no write")
	}
	notReady := desiredNodeStatus(vm, map[corev1.NodeConditionType]corev1.NodeCondition{
		corev1.NodeReady: {Type: corev1.NodeReady, Status: corev1.ConditionFalse},
	}, first.Conditions, now)
	if statusEquivalent(first, notReady) {
		t.Error("a changed Ready condition must be written")
	}
}
