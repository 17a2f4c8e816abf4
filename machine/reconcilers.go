package machine

import (
	"context"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/nodebinding"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

// ReconcileSecret keeps the secret finalizer on a secret exactly while a
// MachineClass in its namespace references it.
func (c *Controller) ReconcileSecret(ctx context.Context, key string) (workqueue.Result, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workqueue.Result{}, nil
	}
	secret, err := c.secrets.Secrets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return workqueue.Result{}, nil
	}
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("getting secret %s: %w", key, err)
	}
	classes, err := c.classes.MachineClasses(namespace).List(everything)
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("listing machine classes: %w", err)
	}
	referenced := slices.ContainsFunc(classes, func(cl *v1alpha1.MachineClass) bool {
		return slices.Contains(classSecretRefs(cl), key)
	})
	written, err := patch.SetFinalizer(ctx, c.controlCore.CoreV1().Secrets(namespace).Patch, secret, v1alpha1.SecretFinalizer, referenced, c.opts.FieldManager)
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("updating finalizer of secret %s: %w", key, err)
	}
	if written == secret {
		return workqueue.Result{}, nil // as wanted already
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("Updated secret finalizer", "secret", key, "referenced", referenced)
	return workqueue.Result{}, nil
}

// ReconcileMachineClass keeps the machine finalizer on a class exactly while
// machines use it, and enqueues the class's machines.
func (c *Controller) ReconcileMachineClass(ctx context.Context, key string) (workqueue.Result, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil || name == "" {
		return workqueue.Result{}, nil
	}
	class, err := c.classes.MachineClasses(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.classWrites.Forget(key)
		return workqueue.Result{}, nil
	}
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("getting machine class %s: %w", key, err)
	}
	if !c.classWrites.Observed(key, class.ResourceVersion) {
		// The cache does not show the last finalizer patch yet: patching
		// from it would send that patch again. Its event brings the class
		// back.
		return workqueue.Result{}, nil
	}
	users, err := c.machineIdx.ByIndex(indexMachineByClass, key)
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("listing machines of class %s: %w", key, err)
	}
	written, err := patch.SetFinalizer(ctx, c.control.MachineV1alpha1().MachineClasses(namespace).Patch, class, v1alpha1.MachineFinalizer, len(users) > 0, c.opts.FieldManager)
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("updating finalizer of machine class %s: %w", key, err)
	}
	if written == class {
		return workqueue.Result{}, nil // as wanted already
	}
	c.classWrites.Wrote(key, written.ResourceVersion)
	logr.FromContextOrDiscard(ctx).V(1).Info("Updated machine class finalizer", "class", key, "machines", len(users))
	c.enqueueMachinesOfClass(key, false) // those that waited for the finalizer
	return workqueue.Result{}, nil
}

// ReconcileNode reacts to a node change: its machines are synced; a node
// that is being deleted (kubectl delete node) or is gone has its machines
// deleted, which drains the node first and removes the node finalizer
// with the node (their MachineSet replaces them); a node being deleted
// that no machine claims loses the node finalizer, so that it never stays
// Terminating for want of a machine to remove it. Other nodes without a
// machine are left alone.
func (c *Controller) ReconcileNode(ctx context.Context, name string) (workqueue.Result, error) {
	if c.nodes == nil {
		return workqueue.Result{}, nil
	}
	objs, err := c.machineIdx.ByIndex(machinestate.ByNodeIndex, name)
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("listing machines of node %s: %w", name, err)
	}
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		node = nil
		c.nodeWrites.Forget(name)
	} else if err != nil {
		return workqueue.Result{}, fmt.Errorf("getting node %s: %w", name, err)
	}
	machines := make([]*v1alpha1.Machine, 0, len(objs))
	for _, o := range objs {
		machines = append(machines, o.(*v1alpha1.Machine))
	}
	p := planNodeEvent(node, machines)
	logger := logr.FromContextOrDiscard(ctx)
	for _, m := range p.SyncFirst {
		c.machineQueue.AddFirst(workqueue.KeyOf(m))
	}
	for _, m := range p.Sync {
		c.machineQueue.Add(workqueue.KeyOf(m))
	}
	for _, m := range p.Delete {
		uid := m.UID
		err := c.control.MachineV1alpha1().Machines(m.Namespace).Delete(ctx, m.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return workqueue.Result{}, fmt.Errorf("deleting machine %s of deleted node %s: %w", workqueue.KeyOf(m), name, err)
		}
		logger.Info("Node deleted; deleting its machine", "node", name, "machine", workqueue.KeyOf(m))
	}
	if p.RemoveFinalizer {
		// As in the deletion flow: a strategic removal of our finalizer
		// alone, which the node's other writers cannot make conflict.
		_, err := patch.SendStrategic(ctx, c.target.CoreV1().Nodes().Patch, name,
			patch.RemoveFinalizerStrategic(v1alpha1.NodeFinalizer), c.opts.FieldManager)
		if err != nil && !apierrors.IsNotFound(err) {
			return workqueue.Result{}, fmt.Errorf("removing finalizer of node %s: %w", name, err)
		}
		logger.Info("Node being deleted has no machine; removed its finalizer", "node", name)
	}
	return workqueue.Result{}, nil
}

