package machine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	machineinformers "github.com/mcmkit/mcm/client/informers/externalversions/machine/v1alpha1"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/internal/cachetransform"
	"github.com/mcmkit/mcm/workqueue"
)

// Informers are the shared informers the controller reads from. Create them
// from factories, hand them to NewController before starting the factories
// (NewController adds indexes and transforms), and start the factories
// before Run.
type Informers struct {
	// Machines and Classes in the control cluster.
	Machines machineinformers.MachineInformer
	Classes  machineinformers.MachineClassInformer
	// Secrets in the control cluster.
	Secrets coreinformers.SecretInformer
	// Nodes in the target cluster; nil without a target cluster.
	Nodes coreinformers.NodeInformer
}

// Index names the controller adds to the informers.
const (
	indexMachineByClass      = "mcmkit.io/machine-by-class"
	indexMachineByNode       = "mcmkit.io/machine-by-node"
	indexMachineByDeployment = "mcmkit.io/machine-by-deployment"
)

// Controller reconciles Machines, MachineClasses and their Secrets against a
// driver and, when there is one, the Nodes of a target cluster.
type Controller struct {
	control     versioned.Interface
	controlCore kubernetes.Interface
	target      kubernetes.Interface // nil: no target cluster
	driver      driver.Driver
	drainer     Drainer
	opts        Options

	machines   machinelisters.MachineLister
	machineIdx cache.Indexer
	classes    machinelisters.MachineClassLister
	secrets    corelisters.SecretLister
	nodes      corelisters.NodeLister // nil without target
	synced     []cache.InformerSynced

	machineQueue *workqueue.Queue[string]
	classQueue   *workqueue.Queue[string]
	secretQueue  *workqueue.Queue[string]
	nodeQueue    *workqueue.Queue[string] // nil without target

	metrics  *metrics
	writes   *pendingWrites
	failures failureCounter

	// budgetMu serializes health-timeout decisions; recentFailed holds
	// machines this controller marked Failed, by deployment, until the
	// cache shows them, so that a lagging cache cannot exceed the budget.
	budgetMu     sync.Mutex
	recentFailed map[string]map[string]time.Time
}

// NewController returns a machine controller. control is the clientset of
// the control cluster (Machines, MachineClasses), controlCore its core client
// (Secrets), target the core client of the target cluster (Nodes, Pods,
// VolumeAttachments) or nil to run without one (MCM's "none"), and d the
// provider's driver. It registers event handlers, indexes and transforms on
// the informers and the metrics on opts.Registerer; it starts nothing.
func NewController(control versioned.Interface, controlCore, target kubernetes.Interface,
	inf Informers, d driver.Driver, opts Options) (*Controller, error) {
	if control == nil || controlCore == nil || d == nil {
		return nil, errors.New("machine: control clients and driver must not be nil")
	}
	if inf.Machines == nil || inf.Classes == nil || inf.Secrets == nil {
		return nil, errors.New("machine: machine, class and secret informers are required")
	}
	if (target == nil) != (inf.Nodes == nil) {
		return nil, errors.New("machine: a target client needs a node informer and vice versa")
	}
	o, err := opts.complete()
	if err != nil {
		return nil, fmt.Errorf("machine: invalid options: %w", err)
	}
	if o.Registerer != nil {
		if d, err = driver.Instrument(d, o.Registerer); err != nil {
			return nil, fmt.Errorf("machine: %w", err)
		}
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("machine: %w", err)
	}
	c := &Controller{
		control: control, controlCore: controlCore, target: target, driver: d, opts: o,
		machines:     inf.Machines.Lister(),
		machineIdx:   inf.Machines.Informer().GetIndexer(),
		classes:      inf.Classes.Lister(),
		secrets:      inf.Secrets.Lister(),
		metrics:      m,
		writes:       &pendingWrites{ttl: 30 * time.Second, now: o.Clock.Now},
		recentFailed: map[string]map[string]time.Time{},
	}
	qopts := func() workqueue.Options {
		return workqueue.Options{Registerer: o.Registerer, Clock: o.Clock, Logger: o.Logger, MaxRetries: -1}
	}
	if c.machineQueue, err = workqueue.New("machine", workqueue.ReconcilerFunc[string](c.ReconcileMachine), qopts()); err != nil {
		return nil, fmt.Errorf("machine: %w", err)
	}
	if c.classQueue, err = workqueue.New("machineclass", workqueue.ReconcilerFunc[string](c.ReconcileMachineClass), qopts()); err != nil {
		return nil, fmt.Errorf("machine: %w", err)
	}
	if c.secretQueue, err = workqueue.New("secret", workqueue.ReconcilerFunc[string](c.ReconcileSecret), qopts()); err != nil {
		return nil, fmt.Errorf("machine: %w", err)
	}

	if target != nil {
		c.nodes = inf.Nodes.Lister()
		if c.nodeQueue, err = workqueue.New("node", workqueue.ReconcilerFunc[string](c.ReconcileNode), qopts()); err != nil {
			return nil, fmt.Errorf("machine: %w", err)
		}
		c.drainer = o.Drainer
		if c.drainer == nil {
			dopts := o.DrainOptions
			if dopts.Clock == nil {
				dopts.Clock = o.Clock
			}
			if dopts.Registerer == nil {
				dopts.Registerer = o.Registerer
			}
			if dopts.Volumes.DetachTimeout == 0 {
				dopts.Volumes.DetachTimeout = o.PVDetachTimeout
			}
			if dopts.Volumes.ReattachTimeout == 0 {
				dopts.Volumes.ReattachTimeout = o.PVReattachTimeout
			}
			if dopts.Volumes.IDs == nil {
				dopts.Volumes.IDs = volumeIDs(c.driver)
			}
			if dopts.Listers.Nodes == nil {
				dopts.Listers.Nodes = c.nodes
			}
			dr, err := drain.New(target, dopts)
			if err != nil {
				return nil, fmt.Errorf("machine: %w", err)
			}
			c.drainer = dr
		}
	}

	if err := c.register(inf); err != nil {
		return nil, fmt.Errorf("machine: %w", err)
	}
	return c, nil
}

