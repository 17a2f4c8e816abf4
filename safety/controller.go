package safety

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/go-logr/logr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	machineinformers "github.com/mcmkit/mcm/client/informers/externalversions/machine/v1alpha1"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/internal/cachetransform"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/internal/promreg"
	"github.com/mcmkit/mcm/internal/registrations"
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
	// DefaultStatusCheckPeriod and DefaultStatusCheckTimeout are MCM's
	// --machine-safety-apiserver-statuscheck-period and -timeout.
	DefaultStatusCheckPeriod  = time.Minute
	DefaultStatusCheckTimeout = 30 * time.Second
	// DefaultProbeNamespace is where the reachability check asks for a
	// machine that does not exist.
	DefaultProbeNamespace = "default"
	// DefaultOrphanVMsPeriod is MCM's --machine-safety-orphan-vms-period.
	DefaultOrphanVMsPeriod = 15 * time.Minute
	// DefaultOrphanGracePeriod is how long a VM must look orphaned before
	// it is deleted.
	DefaultOrphanGracePeriod = 10 * time.Minute
	// DefaultFieldManager names the controller in managed fields.
	DefaultFieldManager = "mcm-safety-controller"
)

// Event reasons, MCM's where it has them.
const (
	ReasonOrphanDeleted     = "OrphanVMDeleted"
	ReasonFrozeSet          = "FrozeMachineSet"
	ReasonUnfrozeSet        = "UnfrozeMachineSet"
	ReasonFrozeDeployment   = "FrozeMachineDeployment"
	ReasonUnfrozeDeployment = "UnfrozeMachineDeployment"
)

// Informers are the shared informers the controller reads from. Hand them
// to NewController before starting their factories.
type Informers struct {
	// MachineSets, Deployments and Machines are the control cluster's.
	MachineSets machineinformers.MachineSetInformer
	Deployments machineinformers.MachineDeploymentInformer
	Machines    machineinformers.MachineInformer
	// Nodes are the target cluster's. Nil (no target cluster) skips the
	// marking of nodes without a machine.
	Nodes coreinformers.NodeInformer
	// Classes and Secrets (the control cluster's secrets the classes
	// reference) are needed with a driver, for the orphan collection.
	Classes machineinformers.MachineClassInformer
	Secrets coreinformers.SecretInformer
}

// Checks selects the checks a Controller runs.
type Checks uint8

const (
	// CheckOvershoot is the overshoot check (and, with MaxUnhealthy, the
	// deployments' remediation condition): what MCM's
	// machine-controller-manager process runs.
	CheckOvershoot Checks = 1 << iota
	// CheckMachines is the API-server reachability check (the freeze),
	// the orphan VM collection and the marking of nodes without a
	// machine: what MCM's provider machine-controller runs.
	CheckMachines
	// AllChecks runs both; the zero Checks means AllChecks.
	AllChecks = CheckOvershoot | CheckMachines
)

