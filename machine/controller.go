package machine

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/client/clientset/versioned"
	machineinformers "github.com/mcmkit/mcm/client/informers/externalversions/machine/v1alpha1"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/expectations"
	"github.com/mcmkit/mcm/internal/registrations"
	"github.com/mcmkit/mcm/internal/replacement"
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
	// Target is the informer factory of the target cluster; optional, and
	// only with a target cluster. With it the drain reads pods,
	// PodDisruptionBudgets, claims, volumes and VolumeAttachments from its
	// caches (drain.ListersFromFactory) instead of the API server, Run
	// waits for those caches, and a budget that allows a disruption again
	// syncs the machines whose drain waits on it at once instead of at
	// their next check. NewController adds the informers to the factory:
	// start it after NewController, like the others.
	Target informers.SharedInformerFactory
}

// Controller reconciles Machines, MachineClasses and their Secrets against a
// driver and, when there is one, the Nodes of a target cluster.
type Controller struct {
	control     versioned.Interface
	controlCore kubernetes.Interface
	target      kubernetes.Interface // nil: no target cluster
	driver      driver.Driver
	drainer     Drainer
	// preserveDrainer drains the nodes of preserved Failed machines:
	// without a cordon when the controller built the drain engine.
	preserveDrainer Drainer
	gate            ReplacementGate
	opts            Options

	machines   machinelisters.MachineLister
	machineIdx cache.Indexer
	classes    machinelisters.MachineClassLister
	secrets    corelisters.SecretLister
	nodes      corelisters.NodeLister // nil without target
	// handlers are the controller's event handlers, removed when Run
	// returns; cachesSynced the caches it reads without a handler.
	handlers     registrations.Set
	cachesSynced []cache.InformerSynced

	machineQueue *workqueue.Queue[string]
	classQueue   *workqueue.Queue[string]
	secretQueue  *workqueue.Queue[string]
	nodeQueue    *workqueue.Queue[string] // nil without target

	metrics *metrics
	// writes are the machines' last writes, nodeWrites the nodes' (by
	// name), classWrites the classes' finalizer patches, until the caches
	// show them.
	writes, nodeWrites, classWrites *expectations.Writes[string]
	// finalized expects, by key, the deletion of each machine whose
	// finalizer the controller removed, until the cache drops it.
	finalized *expectations.Store[string]
	failures  failureCounter
	// statusWrites are the machines' status writes whose events have
	// not come yet (see updateQueues).
	statusWrites statusWrites
	// vouches are the driver's word on which VM backs each machine
	// (see binding.go).
	vouches vouches
	// creations bounds the machines that run a creation at once.
	creations creationSlots
	// goneNodes are the bindings of deleted nodes, for ReconcileNode.
	goneNodes goneNodes
}

// NewController returns a machine controller. control is the clientset of
// the control cluster (Machines, MachineClasses), controlCore its core client
// (Secrets), target the core client of the target cluster (Nodes, Pods,
// VolumeAttachments) or nil to run without one (MCM's "none"), and d the
// provider's driver. It registers event handlers, indexes and transforms on
// the informers and the metrics on opts.Registerer; it starts nothing, and a
// construction that fails leaves nothing behind but registered metrics.
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
	if target == nil && inf.Target != nil {
		return nil, errors.New("machine: a target informer factory needs a target client")
	}
	o, err := opts.complete()
	if err != nil {
		return nil, fmt.Errorf("machine: invalid options: %w", err)
	}
	if _, shared := d.(*driver.Deadlines); shared && o.DriverTimeouts != (driver.Timeouts{}) {
		return nil, errors.New("machine: DriverTimeouts must be zero with a driver that has its deadlines already (a *driver.Deadlines)")
	} else if !shared {
		if d, err = driver.WithDeadlines(d, o.DriverTimeouts); err != nil {
			return nil, fmt.Errorf("machine: %w", err)
		}
	}
	// Instrumented outside the deadlines: a call cut off at its deadline
	// counts as a DeadlineExceeded failure when it is cut off.
	if o.Registerer != nil {
		if d, err = driver.Instrument(d, o.Registerer); err != nil {
			return nil, fmt.Errorf("machine: %w", err)
		}
	}
	c := &Controller{
		control: control, controlCore: controlCore, target: target, driver: d, opts: o,
		gate:        o.ReplacementGate,
		machines:    inf.Machines.Lister(),
		machineIdx:  inf.Machines.Informer().GetIndexer(),
		classes:     inf.Classes.Lister(),
		secrets:     inf.Secrets.Lister(),
		writes:      expectations.NewWrites[string](expectations.Options{Clock: o.Clock}),
		nodeWrites:  expectations.NewWrites[string](expectations.Options{Clock: o.Clock}),
		classWrites: expectations.NewWrites[string](expectations.Options{Clock: o.Clock}),
		finalized:   expectations.New[string](expectations.Options{Clock: o.Clock}),
	}
	if c.metrics, err = newMetrics(o.Registerer); err != nil {
		return nil, fmt.Errorf("machine: %w", err)
	}
	if c.gate == nil {
		// MCM's limit, safe by default: one replacement at a time among
		// the machines one MachineSet controls (no set cache here to
		// follow the set to its deployment).
		if c.gate, err = replacement.New(inf.Machines, replacement.Options{Clock: o.Clock}); err != nil {
			return nil, fmt.Errorf("machine: %w", err)
		}
	}
	if target != nil {
		c.nodes = inf.Nodes.Lister()
		if err := c.buildDrainers(target, inf.Target); err != nil {
			return nil, fmt.Errorf("machine: %w", err)
		}
	}
	if err := c.buildQueues(); err != nil {
		return nil, fmt.Errorf("machine: %w", err)
	}
	if err := c.register(inf); err != nil {
		return nil, fmt.Errorf("machine: %w", err)
	}
	return c, nil
}

