package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/utils/clock"

	"github.com/mcmkit/mcm/internal/cachetransform"
	"github.com/mcmkit/mcm/internal/parallel"
)

// Defaults for the zero values of KubeletOptions.
const (
	DefaultSyncPeriod    = 250 * time.Millisecond
	DefaultLeaseDuration = 40 * time.Second
	// DefaultStatusReportPeriod is the kubelet's nodeStatusReportFrequency:
	// with node leases, an unchanged status is only written this often.
	DefaultStatusReportPeriod  = 5 * time.Minute
	DefaultParallelism         = 16
	DefaultTerminationFraction = 0.1
	DefaultAttachDelay         = 500 * time.Millisecond
	DefaultDetachDelay         = 2 * time.Second
	// DefaultCSIDriver is the attacher whose VolumeAttachments the
	// simulated kubelet serves: that of the volumes GetVolumeIDs reports.
	DefaultCSIDriver = CSIDriverName
)

// VMSource is what the simulated kubelet watches; *Cloud implements it.
//
// A source that also has a method Changed() <-chan struct{}, closed at its
// next change, as *Cloud has, is read again only after a change, when a
// VM's state ends by itself (VM.StateUntil) or every vmRereadPeriod, rather
// than at every sync: a snapshot of thousands of VMs is the costliest part
// of a sync in which nothing else happens.
type VMSource interface {
	// VMs returns a snapshot of every VM, in any order.
	VMs() []VM
}

// KubeletOptions configure a Kubelet. The zero value is ready to use.
type KubeletOptions struct {
	// SyncPeriod is how often VMs, Nodes, Pods and VolumeAttachments are
	// compared and brought in line. Zero means DefaultSyncPeriod.
	SyncPeriod time.Duration
	// LeaseDuration of the node leases (their spec.leaseDurationSeconds,
	// whole seconds). Zero means DefaultLeaseDuration.
	LeaseDuration time.Duration
	// LeaseRenewPeriod is how often a node's lease is renewed. Each renewal
	// comes up to a tenth of the period early, at random, so that the
	// renewals of nodes that registered together drift apart instead of
	// hitting the API server at once. kube-controller-manager marks a node
	// Unknown when its lease was not renewed for --node-monitor-grace-period,
	// which must therefore exceed this period with margin (the kubelet's
	// 10 s against the default 50 s). Zero means a quarter of
	// LeaseDuration, as the kubelet does.
	LeaseRenewPeriod time.Duration
	// StatusReportPeriod is how often an unchanged node status is written
	// again; a changed one is written at the next sync. The lease, not the
	// status, tells the control plane that a node is alive. Zero means
	// DefaultStatusReportPeriod.
	StatusReportPeriod time.Duration
	// Parallelism is how many API calls a sync makes at once. Give the
	// client a rate limit of its own: the kubelet's lease renewals alone
	// need nodes/LeaseRenewPeriod requests per second, and sharing a
	// controller's limit starves one or the other. Zero means
	// DefaultParallelism.
	Parallelism int
	// TerminationFraction of a pod's grace period after which its
	// termination completes and the pod is removed. Zero means
	// DefaultTerminationFraction; 1 uses the whole grace period.
	TerminationFraction float64
	// AttachDelay and DetachDelay are how long attaching and detaching a
	// simulated volume take. Zero means the defaults.
	AttachDelay, DetachDelay time.Duration
	// CSIDriver is the attacher whose VolumeAttachments are served. Empty
	// means DefaultCSIDriver.
	CSIDriver string
	// KeepNodesOfGoneVMs leaves the Node of a deleted VM in place. By
	// default it is deleted once the VM is gone, as a cloud controller
	// manager would.
	KeepNodesOfGoneVMs bool
	// Identity tells this kubelet's nodes from those of other simulated
	// kubelets in the same cluster (the value of AnnotationSimulated).
	// Empty means a random one.
	Identity string
	// Clock is the time source; nil means the real clock. Pod deletion
	// times come from the API server, so a fake clock only suits tests that
	// use no graceful deletion.
	Clock clock.WithTicker
}

