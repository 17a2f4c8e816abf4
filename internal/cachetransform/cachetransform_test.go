package cachetransform

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDropManagedFields(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	got, err := DropManagedFields(pod)
	if err != nil {
		t.Fatal(err)
	}
	if mf := got.(*corev1.Pod).ManagedFields; mf != nil {
		t.Errorf("managed fields kept: %v", mf)
	}
	// Not an object (a tombstone, say): passed through.
	if got, err := DropManagedFields("x"); err != nil || got != "x" {
		t.Errorf("DropManagedFields(non-object) = %v, %v", got, err)
	}
}
