package fakeapi

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
)

func TestEveryWriteGetsANewVersion(t *testing.T) {
	c := fake.NewSimpleClientset()
	VersionWrites(&c.Fake, c.Tracker())
	sets := c.MachineV1alpha1().MachineSets("ns")
	ctx := context.Background()
	created, err := sets.Create(ctx, &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patched, err := sets.Patch(ctx, "a", types.MergePatchType, []byte(`{"status":{"replicas":2}}`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	patched.Spec.Replicas = 3
	updated, err := sets.Update(ctx, patched, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{created.ResourceVersion, patched.ResourceVersion, updated.ResourceVersion}
	if got[0] == "" || got[0] == got[1] || got[1] == got[2] || got[0] == got[2] {
		t.Errorf("resourceVersions %q: want three different ones", got)
	}
	stored, err := sets.Get(ctx, "a", metav1.GetOptions{})
	if err != nil || stored.ResourceVersion != updated.ResourceVersion || stored.Status.Replicas != 2 {
		t.Errorf("stored %+v, %v", stored, err)
	}
}

// ServeLifecycle: a created object gets a UID and a creation time, a
// finalizer holds a deleted one, and the write that removes the last
// finalizer of an object being deleted deletes it.
func TestServeLifecycleHonoursFinalizers(t *testing.T) {
	c := fake.NewSimpleClientset()
	ServeLifecycle(&c.Fake, c.Tracker())
	machines := c.MachineV1alpha1().Machines("ns")
	ctx := context.Background()
	created, err := machines.Create(ctx, &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Finalizers: []string{"hold"}}}, metav1.CreateOptions{})
	if err != nil || created.UID == "" || created.CreationTimestamp.IsZero() || created.ResourceVersion == "" {
		t.Fatalf("created %+v, %v: want a UID, a creation time and a resourceVersion", created.ObjectMeta, err)
	}
	if err := machines.Delete(ctx, "m", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	held, err := machines.Get(ctx, "m", metav1.GetOptions{})
	if err != nil || held.DeletionTimestamp == nil {
		t.Fatalf("after the delete: %v, %v; want the machine held with a deletion timestamp", held, err)
	}
	if _, err := machines.Patch(ctx, "m", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := machines.Get(ctx, "m", metav1.GetOptions{}); err == nil {
		t.Error("the machine is still there after its last finalizer went")
	}
}