// nodeEventPlan is what a node change asks of its machines.
type nodeEventPlan struct {
	// Sync are machines to sync, Delete machines to delete.
	Sync, Delete []*v1alpha1.Machine
	// SyncFirst are machines to sync ahead of the others waiting: the
	// node is Ready, and their sync may turn them Running (or Running
	// again). That is the moment a user waits for, while the other keys
	// queued behind a wave of creations bring results only later.
	SyncFirst []*v1alpha1.Machine
	// RemoveFinalizer: the node is being deleted, carries the node
	// finalizer, confirms no machine's claim, and is not bound to a
	// machine this controller does not know (another manager's).
	RemoveFinalizer bool
}

// planNodeEvent decides what a change of a node (nil: gone) means for the
// machines that claim it (label "node"). It is pure.
func planNodeEvent(node *corev1.Node, machines []*v1alpha1.Machine) nodeEventPlan {
	var p nodeEventPlan
	deleting := node != nil && node.DeletionTimestamp != nil
	confirmed := 0 // machines the node confirms (nodebinding.Confirms)
	for _, m := range machines {
		switch {
		case deleting && nodebinding.Confirms(node, m):
			confirmed++
			if m.DeletionTimestamp != nil {
				p.Sync = append(p.Sync, m)
				continue
			}
			// Someone deletes the node: the machine goes the regular way,
			// drain included, and takes the node (and its finalizer) along.
			// A machine whose claim the node does not confirm is not
			// deleted with it: a node label is anyone's to write.
			p.Delete = append(p.Delete, m)
		case m.DeletionTimestamp != nil, deleting:
			p.Sync = append(p.Sync, m)
		case node == nil && wasJoined(m):
			// Only a node that was there can go: a machine still waiting
			// for its node to register is not deleted.
			p.Delete = append(p.Delete, m)
		case nodeReady(node) && awaitsReadyNode(m):
			p.SyncFirst = append(p.SyncFirst, m)
		default:
			p.Sync = append(p.Sync, m)
		}
	}
	// A node bound to a machine this controller does not know may be
	// another manager's (a shared target): its finalizer is left to it.
	owner := nodebinding.Owner(node)
	known := owner == "" || slices.ContainsFunc(machines, func(m *v1alpha1.Machine) bool { return m.UID == owner })
	p.RemoveFinalizer = deleting && confirmed == 0 && known && slices.Contains(node.Finalizers, v1alpha1.NodeFinalizer)
	return p
}

// awaitsReadyNode reports whether the machine's phase is one a Ready node
// ends (planHealth): joining (none yet, Pending, Available), Unknown, or
// updated in place. A preserved Failed machine, which a healthy node also
// brings back, is not queued first: whether it is preserved depends on the
// time, and it is rare enough to wait its turn.
func awaitsReadyNode(m *v1alpha1.Machine) bool {
	switch m.Status.CurrentStatus.Phase {
	case "", v1alpha1.MachinePending, v1alpha1.MachineAvailable, v1alpha1.MachineUnknown,
		v1alpha1.MachineInPlaceUpdateSuccessful:
		return true
	}
	return false
}

// nodeReady reports whether node's Ready condition is True (nodeHealth
// without the configured bad conditions): enough to queue a machine
// first, whose sync then applies the whole test.
func nodeReady(node *corev1.Node) bool {
	ready, _ := nodeHealth(node, nil)
	return ready
}

// wasJoined reports whether the machine's node had registered: its phase
// is one a machine reaches only with a node.
func wasJoined(m *v1alpha1.Machine) bool {
	switch m.Status.CurrentStatus.Phase {
	case v1alpha1.MachineRunning, v1alpha1.MachineUnknown, v1alpha1.MachineFailed,
		v1alpha1.MachineInPlaceUpdating, v1alpha1.MachineInPlaceUpdateSuccessful, v1alpha1.MachineInPlaceUpdateFailed:
		return true
	}
	return false
}