// Kubelet acts, against a target cluster, for the kubelets of the VMs of a
// VMSource, as kwok does for fake nodes: it registers a Node for each
// running VM and keeps its lease and Ready condition fresh, runs the pods
// bound to those nodes (they become Running and Ready), finishes their
// graceful deletion after a fraction of the grace period, and attaches and
// detaches simulated CSI volumes. A stopped VM's kubelet falls silent: no
// heartbeats, no pod updates. Tests steer nodes with SetCondition and
// StopHeartbeats.
type Kubelet struct {
	vms    VMSource
	client kubernetes.Interface
	opts   KubeletOptions

	// One part per concern. Kubelet itself only decides which nodes are
	// alive and runs the parts over them, one sync at a time.
	nodes    *nodeReporter
	leases   *leaseRenewer
	pods     podRunner
	attacher csiAttacher
	view     vmView // used by Run's goroutine only
	// lateSince is when renewals were first seen late in a row of syncs,
	// zero while they are on time; used by Run's goroutine only.
	lateSince time.Time

	mu       sync.Mutex
	silenced map[string]bool // nodes whose kubelet StopHeartbeats silenced

	running chan struct{} // closed when Run has synced its caches
}

// NewKubelet returns a Kubelet for the VMs of vms, writing to the target
// cluster through client. Call Run to start it.
func NewKubelet(vms VMSource, client kubernetes.Interface, opts KubeletOptions) *Kubelet {
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = DefaultSyncPeriod
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.LeaseRenewPeriod <= 0 {
		opts.LeaseRenewPeriod = opts.LeaseDuration / 4
	}
	if opts.StatusReportPeriod <= 0 {
		opts.StatusReportPeriod = DefaultStatusReportPeriod
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = DefaultParallelism
	}
	if opts.TerminationFraction <= 0 || opts.TerminationFraction > 1 {
		opts.TerminationFraction = DefaultTerminationFraction
	}
	if opts.AttachDelay <= 0 {
		opts.AttachDelay = DefaultAttachDelay
	}
	if opts.DetachDelay <= 0 {
		opts.DetachDelay = DefaultDetachDelay
	}
	if opts.CSIDriver == "" {
		opts.CSIDriver = DefaultCSIDriver
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Identity == "" {
		opts.Identity = "kubelet-" + strconv.FormatUint(rand.Uint64(), 36)
	}
	// Renewals and reports come up to a tenth of their period early, at
	// random: periods that started together drift apart.
	jitter := func(period time.Duration) time.Duration {
		return period - rand.N(period/10+1)
	}
	return &Kubelet{
		vms:    vms,
		client: client,
		opts:   opts,
		nodes:  newNodeReporter(client, opts.Identity, opts.StatusReportPeriod, jitter),
		leases: newLeaseRenewer(client, opts.LeaseDuration, opts.LeaseRenewPeriod, jitter, opts.Clock),
		pods:   podRunner{client: client, terminationFraction: opts.TerminationFraction},
		attacher: csiAttacher{
			client: client, driver: opts.CSIDriver,
			attachDelay: opts.AttachDelay, detachDelay: opts.DetachDelay,
		},
		silenced: map[string]bool{},
		running:  make(chan struct{}),
	}
}

// Identity is the kubelet's identity (KubeletOptions.Identity, or the
// random one it chose), the value of AnnotationSimulated on its nodes: an
// Agent serving its nodes takes it as AgentOptions.Identity.
func (k *Kubelet) Identity() string { return k.opts.Identity }

// SetCondition makes the node report cond (by type) from now on, e.g.
// Ready=False or a node-problem-detector condition such as KernelDeadlock.
func (k *Kubelet) SetCondition(node string, cond corev1.NodeCondition) {
	k.nodes.setCondition(node, cond)
}

// ClearCondition returns the condition of type t to its healthy default.
func (k *Kubelet) ClearCondition(node string, t corev1.NodeConditionType) {
	k.nodes.clearCondition(node, t)
}

// StopHeartbeats silences the node's kubelet: no lease renewals, no status
// updates, no pod handling — what the control plane sees of a hung or
// partitioned node.
func (k *Kubelet) StopHeartbeats(node string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.silenced[node] = true
}

// ResumeHeartbeats undoes StopHeartbeats.
func (k *Kubelet) ResumeHeartbeats(node string) {
	// Renew and report at once rather than when the old periods run out,
	// as a kubelet that comes back does; made due before the node counts
	// as alive again, so the first sync that sees it alive writes both.
	k.nodes.reportAtNextSync(node)
	k.leases.renewAtNextSync(node)
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.silenced, node)
}

