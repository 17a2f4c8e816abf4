package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/cachetransform"
	"github.com/mcmkit/mcm/workqueue"
)

// DefaultAgentWorkers is how many nodes an Agent updates at once when
// AgentOptions.Workers is zero.
const DefaultAgentWorkers = 4

// AgentFieldManager is the field manager of the agent's writes to Nodes.
const AgentFieldManager = "sim-node-agent"

// AgentOptions configure an Agent. The zero value is ready to use.
type AgentOptions struct {
	// Identity is the identity of the kubelet whose nodes the agent serves
	// (KubeletOptions.Identity, the value of AnnotationSimulated): the
	// agent runs on those nodes only. Empty means the Cloud's ID, which
	// the reference manager gives its kubelet.
	Identity string
	// Namespace of the control cluster's machine objects the agent reads
	// the desired classes from. Empty means every namespace.
	Namespace string
	// Workers is how many nodes are updated at once. Zero means
	// DefaultAgentWorkers.
	Workers int
	// Clock measures the providerSpec's updateDelay and retryDelay. Nil
	// means the Cloud's clock (Options.Clock), so that a test stepping a
	// fake clock steps boots and updates alike; the real clock if the
	// Cloud's has no timers.
	Clock clock.WithTicker
}

// Agent is the simulated node agent: for the VMs of a Cloud whose class
// opts in (the providerSpec's inPlaceUpdate.agent), it plays the part
// gardener-node-agent plays in MCM's in-place updates. It watches the
// nodes of those VMs in the target cluster; when the machine controller
// has drained one and set its InPlaceUpdate condition to ReadyForUpdate,
// it works out the class the machine is to have (the template of the
// machine's MachineDeployment, read from the control cluster), waits the
// class's updateDelay, updates the VM in the cloud (its kubelet then
// reports the class's kubeletVersion) and labels the node with the
// result. A failed update is tried again after retryDelay. See the
// package documentation for the protocol.
type Agent struct {
	cloud    *Cloud
	target   kubernetes.Interface
	machines versioned.Interface
	opts     AgentOptions
	clock    clock.WithTicker
	queue    *workqueue.Queue[string]

	// listers are set by Run before its workers start.
	listers agentListers

	mu sync.Mutex
	// pending holds, by node, the update the agent has seen due and not
	// finished: when it is due, and once decided, its result.
	pending map[string]pendingUpdate

	running chan struct{} // closed when Run has synced its caches
}

// agentListers are the caches the agent works from: the target cluster's
// nodes and the control cluster's machine objects.
type agentListers struct {
	nodes       corelisters.NodeLister
	machines    machinelisters.MachineLister
	sets        machinelisters.MachineSetLister
	deployments machinelisters.MachineDeploymentLister
	classes     machinelisters.MachineClassLister
}

// NewAgent returns an Agent for the VMs of cloud, whose nodes it reads and
// labels through target and whose machines, sets, deployments and classes
// it reads through machines. It starts nothing; call Run.
func NewAgent(cloud *Cloud, target kubernetes.Interface, machines versioned.Interface, opts AgentOptions) (*Agent, error) {
	if cloud == nil || target == nil || machines == nil {
		return nil, fmt.Errorf("sim agent: needs a cloud, a target cluster client and a machine client")
	}
	if opts.Workers < 0 {
		return nil, fmt.Errorf("sim agent: negative workers %d", opts.Workers)
	}
	if opts.Workers == 0 {
		opts.Workers = DefaultAgentWorkers
	}
	if opts.Identity == "" {
		opts.Identity = cloud.ID()
	}
	clk := opts.Clock
	if clk == nil {
		if withTicker, ok := cloud.clock.(clock.WithTicker); ok {
			clk = withTicker
		} else {
			clk = clock.RealClock{}
		}
	}
	a := &Agent{
		cloud: cloud, target: target, machines: machines, opts: opts, clock: clk,
		pending: map[string]pendingUpdate{},
		running: make(chan struct{}),
	}
	var err error
	a.queue, err = workqueue.New("sim-node-agent", workqueue.ReconcilerFunc[string](a.reconcile), workqueue.Options{Clock: clk})
	if err != nil {
		return nil, fmt.Errorf("sim agent: %w", err)
	}
	return a, nil
}