// volumeIDs adapts the driver's GetVolumeIDs for the drain engine.
func volumeIDs(d driver.Driver) drain.VolumeIDGetter {
	return drain.VolumeIDFunc(func(ctx context.Context, specs []*corev1.PersistentVolumeSpec) ([]string, error) {
		resp, err := d.GetVolumeIDs(ctx, &driver.GetVolumeIDsRequest{PVSpecs: specs})
		if driver.CodeOf(err) == driver.Unimplemented {
			return nil, errors.ErrUnsupported
		}
		if err != nil {
			return nil, err
		}
		return resp.VolumeIDs, nil
	})
}

// register adds transforms, indexes and event handlers to the informers.
func (c *Controller) register(inf Informers) error {
	informers := []cache.SharedIndexInformer{inf.Machines.Informer(), inf.Classes.Informer(), inf.Secrets.Informer()}
	if inf.Nodes != nil {
		informers = append(informers, inf.Nodes.Informer())
	}
	for _, i := range informers {
		if !i.HasSynced() { // a started informer cannot take a transform
			if err := i.SetTransform(cachetransform.DropManagedFields); err != nil {
				return fmt.Errorf("setting informer transform: %w", err)
			}
		}
	}
	err := inf.Machines.Informer().AddIndexers(cache.Indexers{
		indexMachineByClass: func(obj any) ([]string, error) {
			m, ok := obj.(*v1alpha1.Machine)
			if !ok || m.Spec.Class.Name == "" {
				return nil, nil
			}
			return []string{m.Namespace + "/" + m.Spec.Class.Name}, nil
		},
		indexMachineByNode: func(obj any) ([]string, error) {
			m, ok := obj.(*v1alpha1.Machine)
			if !ok || m.Labels[v1alpha1.NodeLabelKey] == "" {
				return nil, nil
			}
			return []string{m.Labels[v1alpha1.NodeLabelKey]}, nil
		},
		indexMachineByDeployment: func(obj any) ([]string, error) {
			m, ok := obj.(*v1alpha1.Machine)
			if !ok || m.Labels[v1alpha1.MachineDeploymentNameLabelKey] == "" {
				return nil, nil
			}
			return []string{m.Namespace + "/" + m.Labels[v1alpha1.MachineDeploymentNameLabelKey]}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("adding machine indexes: %w", err)
	}

	add := func(i cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
		reg, err := i.AddEventHandler(h)
		if err != nil {
			return fmt.Errorf("adding event handler: %w", err)
		}
		c.synced = append(c.synced, reg.HasSynced)
		return nil
	}
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
		AddFunc:    c.onSecret,
		UpdateFunc: func(_, obj any) { c.onSecret(obj) },
		DeleteFunc: c.onSecret,
	}); err != nil {
		return err
	}
	if inf.Nodes != nil {
		if err := add(inf.Nodes.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onNode(nil, obj) },
			UpdateFunc: c.onNode,
			DeleteFunc: func(obj any) { c.onNode(nil, obj) },
		}); err != nil {
			return err
		}
	}
	return nil
}

