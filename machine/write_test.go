package machine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/patch"
)

func TestNodeMetaPatch(t *testing.T) {
	node := func(labels map[string]string, finalizers []string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels, Finalizers: finalizers},
			Spec:       corev1.NodeSpec{Taints: taints},
		}
	}
	taint := corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name      string
		cur, des  *corev1.Node
		want      string
		strategic bool
	}{{
		name:      "nothing changed",
		cur:       node(map[string]string{"a": "1"}, []string{"f"}),
		des:       node(map[string]string{"a": "1"}, []string{"f"}),
		strategic: true,
	}, {
		name:      "a label and an added finalizer go unguarded, the finalizer merged into the list",
		cur:       node(map[string]string{"a": "1", "b": "2"}, []string{"other"}),
		des:       node(map[string]string{"a": "2"}, []string{"other", "f"}),
		want:      `{"metadata":{"finalizers":["f"],"labels":{"a":"2","b":null}}}`,
		strategic: true,
	}, {
		name:      "only a finalizer added",
		cur:       node(nil, nil),
		des:       node(nil, []string{"f"}),
		want:      `{"metadata":{"finalizers":["f"]}}`,
		strategic: true,
	}, {
		name:      "a removed finalizer replaces the list, guarded",
		cur:       node(nil, []string{"other", "f"}),
		des:       node(map[string]string{"a": "1"}, []string{"other"}),
		want:      `{"metadata":{"finalizers":["other"],"labels":{"a":"1"},"resourceVersion":"7"}}`,
		strategic: false,
	}, {
		name:      "changed taints replace the list, guarded",
		cur:       node(nil, nil),
		des:       node(nil, []string{"f"}, taint),
		want:      `{"metadata":{"finalizers":["f"],"resourceVersion":"7"},"spec":{"taints":[{"effect":"NoSchedule","key":"k"}]}}`,
		strategic: false,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, strategic, err := nodeMetaPatch(tt.cur, tt.des, "7")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(data)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
			if data != nil && strategic != tt.strategic {
				t.Errorf("strategic merge patch: %v, want %v", strategic, tt.strategic)
			}
		})
	}
}

// BenchmarkSyncPatches: the patches a sync of a Running machine computes,
// through the fields writeMachine patches, for a machine that did not
// change (most syncs) and for one whose status did.
func BenchmarkSyncPatches(b *testing.B) {
	t := metav1.NewTime(time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC))
	cur := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name: "pool-a-65784469d5-x7k2p", ResourceVersion: "4711",
			Labels:      map[string]string{"machine-template-hash": "65784469d5", "name": "pool-a", "node": "ip-10-250-3-17.ec2.internal"},
			Annotations: map[string]string{v1alpha1.MachinePriorityAnnotation: "3", CreationStartedAnnotation: "2026-11-26T00:58:02.114Z"},
			Finalizers:  []string{v1alpha1.MachineFinalizer},
		},
		Spec: v1alpha1.MachineSpec{ProviderID: "aws:///eu-west-1a/i-0123456789abcdef0"},
		Status: v1alpha1.MachineStatus{
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastHeartbeatTime: t, LastTransitionTime: t},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available", LastHeartbeatTime: t, LastTransitionTime: t},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure", LastHeartbeatTime: t, LastTransitionTime: t},
			},
			LastOperation: v1alpha1.LastOperation{Description: "Machine pool-a-65784469d5-x7k2p successfully joined the cluster in 52.19s", LastUpdateTime: t, State: v1alpha1.MachineStateSuccessful, Type: v1alpha1.MachineOperationCreate},
			CurrentStatus: v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning, LastUpdateTime: t},
		},
	}
	changed := cur.DeepCopy()
	changed.Status.Conditions[0].Status = corev1.ConditionFalse
	for _, bc := range []struct {
		name    string
		desired *v1alpha1.Machine
	}{
		{"unchanged", cur.DeepCopy()},
		{"status changed", changed},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := patch.Diff(machineMetaFields, cur, bc.desired, cur.ResourceVersion); err != nil {
					b.Fatal(err)
				}
				if _, err := machineStatusPatch(cur, bc.desired); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
