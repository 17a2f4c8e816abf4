package overshoot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	machineinformers "github.com/mcmkit/mcm/client/informers/externalversions/machine/v1alpha1"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/cachetransform"
	"github.com/mcmkit/mcm/internal/registrations"
	"github.com/mcmkit/mcm/internal/replacement"
	"github.com/mcmkit/mcm/workqueue"
)

// Defaults of the Options fields.
const (
	// DefaultOvershootPeriod is how often every namespace is checked for
	// overshooting sets, MCM's --machine-safety-overshooting-period.
	DefaultOvershootPeriod = time.Minute
	// DefaultSafetyUp and DefaultSafetyDown are MCM's --safety-up and
	// --safety-down.
	DefaultSafetyUp   = 2
	DefaultSafetyDown = 1
	// DefaultFieldManager names the controller in managed fields: the
	// safety controller's, as before the safety checks were split.
	DefaultFieldManager = "mcm-safety-controller"
)

// queueName names the controller's queue in logs and metrics.
const queueName = "safety-overshoot"

// Informers are the shared informers the controller reads from. Hand them
// to New before starting their factories.
type Informers struct {
	MachineSets machineinformers.MachineSetInformer
	Deployments machineinformers.MachineDeploymentInformer
	Machines    machineinformers.MachineInformer
}

// Options configures a Controller. The zero value works: MCM's period and
// thresholds, no remediation condition, no events, no metrics, the real
// clock.
type Options struct {
	// OvershootPeriod is how often every namespace is checked even without
	// a change. Zero means DefaultOvershootPeriod.
	OvershootPeriod time.Duration
	// SafetyUp and SafetyDown are the overshoot thresholds (see
	// planOvershoot). Zero means the defaults.
	SafetyUp, SafetyDown int
	// MaxUnhealthy, when set, makes the controller report the remediation
	// short-circuit of a replacement budget with the same MaxUnhealthy
	// (package safety/budget) on each deployment: ConditionRemediationAllowed
	// False while more of its machines are unhealthy than this number or
	// percentage (rounded down), with an event when that starts and ends.
	// Nil writes no such condition, as in MCM.
	MaxUnhealthy *intstr.IntOrString

	// Logger is used where no context carries one.
	Logger logr.Logger
	// Recorder receives events. Nil means none.
	Recorder record.EventRecorder
	// Registerer receives the queue's metrics. Nil means none.
	Registerer prometheus.Registerer
	// Clock is the time source. Nil means the real clock.
	Clock clock.WithTicker
	// FieldManager names the controller in managed fields. Empty means
	// DefaultFieldManager.
	FieldManager string
}

