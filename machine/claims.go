package machine

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/nodebinding"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

// claimants are the other machines that claim m's node or VM, from the
// indexes.
func (c *Controller) claimants(m *v1alpha1.Machine) []*v1alpha1.Machine {
	var out []*v1alpha1.Machine
	seen := map[string]bool{}
	add := func(index, value string) {
		if value == "" {
			return
		}
		objs, _ := c.machineIdx.ByIndex(index, value)
		for _, o := range objs {
			r, ok := o.(*v1alpha1.Machine)
			if !ok || r.UID == m.UID || seen[string(r.UID)] {
				continue
			}
			seen[string(r.UID)] = true
			out = append(out, r)
		}
	}
	add(machinestate.ByNodeIndex, nodeNameOf(m))
	add(machinestate.ByProviderIDIndex, m.Spec.ProviderID)
	return out
}

// rivalsOf names ("namespace/name") the other machines that claim m's
// node or VM and whose claim nothing refutes.
func (c *Controller) rivalsOf(m *v1alpha1.Machine) []string {
	var out []string
	for _, r := range c.claimants(m) {
		node, _ := c.cachedNode(nodeNameOf(r))
		v, ok := c.vouches.get(r)
		if !refuted(r, node, v, ok) {
			out = append(out, workqueue.KeyOf(r))
		}
	}
	return out
}

// enqueueRivals syncs the machines that claim m's node or VM: m's claim
// may have been what held them back.
func (c *Controller) enqueueRivals(m *v1alpha1.Machine) {
	for _, r := range c.claimants(m) {
		c.machineQueue.Add(workqueue.KeyOf(r))
	}
}

// verify asks the driver which VM backs m — by the machine's name, never
// by the provider ID it claims, which would vouch for any VM named there
// — and keeps the answer (see vouches). Machines that claim the same node
// or VM are synced again, since the answer may settle their contest.
func (c *Controller) verify(ctx context.Context, m *v1alpha1.Machine, class *v1alpha1.MachineClass, secret *corev1.Secret) error {
	status, err := c.driver.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: byName(m), MachineClass: class, Secret: secret})
	switch driver.CodeOf(err) {
	case driver.OK, driver.Uninitialized:
		if status == nil || status.ProviderID == "" {
			return fmt.Errorf("verifying the VM of machine %s: driver returned no provider ID", m.Name)
		}
		c.vouches.set(m, vouch{ProviderID: status.ProviderID})
	case driver.NotFound:
		c.vouches.set(m, vouch{None: true})
	default:
		return fmt.Errorf("verifying the VM of machine %s: %w", m.Name, err)
	}
	c.enqueueRivals(m)
	return nil
}

// byName is m without the provider ID it claims, for driver calls that
// must find the machine's own VM by its name.
func byName(m *v1alpha1.Machine) *v1alpha1.Machine {
	if m.Spec.ProviderID == "" {
		return m
	}
	out := m.DeepCopy()
	out.Spec.ProviderID = ""
	return out
}

// reportClaim logs and records a plan's report of claims it ignores; nil
// reports nothing.
func (c *Controller) reportClaim(ctx context.Context, m *v1alpha1.Machine, e *event) {
	if e == nil {
		return
	}
	logr.FromContextOrDiscard(ctx).Info("Ignoring claims of the machine", "reason", e.Reason, "message", e.Message)
	c.recordEvent(m, e)
}

