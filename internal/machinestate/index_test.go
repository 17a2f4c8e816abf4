package machinestate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
)

func TestIndexByNode(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  any
		want []string
	}{
		{"joined", &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.NodeLabelKey: "n1"}}}, []string{"n1"}},
		{"not joined yet", &v1alpha1.Machine{}, nil},
		{"not a machine", "n1", nil},
	} {
		got, err := IndexByNode(tc.obj)
		if err != nil || !cmp.Equal(tc.want, got) {
			t.Errorf("%s: IndexByNode = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestEnsureIndexAddsOnce: a second EnsureIndex of the same name, on a started
// informer as a controller built again would do, keeps the index there.
func TestEnsureIndexAddsOnce(t *testing.T) {
	client := fake.NewSimpleClientset(&v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "ns",
		Labels: map[string]string{v1alpha1.NodeLabelKey: "n1"}}})
	factory := externalversions.NewSharedInformerFactory(client, 0)
	informer := factory.Machine().V1alpha1().Machines().Informer()
	if err := EnsureIndex(informer, ByNodeIndex, IndexByNode); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	if err := EnsureIndex(informer, ByNodeIndex, IndexByNode); err != nil {
		t.Fatalf("second EnsureIndex: %v", err)
	}
	objs, err := informer.GetIndexer().ByIndex(ByNodeIndex, "n1")
	if err != nil || len(objs) != 1 {
		t.Errorf("ByIndex(n1) = %d objects, %v; want the one machine", len(objs), err)
	}
	if err := EnsureIndex(informer, "mcmkit.io/other", func(any) ([]string, error) { return []string{"x"}, nil }); err != nil {
		t.Fatalf("EnsureIndex on a started informer: %v", err)
	}
	if objs, _ := informer.GetIndexer().ByIndex("mcmkit.io/other", "x"); len(objs) != 1 {
		t.Errorf("an index added after the start covers %d cached objects, want 1", len(objs))
	}
}