func (o Options) complete() (Options, error) {
	if o.OvershootPeriod < 0 || o.SafetyUp < 0 || o.SafetyDown < 0 {
		return o, fmt.Errorf("OvershootPeriod, SafetyUp and SafetyDown must not be negative, got %v, %d and %d",
			o.OvershootPeriod, o.SafetyUp, o.SafetyDown)
	}
	if err := replacement.ValidMaxUnhealthy(o.MaxUnhealthy); err != nil {
		return o, err
	}
	if o.OvershootPeriod == 0 {
		o.OvershootPeriod = DefaultOvershootPeriod
	}
	if o.SafetyUp == 0 {
		o.SafetyUp = DefaultSafetyUp
	}
	if o.SafetyDown == 0 {
		o.SafetyDown = DefaultSafetyDown
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.FieldManager == "" {
		o.FieldManager = DefaultFieldManager
	}
	return o, nil
}

// Controller is the overshoot check. It checks a namespace at every
// machine that appears or goes, every change of a set or deployment, and
// every OvershootPeriod.
type Controller struct {
	client   versioned.Interface
	opts     Options
	handlers registrations.Set // removed when Run returns

	sets        machinelisters.MachineSetLister
	deployments machinelisters.MachineDeploymentLister
	machines    machinelisters.MachineLister

	// queue is keyed by namespace: one check looks at all the sets and
	// deployments of a namespace together.
	queue *workqueue.Queue[string]
}

// New returns the overshoot check on client (the control cluster's
// clientset). It registers event handlers on the informers and its
// metrics on opts.Registerer; it starts nothing.
func New(client versioned.Interface, inf Informers, opts Options) (*Controller, error) {
	if client == nil || inf.MachineSets == nil || inf.Deployments == nil || inf.Machines == nil {
		return nil, errors.New("overshoot: client and informers must not be nil")
	}
	o, err := opts.complete()
	if err != nil {
		return nil, fmt.Errorf("overshoot: invalid options: %w", err)
	}
	c := &Controller{client: client, opts: o,
		sets: inf.MachineSets.Lister(), deployments: inf.Deployments.Lister(), machines: inf.Machines.Lister()}
	c.queue, err = workqueue.New(queueName, workqueue.ReconcilerFunc[string](c.checkOvershoot),
		workqueue.Options{Registerer: o.Registerer, Clock: o.Clock, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("overshoot: %w", err)
	}
	cachetransform.SetOn(inf.MachineSets.Informer(), inf.Deployments.Informer(), inf.Machines.Informer())
	if err := c.register(inf); err != nil {
		return nil, fmt.Errorf("overshoot: %w", err)
	}
	return c, nil
}

// register adds the event handlers, each of which queues the object's
// namespace.
func (c *Controller) register(inf Informers) error {
	namespaceOf := func(obj any) {
		if m, ok := workqueue.ObjectOf(obj).(interface{ GetNamespace() string }); ok {
			c.queue.Add(m.GetNamespace())
		}
	}
	changed := func(_, obj any) { namespaceOf(obj) }
	// A machine that appears may push its set over the limit; one that
	// goes may bring it back under. With MaxUnhealthy, one whose phase
	// changes, or that starts being deleted, may start or end a
	// deployment's short-circuit.
	machineChanged := func(oldObj, obj any) {
		old, ok1 := oldObj.(*v1alpha1.Machine)
		m, ok2 := obj.(*v1alpha1.Machine)
		if c.opts.MaxUnhealthy != nil && ok1 && ok2 &&
			(old.Status.CurrentStatus.Phase != m.Status.CurrentStatus.Phase || (old.DeletionTimestamp == nil) != (m.DeletionTimestamp == nil)) {
			namespaceOf(m)
		}
	}
	if err := c.handlers.Add(inf.Machines.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: namespaceOf, DeleteFunc: namespaceOf, UpdateFunc: machineChanged}); err != nil {
		return err
	}
	// Labels, annotations (unfreeze) and replicas of sets and deployments
	// move the limits.
	for _, i := range []cache.SharedIndexInformer{inf.MachineSets.Informer(), inf.Deployments.Informer()} {
		if err := c.handlers.Add(i, cache.ResourceEventHandlerFuncs{AddFunc: namespaceOf, UpdateFunc: changed}); err != nil {
			return err
		}
	}
	return nil
}

// Run waits for the caches, then runs the check with workers workers
// until ctx ends. It returns nil after ctx ended, an error only for bad
// arguments. When it returns, its event handlers are removed from the
// informers, which may go on serving others: run a controller once.
func (c *Controller) Run(ctx context.Context, workers int) error {
	ctx = workqueue.ControllerContext(ctx, c.opts.Logger, "overshoot")
	defer c.handlers.RemoveAll(logr.FromContextOrDiscard(ctx))
	if workers < 1 {
		return fmt.Errorf("overshoot: need at least one worker, got %d", workers)
	}
	if !workqueue.WaitForCaches(ctx, c.handlers.Synced()...) {
		return nil
	}
	return c.queue.Run(ctx, workers)
}

// checkOvershoot is one overshoot check of a namespace: observe (caches),
// plan (planOvershoot), apply; with MaxUnhealthy, the remediation
// condition of its deployments too. It comes back after OvershootPeriod.
func (c *Controller) checkOvershoot(ctx context.Context, namespace string) (workqueue.Result, error) {
	sets, err := c.sets.MachineSets(namespace).List(labels.Everything())
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("listing machine sets: %w", err)
	}
	deployments, err := c.deployments.MachineDeployments(namespace).List(labels.Everything())
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("listing machine deployments: %w", err)
	}
	machines, err := c.machines.Machines(namespace).List(labels.Everything())
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("listing machines: %w", err)
	}
	var errs []error
	for _, ch := range planOvershoot(sets, deployments, machines, thresholds{up: c.opts.SafetyUp, down: c.opts.SafetyDown}) {
		errs = append(errs, c.applyFreeze(ctx, namespace, ch))
	}
	errs = append(errs, c.checkRemediation(ctx, namespace, sets, deployments, machines))
	if err := errors.Join(errs...); err != nil {
		return workqueue.Result{}, err
	}
	return workqueue.Result{RequeueAfter: c.opts.OvershootPeriod}, nil
}