// Run updates nodes until ctx ends. It returns an error only if the
// informer caches cannot sync; a failed update of one node is logged and
// retried with backoff.
func (a *Agent) Run(ctx context.Context) error {
	ctx = workqueue.ControllerContext(ctx, logr.Discard(), "sim-agent")
	tf := informers.NewSharedInformerFactoryWithOptions(a.target, 0,
		informers.WithTransform(cachetransform.DropManagedFields))
	mf := externalversions.NewSharedInformerFactoryWithOptions(a.machines, 0,
		externalversions.WithNamespace(a.opts.Namespace), externalversions.WithTransform(cachetransform.DropManagedFields))
	nodes := tf.Core().V1().Nodes()
	machine := mf.Machine().V1alpha1()
	a.listers = agentListers{
		nodes:       nodes.Lister(),
		machines:    machine.Machines().Lister(),
		sets:        machine.MachineSets().Lister(),
		deployments: machine.MachineDeployments().Lister(),
		classes:     machine.MachineClasses().Lister(),
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			a.queue.Add(key)
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.enqueueIfOwn(obj, enqueue) },
		UpdateFunc: func(_, obj any) { a.enqueueIfOwn(obj, enqueue) },
		DeleteFunc: enqueue,
	}); err != nil {
		return fmt.Errorf("sim agent: %w", err)
	}
	tf.Start(ctx.Done())
	mf.Start(ctx.Done())
	defer tf.Shutdown()
	defer mf.Shutdown()
	for _, synced := range []map[string]bool{syncedNames(tf.WaitForCacheSync(ctx.Done())), syncedNames(mf.WaitForCacheSync(ctx.Done()))} {
		for typ, ok := range synced {
			if !ok && ctx.Err() == nil {
				return fmt.Errorf("sim agent: cache of %s did not sync", typ)
			}
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	close(a.running)
	return a.queue.Run(ctx, a.opts.Workers)
}

// syncedNames turns a WaitForCacheSync answer into one keyed by type name.
func syncedNames[K interface {
	comparable
	fmt.Stringer
}](m map[K]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k.String()] = v
	}
	return out
}

// enqueueIfOwn queues the nodes of this agent's kubelet only: every other
// node of the cluster is none of its business.
func (a *Agent) enqueueIfOwn(obj any, enqueue func(any)) {
	if node, ok := obj.(*corev1.Node); ok && a.owns(node) {
		enqueue(obj)
	}
}

// WaitRunning blocks until Run has synced its caches or ctx ends.
func (a *Agent) WaitRunning(ctx context.Context) error {
	select {
	case <-a.running:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// owns reports whether the node is one of this agent's kubelet's, as the
// kubelet's own check.
func (a *Agent) owns(node *corev1.Node) bool {
	return node.Annotations[AnnotationSimulated] == a.opts.Identity
}

// trigger is why a node is to be updated.
type trigger int

const (
	triggerNone  trigger = iota
	triggerReady         // ReadyForUpdate, no result yet: update after updateDelay
	triggerRetry         // update-result=failed: try again after retryDelay
)

// triggerOf tells from the node's labels and InPlaceUpdate condition
// whether, and why, it is to be updated. A node labelled successful is
// done, whatever its condition says: the result stays until MCM's cleanup
// removes it, and until then the condition may still say ReadyForUpdate.
func triggerOf(node *corev1.Node) trigger {
	switch node.Labels[v1alpha1.UpdateResultLabel] {
	case v1alpha1.UpdateResultFailed:
		return triggerRetry
	case "":
		for _, c := range node.Status.Conditions {
			if c.Type == v1alpha1.NodeInPlaceUpdate && c.Reason == v1alpha1.ReadyForUpdate {
				return triggerReady
			}
		}
	}
	return triggerNone
}

// pendingUpdate is an update the agent has seen due.
type pendingUpdate struct {
	trigger trigger
	due     time.Time
	// result, once the update has been carried out, is what is left to
	// label the node with: a label that could not be written (a conflict)
	// is written again, not the update tried again, which would count
	// another hit of a fault.
	result *updateResult
}

// updateResult is the outcome of one update.
type updateResult struct {
	failed bool
	reason string // for failed: the update-failed-reason annotation
}

// schedule returns the node's pending update, starting one due after the
// VM's delay for trigger if there is none for this trigger yet.
func (a *Agent) schedule(node string, trig trigger, vm VM, now time.Time) pendingUpdate {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.pending[node]; ok && p.trigger == trig {
		return p
	}
	delay := vm.InPlaceUpdate.updateDelay()
	if trig == triggerRetry {
		delay = vm.InPlaceUpdate.retryDelay()
	}
	p := pendingUpdate{trigger: trig, due: now.Add(delay)}
	a.pending[node] = p
	return p
}

// decided records the result of the node's pending update.
func (a *Agent) decided(node string, p pendingUpdate, result updateResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p.result = &result
	a.pending[node] = p
}

// retryLater makes the node's next attempt due after the VM's retry delay.
func (a *Agent) retryLater(node string, vm VM) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pending[node] = pendingUpdate{trigger: triggerRetry, due: a.clock.Now().Add(vm.InPlaceUpdate.retryDelay())}
}

// drop forgets the node's pending update.
func (a *Agent) drop(node string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.pending, node)
}
