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
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
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

// AnnotationSimulated marks Nodes a simulated kubelet registered; its value
// is the kubelet's identity, so that several kubelets (of several clouds)
// can share a cluster without touching each other's nodes.
const AnnotationSimulated = "sim.mcmkit.io/kubelet"

// controllerManagedAttachDetach tells kube-controller-manager's attach-detach
// controller that it, not the kubelet, attaches volumes to the node.
const controllerManagedAttachDetach = "volumes.kubernetes.io/controller-managed-attach-detach"

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

	mu        sync.Mutex
	overrides map[string]map[corev1.NodeConditionType]corev1.NodeCondition
	silenced  map[string]bool
	renewed   map[string]time.Time             // last lease renewal by node
	leases    map[string]*coordinationv1.Lease // last lease written by node
	reported  map[string]time.Time             // last status write by node

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
		vms:       vms,
		client:    client,
		opts:      opts,
		overrides: map[string]map[corev1.NodeConditionType]corev1.NodeCondition{},
		silenced:  map[string]bool{},
		renewed:   map[string]time.Time{},
		leases:    map[string]*coordinationv1.Lease{},
		reported:  map[string]time.Time{},
		running:   make(chan struct{}),
	}
}

// SetCondition makes the node report cond (by type) from now on, e.g.
// Ready=False or a node-problem-detector condition such as KernelDeadlock.
func (k *Kubelet) SetCondition(node string, cond corev1.NodeCondition) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.overrides[node] == nil {
		k.overrides[node] = map[corev1.NodeConditionType]corev1.NodeCondition{}
	}
	k.overrides[node][cond.Type] = cond
	delete(k.reported, node) // write at the next sync
}

// ClearCondition returns the condition of type t to its healthy default.
func (k *Kubelet) ClearCondition(node string, t corev1.NodeConditionType) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.overrides[node], t)
	delete(k.reported, node)
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
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.silenced, node)
	delete(k.reported, node)
	delete(k.renewed, node)
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
		if n.Annotations[AnnotationSimulated] != k.opts.Identity || known[n.Name] || k.opts.KeepNodesOfGoneVMs {
			continue
		}
		if err := k.client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting node %s of a gone VM: %w", n.Name, err))
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
		if err := k.syncPod(ctx, pod, existing[pod.Spec.NodeName], now); err != nil {
			errs = append(errs, err)
		}
	}

	attachments, err := l.attachments.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing volume attachments: %w", err)
	}
	for _, va := range attachments {
		if va.Spec.Attacher != k.opts.CSIDriver {
			continue
		}
		if err := k.syncAttachment(ctx, va, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// forgetNode drops what was last written for the node: a new node of that
// name starts with a fresh lease and status.
func (k *Kubelet) forgetNode(node string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.reported, node)
	delete(k.renewed, node)
	delete(k.leases, node)
}

func (k *Kubelet) isSilenced(node string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.silenced[node]
}

// syncNode registers the node of vm if needed, renews its lease when due
// and writes its status when it changed or is due.
func (k *Kubelet) syncNode(ctx context.Context, vm VM, node *corev1.Node, now time.Time) error {
	if node == nil {
		created, err := k.client.CoreV1().Nodes().Create(ctx, k.nodeFor(vm), metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
			return nil // the cache lags; next sync sees it
		case err != nil:
			return fmt.Errorf("registering node %s: %w", vm.NodeName, err)
		}
		node = created
		k.forgetNode(vm.NodeName)
	}
	if node.Annotations[AnnotationSimulated] != k.opts.Identity {
		return nil // somebody else's node of the same name
	}
	if err := k.renewLease(ctx, node, now); err != nil {
		return err
	}

	k.mu.Lock()
	last, reported := k.reported[node.Name]
	overrides := maps.Clone(k.overrides[node.Name])
	k.mu.Unlock()

	want := desiredNodeStatus(vm, overrides, node.Status.Conditions, now)
	due := !reported || now.Sub(last) >= k.opts.StatusReportPeriod
	if !due && statusEquivalent(node.Status, want) {
		return nil
	}
	updated := node.DeepCopy()
	updated.Status.Capacity = want.Capacity
	updated.Status.Allocatable = want.Allocatable
	updated.Status.Addresses = want.Addresses
	updated.Status.Conditions = want.Conditions
	updated.Status.NodeInfo = want.NodeInfo
	if _, err := k.client.CoreV1().Nodes().UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // retried at the next sync with a fresh copy
		}
		return fmt.Errorf("reporting status of node %s: %w", node.Name, err)
	}
	k.mu.Lock()
	k.reported[node.Name] = now
	k.mu.Unlock()
	return nil
}