func (k *Kubelet) isSilenced(node string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.silenced[node]
}

// WaitRunning blocks until Run has synced its caches or ctx ends.
func (k *Kubelet) WaitRunning(ctx context.Context) error {
	select {
	case <-k.running:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// listers are the informer-backed views a sync works from.
type listers struct {
	nodes       corelisters.NodeLister
	pods        corelisters.PodLister
	attachments storagelisters.VolumeAttachmentLister
}

// Run simulates the kubelets until ctx ends. It returns an error only if
// the informer caches cannot sync; errors of single API calls are logged and
// retried at the next sync.
func (k *Kubelet) Run(ctx context.Context) error {
	logger := logr.FromContextOrDiscard(ctx).WithName("sim-kubelet")
	ctx = logr.NewContext(ctx, logger)

	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithTransform(cachetransform.DropManagedFields))
	l := listers{
		nodes:       factory.Core().V1().Nodes().Lister(),
		pods:        factory.Core().V1().Pods().Lister(),
		attachments: factory.Storage().V1().VolumeAttachments().Lister(),
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("sim kubelet: cache of %v did not sync", typ)
		}
	}
	if err := k.spreadExisting(l, k.opts.Clock.Now()); err != nil {
		return fmt.Errorf("sim kubelet: %w", err)
	}
	close(k.running)

	ticker := k.opts.Clock.NewTicker(k.opts.SyncPeriod)
	defer ticker.Stop()
	for {
		if err := k.sync(ctx, l); err != nil && ctx.Err() == nil {
			logger.Error(err, "Sync failed; retrying at the next period")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// spreadExisting spreads the first renewals and reports of the nodes this
// kubelet's identity registered before it started (a restarted manager's
// nodes) over one period each, instead of making them all at the first
// sync. A node whose status needs a change is still written at once.
func (k *Kubelet) spreadExisting(l listers, now time.Time) error {
	nodes, err := l.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	for _, n := range nodes {
		if k.nodes.owns(n) {
			k.leases.spread(n.Name, now)
			k.nodes.spread(n.Name, now)
		}
	}
	return nil
}

// goneNodeWork is the deletion of the nodes this kubelet registered whose
// VMs are gone entirely, none with KeepNodesOfGoneVMs. A node whose
// deletion was requested already waits for a finalizer's holder: deleting
// it again every sync would only load the API server, which no cloud
// controller does.
func (k *Kubelet) goneNodeWork(l listers, view *vmView) ([]func(context.Context) error, error) {
	if k.opts.KeepNodesOfGoneVMs {
		return nil, nil
	}
	nodes, err := l.nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var work []func(context.Context) error
	for _, n := range nodes {
		if _, known := view.known[n.Name]; known || !k.nodes.owns(n) || n.DeletionTimestamp != nil {
			continue
		}
		work = append(work, func(ctx context.Context) error {
			if err := k.nodes.deregister(ctx, n); err != nil {
				return err
			}
			k.nodeGone(n.Name) // its lease goes with it (owner reference)
			return nil
		})
	}
	return work, nil
}

// sync runs one round over all VMs, nodes, pods and volume attachments: it
// decides from the caches what is to be done, which at steady state is
// little (a renewal here and there), and makes those API calls with up to
// Parallelism at once. It goes on after a failed call so that one bad
// object does not stall the others, and returns the failures joined.
func (k *Kubelet) sync(ctx context.Context, l listers) error {
	now := k.opts.Clock.Now()
	view := k.view.get(k.vms, now)
	k.mu.Lock()
	silenced := len(k.silenced) > 0
	k.mu.Unlock()

	// Nodes of VMs that are gone entirely are deleted.
	work, err := k.goneNodeWork(l, view)
	if err != nil {
		return err
	}

	// Which nodes have a live kubelet: a Running, initialized VM that is
	// not silenced.
	alive := func(node string) bool {
		if _, ok := view.running[node]; !ok {
			return false
		}
		return !silenced || !k.isSilenced(node)
	}
	for _, vm := range view.runningSorted {
		if !alive(vm.NodeName) {
			continue
		}
		node, err := l.nodes.Get(vm.NodeName)
		switch {
		case err != nil && apierrors.IsNotFound(err):
			node = nil
		case err != nil:
			return fmt.Errorf("reading node %s from the cache: %w", vm.NodeName, err)
		case !k.nodes.owns(node):
			continue // somebody else's node of the same name
		case !k.leases.due(node.Name, now) && !k.nodes.due(node, now) && !versionChanged(vm, node):
			continue
		}
		work = append(work, k.nodeWork(vm, node, now))
	}

	pods, err := l.pods.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" || !alive(pod.Spec.NodeName) || !k.pods.due(pod, now) {
			continue
		}
		work = append(work, k.podWork(l, pod, now))
	}

	attachments, err := l.attachments.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing volume attachments: %w", err)
	}
	for _, va := range attachments {
		if !k.attacher.due(va, now) {
			continue
		}
		work = append(work, k.attachmentWork(va, now))
	}
	err = errors.Join(parallel.Run(ctx, k.opts.Parallelism, work)...)
	k.checkLate(ctx, now, len(view.running))
	return err
}

