// The record of the virtual capacity the machine controller last applied
// to a node (MCM's node.machine.sapcloud.io/last-applied-virtual-capacity
// annotation): the machine controller reads it to know what to remove, and
// the node cache to know which capacity entries to keep.

package machinestate

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// RecordedVirtualCapacity returns the virtual capacity recorded on node and whether
// there is a record. An unreadable record reads as empty: nothing is
// removed on its account, and the machine controller writes a readable
// one at its next sync.
func RecordedVirtualCapacity(node *corev1.Node) (corev1.ResourceList, bool) {
	raw, recorded := node.Annotations[v1alpha1.LastAppliedVirtualCapacityAnnotation]
	if !recorded {
		return nil, false
	}
	var last corev1.ResourceList
	if err := json.Unmarshal([]byte(raw), &last); err != nil {
		return nil, true
	}
	return last, true
}
