package drain

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ErrNodeNotFound is wrapped by the errors of Plan, Pass and Drain when the
// node does not exist.
var ErrNodeNotFound = errors.New("node not found")

// ErrRefused is wrapped by the error of Drain when pods on the node are
// refused (see Options.RefuseUnmanaged, Options.RefuseLocalStorage,
// PolicyRefuse): waiting cannot help.
var ErrRefused = errors.New("drain refused")

// PodRef identifies one incarnation of a pod. The UID tells a pod apart
// from a replacement with the same name.
type PodRef struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid,omitempty"`
}

// String returns "namespace/name".
func (r PodRef) String() string { return r.Namespace + "/" + r.Name }

// IsZero reports whether r names no pod.
func (r PodRef) IsZero() bool { return r == PodRef{} }

// Tier orders pods within one order group: regular pods first, then
// system-critical ones, then DaemonSet pods (when they are drained at all).
type Tier int

const (
	// TierRegular holds everything not in the tiers below.
	TierRegular Tier = iota
	// TierCritical holds pods with priority class system-cluster-critical
	// or system-node-critical (or a priority of at least 2000000000).
	TierCritical
	// TierDaemonSet holds pods of DaemonSets.
	TierDaemonSet
	// TierCriticalDaemonSet holds critical pods of DaemonSets.
	TierCriticalDaemonSet
)

// String implements fmt.Stringer.
func (t Tier) String() string {
	switch t {
	case TierRegular:
		return "regular"
	case TierCritical:
		return "critical"
	case TierDaemonSet:
		return "daemonset"
	case TierCriticalDaemonSet:
		return "critical-daemonset"
	default:
		return fmt.Sprintf("Tier(%d)", int(t))
	}
}

// Group is an order group. Groups drain one at a time, lowest first: by
// Order (OrderAnnotation, 0 when absent), then by Tier. A group starts only
// when every pod of the groups before it is gone and their volumes have
// detached. Only the drain deadline overrides this: force deletions happen
// at each pod's own time, whatever its group.
type Group struct {
	Order int  `json:"order"`
	Tier  Tier `json:"tier"`
}

// Less reports whether g drains before h.
func (g Group) Less(h Group) bool {
	if g.Order != h.Order {
		return g.Order < h.Order
	}
	return g.Tier < h.Tier
}

// String returns e.g. "order 0/regular".
func (g Group) String() string { return fmt.Sprintf("order %d/%s", g.Order, g.Tier) }

// Action is what the drain does, or waits for, with one pod.
type Action string

const (
	// ActionSkip leaves the pod on the node; it does not hold up the drain.
	ActionSkip Action = "Skip"
	// ActionRefuse means the pod makes the drain refuse to evict anything.
	ActionRefuse Action = "Refuse"
	// ActionEvict evicts the pod through the eviction API now. In a Result
	// it remains only for evictions that failed or were left to the next
	// pass (see Decision.Error and Reason).
	ActionEvict Action = "Evict"
	// ActionForceDelete deletes the pod without the eviction API now,
	// because the deadline minus its grace period has come (see
	// Plan.Deadline and Plan.ForceReason), or because budgets refused its
	// eviction State.MaxEvictRetries times (CauseEvictRetries).
	ActionForceDelete Action = "ForceDelete"
	// ActionBlocked means the pod cannot be evicted now; Cause and PDBs say
	// why, RetryAt when the next attempt comes.
	ActionBlocked Action = "Blocked"
	// ActionWaitGroup means the pod waits for an earlier order group.
	ActionWaitGroup Action = "WaitForGroup"
	// ActionWaitVolumeSlot means the pod has volumes and waits until fewer
	// than VolumeOptions.Parallelism such pods are in flight.
	ActionWaitVolumeSlot Action = "WaitForVolumeSlot"
	// ActionWaitCompletion means the pod runs under PolicyWaitCompleted and
	// the drain waits for it to finish.
	ActionWaitCompletion Action = "WaitForCompletion"
	// ActionWaitTermination means the pod is terminating; the drain waits
	// for it to be gone.
	ActionWaitTermination Action = "WaitForTermination"
	// ActionGone means the pod disappeared during this pass (an eviction
	// answered 404, or 409 for a UID that no longer matches).
	ActionGone Action = "Gone"
)

// Cause refines a Decision's Action for programs; Reason says the same for
// people.
type Cause string

// Causes of ActionSkip.
const (
	CauseMirrorPod        Cause = "MirrorPod"
	CauseTerminal         Cause = "Terminal"
	CauseDaemonSet        Cause = "DaemonSet"
	CauseAnnotation       Cause = "Annotation"
	CauseFilter           Cause = "Filter"
	CauseStuckTerminating Cause = "StuckTerminating"
)

