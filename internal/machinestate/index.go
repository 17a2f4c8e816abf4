// The informer indexes of machines that several controllers read, and
// EnsureIndex, which adds an index unless the informer has it: the
// controllers are built independently of each other, an informer refuses
// an index name twice, and a controller built again on informers that
// outlived its predecessor (a manager that shares informers between
// controller groups that come and go) finds its indexes there. One index
// of each kind per informer, under a name of this module's, rather than
// one per controller: an index costs memory for every object.

package machinestate

import (
	"fmt"

	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// ByNodeIndex is the name of the IndexByNode index.
const ByNodeIndex = "mcmkit.io/machine-by-node"

// IndexByNode indexes a machine by its node label (v1alpha1.NodeLabelKey), the
// name of its node in the target cluster; a machine without one is not
// indexed.
func IndexByNode(obj any) ([]string, error) {
	if m, ok := obj.(*v1alpha1.Machine); ok && m.Labels[v1alpha1.NodeLabelKey] != "" {
		return []string{m.Labels[v1alpha1.NodeLabelKey]}, nil
	}
	return nil, nil
}

// ByProviderIDIndex is the name of the IndexByProviderID index.
const ByProviderIDIndex = "mcmkit.io/machine-by-provider-id"

// IndexByProviderID indexes a machine by its spec.providerID, the VM it
// claims; a machine without one is not indexed.
func IndexByProviderID(obj any) ([]string, error) {
	if m, ok := obj.(*v1alpha1.Machine); ok && m.Spec.ProviderID != "" {
		return []string{m.Spec.ProviderID}, nil
	}
	return nil, nil
}

// EnsureIndex adds fn to informer as the index name unless the informer has an
// index of that name, which it then takes to be fn: names under
// "mcmkit.io/" are this module's. It works on a started informer too (the
// index then covers the objects already cached). An informer's indexes
// must not be added to concurrently: build controllers that share
// informers one after the other.
func EnsureIndex(informer cache.SharedIndexInformer, name string, fn cache.IndexFunc) error {
	if _, ok := informer.GetIndexer().GetIndexers()[name]; ok {
		return nil
	}
	if err := informer.AddIndexers(cache.Indexers{name: fn}); err != nil {
		return fmt.Errorf("adding index %s: %w", name, err)
	}
	return nil
}