// nodeFor is the Node a kubelet on vm registers.
func (k *Kubelet) nodeFor(vm VM) *corev1.Node {
	l := maps.Clone(vm.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[corev1.LabelHostname] = vm.NodeName
	l[corev1.LabelOSStable] = "linux"
	l[corev1.LabelArchStable] = "amd64"
	l[corev1.LabelTopologyZone] = vm.Zone
	l[corev1.LabelInstanceTypeStable] = vm.InstanceType
	l[v1alpha1.MachineNameLabelKey] = vm.MachineName
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   vm.NodeName,
			Labels: l,
			Annotations: map[string]string{
				AnnotationSimulated:           k.opts.Identity,
				controllerManagedAttachDetach: "true",
			},
		},
		Spec: corev1.NodeSpec{ProviderID: vm.ProviderID},
	}
}

// desiredNodeStatus is the status the node's kubelet reports: capacity and
// addresses of the VM, healthy conditions unless overridden. Transition
// times are kept from current when a condition's status did not change.
func desiredNodeStatus(vm VM, overrides map[corev1.NodeConditionType]corev1.NodeCondition, current []corev1.NodeCondition, now time.Time) corev1.NodeStatus {
	capacity := vm.Capacity.DeepCopy()
	if capacity == nil {
		capacity = corev1.ResourceList{}
	}
	if _, ok := capacity[corev1.ResourcePods]; !ok {
		capacity[corev1.ResourcePods] = resource.MustParse("110")
	}
	conditions := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "simulated kubelet is posting ready status"},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID"},
	}
	for i, c := range conditions {
		if o, ok := overrides[c.Type]; ok {
			conditions[i] = o
		}
	}
	for _, t := range slices.Sorted(maps.Keys(overrides)) {
		if !slices.ContainsFunc(conditions, func(c corev1.NodeCondition) bool { return c.Type == t }) {
			conditions = append(conditions, overrides[t])
		}
	}
	heartbeat := metav1.NewTime(now)
	for i := range conditions {
		conditions[i].LastHeartbeatTime = heartbeat
		conditions[i].LastTransitionTime = heartbeat
		for _, cur := range current {
			if cur.Type == conditions[i].Type && cur.Status == conditions[i].Status {
				conditions[i].LastTransitionTime = cur.LastTransitionTime
			}
		}
	}
	return corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity.DeepCopy(),
		Addresses:   slices.Clone(vm.Addresses),
		Conditions:  conditions,
		NodeInfo: corev1.NodeSystemInfo{
			OperatingSystem: "linux", Architecture: "amd64",
			KubeletVersion: "v1.37.1-sim", ContainerRuntimeVersion: "sim://1",
		},
	}
}

// statusEquivalent compares what a status write would change, ignoring
// heartbeat times.
func statusEquivalent(cur, want corev1.NodeStatus) bool {
	if !apiequality.Semantic.DeepEqual(cur.Capacity, want.Capacity) ||
		!apiequality.Semantic.DeepEqual(cur.Allocatable, want.Allocatable) ||
		!apiequality.Semantic.DeepEqual(cur.Addresses, want.Addresses) ||
		len(cur.Conditions) != len(want.Conditions) {
		return false
	}
	for _, w := range want.Conditions {
		i := slices.IndexFunc(cur.Conditions, func(c corev1.NodeCondition) bool { return c.Type == w.Type })
		if i < 0 {
			return false
		}
		c := cur.Conditions[i]
		if c.Status != w.Status || c.Reason != w.Reason || c.Message != w.Message {
			return false
		}
	}
	return true
}

// renewLease keeps the node's lease in kube-node-lease fresh, which is what
// the node lifecycle controller watches for liveness. It renews from the
// lease it last wrote, as the kubelet does, and reads the lease only when it
// has none or the update failed.
func (k *Kubelet) renewLease(ctx context.Context, node *corev1.Node, now time.Time) error {
	k.mu.Lock()
	last, ok := k.renewed[node.Name]
	lease := k.leases[node.Name]
	k.mu.Unlock()
	if ok && now.Sub(last) < k.opts.LeaseDuration/4 {
		return nil
	}
	leases := k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	renew := &metav1.MicroTime{Time: now}
	var err error
	if lease == nil {
		lease, err = leases.Get(ctx, node.Name, metav1.GetOptions{})
	}
	var (
		written *coordinationv1.Lease
		gone    bool
	)
	switch {
	case apierrors.IsNotFound(err):
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: node.Name, Namespace: corev1.NamespaceNodeLease,
				// Owned by the node, so it goes when the node goes.
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(node.Name),
				LeaseDurationSeconds: ptr.To(int32(k.opts.LeaseDuration / time.Second)),
				RenewTime:            renew,
			},
		}
		written, err = leases.Create(ctx, lease, metav1.CreateOptions{})
	case err == nil:
		lease = lease.DeepCopy() // the cached copy stays as written
		lease.Spec.RenewTime = renew
		written, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		gone = apierrors.IsNotFound(err) // deleted since it was read or written
	}
	if err != nil {
		// Read the lease afresh at the next sync.
		k.mu.Lock()
		delete(k.leases, node.Name)
		k.mu.Unlock()
		if gone || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("renewing lease of node %s: %w", node.Name, err)
	}
	k.mu.Lock()
	k.renewed[node.Name] = now
	k.leases[node.Name] = written
	k.mu.Unlock()
	return nil
}