// Options configures a Controller. The zero value works: MCM's periods and
// thresholds, no events, no metrics, the real clock.
type Options struct {
	// Checks are the checks to run. Zero means AllChecks. A manager that
	// runs MCM's two processes' controllers under their two leases runs a
	// controller of each kind, one per lease, so that next to either MCM
	// process no check runs twice. Without CheckMachines the controller is
	// never Frozen; the replacement budget works either way.
	Checks Checks
	// OvershootPeriod is how often every namespace is checked even without
	// a change. Zero means DefaultOvershootPeriod.
	OvershootPeriod time.Duration
	// SafetyUp and SafetyDown are the overshoot thresholds (see
	// planOvershoot). Zero means the defaults.
	SafetyUp, SafetyDown int
	// StatusCheckPeriod is how often the API servers' reachability is
	// checked (every fifth of StatusCheckTimeout while one is down); after
	// StatusCheckTimeout out of reach the controller is Frozen. Zero means
	// the defaults.
	StatusCheckPeriod, StatusCheckTimeout time.Duration
	// ProbeNamespace is the control-cluster namespace the reachability
	// check reads a (missing) machine from; use one the controller may
	// read. Empty means DefaultProbeNamespace.
	ProbeNamespace string
	// OrphanVMsPeriod is how often, with a driver, every class's VMs are
	// listed for orphans; a VM is deleted once it has looked orphaned for
	// OrphanGracePeriod. Zero means the defaults.
	OrphanVMsPeriod, OrphanGracePeriod time.Duration
	// CreationTimeout is how long after it registered a node without a
	// machine is marked not-managed-by-mcm: a machine's node label is
	// written only after its node joined. Zero means
	// v1alpha1.DefaultMachineCreationTimeout, as the machine controller.
	CreationTimeout time.Duration
	// MaxUnhealthy turns on the remediation short-circuit (beyond MCM, as
	// Cluster API's MachineHealthCheck): while more of a deployment's
	// machines are unhealthy (Unknown or Failed) than this number or
	// percentage (rounded down), ReplacementGate lets no health timeout
	// mark one of them Failed, and the deployment's
	// ConditionRemediationAllowed is False with an event. Join timeouts
	// are not gated, as in MCM: a machine whose node does not join within
	// the creation timeout is marked Failed and replaced all the same.
	// Nil turns it off, as in MCM.
	MaxUnhealthy *intstr.IntOrString
	// MaxReplacements bounds the replacements in flight per deployment
	// (see BudgetOptions.Max). Nil means 1, as in MCM.
	MaxReplacements *intstr.IntOrString

	// Logger is used where no context carries one.
	Logger logr.Logger
	// DriverTimeouts are the deadlines of the driver's calls (ListMachines
	// and DeleteMachine of the orphan collection), by operation; the zero
	// value means the driver package's defaults. A driver that is already
	// a *driver.Deadlines (shared with the machine controller, as the
	// reference manager does) is used as it is; DriverTimeouts must then
	// be zero.
	DriverTimeouts driver.Timeouts
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
	if o.OvershootPeriod < 0 || o.SafetyUp < 0 || o.SafetyDown < 0 || o.CreationTimeout < 0 {
		return o, fmt.Errorf("OvershootPeriod, SafetyUp, SafetyDown and CreationTimeout must not be negative, got %v, %d, %d, %v",
			o.OvershootPeriod, o.SafetyUp, o.SafetyDown, o.CreationTimeout)
	}
	if o.CreationTimeout == 0 {
		o.CreationTimeout = v1alpha1.DefaultMachineCreationTimeout
	}
	if o.Checks&^AllChecks != 0 {
		return o, fmt.Errorf("Checks %#x has unknown checks", o.Checks)
	}
	if o.Checks == 0 {
		o.Checks = AllChecks
	}
	if err := validMaxUnhealthy(o.MaxUnhealthy); err != nil {
		return o, err
	}
	if o.StatusCheckPeriod < 0 || o.StatusCheckTimeout < 0 {
		return o, fmt.Errorf("StatusCheckPeriod and StatusCheckTimeout must not be negative, got %v and %v", o.StatusCheckPeriod, o.StatusCheckTimeout)
	}
	if o.StatusCheckPeriod == 0 {
		o.StatusCheckPeriod = DefaultStatusCheckPeriod
	}
	if o.StatusCheckTimeout == 0 {
		o.StatusCheckTimeout = DefaultStatusCheckTimeout
	}
	if o.ProbeNamespace == "" {
		o.ProbeNamespace = DefaultProbeNamespace
	}
	if o.OrphanVMsPeriod < 0 || o.OrphanGracePeriod < 0 {
		return o, fmt.Errorf("OrphanVMsPeriod and OrphanGracePeriod must not be negative, got %v and %v", o.OrphanVMsPeriod, o.OrphanGracePeriod)
	}
	if o.OrphanVMsPeriod == 0 {
		o.OrphanVMsPeriod = DefaultOrphanVMsPeriod
	}
	if o.OrphanGracePeriod == 0 {
		o.OrphanGracePeriod = DefaultOrphanGracePeriod
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

// Controller is the safety controller. It runs the overshoot check, per
// namespace, at every machine that appears or goes, every change of a set
// or deployment, and every OvershootPeriod; with a target cluster, it marks
// nodes no machine claims; and it checks that the API servers are
// reachable, and is the SafetyGate (and machine.OutageReporter) the other
// controllers ask.
type Controller struct {
	client versioned.Interface
	target kubernetes.Interface // nil without a target cluster
	opts   Options

	sets        machinelisters.MachineSetLister
	deployments machinelisters.MachineDeploymentLister
	machines    machinelisters.MachineLister
	machineIdx  cache.Indexer
	nodes       corelisters.NodeLister // nil without a target cluster
	handlers    registrations.Set      // removed when Run returns

	// overshoot is keyed by namespace: one check looks at all the sets
	// and deployments of a namespace together; nil without
	// CheckOvershoot.
	overshoot *workqueue.Queue[string]
	// watchesAPIServers: CheckMachines is on.
	watchesAPIServers bool
	// unmanaged is keyed by node name; nil without a target cluster.
	unmanaged *workqueue.Queue[string]
	// outage is the API-server reachability check's state.
	outage outage

	// driver lists and deletes orphan VMs; nil skips the collection.
	driver         driver.Driver
	classes        machinelisters.MachineClassLister
	secrets        corelisters.SecretLister
	suspects       suspects
	orphansDeleted prometheus.Counter

	// budget is the replacement gate the machine controller asks.
	budget *Budget
}

// NewController returns a safety controller on client (the control
// cluster's clientset), target (the target cluster's; nil without one, and
// then inf.Nodes is nil too) and drv (the cloud's driver, for the orphan
// collection; nil skips it, and then inf.Classes and inf.Secrets may be
// nil). It registers event handlers on the informers and its metrics on
// opts.Registerer; it starts nothing.
func NewController(client versioned.Interface, target kubernetes.Interface, inf Informers, drv driver.Driver, opts Options) (*Controller, error) {
	if client == nil || inf.MachineSets == nil || inf.Deployments == nil || inf.Machines == nil {
		return nil, errors.New("safety: client and informers must not be nil")
	}
	if (target == nil) != (inf.Nodes == nil) {
		return nil, errors.New("safety: give both the target client and the Nodes informer, or neither")
	}
	if drv != nil && (inf.Classes == nil || inf.Secrets == nil) {
		return nil, errors.New("safety: a driver needs the Classes and Secrets informers")
	}
	o, err := opts.complete()
	if err != nil {
		return nil, fmt.Errorf("safety: invalid options: %w", err)
	}
	c := &Controller{client: client, target: target, opts: o,
		sets: inf.MachineSets.Lister(), deployments: inf.Deployments.Lister(), machines: inf.Machines.Lister()}
	if c.budget, err = NewBudget(inf.Machines, BudgetOptions{Max: o.MaxReplacements, MaxUnhealthy: o.MaxUnhealthy, MachineSets: inf.MachineSets, Clock: o.Clock}); err != nil {
		return nil, err
	}
	qopts := workqueue.Options{Registerer: o.Registerer, Clock: o.Clock, Logger: o.Logger}
	overshoot, machineChecks := o.Checks&CheckOvershoot != 0, o.Checks&CheckMachines != 0
	if overshoot {
		if c.overshoot, err = workqueue.New("safety-overshoot", workqueue.ReconcilerFunc[string](c.checkOvershoot), qopts); err != nil {
			return nil, fmt.Errorf("safety: %w", err)
		}
	}
	if !machineChecks {
		// No nodes to mark and no VMs to collect.
		inf.Nodes, drv = nil, nil
	}
	c.watchesAPIServers = machineChecks
	informers := []cache.SharedIndexInformer{inf.MachineSets.Informer(), inf.Deployments.Informer(), inf.Machines.Informer()}
	if inf.Nodes != nil {
		informers = append(informers, inf.Nodes.Informer())
	}
	c.orphansDeleted = prometheus.NewCounter(prometheus.CounterOpts{Name: "mcm_safety_orphan_vms_deleted_total",
		Help: "VMs the safety controller deleted because no machine claimed them."})
	if drv != nil {
		if _, shared := drv.(*driver.Deadlines); shared && o.DriverTimeouts != (driver.Timeouts{}) {
			return nil, errors.New("safety: DriverTimeouts must be zero with a driver that has its deadlines already (a *driver.Deadlines)")
		} else if !shared {
			// A hung cloud call must not hold the orphan collection.
			if drv, err = driver.WithDeadlines(drv, o.DriverTimeouts); err != nil {
				return nil, fmt.Errorf("safety: %w", err)
			}
		}
		c.driver, c.classes, c.secrets = drv, inf.Classes.Lister(), inf.Secrets.Lister()
		informers = append(informers, inf.Classes.Informer(), inf.Secrets.Informer())
		for _, i := range []cache.SharedIndexInformer{inf.Classes.Informer(), inf.Secrets.Informer()} {
			if err := c.handlers.Add(i, cache.ResourceEventHandlerFuncs{}); err != nil {
				return nil, fmt.Errorf("safety: %w", err)
			}
		}
		if o.Registerer != nil {
			if c.orphansDeleted, err = promreg.Register(o.Registerer, c.orphansDeleted); err != nil {
				return nil, fmt.Errorf("safety: registering metric: %w", err)
			}
		}
	}
	cachetransform.SetOn(informers...)
	namespaceOf := func(obj any) {
		if m, ok := workqueue.ObjectOf(obj).(interface{ GetNamespace() string }); ok && c.overshoot != nil {
			c.overshoot.Add(m.GetNamespace())
		}
	}
	handlers := []struct {
		i cache.SharedIndexInformer
		h cache.ResourceEventHandler
	}{
		// A machine that appears may push its set over the limit; one that
		// goes may bring it back under. With MaxUnhealthy, one whose phase
		// changes may start or end a deployment's short-circuit.
		{inf.Machines.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: namespaceOf, DeleteFunc: namespaceOf,
			UpdateFunc: func(oldObj, obj any) {
				old, ok1 := oldObj.(*v1alpha1.Machine)
				m, ok2 := obj.(*v1alpha1.Machine)
				if o.MaxUnhealthy != nil && ok1 && ok2 &&
					(old.Status.CurrentStatus.Phase != m.Status.CurrentStatus.Phase || (old.DeletionTimestamp == nil) != (m.DeletionTimestamp == nil)) {
					namespaceOf(m)
				}
			}}},
		// Labels, annotations (unfreeze) and replicas of sets and
		// deployments move the limits.
		{inf.MachineSets.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: namespaceOf, UpdateFunc: func(_, obj any) { namespaceOf(obj) }}},
		{inf.Deployments.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: namespaceOf, UpdateFunc: func(_, obj any) { namespaceOf(obj) }}},
	}
	if inf.Nodes != nil {
		if err := c.watchNodes(inf, qopts); err != nil {
			return nil, fmt.Errorf("safety: %w", err)
		}
		nodeOfMachine := func(obj any) {
			if m, ok := workqueue.ObjectOf(obj).(*v1alpha1.Machine); ok && m.Labels[v1alpha1.NodeLabelKey] != "" {
				c.unmanaged.Add(m.Labels[v1alpha1.NodeLabelKey])
			}
		}
		handlers = append(handlers,
			struct {
				i cache.SharedIndexInformer
				h cache.ResourceEventHandler
			}{inf.Machines.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: nodeOfMachine, DeleteFunc: nodeOfMachine,
				UpdateFunc: func(old, obj any) { nodeOfMachine(old); nodeOfMachine(obj) }}},
			struct {
				i cache.SharedIndexInformer
				h cache.ResourceEventHandler
			}{inf.Nodes.Informer(), cache.ResourceEventHandlerFuncs{
				AddFunc: func(obj any) { c.unmanaged.Add(workqueue.KeyOf(obj)) },
				UpdateFunc: func(old, obj any) {
					if o, n := old.(*corev1.Node), obj.(*corev1.Node); markFactsChanged(o, n) {
						c.unmanaged.Add(n.Name)
					}
				}}})
	}
	for _, h := range handlers {
		if err := c.handlers.Add(h.i, h.h); err != nil {
			return nil, fmt.Errorf("safety: %w", err)
		}
	}
	return c, nil
}

