package machinestate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestRecordedVirtualCapacity(t *testing.T) {
	for _, tc := range []struct {
		name         string
		annotations  map[string]string
		want         corev1.ResourceList
		wantRecorded bool
	}{
		{name: "no record"},
		{
			name:        "a record",
			annotations: map[string]string{v1alpha1.LastAppliedVirtualCapacityAnnotation: `{"example.com/licenses":"4"}`},
			want:        corev1.ResourceList{"example.com/licenses": resource.MustParse("4")}, wantRecorded: true,
		},
		{name: "an empty record", annotations: map[string]string{v1alpha1.LastAppliedVirtualCapacityAnnotation: `{}`}, want: corev1.ResourceList{}, wantRecorded: true},
		{name: "unreadable: empty, but recorded", annotations: map[string]string{v1alpha1.LastAppliedVirtualCapacityAnnotation: `{"x":`}, wantRecorded: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, recorded := RecordedVirtualCapacity(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}})
			if diff := cmp.Diff(tc.want, got); diff != "" || recorded != tc.wantRecorded {
				t.Errorf("RecordedVirtualCapacity = _, %v (want %v); capacity (-want +got):\n%s", recorded, tc.wantRecorded, diff)
			}
		})
	}
}
