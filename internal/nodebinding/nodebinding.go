// Package nodebinding says whether a Node is bound to a Machine: the one
// test every controller applies before it writes to, drains or deletes
// the node a machine names. A machine's node label and provider ID are
// anyone's to write who may create or patch machines; the binding is not:
// the machine controller sets it on the Node (v1alpha1.MachineUIDAnnotation)
// only after the driver named the machine's VM and the Node showed that
// VM's provider ID.
//
// # Usage
//
//	if nodebinding.Bound(node, m) {
//		// drain, delete or label the node on m's behalf
//	}
//	if nodebinding.Confirms(node, m) {
//		// mark the node of m (a controller that does not bind nodes)
//	}
package nodebinding

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// Bound reports whether node is bound to machine m: the node carries m's
// UID and the provider ID m claims.
func Bound(node *corev1.Node, m *v1alpha1.Machine) bool {
	return node != nil && m != nil && m.UID != "" && m.Spec.ProviderID != "" &&
		Owner(node) == m.UID && node.Spec.ProviderID == m.Spec.ProviderID
}

// Confirms reports whether node confirms m's claim on it, for controllers
// that act on the node on m's behalf but do not establish bindings: the
// node is bound to m, or, bound to no machine yet (a node registered
// moments ago, or one from before the binding existed), shows the VM m
// claims.
func Confirms(node *corev1.Node, m *v1alpha1.Machine) bool {
	if Owner(node) != "" {
		return Bound(node, m)
	}
	return node != nil && m != nil && node.Spec.ProviderID != "" && node.Spec.ProviderID == m.Spec.ProviderID
}

// Owner is the UID of the machine node is bound to; "" when none.
func Owner(node *corev1.Node) types.UID {
	if node == nil {
		return ""
	}
	return types.UID(node.Annotations[v1alpha1.MachineUIDAnnotation])
}
