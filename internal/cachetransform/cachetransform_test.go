package cachetransform

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
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

// TestSetOn: an informer that has not started gets the transform, so its
// cache holds objects without managed fields.
func TestSetOn(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}}
	f := informers.NewSharedInformerFactory(fake.NewSimpleClientset(node), 0)
	inf := f.Core().V1().Nodes().Informer()
	if err := SetOn(inf); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("cache did not sync")
	}
	got, _ := f.Core().V1().Nodes().Lister().Get("n")
	if got == nil || got.ManagedFields != nil {
		t.Fatalf("cached node %v still has managed fields", got)
	}
	// Started informers are left alone instead of failing.
	if err := SetOn(inf); err != nil {
		t.Errorf("SetOn on a started informer: %v", err)
	}
}
