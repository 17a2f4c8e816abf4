package orphanvms

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/mcmkit/mcm/client/clientset/versioned"
	machineinformers "github.com/mcmkit/mcm/client/informers/externalversions/machine/v1alpha1"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/internal/cachetransform"
	"github.com/mcmkit/mcm/internal/promreg"
	"github.com/mcmkit/mcm/internal/registrations"
	"github.com/mcmkit/mcm/safety"
	"github.com/mcmkit/mcm/workqueue"
)

// Defaults of the Options fields.
const (
	// DefaultOrphanVMsPeriod is MCM's --machine-safety-orphan-vms-period.
	DefaultOrphanVMsPeriod = 15 * time.Minute
	// DefaultOrphanGracePeriod is how long a VM must look orphaned before
	// it is deleted.
	DefaultOrphanGracePeriod = 10 * time.Minute
)

// ReasonOrphanDeleted is the reason of the event on a class whose orphan
// VM was deleted.
const ReasonOrphanDeleted = "OrphanVMDeleted"

// queueName names the collection's queue in logs and metrics.
const queueName = "safety-orphan-vms"

// collectKey is the one key of the collection's queue: a pass covers
// every class.
const collectKey = "all-classes"

// retryBaseDelay is the first retry's delay after a failed pass: each pass
// lists every class's VMs from the cloud, which the queue's default of
// milliseconds would call in a burst.
const retryBaseDelay = time.Second

// Outages is what the collection asks of the API-server outage gate
// (*outage.Gate implements it): whether it is frozen, and when the last
// outage ended.
type Outages interface {
	safety.Gate
	LastOutageEnd() time.Time
}

// Informers are the shared informers the collector reads from. Hand them
// to New before starting their factories.
type Informers struct {
	Machines machineinformers.MachineInformer
	Classes  machineinformers.MachineClassInformer
	// Secrets are the control cluster's secrets the classes reference.
	Secrets coreinformers.SecretInformer
}

// Options configures a Collector. The zero value works: MCM's period, a
// grace period of DefaultOrphanGracePeriod, the driver package's
// deadlines, no pause for outages, no events, no metrics, the real clock.
type Options struct {
	// OrphanVMsPeriod is how often every class's VMs are listed for
	// orphans; a VM is deleted once it has looked orphaned for
	// OrphanGracePeriod. A failed pass is retried with backoff, never
	// later than a period. Zero means the defaults.
	OrphanVMsPeriod, OrphanGracePeriod time.Duration
	// Outages pauses the collection while frozen and for one period after
	// an outage ended (the caches may still show the world from before
	// it). Nil means no pause; the grace period and the uncached read
	// before each deletion still hold.
	Outages Outages
	// DriverTimeouts are the deadlines of the driver's calls (ListMachines
	// and DeleteMachine), by operation; the zero value means the driver
	// package's defaults. A driver that is already a *driver.Deadlines
	// (shared with the machine controller, as the reference manager does)
	// is used as it is; DriverTimeouts must then be zero.
	DriverTimeouts driver.Timeouts
	// Logger is used where no context carries one.
	Logger logr.Logger
	// Recorder receives events. Nil means none.
	Recorder record.EventRecorder
	// Registerer receives the queue's metrics and
	// mcm_safety_orphan_vms_deleted_total. Nil means none.
	Registerer prometheus.Registerer
	// Clock is the time source. Nil means the real clock.
	Clock clock.WithTicker
}

