package deployment

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/api/machine/v1alpha1/validation"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	machineinformers "github.com/mcmkit/mcm/client/informers/externalversions/machine/v1alpha1"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/expectations"
	"github.com/mcmkit/mcm/internal/cachetransform"
	"github.com/mcmkit/mcm/internal/dedup"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/ownership"
	"github.com/mcmkit/mcm/internal/registrations"
	"github.com/mcmkit/mcm/workqueue"
)

var everything = labels.Everything()

// Informers are the shared informers the controller reads from. Hand them
// to NewController before starting their factories.
type Informers struct {
	// Deployments, MachineSets and Machines are in the control cluster.
	Deployments machineinformers.MachineDeploymentInformer
	MachineSets machineinformers.MachineSetInformer
	Machines    machineinformers.MachineInformer
	// Nodes are the target cluster's. Nil (no target cluster) leaves nodes
	// alone: no PreferNoSchedule taint on old sets' nodes and no
	// scale-down-disabled annotation during rollouts.
	Nodes coreinformers.NodeInformer
}

// Controller rolls the machines of MachineDeployments through their
// MachineSets.
type Controller struct {
	client versioned.Interface
	target kubernetes.Interface // nil with no target cluster
	opts   Options

	deployments machinelisters.MachineDeploymentLister
	sets        machinelisters.MachineSetLister
	machines    machinelisters.MachineLister
	nodes       corelisters.NodeLister // nil with no target cluster
	machineIdx  cache.Indexer          // machines by node; nil with no target cluster
	handlers    registrations.Set      // removed when Run returns

	queue *workqueue.Queue[string]
	// nodeQueue holds the deployments whose nodes' rollout marks are to
	// be checked (ReconcileNodes); nil with no target cluster.
	nodeQueue *workqueue.Queue[string]
	// writes makes a sync wait until the cache shows the controller's own
	// writes of a deployment's status and of its sets: planning on a set
	// whose scale the cache does not show yet would scale it twice.
	writes *expectations.Writes[string]
	// nodeWrites makes ReconcileNodes wait until the cache shows its own
	// marks on a node, by node name, so that a node is not marked twice.
	nodeWrites *expectations.Writes[string]
	// machineWrites makes a sync wait until the cache shows its own
	// writes of machines (an in-place rollout's moves), by machine key,
	// so that a machine and its replica are not moved twice.
	machineWrites *expectations.Writes[string]
	// toldFrozen remembers the freeze each deployment last told of.
	toldFrozen dedup.Messages
	// nodeMarksQueued remembers, per deployment, the machines' side of its
	// node marks (nodeMarksInputs) when a sync last queued their check: a
	// sync that sees the same queues none.
	nodeMarksQueued dedup.Messages
}

// NewController returns a MachineDeployment controller on client (the
// control cluster's clientset) and target (the target cluster's, nil when
// there is none; then inf.Nodes must be nil too). It registers event
// handlers and transforms on the informers and the metrics on
// opts.Registerer; it starts nothing.
func NewController(client versioned.Interface, target kubernetes.Interface, inf Informers, opts Options) (*Controller, error) {
	if client == nil || inf.Deployments == nil || inf.MachineSets == nil || inf.Machines == nil {
		return nil, errors.New("deployment: client and the Deployments, MachineSets and Machines informers must not be nil")
	}
	if (target == nil) != (inf.Nodes == nil) {
		return nil, errors.New("deployment: give both the target client and the Nodes informer, or neither")
	}
	o, err := opts.complete()
	if err != nil {
		return nil, fmt.Errorf("deployment: invalid options: %w", err)
	}
	c := &Controller{
		client: client, target: target, opts: o,
		deployments:   inf.Deployments.Lister(),
		sets:          inf.MachineSets.Lister(),
		machines:      inf.Machines.Lister(),
		writes:        expectations.NewWrites[string](expectations.Options{Clock: o.Clock}),
		nodeWrites:    expectations.NewWrites[string](expectations.Options{Clock: o.Clock}),
		machineWrites: expectations.NewWrites[string](expectations.Options{Clock: o.Clock}),
	}
	if inf.Nodes != nil {
		c.nodes = inf.Nodes.Lister()
	}
	qopts := workqueue.Options{Registerer: o.Registerer, Clock: o.Clock, Logger: o.Logger}
	if err := registerMetrics(o.Registerer, c); err != nil {
		return nil, fmt.Errorf("deployment: %w", err)
	}
	if c.queue, err = workqueue.New("machinedeployment", workqueue.ReconcilerFunc[string](c.Reconcile), qopts); err != nil {
		return nil, fmt.Errorf("deployment: %w", err)
	}
	if inf.Nodes != nil {
		if c.nodeQueue, err = workqueue.New("machinedeployment-nodes", workqueue.ReconcilerFunc[string](c.ReconcileNodes), qopts); err != nil {
			return nil, fmt.Errorf("deployment: %w", err)
		}
	}
	if err := c.register(inf); err != nil {
		return nil, fmt.Errorf("deployment: %w", err)
	}
	return c, nil
}

