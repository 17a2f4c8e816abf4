package machine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
