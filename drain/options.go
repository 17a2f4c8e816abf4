package drain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Annotation keys a pod owner sets to steer the drain of their pods.
const (
	// PolicyAnnotation sets how a pod is drained: "skip" leaves it on the
	// node, "wait-completed" never evicts it but waits until it has
	// finished, "drain" drains it even if it would otherwise be skipped or
	// refused (a DaemonSet pod, an unmanaged pod). Any other value is
	// ignored with a warning in the pod's Decision.
	PolicyAnnotation = "mcmkit.io/drain"
	// OrderAnnotation puts a pod into an order group: an integer, lower
	// groups drain first, 0 when absent. An invalid value counts as 0 and
	// is reported as a warning in the pod's Decision.
	OrderAnnotation = "mcmkit.io/drain-order"
)

// Policy is how one pod is to be drained. The values of PolicyAnnotation
// are PolicyDrain, PolicySkip and PolicyWaitCompleted; a Filter may also
// answer PolicyRefuse, or "" for no opinion.
type Policy string

const (
	// PolicyDrain evicts the pod in its order group.
	PolicyDrain Policy = "drain"
	// PolicySkip leaves the pod on the node; it does not hold up the drain.
	PolicySkip Policy = "skip"
	// PolicyWaitCompleted never evicts the pod (a batch job that must not be
	// interrupted) but holds up its order group until the pod has succeeded
	// or failed. At the drain deadline it is force-deleted like any other.
	PolicyWaitCompleted Policy = "wait-completed"
	// PolicyRefuse makes the drain refuse to start while the pod is on the
	// node, like kubectl drain without --force. Only filters and the
	// Refuse* options produce it.
	PolicyRefuse Policy = "refuse"
)

// Filter decides the policy of a pod before the built-in rules do. It must
// be a pure function of the pod (it runs inside the planner, which does no
// I/O) and must not modify the pod, which may come from an informer cache.
// It returns "" to leave the pod to the next filter and the defaults, and a
// short reason that appears in the pod's Decision.
type Filter func(pod *corev1.Pod) (policy Policy, reason string)

// VolumeIDGetter maps persistent volumes to the cloud provider's volume
// IDs, in the shape of a machine driver's GetVolumeIDs: the IDs of the
// volumes that belong to the provider, others left out. The drain calls it
// with one spec at a time. Volumes for which it returns no ID are not
// waited for (an NFS share does not detach from a VM); the IDs it returns
// are also looked up in the Node's status.volumesAttached. An error that
// wraps errors.ErrUnsupported means "cannot tell": the drain then waits for
// all volumes, as if no getter were set. Other errors fail the pass.
//
// A machine controller adapts its driver in a few lines:
//
//	drain.VolumeIDFunc(func(ctx context.Context, specs []*corev1.PersistentVolumeSpec) ([]string, error) {
//		resp, err := d.GetVolumeIDs(ctx, &driver.GetVolumeIDsRequest{PVSpecs: specs})
//		if driver.CodeOf(err) == driver.Unimplemented {
//			return nil, errors.ErrUnsupported
//		}
//		if err != nil {
//			return nil, err
//		}
//		return resp.VolumeIDs, nil
//	})
type VolumeIDGetter interface {
	GetVolumeIDs(ctx context.Context, specs []*corev1.PersistentVolumeSpec) ([]string, error)
}

// VolumeIDFunc adapts a function to VolumeIDGetter.
type VolumeIDFunc func(ctx context.Context, specs []*corev1.PersistentVolumeSpec) ([]string, error)

// GetVolumeIDs calls f.
func (f VolumeIDFunc) GetVolumeIDs(ctx context.Context, specs []*corev1.PersistentVolumeSpec) ([]string, error) {
	return f(ctx, specs)
}