func (c *Controller) register(inf Informers) error {
	informers := []cache.SharedIndexInformer{inf.Deployments.Informer(), inf.MachineSets.Informer(), inf.Machines.Informer()}
	if inf.Nodes != nil {
		informers = append(informers, inf.Nodes.Informer())
	}
	cachetransform.SetOn(informers...)
	add := c.handlers.Add
	if err := add(inf.Deployments.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: func(obj any) {
			key := workqueue.KeyOf(obj)
			c.writes.Forget(key)
			c.toldFrozen.Forget(key)
			c.nodeMarksQueued.Forget(key)
		},
	}); err != nil {
		return err
	}
	if err := add(inf.MachineSets.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onSet,
		UpdateFunc: func(old, obj any) { c.onSetUpdate(old, obj) },
		DeleteFunc: c.onSetDelete,
	}); err != nil {
		return err
	}
	if err := add(inf.Machines.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onMachine,
		UpdateFunc: c.onMachineUpdate,
		DeleteFunc: c.onMachine,
	}); err != nil {
		return err
	}
	if inf.Nodes == nil {
		return nil
	}
	// A change of a node's rollout marks checks its deployment's marks
	// again: a check that skipped the node because the cache did not show
	// the controller's own mark yet, or read it before someone else's
	// change, would otherwise leave the node as it was.
	if err := machinestate.EnsureIndex(inf.Machines.Informer(), machinestate.ByNodeIndex, machinestate.IndexByNode); err != nil {
		return err
	}
	c.machineIdx = inf.Machines.Informer().GetIndexer()
	return add(inf.Nodes.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onNodeAdd,
		UpdateFunc: c.onNodeUpdate,
		DeleteFunc: func(obj any) { c.nodeWrites.Forget(workqueue.KeyOf(obj)) },
	})
}

// onNodeUpdate queues the node marks of the deployment of a node whose
// rollout marks changed, or whose binding to a machine did (which decides
// whether the node is marked on the machine's behalf), and the sync of the
// deployment when its in-place marks changed.
func (c *Controller) onNodeUpdate(oldObj, obj any) {
	old, ok1 := oldObj.(*corev1.Node)
	n, ok2 := obj.(*corev1.Node)
	if !ok1 || !ok2 {
		return
	}
	marks := rolloutMarksChanged(old, n) || nodeBindingChanged(old, n)
	if inPlace := inPlaceMarksChanged(old, n); marks || inPlace {
		c.queueNodeMarksOf(n, marks, inPlace)
	}
}

// queueNodeMarksOf queues, for the deployments of the machines on node n,
// the check of their nodes' marks (marks) and their sync (sync).
func (c *Controller) queueNodeMarksOf(n *corev1.Node, marks, sync bool) {
	machines, err := c.machineIdx.ByIndex(machinestate.ByNodeIndex, n.Name)
	if err != nil {
		return
	}
	for _, o := range machines {
		if m, ok := o.(*v1alpha1.Machine); ok {
			key := c.deploymentOfMachine(m)
			if key != "" && marks {
				c.nodeQueue.Add(key)
			}
			if key != "" && sync {
				c.queue.Add(key)
			}
		}
	}
}

// inPlaceMarksChanged tells whether a node's part in an in-place rollout
// changed between old and n: its in-place labels (a person's selection in
// Manual, the agent's result), the agent's failure reason, the cordon, or,
// on a candidate node, its taints and resourceVersion-guarded writes the
// rollout waits for.
func inPlaceMarksChanged(old, n *corev1.Node) bool {
	for _, k := range []string{v1alpha1.CandidateForUpdateLabel, v1alpha1.SelectedForUpdateLabel, v1alpha1.UpdateResultLabel} {
		if old.Labels[k] != n.Labels[k] {
			return true
		}
	}
	_, candidate := n.Labels[v1alpha1.CandidateForUpdateLabel]
	return old.Annotations[v1alpha1.UpdateFailedReasonAnnotation] != n.Annotations[v1alpha1.UpdateFailedReasonAnnotation] ||
		old.Spec.Unschedulable != n.Spec.Unschedulable || (candidate && rolloutMarksChanged(old, n))
}

// rolloutMarksChanged tells whether the marks this controller puts on nodes
// during a rollout differ between old and n.
func rolloutMarksChanged(old, n *corev1.Node) bool {
	tainted := func(n *corev1.Node) bool {
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == v1alpha1.PreferNoScheduleTaintKey })
	}
	return old.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] != n.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] ||
		tainted(old) != tainted(n)
}

// Run waits for the caches, then reconciles deployments with workers
// workers, and checks their nodes' rollout marks (ReconcileNodes) with as
// many more, until ctx ends. It returns nil after ctx ended, an error only
// for bad arguments. When it returns, its event handlers are removed from
// the informers, which may go on serving others: run a controller once.
func (c *Controller) Run(ctx context.Context, workers int) error {
	ctx = workqueue.ControllerContext(ctx, c.opts.Logger, "machinedeployment")
	defer c.handlers.RemoveAll(logr.FromContextOrDiscard(ctx))
	if workers < 1 {
		return fmt.Errorf("machinedeployment: need at least one worker, got %d", workers)
	}
	if !workqueue.WaitForCaches(ctx, c.handlers.Synced()...) {
		return nil // ended before the caches synced: nothing failed
	}
	runs := []func(context.Context) error{c.queue.Runner(workers)}
	if c.nodeQueue != nil {
		runs = append(runs, c.nodeQueue.Runner(workers))
	}
	return workqueue.RunAll(ctx, runs...)
}

