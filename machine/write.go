package machine

import (
	"context"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

// The fields the controller owns on a Machine, and on a Node.
func machineMetaFields(m *v1alpha1.Machine) patch.Fields {
	return patch.Fields{
		"metadata": patch.Fields{"labels": m.Labels, "annotations": m.Annotations, "finalizers": m.Finalizers},
		"spec":     patch.Fields{"providerID": m.Spec.ProviderID},
	}
}

func machineStatusFields(m *v1alpha1.Machine) patch.Fields { return patch.Fields{"status": m.Status} }

func nodeFields(n *corev1.Node) patch.Fields {
	return patch.Fields{
		"metadata": patch.Fields{"labels": n.Labels, "annotations": n.Annotations, "finalizers": n.Finalizers},
		"spec":     patch.Fields{"taints": n.Spec.Taints, "unschedulable": n.Spec.Unschedulable},
	}
}

func nodeStatusFields(n *corev1.Node) patch.Fields {
	return patch.Fields{"status": patch.Fields{"capacity": n.Status.Capacity}}
}

// machineStatusPatch is the guarded patch from cur's status to desired's,
// nil when they are equal: the status is written only when it changed.
func machineStatusPatch(cur, desired *v1alpha1.Machine) ([]byte, error) {
	return patch.Diff(machineStatusFields, cur, desired, cur.ResourceVersion)
}

// writeMachine persists the difference between cur (as read) and desired:
// first labels, annotations, finalizers and spec.providerID, then the
// status, each as a guarded merge patch (see package internal/patch).
// Nothing is written for parts that did not change. It returns the machine
// as last written (cur if nothing was), and records each write so that the
// next sync waits for the cache to show it.
func (c *Controller) writeMachine(ctx context.Context, cur, desired *v1alpha1.Machine) (*v1alpha1.Machine, error) {
	client := c.control.MachineV1alpha1().Machines(cur.Namespace)
	key := workqueue.KeyOf(cur)
	data, err := patch.Diff(machineMetaFields, cur, desired, cur.ResourceVersion)
	if err != nil {
		return cur, fmt.Errorf("patching machine %s: %w", key, err)
	}
	if data != nil {
		updated, err := patch.Send(ctx, client.Patch, cur.Name, data, c.opts.FieldManager)
		if err != nil {
			return cur, fmt.Errorf("patching machine %s: %w", key, err)
		}
		c.writes.Wrote(key, updated.ResourceVersion)
		// The status is unchanged by the patch; compare against cur's.
		status := cur.Status
		cur = updated
		cur.Status = status
	}
	data, err = machineStatusPatch(cur, desired)
	if err != nil {
		return cur, fmt.Errorf("patching status of machine %s: %w", key, err)
	}
	if data == nil {
		return cur, nil
	}
	updated, err := patch.Send(ctx, client.Patch, cur.Name, data, c.opts.FieldManager, "status")
	if err != nil {
		return cur, fmt.Errorf("patching status of machine %s: %w", key, err)
	}
	c.writes.Wrote(key, updated.ResourceVersion)
	c.statusWrites.wrote(key, updated.ResourceVersion)
	return updated, nil
}

// patchNode writes what planNodeSync changed: status.capacity first,
// guarded by the node's resourceVersion, then labels, annotations,
// finalizers and taints (see nodeMetaPatch for which need a guard). The
// capacity goes first because the virtual-capacity record (an
// annotation) must never claim what the status does not have yet: a
// crash in between then repeats the status write instead of forgetting a
// resource to remove.
func (c *Controller) patchNode(ctx context.Context, cur, desired *corev1.Node) error {
	nodes := c.target.CoreV1().Nodes()
	rv := cur.ResourceVersion
	data, err := patch.Diff(nodeStatusFields, cur, desired, rv)
	if err == nil && data != nil {
		var written *corev1.Node
		if written, err = patch.Send(ctx, nodes.Patch, cur.Name, data, c.opts.FieldManager, "status"); err == nil {
			rv = written.ResourceVersion
			c.nodeWrites.Wrote(cur.Name, rv)
		}
	}
	if err != nil {
		return fmt.Errorf("syncing virtual capacity to node %s: %w", cur.Name, err)
	}
	data, strategic, err := nodeMetaPatch(cur, desired, rv)
	if err == nil && data != nil {
		send := patch.Send[*corev1.Node]
		if strategic {
			send = patch.SendStrategic[*corev1.Node]
		}
		var written *corev1.Node
		if written, err = send(ctx, nodes.Patch, cur.Name, data, c.opts.FieldManager); err == nil {
			c.nodeWrites.Wrote(cur.Name, written.ResourceVersion)
		}
	}
	if err != nil {
		return fmt.Errorf("syncing node template to node %s: %w", cur.Name, err)
	}
	if data != nil {
		logr.FromContextOrDiscard(ctx).V(2).Info("Synced node template to node", "node", cur.Name)
	}
	return nil
}

// nodeMetaPatch is the patch of the node's labels, annotations,
// finalizers and taints from cur to desired, nil when they are equal, and
// whether it is a strategic merge patch.
//
// Labels and annotations are merged key by key, so a patch of them alone
// cannot undo anyone's concurrent change and needs no guard; a finalizer
// that is only added goes as a strategic merge patch, which the API server
// merges into the node's list. Such a patch is sent without a
// resourceVersion: the kubelet updates a new node's status right after
// registering it, and a guard would make the write fail on that alone. A
// patch that removes a finalizer or changes the taints, lists a merge
// patch replaces whole, or that uncordons (a drain may be cordoning the
// node meanwhile), is guarded by rv.
func nodeMetaPatch(cur, desired *corev1.Node, rv string) (data []byte, strategic bool, err error) {
	added := slices.DeleteFunc(slices.Clone(desired.Finalizers), func(f string) bool { return slices.Contains(cur.Finalizers, f) })
	removed := slices.ContainsFunc(cur.Finalizers, func(f string) bool { return !slices.Contains(desired.Finalizers, f) })
	if removed || !slices.EqualFunc(cur.Spec.Taints, desired.Spec.Taints, taintEqual) ||
		cur.Spec.Unschedulable != desired.Spec.Unschedulable {
		data, err := patch.Diff(nodeFields, cur, desired, rv)
		return data, false, err
	}
	// The finalizers are only those added, which the strategic merge
	// patch merges into the node's list: cur has none to add.
	have := nodeMeta{Labels: cur.Labels, Annotations: cur.Annotations}
	want := nodeMeta{Labels: desired.Labels, Annotations: desired.Annotations, AddedFinalizers: added}
	data, err = patch.Diff(nodeMetaFields, have, want, "")
	return data, true, err
}

// nodeMeta is what a strategic merge patch of a node's metadata writes.
type nodeMeta struct {
	Labels, Annotations map[string]string
	AddedFinalizers     []string
}

func nodeMetaFields(m nodeMeta) patch.Fields {
	return patch.Fields{"metadata": patch.Fields{"labels": m.Labels, "annotations": m.Annotations, "finalizers": m.AddedFinalizers}}
}

// recordEvent records e about m, its message bounded (boundMessage): a
// driver's error of any size still makes an event.
func (c *Controller) recordEvent(m *v1alpha1.Machine, e *event) {
	if e == nil || c.opts.Recorder == nil {
		return
	}
	c.opts.Recorder.Eventf(m, e.Type, e.Reason, "%s", boundMessage(e.Message, maxEventMessage))
}
