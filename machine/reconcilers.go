package machine

import (
	"context"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
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
	data, err := patch.Finalizer(secret.Finalizers, v1alpha1.SecretFinalizer, referenced, secret.ResourceVersion)
	if err != nil || data == nil {
		return workqueue.Result{}, err
	}
	if _, err := patch.Send(ctx, c.controlCore.CoreV1().Secrets(namespace).Patch, name, data, c.opts.FieldManager); err != nil {
		return workqueue.Result{}, fmt.Errorf("updating finalizer of secret %s: %w", key, err)
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
		return workqueue.Result{}, nil
	}
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("getting machine class %s: %w", key, err)
	}
	users, err := c.machineIdx.ByIndex(indexMachineByClass, key)
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("listing machines of class %s: %w", key, err)
	}
	data, err := patch.Finalizer(class.Finalizers, v1alpha1.MachineFinalizer, len(users) > 0, class.ResourceVersion)
	if err != nil || data == nil {
		return workqueue.Result{}, err
	}
	if _, err := patch.Send(ctx, c.control.MachineV1alpha1().MachineClasses(namespace).Patch, name, data, c.opts.FieldManager); err != nil {
		return workqueue.Result{}, fmt.Errorf("updating finalizer of machine class %s: %w", key, err)
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("Updated machine class finalizer", "class", key, "machines", len(users))
	c.enqueueMachinesOfClass(key)
	return workqueue.Result{}, nil
}

// ReconcileNode reacts to a node change: its machines are synced, and if
// the node was deleted, its machines are deleted (they are replaced by
// their MachineSet). Nodes without a machine are left alone.
func (c *Controller) ReconcileNode(ctx context.Context, name string) (workqueue.Result, error) {
	if c.nodes == nil {
		return workqueue.Result{}, nil
	}
	objs, err := c.machineIdx.ByIndex(indexMachineByNode, name)
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("listing machines of node %s: %w", name, err)
	}
	_, err = c.nodes.Get(name)
	gone := apierrors.IsNotFound(err)
	if err != nil && !gone {
		return workqueue.Result{}, fmt.Errorf("getting node %s: %w", name, err)
	}
	for _, o := range objs {
		m := o.(*v1alpha1.Machine)
		if !gone || m.DeletionTimestamp != nil {
			c.machineQueue.Add(workqueue.KeyOf(m))
			continue
		}
		// Only a node that was there can go: a machine still waiting for
		// its node to register is not deleted.
		switch m.Status.CurrentStatus.Phase {
		case v1alpha1.MachineRunning, v1alpha1.MachineUnknown, v1alpha1.MachineFailed:
		default:
			c.machineQueue.Add(workqueue.KeyOf(m))
			continue
		}
		uid := m.UID
		err := c.control.MachineV1alpha1().Machines(m.Namespace).Delete(ctx, m.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return workqueue.Result{}, fmt.Errorf("deleting machine %s of deleted node %s: %w", workqueue.KeyOf(m), name, err)
		}
		logr.FromContextOrDiscard(ctx).Info("Node deleted; deleting its machine", "node", name, "machine", workqueue.KeyOf(m))
	}
	return workqueue.Result{}, nil
}
