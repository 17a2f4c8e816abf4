package machine

import (
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/nodebinding"
	"github.com/mcmkit/mcm/workqueue"
)

// A machine's node label and spec.providerID are claims: anyone who may
// create or patch machines can write them, naming a node or a VM of
// another machine, or one no machine has. The controller acts on a node
// or a VM only through a binding it established itself: the driver named
// the VM for this very machine (CreateMachine, or GetMachineStatus asked
// by the machine's name, never by the claimed provider ID), and the node
// shows that VM's provider ID. The binding is kept on the node
// (v1alpha1.MachineUIDAnnotation, which only the controller and the
// target's administrators write) and, until the node is there to carry
// it, in memory (vouches). After a restart, a claim whose node carries no
// binding yet is checked with the driver once.

// Event reasons of claims the controller ignores.
const (
	// ReasonForeignClaim: the machine's node label or provider ID names
	// a node or VM that is not its own; they are ignored, and the
	// machine gets its own VM.
	ReasonForeignClaim = "ForeignClaim"
	// ReasonContestedClaim: another machine claims the same node or VM;
	// neither acts on them until one claim is refuted.
	ReasonContestedClaim = "ContestedClaim"
	// ReasonNodeNotOwned: a machine being deleted names a node that is
	// not its own; the node is neither drained nor deleted.
	ReasonNodeNotOwned = "NodeNotOwned"
	// ReasonForeignVM: the driver named another machine's VM for the
	// machine; the answer is refused and the machine Failed.
	ReasonForeignVM = "ForeignVM"
)

// bindingKind is what the controller may do with a machine's claims.
type bindingKind int

const (
	// bindNone: the machine claims neither a VM nor a node.
	bindNone bindingKind = iota
	// bindBound: its node carries its UID and its provider ID.
	bindBound
	// bindVouched: the driver named its provider ID for it, and its node
	// (if there is one yet) does not say otherwise; once the node shows
	// the provider ID, the node sync binds it.
	bindVouched
	// bindUnverified: it claims a VM or a node that nobody vouched for
	// yet; the driver is asked.
	bindUnverified
	// bindForeign: the node or the driver refutes the claim; it is
	// reported and ignored.
	bindForeign
	// bindContested: the driver vouched for it, but another machine
	// claims the same node or VM and nothing refutes that claim; neither
	// acts on them until one is refuted.
	bindContested
)

var bindingKindNames = [...]string{"None", "Bound", "Vouched", "Unverified", "Foreign", "Contested"}

func (k bindingKind) String() string { return bindingKindNames[k] }

// binding is the verdict on a machine's claims.
type binding struct {
	Kind bindingKind
	// Why explains Foreign and Contested, for the machine's report.
	Why string
	// NodeConfirms: the node is there and shows the machine's provider ID;
	// with Bound or Vouched, the controller may act on it (and for
	// Vouched, the node sync binds it).
	NodeConfirms bool
}

// ownsNode reports whether the controller may act on the machine's node
// on the machine's behalf: sync it, read its health, drain and delete it.
func (b binding) ownsNode() bool {
	return (b.Kind == bindBound || b.Kind == bindVouched) && b.NodeConfirms
}

// ownsVM reports whether the machine's spec.providerID names its VM, so
// that the driver may be asked to act on that VM by provider ID.
func (b binding) ownsVM() bool { return b.Kind == bindBound || b.Kind == bindVouched }

// vouch is what the driver last said, in this process, about which VM
// backs a machine.
type vouch struct {
	// ProviderID of the machine's VM; "" with None.
	ProviderID string
	// None: the driver knows no VM for the machine.
	None bool
}