// takenVM says why the VM the driver named for m (provider ID pid, node
// nodeName) is another machine's, "" when nothing says so (see vmTakenBy):
// another machine of this controller owns a VM of that provider ID, or
// the node of that name is bound to another machine and shows it.
func (c *Controller) takenVM(m *v1alpha1.Machine, pid, nodeName string) string {
	if pid == "" {
		return ""
	}
	var owners []string
	objs, _ := c.machineIdx.ByIndex(machinestate.ByProviderIDIndex, pid)
	for _, o := range objs {
		r, ok := o.(*v1alpha1.Machine)
		if !ok || r.UID == m.UID {
			continue
		}
		node, _ := c.cachedNode(nodeNameOf(r))
		v, vouched := c.vouches.get(r)
		if bindingOf(r, node, v, vouched, nil).ownsVM() {
			owners = append(owners, workqueue.KeyOf(r))
		}
	}
	node, _ := c.cachedNode(nodeName)
	return vmTakenBy(m, pid, node, owners)
}

// maxBindAttempts bounds the compare-and-swap of a binding against
// writes of others to the node (the kubelet's status reports move its
// resourceVersion too).
const maxBindAttempts = 5

// errBindingLost: the node is bound to another machine, or no longer
// shows the machine's VM; the machine's next sync judges its claims anew.
var errBindingLost = errors.New("binding lost")

// bindNode binds node to machine m (v1alpha1.MachineUIDAnnotation) with a
// compare-and-swap: a merge patch guarded by the resourceVersion of a copy
// of the node that bindRefusal accepts. The first try, on the node the
// sync observed, also writes the rest of desired's labels, annotations,
// finalizers and taints (planNodeSync's, which bind the node too) when
// the node's status needs no change, so that a joining node costs one
// write; the guard makes replacing its lists safe. A conflict reads the
// node from the API server and tries again, with the binding alone,
// while it may still be bound, so that of two machines (of two managers
// sharing the target) that bind one node at once, exactly one wins; the
// other gets errBindingLost. It returns the node as written, and whether
// desired was written whole: when it was not, desired was planned on a
// node older than the one written, and the node sync waits for the
// machine's next sync.
func (c *Controller) bindNode(ctx context.Context, node, desired *corev1.Node, m *v1alpha1.Machine) (*corev1.Node, bool, error) {
	nodes := c.target.CoreV1().Nodes()
	bindingOnly := func(n *corev1.Node) patch.Fields {
		return patch.Fields{"metadata": patch.Fields{"annotations": patch.Keys(n.Annotations, v1alpha1.MachineUIDAnnotation)}}
	}
	statusSame, err := patch.Diff(nodeStatusFields, node, desired, "")
	whole := err == nil && statusSame == nil
	cur := node
	for attempt := 1; ; attempt++ {
		if why := bindRefusal(cur, m.UID, m.Spec.ProviderID); why != "" {
			return nil, false, fmt.Errorf("binding node %s to machine %s: %w: %s", cur.Name, m.Name, errBindingLost, why)
		}
		if nodebinding.Owner(cur) == m.UID {
			return cur, false, nil
		}
		fields, bound := bindingOnly, cur
		if whole {
			fields, bound = nodeFields, desired
		}
		bound = bound.DeepCopy()
		setMapKey(&bound.Annotations, v1alpha1.MachineUIDAnnotation, string(m.UID))
		data, err := patch.Diff(fields, cur, bound, cur.ResourceVersion)
		if err != nil {
			return nil, false, fmt.Errorf("binding node %s to machine %s: %w", cur.Name, m.Name, err)
		}
		written, err := patch.Send(ctx, nodes.Patch, cur.Name, data, c.opts.FieldManager)
		if err == nil {
			c.nodeWrites.Wrote(cur.Name, written.ResourceVersion)
			logr.FromContextOrDiscard(ctx).Info("Bound node to the machine", "node", cur.Name)
			return written, whole, nil
		}
		if !apierrors.IsConflict(err) || attempt == maxBindAttempts {
			return nil, false, fmt.Errorf("binding node %s to machine %s: %w", cur.Name, m.Name, err)
		}
		if cur, err = nodes.Get(ctx, cur.Name, metav1.GetOptions{}); err != nil {
			return nil, false, fmt.Errorf("binding node %s to machine %s: %w", node.Name, m.Name, err)
		}
		whole = false
	}
}
