// Package machineindex holds the informer index functions several
// controllers add to the shared machine informer. Each controller adds
// them under its own index name: an informer refuses a name twice, and the
// controllers are built independently of each other.
//
// # Usage
//
//	err := machines.Informer().AddIndexers(cache.Indexers{"mycontroller/by-node": machineindex.ByNode})
//	objs, err := machines.Informer().GetIndexer().ByIndex("mycontroller/by-node", nodeName)
package machineindex

import "github.com/mcmkit/mcm/api/machine/v1alpha1"

// ByNode indexes a machine by its node label (v1alpha1.NodeLabelKey), the
// name of its node in the target cluster; a machine without one is not
// indexed.
func ByNode(obj any) ([]string, error) {
	if m, ok := obj.(*v1alpha1.Machine); ok && m.Labels[v1alpha1.NodeLabelKey] != "" {
		return []string{m.Labels[v1alpha1.NodeLabelKey]}, nil
	}
	return nil, nil
}