// Run waits for the informer caches, then reconciles until ctx ends:
// workers workers on the machine queue, Options.*Workers on the others. It
// returns nil when every worker has stopped after ctx ended (also when ctx
// ends before the caches synced), and an error only for invalid arguments.
// While the caches do not sync (the machine CRDs are missing, the API server
// is unreachable) it logs that every 15 seconds instead of waiting silently.
func (c *Controller) Run(ctx context.Context, workers int) error {
	logger := logr.FromContextOrDiscard(ctx)
	if _, err := logr.FromContext(ctx); err != nil {
		logger = c.opts.Logger
	}
	logger = logger.WithName("machine")
	ctx = logr.NewContext(ctx, logger)
	if workers < 1 {
		return fmt.Errorf("machine: need at least one worker, got %d", workers)
	}
	if !c.waitForCaches(ctx, logger) {
		// The caller ended the run before the caches synced: nothing
		// failed, there is just nothing to do any more.
		return nil
	}
	c.metrics.attachCollector(c)
	logger.Info("Caches synced; starting workers", "workers", workers, "targetCluster", c.target != nil)

	type runner struct {
		q *workqueue.Queue[string]
		n int
	}
	runners := []runner{{c.machineQueue, workers}, {c.classQueue, c.opts.ClassWorkers}, {c.secretQueue, c.opts.SecretWorkers}}
	if c.nodeQueue != nil {
		runners = append(runners, runner{c.nodeQueue, c.opts.NodeWorkers})
	}
	errs := make(chan error, len(runners))
	for _, r := range runners {
		go func() { errs <- r.q.Run(ctx, r.n) }()
	}
	var all []error
	for range runners {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

func keyOf(obj any) string {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return ""
	}
	return key
}

func unwrapTombstone(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func (c *Controller) onMachine(oldObj, obj any) {
	m, ok := obj.(*v1alpha1.Machine)
	if !ok {
		return
	}
	c.machineQueue.Add(keyOf(m))
	c.classQueue.Add(m.Namespace + "/" + m.Spec.Class.Name)
	if old, ok := oldObj.(*v1alpha1.Machine); ok && old.Spec.Class.Name != m.Spec.Class.Name {
		c.classQueue.Add(old.Namespace + "/" + old.Spec.Class.Name)
	}
	// A machine that is Failed or being deleted holds its deployment's
	// replacement budget; when it changes, its siblings may proceed.
	if m.DeletionTimestamp != nil || m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed {
		c.enqueueSiblings(m)
	}
}

func (c *Controller) onMachineDelete(obj any) {
	m, ok := unwrapTombstone(obj).(*v1alpha1.Machine)
	if !ok {
		return
	}
	key := keyOf(m)
	c.writes.forget(key)
	c.failures.reset(key)
	c.classQueue.Add(m.Namespace + "/" + m.Spec.Class.Name)
	c.enqueueSiblings(m)
}

func (c *Controller) enqueueSiblings(m *v1alpha1.Machine) {
	d := m.Labels[v1alpha1.MachineDeploymentNameLabelKey]
	if d == "" {
		return
	}
	objs, _ := c.machineIdx.ByIndex(indexMachineByDeployment, m.Namespace+"/"+d)
	for _, o := range objs {
		if s, ok := o.(*v1alpha1.Machine); ok && s.Name != m.Name && s.Status.CurrentStatus.Phase == v1alpha1.MachineUnknown {
			c.machineQueue.Add(keyOf(s))
		}
	}
}

func (c *Controller) onClass(oldObj, obj any) {
	class, ok := unwrapTombstone(obj).(*v1alpha1.MachineClass)
	if !ok {
		return
	}
	c.classQueue.Add(keyOf(class))
	for _, cl := range []*v1alpha1.MachineClass{class, asClass(oldObj)} {
		if cl == nil {
			continue
		}
		for _, ref := range classSecretRefs(cl) {
			c.secretQueue.Add(ref)
		}
	}
	c.enqueueMachinesOfClass(class.Namespace, class.Name)
}

func asClass(obj any) *v1alpha1.MachineClass {
	cl, _ := obj.(*v1alpha1.MachineClass)
	return cl
}

func (c *Controller) enqueueMachinesOfClass(namespace, name string) {
	objs, _ := c.machineIdx.ByIndex(indexMachineByClass, namespace+"/"+name)
	for _, o := range objs {
		c.machineQueue.Add(keyOf(o))
	}
}

func (c *Controller) onSecret(obj any) {
	s, ok := unwrapTombstone(obj).(*corev1.Secret)
	if !ok {
		return
	}
	key := keyOf(s)
	c.secretQueue.Add(key)
	// Machines waiting for a fixed secret retry now rather than after
	// their backoff.
	classes, _ := c.classes.MachineClasses(s.Namespace).List(everything)
	for _, cl := range classes {
		if slices.Contains(classSecretRefs(cl), key) {
			c.enqueueMachinesOfClass(cl.Namespace, cl.Name)
		}
	}
}

func (c *Controller) onNode(oldObj, obj any) {
	n, ok := unwrapTombstone(obj).(*corev1.Node)
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
		!slices.EqualFunc(old.Spec.Taints, n.Spec.Taints, taintEqual) ||
		(old.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
}

// waitForCaches waits until every informer has synced, logging what it
// waits for every 15 seconds; false means ctx ended first.
func (c *Controller) waitForCaches(ctx context.Context, logger logr.Logger) bool {
	const report = 15 * time.Second
	last := c.opts.Clock.Now()
	for {
		pending := 0
		for _, synced := range c.synced {
			if !synced() {
				pending++
			}
		}
		if pending == 0 {
			return true
		}
		if now := c.opts.Clock.Now(); now.Sub(last) >= report {
			logger.Info("Waiting for informer caches; are the machine CRDs installed and the API servers reachable?",
				"pending", pending, "total", len(c.synced))
			last = now
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}