// Defaults for the zero values of Options.
const (
	DefaultPollInterval        = 5 * time.Second
	DefaultPassTimeout         = 10 * time.Second
	DefaultEvictionConcurrency = 10
	DefaultBackoffInitial      = time.Second
	DefaultBackoffMax          = 30 * time.Second
	DefaultUnreachableAfter    = time.Minute
	// DefaultUnreachableForceAfter is the Machine Controller Manager's
	// threshold for draining a NotReady node by force.
	DefaultUnreachableForceAfter = 5 * time.Minute
	DefaultUnreachableGrace      = time.Second
	DefaultSkipWaitAfter         = 10 * time.Second
	DefaultVolumeParallelism     = 4
	DefaultDetachTimeout         = 2 * time.Minute
	DefaultReattachTimeout       = 90 * time.Second
	DefaultPageSize              = 500
	DefaultFieldManager          = "mcm-drain"
)

// Options configures a Drainer. The zero value drains like `kubectl drain
// --ignore-daemonsets --delete-emptydir-data --force` would, plus ordering,
// PodDisruptionBudget diagnostics and volume-detach waits, with no deadline:
// budgets are respected forever.
type Options struct {
	// SkipCordon leaves the node schedulable. By default every Pass first
	// marks the node unschedulable (a patch, only when it is not already).
	SkipCordon bool

	// DrainDaemonSets evicts DaemonSet pods too, in the last tiers of their
	// order group. By default they are skipped. Note that the DaemonSet
	// controller recreates them unless the node goes away or the pods'
	// tolerations keep them off a cordoned node.
	DrainDaemonSets bool
	// RefuseUnmanaged refuses to drain while pods without a controller are
	// on the node (they would not come back). By default they are evicted.
	RefuseUnmanaged bool
	// RefuseLocalStorage refuses to drain while pods with emptyDir volumes
	// are on the node (their data is lost). By default they are evicted.
	RefuseLocalStorage bool
	// Filters run in order after PolicyAnnotation and before the built-in
	// rules; the first one with an opinion decides.
	Filters []Filter

	// Timeout is the drain deadline, counted from the first pass
	// (State.Start). Once it approaches, every remaining pod is deleted
	// without the eviction API at deadline minus its termination grace
	// period, so that it is gone by the deadline. Zero means no deadline:
	// PodDisruptionBudgets are respected forever. A deadline the caller
	// sets with State.SetDeadline takes precedence.
	Timeout time.Duration
	// MaxEvictRetries is the bound on refused evictions per pod for
	// drains whose State does not set one (see State.SetMaxEvictRetries):
	// after that many refusals by PodDisruptionBudgets, a pod is deleted
	// without the eviction API. Zero means no bound. A controller with a
	// bound per node sets it with State.SetMaxEvictRetries instead, as it
	// sets the deadline.
	MaxEvictRetries int
	// GracePeriod overrides the pods' terminationGracePeriodSeconds for
	// evictions. Zero uses each pod's own; values below a second count as
	// one second.
	GracePeriod time.Duration

	// Unreachable configures the fast path for nodes that are NotReady or
	// unreachable.
	Unreachable UnreachableOptions
	// Volumes configures the waits for volumes to detach.
	Volumes VolumeOptions

	// PollInterval is how soon to look again while pods terminate or
	// volumes detach. Zero means DefaultPollInterval.
	PollInterval time.Duration
	// PassTimeout bounds the time one Pass spends issuing evictions;
	// evictions not started by then are left to the next pass. Zero means
	// DefaultPassTimeout.
	PassTimeout time.Duration
	// EvictionConcurrency bounds the eviction and delete requests in flight
	// during one Pass. Zero means DefaultEvictionConcurrency.
	EvictionConcurrency int
	// BackoffInitial and BackoffMax shape the wait after an eviction was
	// refused with 429 (a PodDisruptionBudget): the first retry comes after
	// BackoffInitial, each further one after twice the previous wait, at
	// most BackoffMax. Zero means DefaultBackoffInitial / DefaultBackoffMax.
	BackoffInitial, BackoffMax time.Duration

	// Listers, where set, serve reads from informer caches instead of the
	// API server.
	Listers Listers
	// PageSize is the page size of LIST requests made when no lister is
	// set. Zero means DefaultPageSize.
	PageSize int64
	// FieldManager names the drain in the managed fields of its patches.
	// Empty means DefaultFieldManager.
	FieldManager string

	// OnEvent, when set, is called for every pod event (eviction started,
	// blocked or failed, force deletion, pod gone, volumes detached). Pass
	// calls it synchronously from the calling goroutine, in order; it must
	// not block for long. Result.Events holds the same events.
	OnEvent func(Event)
	// Registerer receives the drain metrics (see the package
	// documentation). Nil means no metrics.
	Registerer prometheus.Registerer
	// Clock is the source of time. Nil means the real clock; tests inject
	// k8s.io/utils/clock/testing.FakeClock.
	Clock clock.Clock
}