// watchNodes sets up the marking of nodes without a machine: the queue,
// the node lister and the index of machines by node.
func (c *Controller) watchNodes(inf Informers, qopts workqueue.Options) error {
	var err error
	if c.unmanaged, err = workqueue.New("safety-node", workqueue.ReconcilerFunc[string](c.checkNode), qopts); err != nil {
		return err
	}
	c.nodes = inf.Nodes.Lister()
	if err := machinestate.EnsureIndex(inf.Machines.Informer(), machinestate.ByNodeIndex, machinestate.IndexByNode); err != nil {
		return err
	}
	c.machineIdx = inf.Machines.Informer().GetIndexer()
	return nil
}

// Run waits for the caches, then runs the checks with workers workers
// until ctx ends. It returns nil after ctx ended, an error only for bad
// arguments.
// When it returns, its event handlers are removed from the informers,
// which may go on serving others: run a controller once.
func (c *Controller) Run(ctx context.Context, workers int) error {
	ctx = workqueue.ControllerContext(ctx, c.opts.Logger, "safety")
	defer c.handlers.RemoveAll(logr.FromContextOrDiscard(ctx))
	if workers < 1 {
		return fmt.Errorf("safety: need at least one worker, got %d", workers)
	}
	// Reachability needs no cache: it runs from the start, so that an
	// outage during the caches' sync is seen too.
	var wg sync.WaitGroup
	defer wg.Wait()
	if c.watchesAPIServers {
		wg.Go(func() { c.watchAPIServers(ctx) })
	}
	if !workqueue.WaitForCaches(ctx, c.handlers.Synced()...) {
		return nil
	}
	if c.driver != nil {
		wg.Go(func() { c.watchOrphans(ctx) })
	}
	var runs []func(context.Context) error
	if c.overshoot != nil {
		runs = append(runs, c.overshoot.Runner(workers))
	}
	if c.unmanaged != nil {
		runs = append(runs, c.unmanaged.Runner(workers))
	}
	if len(runs) == 0 {
		<-ctx.Done() // the reachability check alone, or nothing
		return nil
	}
	return workqueue.RunAll(ctx, runs...)
}