// buildDrainers sets the drainers: Options.Drainer for both, else the
// drain engine on the target — for the deletion's drain, and without a
// cordon for the drain of a preserved node, which the preserved taint
// keeps free of new pods (a cordon would be one more mark to undo, and
// MCM's clients read a cordon as the node going away).
func (c *Controller) buildDrainers(target kubernetes.Interface, factory informers.SharedInformerFactory) error {
	c.drainer, c.preserveDrainer = c.opts.Drainer, c.opts.Drainer
	if c.drainer != nil {
		return nil
	}
	dopts, err := c.drainOptions(factory)
	if err != nil {
		return err
	}
	if c.drainer, err = drain.New(target, dopts); err != nil {
		return err
	}
	dopts.SkipCordon = true
	c.preserveDrainer, err = drain.New(target, dopts)
	return err
}

// drainOptions are Options.DrainOptions with what only the controller
// knows filled in: its clock, registry, driver and caches. Every other
// default is the drain package's.
func (c *Controller) drainOptions(target informers.SharedInformerFactory) (drain.Options, error) {
	dopts := c.opts.DrainOptions
	if dopts.Clock == nil {
		dopts.Clock = c.opts.Clock
	}
	if dopts.Registerer == nil {
		dopts.Registerer = c.opts.Registerer
	}
	if dopts.Volumes.IDs == nil {
		dopts.Volumes.IDs = volumeIDs(c.driver)
	}
	if dopts.Listers.Nodes == nil {
		dopts.Listers.Nodes = c.nodes
	}
	if target == nil {
		return dopts, nil
	}
	cached, err := drain.ListersFromFactory(target)
	if err != nil {
		return dopts, err
	}
	l := &dopts.Listers
	l.Pods = cmp.Or(l.Pods, cached.Pods)
	l.PodDisruptionBudgets = cmp.Or(l.PodDisruptionBudgets, cached.PodDisruptionBudgets)
	l.PersistentVolumeClaims = cmp.Or(l.PersistentVolumeClaims, cached.PersistentVolumeClaims)
	l.PersistentVolumes = cmp.Or(l.PersistentVolumes, cached.PersistentVolumes)
	l.VolumeAttachments = cmp.Or(l.VolumeAttachments, cached.VolumeAttachments)
	return dopts, nil
}

// buildQueues builds the work queues; they start nothing until used.
func (c *Controller) buildQueues() error {
	qopts := workqueue.Options{Registerer: c.opts.Registerer, Clock: c.opts.Clock, Logger: c.opts.Logger}
	var err error
	if c.machineQueue, err = workqueue.New("machine", workqueue.ReconcilerFunc[string](c.ReconcileMachine), qopts); err != nil {
		return err
	}
	if c.classQueue, err = workqueue.New("machineclass", workqueue.ReconcilerFunc[string](c.ReconcileMachineClass), qopts); err != nil {
		return err
	}
	if c.secretQueue, err = workqueue.New("secret", workqueue.ReconcilerFunc[string](c.ReconcileSecret), qopts); err != nil {
		return err
	}
	if c.target != nil {
		if c.nodeQueue, err = workqueue.New("node", workqueue.ReconcilerFunc[string](c.ReconcileNode), qopts); err != nil {
			return err
		}
	}
	return nil
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

// synced returns whether the handlers and caches the controller reads
// have synced.
func (c *Controller) synced() []cache.InformerSynced {
	return append(c.handlers.Synced(), c.cachesSynced...)
}

// Run waits for the informer caches, then reconciles until ctx ends:
// workers workers on the machine queue (at most
// Options.MaxConcurrentCreations of them creating machines at once, which
// must be fewer than workers), Options.*Workers on the others. It
// returns nil when every worker has stopped after ctx ended (also when ctx
// ends before the caches synced), and an error only for invalid arguments.
// While the caches do not sync (the machine CRDs are missing, the API server
// is unreachable) it logs that every 15 seconds instead of waiting silently.
// When it returns, the controller's event handlers are removed from the
// informers, which may go on serving others: run a controller once.
func (c *Controller) Run(ctx context.Context, workers int) error {
	ctx = workqueue.ControllerContext(ctx, c.opts.Logger, "machine")
	logger := logr.FromContextOrDiscard(ctx)
	defer c.handlers.RemoveAll(logger)
	if workers < 1 {
		return fmt.Errorf("machine: need at least one worker, got %d", workers)
	}
	slots, err := c.opts.creationLimit(workers)
	if err != nil {
		return fmt.Errorf("machine: %w", err)
	}
	c.creations.setLimit(slots)
	if !workqueue.WaitForCaches(ctx, c.synced()...) {
		// The caller ended the run before the caches synced: nothing
		// failed, there is just nothing to do any more.
		return nil
	}
	c.metrics.attachCollector(ctx, c)
	logger.Info("Caches synced; starting workers", "workers", workers, "creationSlots", slots, "targetCluster", c.target != nil)

	runs := []func(context.Context) error{c.machineQueue.Runner(workers), c.classQueue.Runner(c.opts.ClassWorkers),
		c.secretQueue.Runner(c.opts.SecretWorkers)}
	if c.nodeQueue != nil {
		runs = append(runs, c.nodeQueue.Runner(c.opts.NodeWorkers))
	}
	return workqueue.RunAll(ctx, runs...)
}
