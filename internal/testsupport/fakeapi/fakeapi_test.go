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