// ReplacementGate is the replacement budget of the controller's options
// (MaxReplacements, MaxUnhealthy), for the machine controller's
// Options.ReplacementGate.
func (c *Controller) ReplacementGate() *Budget { return c.budget }

// checkOvershoot is one overshoot check of a namespace: observe (caches),
// plan (planOvershoot), apply.
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
	errs = append(errs, c.checkRemediation(ctx, namespace, deployments, machines))
	if err := errors.Join(errs...); err != nil {
		return workqueue.Result{}, err
	}
	return workqueue.Result{RequeueAfter: c.opts.OvershootPeriod}, nil
}

// applyFreeze writes one freeze or unfreeze: the label (and the removal of
// the unfreeze annotation) on the object, then the Frozen condition on its
// status, each guarded by the resourceVersion it was computed from.
func (c *Controller) applyFreeze(ctx context.Context, namespace string, ch freezeChange) error {
	var err error
	switch ch.Kind {
	case "MachineSet":
		err = c.freezeSet(ctx, namespace, ch)
	case "MachineDeployment":
		err = c.freezeDeployment(ctx, namespace, ch)
	}
	if apierrors.IsNotFound(err) {
		return nil // gone since: nothing to freeze
	}
	return err
}

// freezeMeta is the metadata a freeze writes: one label, one annotation.
type freezeMeta struct{ Labels, Annotations map[string]string }

