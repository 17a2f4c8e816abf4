package machine

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/internal/cachetransform"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/workqueue"
)

// Index names the controller adds to the informers.
const (
	indexMachineByClass = "mcmkit.io/machine-by-class"
	// indexMachineByBlockingBudget: machines whose drain waits on a
	// PodDisruptionBudget, by the budget's key.
	indexMachineByBlockingBudget = "mcmkit.io/machine-by-blocking-budget"
)

// objectKey is the "namespace/name" key of an object, as the work queues
// and the informer indexes use it.
func objectKey(namespace, name string) string { return cache.NewObjectName(namespace, name).String() }

// classKeyOf is the key of the machine's class.
func classKeyOf(m *v1alpha1.Machine) string { return objectKey(m.Namespace, m.Spec.Class.Name) }

// machinesByClass indexes machines by the key of their class.
func machinesByClass(obj any) ([]string, error) {
	m, ok := obj.(*v1alpha1.Machine)
	if !ok || m.Spec.Class.Name == "" {
		return nil, nil
	}
	return []string{classKeyOf(m)}, nil
}

// register adds transforms, indexes and event handlers to the informers.
func (c *Controller) register(inf Informers) error {
	informers := []cache.SharedIndexInformer{inf.Machines.Informer(), inf.Classes.Informer(), inf.Secrets.Informer()}
	if inf.Nodes != nil {
		informers = append(informers, inf.Nodes.Informer())
	}
	// The drain's caches, when the target's factory is given.
	var drainCaches []cache.SharedIndexInformer
	if inf.Target != nil {
		drainCaches = drain.FactoryInformers(inf.Target)
		informers = append(informers, drainCaches...)
	}
	cachetransform.SetOn(informers...)
	machines := inf.Machines.Informer()
	for _, index := range []struct {
		name string
		fn   cache.IndexFunc
	}{
		{indexMachineByClass, machinesByClass},
		{machinestate.ByNodeIndex, machinestate.IndexByNode},
		{machinestate.ByProviderIDIndex, machinestate.IndexByProviderID},
		{indexMachineByBlockingBudget, machinesByBlockingBudget},
	} {
		if err := machinestate.EnsureIndex(machines, index.name, index.fn); err != nil {
			return err
		}
	}

	add := c.handlers.Add
	if err := add(inf.Machines.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onMachine(nil, obj) },
		UpdateFunc: c.onMachine,
		DeleteFunc: c.onMachineDelete,
	}); err != nil {
		return err
	}
	if err := add(inf.Classes.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onClass(nil, obj) },
		UpdateFunc: c.onClass,
		DeleteFunc: func(obj any) { c.onClass(nil, obj) },
	}); err != nil {
		return err
	}
	if err := add(inf.Secrets.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onSecret(nil, obj) },
		UpdateFunc: c.onSecret,
		DeleteFunc: func(obj any) { c.onSecret(nil, obj) },
	}); err != nil {
		return err
	}
	if inf.Nodes != nil {
		if err := add(inf.Nodes.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onNode(nil, obj) },
			UpdateFunc: c.onNode,
			DeleteFunc: c.onNodeDelete,
		}); err != nil {
			return err
		}
	}
	if inf.Target != nil {
		if err := add(inf.Target.Policy().V1().PodDisruptionBudgets().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onBudget,
			UpdateFunc: func(_, obj any) { c.onBudget(obj) },
		}); err != nil {
			return err
		}
		for _, i := range drainCaches {
			c.cachesSynced = append(c.cachesSynced, i.HasSynced)
		}
	}
	return nil
}

// onBudget syncs the machines whose drain waits on a PodDisruptionBudget
// as soon as the budget allows a disruption, instead of at their drain's
// next check.
func (c *Controller) onBudget(obj any) {
	pdb, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok || pdb.Status.DisruptionsAllowed <= 0 {
		return
	}
	objs, _ := c.machineIdx.ByIndex(indexMachineByBlockingBudget, workqueue.KeyOf(pdb))
	for _, o := range objs {
		c.machineQueue.Add(workqueue.KeyOf(o))
	}
}

func (c *Controller) onMachine(oldObj, obj any) {
	m, ok := obj.(*v1alpha1.Machine)
	if !ok {
		return
	}
	key := workqueue.KeyOf(m)
	old, _ := oldObj.(*v1alpha1.Machine)
	if old != nil && !updateQueues(old, m, c.statusWrites.take(key, m.ResourceVersion)) {
		return
	}
	if inputsChanged(old, m) {
		c.failures.release(key)
	}
	if c.joinsNow(m) {
		c.machineQueue.AddFirst(workqueue.KeyOf(m))
	} else {
		c.machineQueue.Add(workqueue.KeyOf(m))
	}
	c.classQueue.Add(classKeyOf(m))
	if old != nil && old.Spec.Class.Name != m.Spec.Class.Name {
		c.classQueue.Add(classKeyOf(old))
	}
}

