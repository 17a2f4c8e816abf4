package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/utils/clock"

	"github.com/mcmkit/mcm/internal/cachetransform"
)

// Defaults for the zero values of KubeletOptions.
const (
	DefaultSyncPeriod          = 250 * time.Millisecond
	DefaultLeaseDuration       = 40 * time.Second
	DefaultStatusReportPeriod  = time.Minute
	DefaultTerminationFraction = 0.1
	DefaultAttachDelay         = 500 * time.Millisecond
	DefaultDetachDelay         = 2 * time.Second
	// DefaultCSIDriver is the attacher whose VolumeAttachments the
	// simulated kubelet serves: that of the volumes GetVolumeIDs reports.
	DefaultCSIDriver = CSIDriverName
)

// VMSource is what the simulated kubelet watches; *Cloud implements it.
type VMSource interface {
	// VMs returns a snapshot of every VM, in any order.
	VMs() []VM
}

// KubeletOptions configure a Kubelet. The zero value is ready to use.
type KubeletOptions struct {
	// SyncPeriod is how often VMs, Nodes, Pods and VolumeAttachments are
	// compared and brought in line. Zero means DefaultSyncPeriod.
	SyncPeriod time.Duration
	// LeaseDuration of the node leases; they are renewed every quarter of
	// it, as the kubelet does. Zero means DefaultLeaseDuration.
	LeaseDuration time.Duration
	// StatusReportPeriod is how often an unchanged node status is written
	// again. Zero means DefaultStatusReportPeriod.
	StatusReportPeriod time.Duration
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
	if opts.StatusReportPeriod <= 0 {
		opts.StatusReportPeriod = DefaultStatusReportPeriod
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
	return &Kubelet{
		vms:    vms,
		client: client,
		opts:   opts,
		nodes:  newNodeReporter(client, opts.Identity, opts.StatusReportPeriod),
		leases: newLeaseRenewer(client, opts.LeaseDuration),
		pods:   podRunner{client: client, terminationFraction: opts.TerminationFraction},
		attacher: csiAttacher{
			client: client, driver: opts.CSIDriver,
			attachDelay: opts.AttachDelay, detachDelay: opts.DetachDelay,
		},
		silenced: map[string]bool{},
		running:  make(chan struct{}),
	}
}

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

// sync runs one round over all VMs, nodes, pods and volume attachments. It
// goes on after a failed call so that one bad object does not stall the
// others, and returns the failures joined.
func (k *Kubelet) sync(ctx context.Context, l listers) error {
	now := k.opts.Clock.Now()
	var errs []error

	// Which nodes have a live kubelet: a Running, initialized VM that is not
	// silenced. Nodes of VMs that are gone entirely may be deleted.
	alive := map[string]VM{}
	known := map[string]bool{} // node names of VMs that still exist
	for _, vm := range k.vms.VMs() {
		known[vm.NodeName] = true
		if vm.State == VMRunning && vm.Initialized && !k.isSilenced(vm.NodeName) {
			alive[vm.NodeName] = vm
		}
	}

	nodes, err := l.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	existing := map[string]*corev1.Node{}
	for _, n := range nodes {
		existing[n.Name] = n
		if !k.nodes.owns(n) || known[n.Name] || k.opts.KeepNodesOfGoneVMs {
			continue
		}
		if err := k.nodes.deregister(ctx, n); err != nil {
			errs = append(errs, err)
			continue
		}
		k.forgetNode(n.Name) // its lease goes with it (owner reference)
	}

	for _, name := range slices.Sorted(maps.Keys(alive)) {
		if err := k.syncNode(ctx, alive[name], existing[name], now); err != nil {
			errs = append(errs, err)
		}
	}

	pods, err := l.pods.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	for _, pod := range pods {
		if _, ok := alive[pod.Spec.NodeName]; !ok {
			continue
		}
		if err := k.pods.sync(ctx, pod, existing[pod.Spec.NodeName], now); err != nil {
			errs = append(errs, err)
		}
	}

	attachments, err := l.attachments.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing volume attachments: %w", err)
	}
	for _, va := range attachments {
		if !k.attacher.serves(va) {
			continue
		}
		if err := k.attacher.sync(ctx, va, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// syncNode registers the node of a live vm if needed, then renews its
// lease and reports its status when due. The lease comes first because it
// alone keeps the node from being marked Unknown.
func (k *Kubelet) syncNode(ctx context.Context, vm VM, node *corev1.Node, now time.Time) error {
	if node == nil {
		registered, err := k.nodes.register(ctx, vm)
		if registered == nil || err != nil {
			return err
		}
		node = registered
		k.forgetNode(vm.NodeName)
	}
	if !k.nodes.owns(node) {
		return nil // somebody else's node of the same name
	}
	if err := k.leases.renew(ctx, node, now); err != nil {
		return err
	}
	return k.nodes.reportStatus(ctx, vm, node, now)
}

// forgetNode drops what was last written for the node: a new node of that
// name starts with a fresh lease and status.
func (k *Kubelet) forgetNode(node string) {
	k.nodes.reportAtNextSync(node)
	k.leases.forget(node)
}