// UnreachableOptions configures the fast path for a node whose Ready
// condition has not been True (or which has carried the
// node.kubernetes.io/unreachable taint) for After. On such a node the kubelet
// cannot finish pod termination or unmount volumes, so the drain evicts with
// a short grace period, treats pods that have been terminating for more than
// SkipWaitAfter past their deletion time as gone, and does not wait for
// volumes to detach. PodDisruptionBudgets still apply, through the eviction
// API, until ForceAfter.
type UnreachableOptions struct {
	// After is how long the node must have been NotReady or unreachable.
	// Zero means DefaultUnreachableAfter: a Ready condition that is
	// Unknown already means some 40 seconds without heartbeats, and one
	// more minute rules out a blip without leaving a dead node's drain
	// idle for long. Negative disables the fast path.
	After time.Duration
	// ForceAfter is how long the node must have been NotReady or
	// unreachable for the drain to be forced: from then on the remaining
	// pods are deleted without the eviction API exactly as at the
	// deadline (the effective deadline is the earlier of State.Deadline
	// and the node's NotReady time plus ForceAfter), and on an unreachable
	// node the VolumeAttachments are deleted once no pod is left (see
	// VolumeOptions.KeepAttachments). Zero means
	// DefaultUnreachableForceAfter; negative disables it, leaving only
	// the deadline.
	ForceAfter time.Duration
	// GracePeriod of evictions on such a node. Zero means
	// DefaultUnreachableGrace; it is never below one second.
	GracePeriod time.Duration
	// SkipWaitAfter is how long after its deletion time a terminating pod
	// still counts. Zero means DefaultSkipWaitAfter.
	SkipWaitAfter time.Duration
}

// VolumeOptions configures the volume-detach waits. After a pod with
// persistent volumes is gone, its order group is not finished (and the
// drain is not done) until the VolumeAttachments of those volumes on this
// node are gone, or DetachTimeout has passed. Once no drained pod is left,
// every remaining attachment on the node that no remaining pod uses is
// waited for the same way, so a detach is never missed because a pod
// vanished between two passes.
//
// An unreachable node cannot detach anything: its kubelet is gone, and the
// attach/detach controller waits for minutes before it detaches by force.
// So once no pod is left on such a node, the drain waits for its
// VolumeAttachments until the drain is forced (the deadline, or
// UnreachableOptions.ForceAfter), then deletes them, emits an
// EventAttachmentDeleted for each, and is not done until they are gone or
// DetachTimeout has passed since the first deletion. On a Ready node
// nothing is ever deleted: a running kubelet may still have the volume
// mounted. Without a deadline and with ForceAfter disabled, an unreachable
// node's attachments are not waited for.
type VolumeOptions struct {
	// Skip disables all volume handling: the waits, and the deletion of
	// an unreachable node's VolumeAttachments.
	Skip bool
	// KeepAttachments never deletes VolumeAttachments, not even those of
	// an unreachable node whose drain is forced; they are then left to the
	// attach/detach controller and not waited for.
	KeepAttachments bool
	// Parallelism bounds the pods with volumes that are being evicted or
	// whose volumes are detaching at the same time, so that a node with
	// many volumes does not flood the cloud's attach API. Zero means
	// DefaultVolumeParallelism.
	Parallelism int
	// DetachTimeout is how long to wait for a gone pod's volumes to detach
	// before giving up on them (reported by an EventDetachTimedOut). Zero
	// means DefaultDetachTimeout.
	DetachTimeout time.Duration
	// WaitForReattach also waits, after the detach, until each volume is
	// attached to another node, at most ReattachTimeout (zero means
	// DefaultReattachTimeout). This wait holds up Done, not the next
	// order group.
	WaitForReattach bool
	ReattachTimeout time.Duration
	// IDs, when set, narrows the waits to the cloud provider's volumes and
	// adds the Node's status.volumesAttached as a second signal.
	IDs VolumeIDGetter
}

