package machinestate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestForeignMachines(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        map[types.UID]bool
	}{
		{"no annotations", nil, nil},
		{"empty", map[string]string{v1alpha1.ForeignMachinesAnnotation: ""}, nil},
		{"a list, blanks and empty entries skipped", map[string]string{v1alpha1.ForeignMachinesAnnotation: "uid-a, uid-b,,"},
			map[types.UID]bool{"uid-a": true, "uid-b": true}},
		{"other annotations count for nothing", map[string]string{"foreign-machines": "uid-a"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Annotations: tt.annotations}}
			if diff := cmp.Diff(tt.want, ForeignMachines(set)); diff != "" {
				t.Errorf("ForeignMachines (-want +got):\n%s", diff)
			}
		})
	}
}