// checkLate logs when lease renewals have been late for a renew period:
// the first sign that the kubelet cannot keep up with its nodes, long
// before kube-controller-manager marks them Unknown. It says which knobs
// help.
func (k *Kubelet) checkLate(ctx context.Context, now time.Time, nodes int) {
	late := k.leases.takeLate()
	if late <= k.opts.LeaseRenewPeriod/4 {
		k.lateSince = time.Time{}
		return
	}
	if k.lateSince.IsZero() {
		k.lateSince = now
		return
	}
	if now.Sub(k.lateSince) < k.opts.LeaseRenewPeriod {
		return
	}
	k.lateSince = now // at most once a renew period
	logr.FromContextOrDiscard(ctx).Info("Node lease renewals are late: the API server or this kubelet's client rate limit does not keep up with renewing every lease each renew period; "+
		"raise the client's QPS, or the renew period together with kube-controller-manager's --node-monitor-grace-period",
		"late", late, "renewPeriod", k.opts.LeaseRenewPeriod, "nodes", nodes)
}

// nodeWork, podWork and attachmentWork are the API calls a sync found
// due. They are built here rather than in sync's loops, where a closure
// would move every object the loops look at to the heap, not just those
// with work due.
func (k *Kubelet) nodeWork(vm VM, node *corev1.Node, now time.Time) func(context.Context) error {
	return func(ctx context.Context) error { return k.syncNode(ctx, vm, node, now) }
}

func (k *Kubelet) podWork(l listers, pod *corev1.Pod, now time.Time) func(context.Context) error {
	return func(ctx context.Context) error {
		node, _ := l.nodes.Get(pod.Spec.NodeName) // nil if not cached yet: no host IP
		return k.pods.sync(ctx, pod, node, now)
	}
}

func (k *Kubelet) attachmentWork(va *storagev1.VolumeAttachment, now time.Time) func(context.Context) error {
	return func(ctx context.Context) error { return k.attacher.sync(ctx, va, now) }
}

// syncNode registers the node of a live vm if needed, then renews its
// lease and reports its status when due. The lease comes first because it
// alone keeps the node from being marked Unknown.
func (k *Kubelet) syncNode(ctx context.Context, vm VM, node *corev1.Node, now time.Time) error {
	if node == nil {
		registered, err := k.nodes.register(ctx, vm, now)
		if registered == nil || err != nil {
			return err
		}
		node = registered
		// A lease of a node of this name from before is another's; the
		// status went with the registration.
		k.leases.forget(vm.NodeName)
	}
	if err := k.leases.renew(ctx, node, now); err != nil {
		return err
	}
	return k.nodes.reportStatus(ctx, vm, node, now)
}

// nodeGone drops all that is known of a deleted node but its condition
// overrides, which belong to the node name.
func (k *Kubelet) nodeGone(node string) {
	k.nodes.forget(node)
	k.leases.forget(node)
}