// Causes of ActionRefuse (and CauseFilter).
const (
	CauseUnmanaged    Cause = "Unmanaged"
	CauseLocalStorage Cause = "LocalStorage"
)

// Causes of ActionBlocked.
const (
	// CauseDisruptionBudget: the pod's PodDisruptionBudget allows no
	// further disruption now.
	CauseDisruptionBudget Cause = "DisruptionBudget"
	// CauseMisconfiguredPDB: the budget allows no disruption although all
	// its pods are healthy; it will never allow one by itself.
	CauseMisconfiguredPDB Cause = "MisconfiguredPDB"
	// CauseMultiplePDBs: more than one budget selects the pod, which the
	// eviction API refuses to handle.
	CauseMultiplePDBs Cause = "MultiplePDBs"
	// CauseTooManyRequests: an eviction was answered 429 for a reason not
	// tied to a known budget; retried after a backoff.
	CauseTooManyRequests Cause = "TooManyRequests"
	// CauseNamespaceTerminating: the namespace is being deleted; its
	// controller will delete the pod.
	CauseNamespaceTerminating Cause = "NamespaceTerminating"
	// CauseRefusedPods: the drain is held because other pods are refused.
	CauseRefusedPods Cause = "RefusedPods"
)

// Causes of ActionForceDelete.
const (
	// CauseDeadline: the drain deadline (minus the pod's grace period)
	// has come.
	CauseDeadline Cause = "Deadline"
	// CauseNodeNotReady: the node has been NotReady for
	// UnreachableOptions.ForceAfter (minus the pod's grace period).
	CauseNodeNotReady Cause = "NodeNotReady"
	// CauseEvictRetries: PodDisruptionBudgets refused the pod's eviction
	// State.MaxEvictRetries times; the next attempt is a deletion.
	CauseEvictRetries Cause = "EvictRetries"
)

// PDBStatus summarizes a PodDisruptionBudget that affects a pod.
type PDBStatus struct {
	// Name is "namespace/name".
	Name string `json:"name"`
	// DesiredHealthy pods the budget needs, CurrentHealthy it has,
	// ExpectedPods it selects, DisruptionsAllowed right now, all from the
	// budget's status.
	DesiredHealthy     int32 `json:"desiredHealthy"`
	CurrentHealthy     int32 `json:"currentHealthy"`
	ExpectedPods       int32 `json:"expectedPods"`
	DisruptionsAllowed int32 `json:"disruptionsAllowed"`
	// Misconfigured is set when the budget allows no disruption although
	// all its pods are healthy, e.g. minAvailable equal to the replicas or
	// maxUnavailable 0.
	Misconfigured bool `json:"misconfigured,omitempty"`
}

// String returns e.g. "default/web (needs 3 healthy, has 3)".
func (s PDBStatus) String() string {
	out := fmt.Sprintf("%s (needs %d healthy, has %d", s.Name, s.DesiredHealthy, s.CurrentHealthy)
	if s.Misconfigured {
		out += "; misconfigured: allows no disruption while all its pods are healthy"
	}
	return out + ")"
}

// Decision is what the drain does with one pod, and why.
type Decision struct {
	Pod    PodRef `json:"pod"`
	Action Action `json:"action"`
	// Cause refines Action (see the Cause constants); empty for evictions
	// and the plain waits.
	Cause Cause `json:"cause,omitempty"`
	// Reason explains the decision in a few words.
	Reason string `json:"reason"`
	// Warning notes something odd about the pod that did not change the
	// decision, e.g. an unparsable annotation.
	Warning string `json:"warning,omitempty"`
	// Group is the pod's order group; meaningless for skipped pods.
	Group Group `json:"group"`
	// Healthy is the pod's Ready condition, as PodDisruptionBudgets count it.
	Healthy bool `json:"healthy"`
	// PDBs are the budgets that select the pod.
	PDBs []PDBStatus `json:"pdbs,omitempty"`
	// RetryAt is when a blocked eviction is tried again (zero: next pass).
	RetryAt time.Time `json:"retryAt,omitzero"`
	// ForceAt is when the pod will be force-deleted: the deadline minus its
	// grace period. Zero without a deadline.
	ForceAt time.Time `json:"forceAt,omitzero"`
	// GracePeriod of the eviction or deletion; zero means the pod's own.
	GracePeriod time.Duration `json:"gracePeriod,omitempty"`
	// Volumes are the persistent volumes the drain waits to detach after
	// the pod is gone.
	Volumes []string `json:"volumes,omitempty"`
	// Error is the error of a failed eviction or deletion in this pass.
	Error string `json:"error,omitempty"`
}