// joinsNow reports whether m's next sync may turn it Running: it awaits a
// Ready node, and the node it is bound to is Ready in the cache. Such a
// machine is queued first, as ReconcileNode queues it when the node turns
// Ready: a node that registers before the machine's creation write shows
// in the cache finds no machine, and the machine's own event is then the
// one that brings it to Running.
func (c *Controller) joinsNow(m *v1alpha1.Machine) bool {
	name := m.Labels[v1alpha1.NodeLabelKey]
	if c.nodes == nil || name == "" || m.DeletionTimestamp != nil || !awaitsReadyNode(m) {
		return false
	}
	node, err := c.nodes.Get(name)
	return err == nil && nodeReady(node)
}

func (c *Controller) onMachineDelete(obj any) {
	m, ok := workqueue.ObjectOf(obj).(*v1alpha1.Machine)
	if !ok {
		return
	}
	key := workqueue.KeyOf(m)
	c.writes.Forget(key)
	c.statusWrites.forget(key)
	c.finalized.DeletionObserved(key, m.UID)
	c.failures.reset(key)
	c.vouches.forget(m)
	// Machines whose claims this one contested are synced again.
	c.enqueueRivals(m)
	c.classQueue.Add(classKeyOf(m))
}

func (c *Controller) onClass(oldObj, obj any) {
	class, ok := workqueue.ObjectOf(obj).(*v1alpha1.MachineClass)
	if !ok {
		return
	}
	c.classQueue.Add(workqueue.KeyOf(class))
	for _, cl := range []*v1alpha1.MachineClass{class, asClass(oldObj)} {
		if cl == nil {
			continue
		}
		for _, ref := range classSecretRefs(cl) {
			c.secretQueue.Add(ref)
		}
	}
	c.enqueueMachinesOfClass(workqueue.KeyOf(class), classChanged(asClass(oldObj), class))
}

func asClass(obj any) *v1alpha1.MachineClass {
	cl, _ := obj.(*v1alpha1.MachineClass)
	return cl
}

// enqueueMachinesOfClass queues the machines of the class; with retryNow
// (what they are created from changed) a failed creation among them runs
// again without waiting for the rest of its backoff.
func (c *Controller) enqueueMachinesOfClass(classKey string, retryNow bool) {
	objs, _ := c.machineIdx.ByIndex(indexMachineByClass, classKey)
	for _, o := range objs {
		key := workqueue.KeyOf(o)
		if retryNow {
			c.failures.release(key)
		}
		c.machineQueue.Add(key)
	}
}

func (c *Controller) onSecret(oldObj, obj any) {
	s, ok := workqueue.ObjectOf(obj).(*corev1.Secret)
	if !ok {
		return
	}
	key := workqueue.KeyOf(s)
	c.secretQueue.Add(key)
	// Machines waiting for a fixed secret retry now rather than after
	// their backoff.
	old, _ := oldObj.(*corev1.Secret)
	classes, _ := c.classes.MachineClasses(s.Namespace).List(everything)
	for _, cl := range classes {
		if slices.Contains(classSecretRefs(cl), key) {
			c.enqueueMachinesOfClass(workqueue.KeyOf(cl), secretChanged(old, s))
		}
	}
}

func (c *Controller) onNode(oldObj, obj any) {
	n, ok := workqueue.ObjectOf(obj).(*corev1.Node)
	if !ok {
		return
	}
	if old, ok := oldObj.(*corev1.Node); ok && !nodeChanged(old, n) {
		return
	}
	c.nodeQueue.Add(n.Name)
}

// nodeChanged reports whether an update matters to machines: not every
// heartbeat does.
func nodeChanged(old, n *corev1.Node) bool {
	return !conditionsEquivalent(old.Status.Conditions, n.Status.Conditions) ||
		!maps.Equal(old.Labels, n.Labels) || !maps.Equal(old.Annotations, n.Annotations) ||
		!slices.Equal(old.Finalizers, n.Finalizers) ||
		!slices.EqualFunc(old.Spec.Taints, n.Spec.Taints, taintEqual) ||
		(old.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
}

// classSecretRefs returns the keys of the class's secrets.
func classSecretRefs(cl *v1alpha1.MachineClass) []string {
	var out []string
	for _, ref := range []*corev1.SecretReference{cl.SecretRef, cl.CredentialsSecretRef} {
		if ref == nil || ref.Name == "" {
			continue
		}
		out = append(out, objectKey(driver.SecretNamespace(ref, cl), ref.Name))
	}
	return out
}