// freezeMetaFields: of the object's labels and annotations, a freeze owns
// the freeze label and the unfreeze annotation, nothing else.
func freezeMetaFields(m freezeMeta) patch.Fields {
	return patch.Fields{"metadata": patch.Fields{
		"labels":      patch.Keys(m.Labels, v1alpha1.FreezeLabelKey),
		"annotations": patch.Keys(m.Annotations, v1alpha1.UnfreezeAnnotation),
	}}
}

// frozenMeta is the metadata of an object after ch: the label set or
// removed, and the unfreeze annotation removed when it is to go.
func frozenMeta(ch freezeChange, have freezeMeta) freezeMeta {
	want := freezeMeta{Labels: make(map[string]string, len(have.Labels)+1), Annotations: maps.Clone(have.Annotations)}
	maps.Copy(want.Labels, have.Labels)
	if ch.Freeze {
		want.Labels[v1alpha1.FreezeLabelKey] = v1alpha1.FreezeLabelValue
	} else {
		delete(want.Labels, v1alpha1.FreezeLabelKey)
	}
	if ch.ClearUnfreeze {
		delete(want.Annotations, v1alpha1.UnfreezeAnnotation)
	}
	return want
}

func (c *Controller) freezeSet(ctx context.Context, namespace string, ch freezeChange) error {
	client := c.client.MachineV1alpha1().MachineSets(namespace)
	get := func(ctx context.Context) (*v1alpha1.MachineSet, error) {
		return client.Get(ctx, ch.Name, metav1.GetOptions{})
	}
	conditions := func(s *v1alpha1.MachineSet) ([]byte, error) {
		return patch.Diff(setConditionFields, s.Status.Conditions, setFrozenCondition(s.Status.Conditions, ch, c.opts.Clock.Now()), s.ResourceVersion)
	}
	if err := writeFreeze(ctx, c, ch, get, client.Patch, conditions); err != nil {
		return fmt.Errorf("freezing machine set %s: %w", ch.Name, err)
	}
	return nil
}