// bindingOf judges a machine's claims. node is the node its label names
// (nil when it has none or the node does not exist); v the driver's word,
// if any (ok); rivals the other machines that claim the same node or VM
// and that nothing refutes. It is pure.
func bindingOf(m *v1alpha1.Machine, node *corev1.Node, v vouch, vouched bool, rivals []string) binding {
	pid, nodeName := m.Spec.ProviderID, nodeNameOf(m)
	if pid == "" && nodeName == "" {
		return binding{Kind: bindNone}
	}
	if node != nil {
		if owner := nodebinding.Owner(node); owner != "" && owner != m.UID {
			return binding{Kind: bindForeign, Why: fmt.Sprintf("node %s is bound to machine %q (UID %s)",
				node.Name, node.Labels[v1alpha1.MachineNameLabelKey], owner)}
		}
		if node.Spec.ProviderID != "" && node.Spec.ProviderID != pid {
			return binding{Kind: bindForeign, Why: fmt.Sprintf("node %s runs on VM %s, not on %q", node.Name, node.Spec.ProviderID, pid)}
		}
		if nodebinding.Bound(node, m) {
			return binding{Kind: bindBound, NodeConfirms: true}
		}
	}
	if !vouched {
		return binding{Kind: bindUnverified}
	}
	switch {
	case v.None:
		return binding{Kind: bindForeign, Why: fmt.Sprintf("the driver knows no VM of machine %s", m.Name)}
	case v.ProviderID != pid:
		return binding{Kind: bindForeign, Why: fmt.Sprintf("the driver names VM %s for machine %s, not %q", v.ProviderID, m.Name, pid)}
	case len(rivals) > 0:
		return binding{Kind: bindContested, Why: fmt.Sprintf("machines %s claim the same node or VM", strings.Join(rivals, ", "))}
	}
	return binding{Kind: bindVouched, NodeConfirms: node != nil && node.Spec.ProviderID == pid}
}

// vouches holds the driver's word per machine, from creations and
// lookups of this process. An entry goes with its machine.
type vouches struct {
	mu sync.Mutex
	m  map[machineID]vouch
}

// machineID tells machines apart across recreations under one name.
type machineID struct {
	Key string
	UID types.UID
}

func idOf(m *v1alpha1.Machine) machineID { return machineID{workqueue.KeyOf(m), m.UID} }

func (v *vouches) get(m *v1alpha1.Machine) (vouch, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	got, ok := v.m[idOf(m)]
	return got, ok
}

func (v *vouches) set(m *v1alpha1.Machine, got vouch) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[machineID]vouch{}
	}
	v.m[idOf(m)] = got
}

func (v *vouches) forget(m *v1alpha1.Machine) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, idOf(m))
}

// refuted reports whether machine r's claim is refuted by its node (nil:
// none or not found) or by the driver's word: the verdict bindingOf gives
// r, so that a rival's claim is judged by the rules that judge r's own.
func refuted(r *v1alpha1.Machine, node *corev1.Node, v vouch, vouched bool) bool {
	return bindingOf(r, node, v, vouched, nil).Kind == bindForeign
}

// vmTakenBy says why a VM the driver named for machine m, with provider ID
// pid and node name nodeName, is another machine's, "" when nothing says
// so: owners are the other machines of this controller that own a VM of
// that provider ID (their binding owns it: the driver named it for them,
// or their node is bound to them); node is the node of that name (nil
// when there is none), which, bound to another machine and showing that
// provider ID, makes the VM that machine's — another manager's, on a
// shared target. Such an answer is a driver's mistake, or a second
// manager's VM under the same ID: nothing of it becomes m's claim, and no
// driver call carries its provider ID. It is pure.
func vmTakenBy(m *v1alpha1.Machine, pid string, node *corev1.Node, owners []string) string {
	if pid == "" {
		return ""
	}
	if len(owners) > 0 {
		return fmt.Sprintf("VM %s is the VM of machine %s", pid, strings.Join(owners, ", "))
	}
	if owner := nodebinding.Owner(node); owner != "" && owner != m.UID && node.Spec.ProviderID == pid {
		return fmt.Sprintf("VM %s runs node %s, which is bound to machine %q (UID %s)",
			pid, node.Name, node.Labels[v1alpha1.MachineNameLabelKey], owner)
	}
	return ""
}

// bindRefusal says why node cannot be bound to the machine of UID uid
// whose VM has provider ID pid, "" when it can (it is bound to no machine,
// or to this one, and shows that VM). It is the precondition of the
// binding's compare-and-swap, checked again on the node as the API server
// has it whenever a write conflicts. It is pure.
func bindRefusal(node *corev1.Node, uid types.UID, pid string) string {
	switch owner := nodebinding.Owner(node); {
	case owner != "" && owner != uid:
		return fmt.Sprintf("node %s is bound to machine %q (UID %s)", node.Name, node.Labels[v1alpha1.MachineNameLabelKey], owner)
	case pid == "" || node.Spec.ProviderID != pid:
		return fmt.Sprintf("node %s runs on VM %q, not on %q", node.Name, node.Spec.ProviderID, pid)
	}
	return ""
}
