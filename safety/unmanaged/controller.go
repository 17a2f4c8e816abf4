package unmanaged

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	machineinformers "github.com/mcmkit/mcm/client/informers/externalversions/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/cachetransform"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/registrations"
	"github.com/mcmkit/mcm/workqueue"
)

// DefaultFieldManager names the controller in managed fields: the safety
// controller's, as before the safety checks were split.
const DefaultFieldManager = "mcm-safety-controller"

// queueName names the controller's queue in logs and metrics.
const queueName = "safety-node"

// Informers are the shared informers the controller reads from. Hand them
// to New before starting their factories.
type Informers struct {
	// Machines are the control cluster's: the machines of this manager.
	Machines machineinformers.MachineInformer
	// Nodes are the target cluster's.
	Nodes coreinformers.NodeInformer
}

// Options configures a Controller. The zero value works: the machine
// controller's creation timeout, no metrics, the real clock.
type Options struct {
	// CreationTimeout is how long after it registered a node without a
	// machine is marked not-managed-by-mcm: a machine's node label is
	// written only after its node joined. Zero means
	// v1alpha1.DefaultMachineCreationTimeout, as the machine controller.
	CreationTimeout time.Duration
	// Logger is used where no context carries one.
	Logger logr.Logger
	// Registerer receives the queue's metrics. Nil means none.
	Registerer prometheus.Registerer
	// Clock is the time source. Nil means the real clock.
	Clock clock.WithTicker
	// FieldManager names the controller in managed fields. Empty means
	// DefaultFieldManager.
	FieldManager string
}

func (o Options) complete() (Options, error) {
	if o.CreationTimeout < 0 {
		return o, fmt.Errorf("CreationTimeout must not be negative, got %v", o.CreationTimeout)
	}
	if o.CreationTimeout == 0 {
		o.CreationTimeout = v1alpha1.DefaultMachineCreationTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.FieldManager == "" {
		o.FieldManager = DefaultFieldManager
	}
	return o, nil
}

// Controller marks the target's nodes no machine claims, per node, at
// every change of a node's mark or adoption, of a machine's node label,
// and when a node comes of age.
type Controller struct {
	target     kubernetes.Interface
	opts       Options
	nodes      corelisters.NodeLister
	machineIdx cache.Indexer
	handlers   registrations.Set // removed when Run returns
	// queue is keyed by node name.
	queue *workqueue.Queue[string]
}

// New returns the controller of target's (the target cluster's clientset)
// nodes. It adds the machines-by-node index and event handlers to the
// informers and registers its metrics on opts.Registerer; it starts
// nothing.
func New(target kubernetes.Interface, inf Informers, opts Options) (*Controller, error) {
	if target == nil || inf.Machines == nil || inf.Nodes == nil {
		return nil, errors.New("unmanaged nodes: target client and informers must not be nil")
	}
	o, err := opts.complete()
	if err != nil {
		return nil, fmt.Errorf("unmanaged nodes: invalid options: %w", err)
	}
	c := &Controller{target: target, opts: o, nodes: inf.Nodes.Lister()}
	c.queue, err = workqueue.New(queueName, workqueue.ReconcilerFunc[string](c.checkNode),
		workqueue.Options{Registerer: o.Registerer, Clock: o.Clock, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("unmanaged nodes: %w", err)
	}
	if err := machinestate.EnsureIndex(inf.Machines.Informer(), machinestate.ByNodeIndex, machinestate.IndexByNode); err != nil {
		return nil, fmt.Errorf("unmanaged nodes: %w", err)
	}
	c.machineIdx = inf.Machines.Informer().GetIndexer()
	cachetransform.SetOn(inf.Machines.Informer(), inf.Nodes.Informer())
	if err := c.register(inf); err != nil {
		return nil, fmt.Errorf("unmanaged nodes: %w", err)
	}
	return c, nil
}

// register adds the event handlers: a machine's node label names the node
// to look at (before and after a change); a node is looked at when it
// registers and when its mark or adoption changes.
func (c *Controller) register(inf Informers) error {
	nodeOfMachine := func(obj any) {
		if m, ok := workqueue.ObjectOf(obj).(*v1alpha1.Machine); ok && m.Labels[v1alpha1.NodeLabelKey] != "" {
			c.queue.Add(m.Labels[v1alpha1.NodeLabelKey])
		}
	}
	if err := c.handlers.Add(inf.Machines.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: nodeOfMachine, DeleteFunc: nodeOfMachine,
		UpdateFunc: func(old, obj any) { nodeOfMachine(old); nodeOfMachine(obj) }}); err != nil {
		return err
	}
	return c.handlers.Add(inf.Nodes.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.queue.Add(workqueue.KeyOf(obj)) },
		UpdateFunc: func(old, obj any) {
			if o, n := old.(*corev1.Node), obj.(*corev1.Node); markFactsChanged(o, n) {
				c.queue.Add(n.Name)
			}
		}})
}

// Run waits for the caches, then checks nodes with workers workers until
// ctx ends. It returns nil after ctx ended, an error only for bad
// arguments. When it returns, its event handlers are removed from the
// informers, which may go on serving others: run a controller once.
func (c *Controller) Run(ctx context.Context, workers int) error {
	ctx = workqueue.ControllerContext(ctx, c.opts.Logger, "unmanaged")
	defer c.handlers.RemoveAll(logr.FromContextOrDiscard(ctx))
	if workers < 1 {
		return fmt.Errorf("unmanaged nodes: need at least one worker, got %d", workers)
	}
	if !workqueue.WaitForCaches(ctx, c.handlers.Synced()...) {
		return nil
	}
	return c.queue.Run(ctx, workers)
}