// complete returns opts with defaults filled in, or an error for values
// that cannot be meant.
func (o Options) complete() (Options, error) {
	var errs []error
	neg := func(name string, d time.Duration) {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %v", name, d))
		}
	}
	neg("Timeout", o.Timeout)
	neg("GracePeriod", o.GracePeriod)
	neg("PollInterval", o.PollInterval)
	neg("PassTimeout", o.PassTimeout)
	neg("BackoffInitial", o.BackoffInitial)
	neg("BackoffMax", o.BackoffMax)
	neg("Unreachable.GracePeriod", o.Unreachable.GracePeriod)
	neg("Unreachable.SkipWaitAfter", o.Unreachable.SkipWaitAfter)
	neg("Volumes.DetachTimeout", o.Volumes.DetachTimeout)
	neg("Volumes.ReattachTimeout", o.Volumes.ReattachTimeout)
	if o.MaxEvictRetries < 0 {
		errs = append(errs, fmt.Errorf("MaxEvictRetries must not be negative, got %d", o.MaxEvictRetries))
	}
	if o.EvictionConcurrency < 0 {
		errs = append(errs, fmt.Errorf("EvictionConcurrency must not be negative, got %d", o.EvictionConcurrency))
	}
	if o.Volumes.Parallelism < 0 {
		errs = append(errs, fmt.Errorf("Volumes.Parallelism must not be negative, got %d", o.Volumes.Parallelism))
	}
	if o.PageSize < 0 {
		errs = append(errs, fmt.Errorf("PageSize must not be negative, got %d", o.PageSize))
	}
	if o.BackoffInitial > 0 && o.BackoffMax > 0 && o.BackoffMax < o.BackoffInitial {
		errs = append(errs, fmt.Errorf("BackoffMax (%v) must not be below BackoffInitial (%v)", o.BackoffMax, o.BackoffInitial))
	}
	for i, f := range o.Filters {
		if f == nil {
			errs = append(errs, fmt.Errorf("Filters[%d] is nil", i))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	return o.withDefaults(), nil
}

// withDefaults fills zero values. It never fails, so the pure planner can
// use it on options that were not validated.
func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.PollInterval, DefaultPollInterval)
	def(&o.PassTimeout, DefaultPassTimeout)
	def(&o.BackoffInitial, DefaultBackoffInitial)
	def(&o.BackoffMax, DefaultBackoffMax)
	if o.BackoffMax < o.BackoffInitial {
		o.BackoffMax = o.BackoffInitial
	}
	if o.Unreachable.After == 0 {
		o.Unreachable.After = DefaultUnreachableAfter
	}
	if o.Unreachable.ForceAfter == 0 {
		o.Unreachable.ForceAfter = DefaultUnreachableForceAfter
	}
	def(&o.Unreachable.GracePeriod, DefaultUnreachableGrace)
	o.Unreachable.GracePeriod = max(o.Unreachable.GracePeriod, time.Second)
	def(&o.Unreachable.SkipWaitAfter, DefaultSkipWaitAfter)
	def(&o.Volumes.DetachTimeout, DefaultDetachTimeout)
	def(&o.Volumes.ReattachTimeout, DefaultReattachTimeout)
	if o.Volumes.Parallelism <= 0 {
		o.Volumes.Parallelism = DefaultVolumeParallelism
	}
	if o.EvictionConcurrency <= 0 {
		o.EvictionConcurrency = DefaultEvictionConcurrency
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.FieldManager == "" {
		o.FieldManager = DefaultFieldManager
	}
	if o.Timeout < 0 {
		o.Timeout = 0
	}
	if o.MaxEvictRetries < 0 {
		o.MaxEvictRetries = 0
	}
	if o.GracePeriod > 0 && o.GracePeriod < time.Second {
		o.GracePeriod = time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}