func (c *Controller) freezeDeployment(ctx context.Context, namespace string, ch freezeChange) error {
	client := c.client.MachineV1alpha1().MachineDeployments(namespace)
	get := func(ctx context.Context) (*v1alpha1.MachineDeployment, error) {
		return client.Get(ctx, ch.Name, metav1.GetOptions{})
	}
	conditions := func(d *v1alpha1.MachineDeployment) ([]byte, error) {
		return patch.Diff(deploymentConditionFields, d.Status.Conditions, setFrozenDeploymentCondition(d.Status.Conditions, ch, c.opts.Clock.Now()), d.ResourceVersion)
	}
	if err := writeFreeze(ctx, c, ch, get, client.Patch, conditions); err != nil {
		return fmt.Errorf("freezing machine deployment %s: %w", ch.Name, err)
	}
	return nil
}

// frozenObject is a MachineSet or MachineDeployment.
type frozenObject interface {
	runtime.Object
	metav1.Object
}

// writeFreeze writes one freeze or unfreeze of an object: the label (and
// the removal of the unfreeze annotation), then the Frozen condition. The
// label is one key of a merge patch and needs no guard; the conditions are
// a list the patch replaces whole, so they are written against a fresh
// read, again on a conflict: the object's own controller writes its status
// too, and a freeze whose condition was lost to a conflict would be seen,
// at the next check, as a freeze someone else made.
func writeFreeze[T frozenObject](ctx context.Context, c *Controller, ch freezeChange,
	get func(context.Context) (T, error), send patch.Func[T], conditionsPatch func(T) ([]byte, error)) error {
	obj, err := get(ctx)
	if err != nil {
		return err
	}
	have := freezeMeta{Labels: obj.GetLabels(), Annotations: obj.GetAnnotations()}
	data, err := patch.Diff(freezeMetaFields, have, frozenMeta(ch, have), "")
	if err == nil && data != nil {
		_, err = patch.Send(ctx, send, obj.GetName(), data, c.opts.FieldManager)
	}
	if err != nil {
		return err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh, err := get(ctx)
		if err != nil {
			return err
		}
		data, err := conditionsPatch(fresh)
		if err != nil || data == nil {
			return err
		}
		_, err = patch.Send(ctx, send, fresh.GetName(), data, c.opts.FieldManager, "status")
		return err
	})
	if err != nil {
		return fmt.Errorf("writing the Frozen condition: %w", err)
	}
	froze, unfroze := ReasonFrozeSet, ReasonUnfrozeSet
	if _, ok := any(obj).(*v1alpha1.MachineDeployment); ok {
		froze, unfroze = ReasonFrozeDeployment, ReasonUnfrozeDeployment
	}
	c.event(obj, ch, froze, unfroze)
	return nil
}

func (c *Controller) event(obj runtime.Object, ch freezeChange, froze, unfroze string) {
	if c.opts.Recorder == nil {
		return
	}
	if ch.Freeze {
		c.opts.Recorder.Eventf(obj, corev1.EventTypeWarning, froze, "%s", ch.Message)
		return
	}
	c.opts.Recorder.Eventf(obj, corev1.EventTypeNormal, unfroze, "%s", ch.Message)
}

// setConditionFields and deploymentConditionFields are the conditions of a
// set's and a deployment's status. A merge patch replaces the list whole,
// so their patches are built from a fresh read and guarded by its
// resourceVersion.
func setConditionFields(c []v1alpha1.MachineSetCondition) patch.Fields {
	return patch.Fields{"status": patch.Fields{"machineSetCondition": c}}
}

func deploymentConditionFields(c []v1alpha1.MachineDeploymentCondition) patch.Fields {
	return patch.Fields{"status": patch.Fields{"conditions": c}}
}
