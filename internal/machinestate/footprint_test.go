package machinestate

import (
	"fmt"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/testsupport/heaptest"
)

// BenchmarkByNodeFootprint: the heap a machine cache keeps per machine
// for its keys and namespace index, and with the IndexByNode index too; the
// difference is what IndexByNode costs (a set of one key per node name).
func BenchmarkByNodeFootprint(b *testing.B) {
	for _, bc := range []struct {
		name     string
		indexers cache.Indexers
	}{
		{"namespace index", cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}},
		{"namespace and ByNode indexes", cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, ByNodeIndex: IndexByNode}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			machines := make([]*v1alpha1.Machine, b.N)
			for i := range machines {
				name := fmt.Sprintf("pool-a-65784469d5-%05d", i)
				machines[i] = &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shoot", Labels: map[string]string{v1alpha1.NodeLabelKey: name}}}
			}
			heaptest.Retained(b, "machine", func() any {
				store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, bc.indexers)
				for _, m := range machines {
					if err := store.Add(m); err != nil {
						b.Fatal(err)
					}
				}
				return store
			})
			runtime.KeepAlive(machines)
		})
	}
}
