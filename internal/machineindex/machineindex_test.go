package machineindex

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestByNode(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  any
		want []string
	}{
		{"joined", &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.NodeLabelKey: "n1"}}}, []string{"n1"}},
		{"not joined yet", &v1alpha1.Machine{}, nil},
		{"not a machine", "n1", nil},
	} {
		got, err := ByNode(tc.obj)
		if err != nil || !cmp.Equal(tc.want, got) {
			t.Errorf("%s: ByNode = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}