// syncPod runs a pod bound to a live simulated node: it becomes Running and
// Ready, and once deleted it is removed after TerminationFraction of its
// grace period.
func (k *Kubelet) syncPod(ctx context.Context, pod *corev1.Pod, node *corev1.Node, now time.Time) error {
	pods := k.client.CoreV1().Pods(pod.Namespace)
	if pod.DeletionTimestamp != nil {
		grace := time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 0)) * time.Second
		requested := pod.DeletionTimestamp.Add(-grace)
		done := requested.Add(time.Duration(float64(grace) * k.opts.TerminationFraction))
		if now.Before(done) {
			return nil
		}
		err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("finishing termination of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		return nil
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || podRunningAndReady(pod) {
		return nil
	}
	updated := pod.DeepCopy()
	start := metav1.NewTime(now)
	updated.Status.Phase = corev1.PodRunning
	updated.Status.StartTime = &start
	if node != nil {
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				updated.Status.HostIP = a.Address
				updated.Status.HostIPs = []corev1.HostIP{{IP: a.Address}}
			}
		}
	}
	updated.Status.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		updated.Status.Conditions = append(updated.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: start})
	}
	updated.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		updated.Status.ContainerStatuses = append(updated.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "sim://" + c.Image, Ready: true, Started: ptr.To(true),
			ContainerID: fmt.Sprintf("sim://%s/%s", pod.UID, c.Name),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}},
		})
	}
	if _, err := pods.UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("starting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func podRunningAndReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// attacherFinalizer is what a CSI external-attacher puts on the attachments
// it serves, so that they are deleted only once detached.
func (k *Kubelet) attacherFinalizer() string {
	return "external-attacher/" + k.opts.CSIDriver
}

// syncAttachment plays the CSI external-attacher for the simulated driver:
// a new VolumeAttachment is attached after AttachDelay; a deleted one is
// detached DetachDelay after its deletion began, and only then released.
// Attachments to nodes whose VM is stopped are still served, as a cloud
// detaches volumes from stopped VMs.
func (k *Kubelet) syncAttachment(ctx context.Context, va *storagev1.VolumeAttachment, now time.Time) error {
	attachments := k.client.StorageV1().VolumeAttachments()
	finalizer := k.attacherFinalizer()
	if va.DeletionTimestamp != nil {
		if !slices.Contains(va.Finalizers, finalizer) || now.Before(va.DeletionTimestamp.Add(k.opts.DetachDelay)) {
			return nil
		}
		patch := fmt.Appendf(nil, `{"metadata":{"$deleteFromPrimitiveList/finalizers":[%q],"resourceVersion":%q}}`, finalizer, va.ResourceVersion)
		if _, err := attachments.Patch(ctx, va.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil &&
			!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("detaching %s: %w", va.Name, err)
		}
		return nil
	}
	if va.Status.Attached || now.Before(va.CreationTimestamp.Add(k.opts.AttachDelay)) {
		return nil
	}
	if !slices.Contains(va.Finalizers, finalizer) {
		patch := fmt.Appendf(nil, `{"metadata":{"finalizers":[%q],"resourceVersion":%q}}`, finalizer, va.ResourceVersion)
		if _, err := attachments.Patch(ctx, va.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return nil
			}
			return fmt.Errorf("taking %s: %w", va.Name, err)
		}
		return nil // attach at the next sync, from the updated object
	}
	updated := va.DeepCopy()
	updated.Status.Attached = true
	updated.Status.AttachmentMetadata = map[string]string{"devicePath": "/dev/sim/" + va.Name}
	if _, err := attachments.UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil &&
		!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("attaching %s: %w", va.Name, err)
	}
	return nil
}
