package machine

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
// that is being deleted (kubectl delete node) or is gone has the machine
// it is bound to deleted (by UID: never a machine that merely names the
// node, nor one of another manager on a shared target), which drains the
// node first and removes the node finalizer with the node (its MachineSet
// replaces it); a node being deleted that no machine is bound to loses the
// node finalizer, so that it never stays Terminating for want of a machine
// to remove it. Other nodes without a machine are left alone.
func (c *Controller) ReconcileNode(ctx context.Context, name string) (workqueue.Result, error) {
	if c.nodes == nil {
		return workqueue.Result{}, nil
	}
	objs, err := c.machineIdx.ByIndex(machinestate.ByNodeIndex, name)
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("listing machines of node %s: %w", name, err)
	}
	goneOwner, wasGone := c.goneNodes.take(name)
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		node = nil
		c.nodeWrites.Forget(name)
	} else if err != nil {
		if wasGone {
			c.goneNodes.put(name, goneOwner) // for the retry
		}
		return workqueue.Result{}, fmt.Errorf("getting node %s: %w", name, err)
	}
	machines := make([]*v1alpha1.Machine, 0, len(objs))
	for _, o := range objs {
		machines = append(machines, o.(*v1alpha1.Machine))
	}
	p := planNodeEvent(node, goneOwner, machines)
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
			if node == nil {
				c.goneNodes.put(name, goneOwner) // for the retry
			}
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
		logger.Info("Node being deleted is bound to no machine; removed its finalizer", "node", name)
	}
	return workqueue.Result{}, nil
}

// onNodeDelete remembers which machine a node that is gone was bound to,
// from the informer's last copy of it, for ReconcileNode: the cache no
// longer has the node when that runs.
func (c *Controller) onNodeDelete(obj any) {
	n, ok := workqueue.ObjectOf(obj).(*corev1.Node)
	if !ok {
		return
	}
	c.goneNodes.put(n.Name, nodebinding.Owner(n))
	c.nodeQueue.Add(n.Name)
}

// goneNodes are the bindings of nodes that are gone, by name, until
// ReconcileNode has seen them.
type goneNodes struct {
	mu sync.Mutex
	m  map[string]types.UID
}

func (g *goneNodes) put(name string, owner types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string]types.UID{}
	}
	g.m[name] = owner
}

// take returns and forgets the binding of the gone node name, and whether
// one was recorded.
func (g *goneNodes) take(name string) (types.UID, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	owner, ok := g.m[name]
	delete(g.m, name)
	return owner, ok
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
	// finalizer, and is bound to no machine (a machine of another
	// manager's on a shared target removes it with its own deletion).
	RemoveFinalizer bool
}

// planNodeEvent decides what a change of a node (nil: gone, and then
// goneOwner is the UID of the machine it was bound to, "" for none or not
// known) means for the machines that claim it (label "node"). Only the
// machine the node is (or was) bound to is deleted with it: the node label
// is anyone's to write, and a node of another manager's machine on a
// shared target carries that machine's UID. It is pure.
func planNodeEvent(node *corev1.Node, goneOwner types.UID, machines []*v1alpha1.Machine) nodeEventPlan {
	var p nodeEventPlan
	deleting := node != nil && node.DeletionTimestamp != nil
	owner := goneOwner
	if node != nil {
		owner = nodebinding.Owner(node)
	}
	for _, m := range machines {
		boundHere := owner != "" && m.UID == owner
		switch {
		case (deleting || node == nil) && boundHere && m.DeletionTimestamp == nil:
			// Someone deleted the node: the machine goes the regular way,
			// drain included, and takes the node (and its finalizer) along.
			p.Delete = append(p.Delete, m)
		case m.DeletionTimestamp != nil, deleting, node == nil:
			p.Sync = append(p.Sync, m)
		case nodeReady(node) && awaitsReadyNode(m):
			p.SyncFirst = append(p.SyncFirst, m)
		default:
			p.Sync = append(p.Sync, m)
		}
	}
	p.RemoveFinalizer = deleting && owner == "" && slices.Contains(node.Finalizers, v1alpha1.NodeFinalizer)
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