func (o Options) complete() (Options, error) {
	if o.OrphanVMsPeriod < 0 || o.OrphanGracePeriod < 0 {
		return o, fmt.Errorf("OrphanVMsPeriod and OrphanGracePeriod must not be negative, got %v and %v", o.OrphanVMsPeriod, o.OrphanGracePeriod)
	}
	if o.OrphanVMsPeriod == 0 {
		o.OrphanVMsPeriod = DefaultOrphanVMsPeriod
	}
	if o.OrphanGracePeriod == 0 {
		o.OrphanGracePeriod = DefaultOrphanGracePeriod
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o, nil
}

// Collector deletes the VMs no machine claims. Create it with New.
type Collector struct {
	client   versioned.Interface
	driver   driver.Driver
	opts     Options
	machines machinelisters.MachineLister
	classes  machinelisters.MachineClassLister
	secrets  corelisters.SecretLister
	handlers registrations.Set // removed when Run returns
	queue    *workqueue.Queue[string]

	suspects       suspects
	orphansDeleted prometheus.Counter
}

// New returns a collector of drv's VMs against the machines of client
// (the control cluster's clientset). It registers (empty) event handlers
// on the informers, to wait for their caches, and its metrics on
// opts.Registerer; it starts nothing.
func New(client versioned.Interface, drv driver.Driver, inf Informers, opts Options) (*Collector, error) {
	if client == nil || drv == nil || inf.Machines == nil || inf.Classes == nil || inf.Secrets == nil {
		return nil, errors.New("orphan VM collection: client, driver and informers must not be nil")
	}
	o, err := opts.complete()
	if err != nil {
		return nil, fmt.Errorf("orphan VM collection: invalid options: %w", err)
	}
	if _, shared := drv.(*driver.Deadlines); shared && o.DriverTimeouts != (driver.Timeouts{}) {
		return nil, errors.New("orphan VM collection: DriverTimeouts must be zero with a driver that has its deadlines already (a *driver.Deadlines)")
	} else if !shared {
		// A hung cloud call must not hold the collection.
		if drv, err = driver.WithDeadlines(drv, o.DriverTimeouts); err != nil {
			return nil, fmt.Errorf("orphan VM collection: %w", err)
		}
	}
	c := &Collector{client: client, driver: drv, opts: o,
		machines: inf.Machines.Lister(), classes: inf.Classes.Lister(), secrets: inf.Secrets.Lister()}
	c.orphansDeleted = prometheus.NewCounter(prometheus.CounterOpts{Name: "mcm_safety_orphan_vms_deleted_total",
		Help: "VMs the safety controller deleted because no machine claimed them."})
	if o.Registerer != nil {
		if c.orphansDeleted, err = promreg.Register(o.Registerer, c.orphansDeleted); err != nil {
			return nil, fmt.Errorf("orphan VM collection: registering metric: %w", err)
		}
	}
	// A failed pass takes the queue's common path (logged once, counted,
	// retried with backoff), its backoff capped at the period so that a
	// cloud that keeps failing is asked no more often than a healthy one.
	c.queue, err = workqueue.New(queueName, workqueue.ReconcilerFunc[string](c.collect), workqueue.Options{
		Registerer: o.Registerer, Clock: o.Clock, Logger: o.Logger,
		BaseDelay: min(retryBaseDelay, o.OrphanVMsPeriod), MaxDelay: o.OrphanVMsPeriod})
	if err != nil {
		return nil, fmt.Errorf("orphan VM collection: %w", err)
	}
	informers := []cache.SharedIndexInformer{inf.Machines.Informer(), inf.Classes.Informer(), inf.Secrets.Informer()}
	cachetransform.SetOn(informers...)
	for _, i := range informers {
		if err := c.handlers.Add(i, cache.ResourceEventHandlerFuncs{}); err != nil {
			return nil, fmt.Errorf("orphan VM collection: %w", err)
		}
	}
	return c, nil
}

// Run waits for the caches, then collects at once and every
// OrphanVMsPeriod until ctx ends. It returns nil after ctx ended. When it
// returns, its event handlers are removed from the informers, which may
// go on serving others: run a collector once.
func (c *Collector) Run(ctx context.Context) error {
	ctx = workqueue.ControllerContext(ctx, c.opts.Logger, "orphanvms")
	defer c.handlers.RemoveAll(logr.FromContextOrDiscard(ctx))
	if !workqueue.WaitForCaches(ctx, c.handlers.Synced()...) {
		return nil
	}
	c.queue.Add(collectKey)
	return c.queue.Run(ctx, 1)
}

// collect is one pass of the collection (collectOrphans), rescheduled
// after the period when it succeeded; a failure goes to the queue.
func (c *Collector) collect(ctx context.Context, _ string) (workqueue.Result, error) {
	if err := c.collectOrphans(ctx); err != nil {
		return workqueue.Result{}, err
	}
	return workqueue.Result{RequeueAfter: c.opts.OrphanVMsPeriod}, nil
}