func (c *Controller) enqueue(obj any) {
	if key := workqueue.KeyOf(obj); key != "" {
		c.queue.Add(key)
	}
}

// deploymentOf returns the key of the deployment that controls obj, or "".
func deploymentOf(obj metav1.Object) string {
	return ownership.ControllerKey(obj, v1alpha1.SchemeGroupVersion.WithKind("MachineDeployment"))
}

func (c *Controller) onSet(obj any) {
	s, ok := obj.(*v1alpha1.MachineSet)
	if !ok {
		return
	}
	if key := deploymentOf(s); key != "" {
		c.queue.Add(key)
		return
	}
	c.enqueueSelecting(s) // an orphan: a deployment may adopt it
}

func (c *Controller) onSetUpdate(oldObj, obj any) {
	old, ok1 := oldObj.(*v1alpha1.MachineSet)
	s, ok2 := obj.(*v1alpha1.MachineSet)
	if !ok1 || !ok2 || old.ResourceVersion == s.ResourceVersion {
		return
	}
	if oldKey, key := deploymentOf(old), deploymentOf(s); oldKey != key && oldKey != "" {
		c.queue.Add(oldKey)
	}
	c.onSet(s)
}

func (c *Controller) onSetDelete(obj any) {
	obj = workqueue.ObjectOf(obj)
	s, ok := obj.(*v1alpha1.MachineSet)
	if !ok {
		return
	}
	c.writes.Forget(workqueue.KeyOf(s))
	if key := deploymentOf(s); key != "" {
		c.queue.Add(key)
	}
}

// onMachine queues the deployment of the machine's set: machines make the
// deployment's status and decide when a rollout may go on.
func (c *Controller) onMachine(obj any) {
	obj = workqueue.ObjectOf(obj)
	if m, ok := obj.(*v1alpha1.Machine); ok {
		if key := c.deploymentOfMachine(m); key != "" {
			c.queue.Add(key)
		}
	}
}

// onMachineUpdate queues the deployment of an updated machine's set, and
// that of the set it left, when something the deployment decides on
// changed (machineChangeMatters). A resync (same resourceVersion) carries
// nothing new: the deployment's own resync (Reconcile's RequeueAfter, its
// informer's resync) looks at it again.
func (c *Controller) onMachineUpdate(oldObj, obj any) {
	old, ok1 := oldObj.(*v1alpha1.Machine)
	m, ok2 := obj.(*v1alpha1.Machine)
	if !ok1 || !ok2 || old.ResourceVersion == m.ResourceVersion || !machineChangeMatters(old, m) {
		return
	}
	if oldKey, key := c.deploymentOfMachine(old), c.deploymentOfMachine(m); oldKey != "" && oldKey != key {
		c.queue.Add(oldKey)
	}
	c.onMachine(m)
}

// deploymentOfMachine returns the key of the deployment that controls the
// machine's set, or "".
func (c *Controller) deploymentOfMachine(m *v1alpha1.Machine) string {
	ref := metav1.GetControllerOfNoCopy(m)
	if ref == nil || ref.Kind != "MachineSet" {
		return ""
	}
	s, err := c.sets.MachineSets(m.Namespace).Get(ref.Name)
	if err != nil || s.UID != ref.UID {
		return ""
	}
	return deploymentOf(s)
}

// enqueueSelecting queues the deployments whose selector matches an orphan
// set. A selector without a positive requirement (empty, or only NotIn and
// DoesNotExist) selects nothing here: the deployment is invalid, and would
// claim nearly every set. Nor does one naming a label key the controllers
// write (validation.SelectorAdopts): the deployment is invalid, and would
// lose its sets or claim others' through the controllers' own writes.
func (c *Controller) enqueueSelecting(s *v1alpha1.MachineSet) {
	ds, err := c.deployments.MachineDeployments(s.Namespace).List(everything)
	if err != nil {
		return
	}
	for _, d := range ds {
		if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil && validation.SelectorAdopts(validation.OwnerMachineDeployment, d.Spec.Selector) && sel.Matches(labels.Set(s.Labels)) {
			c.queue.Add(workqueue.KeyOf(d))
		}
	}
}

func (c *Controller) event(d *v1alpha1.MachineDeployment, typ, reason, msg string) {
	if c.opts.Recorder != nil {
		c.opts.Recorder.Eventf(d, typ, reason, "%s", msg)
	}
}

// warn records a warning event.
func (c *Controller) warn(d *v1alpha1.MachineDeployment, reason, msg string) {
	c.event(d, corev1.EventTypeWarning, reason, msg)
}
