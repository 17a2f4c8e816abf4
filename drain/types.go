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

// VolumePhase says what a VolumeWait waits for.
type VolumePhase string

const (
	// VolumeDetach waits for the volumes to be detached from the node.
	VolumeDetach VolumePhase = "Detach"
	// VolumeReattach waits for them to be attached to another node.
	VolumeReattach VolumePhase = "Reattach"
	// VolumeForceDetach waits for the VolumeAttachments of an unreachable
	// node, which the drain deleted because it is forced, to be gone.
	VolumeForceDetach VolumePhase = "ForceDetach"
)

// VolumeWait is a pending wait for the volumes of a pod that is gone, or
// for the attachments of the node.
type VolumeWait struct {
	// Pod whose volumes these were; zero for attachments that the final
	// sweep found without a pod, and for the attachments of an unreachable
	// node.
	Pod   PodRef      `json:"pod,omitzero"`
	Phase VolumePhase `json:"phase"`
	// Volumes (persistent volume names) still waited for.
	Volumes []string `json:"volumes"`
	// Attachments are the names of the VolumeAttachments still waited
	// for, for the attachments of an unreachable node.
	Attachments []string `json:"attachments,omitempty"`
	// Since is when the wait began; Until when it is given up.
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
}

// Plan is what a pass decides for a node: one Decision per pod, the volume
// waits, and a summary. Plan returns it as a dry run; Pass returns it,
// updated with the outcome of its actions, inside a Result.
type Plan struct {
	Node string    `json:"node"`
	Now  time.Time `json:"now"`
	// Deadline of the drain: the earlier of State.Deadline and, unless
	// disabled, NotReadySince plus UnreachableOptions.ForceAfter; zero if
	// there is none. Pods are force-deleted at Deadline minus their grace
	// period.
	Deadline time.Time `json:"deadline,omitzero"`
	// NotReadySince is when the node stopped being Ready or became
	// unreachable; zero while it is Ready.
	NotReadySince time.Time `json:"notReadySince,omitzero"`
	// Unreachable is set when the fast path applies (see
	// UnreachableOptions).
	Unreachable bool `json:"unreachable,omitempty"`
	// Groups are the order groups with pods left to drain, in order; the
	// first is the one being drained.
	Groups []Group `json:"groups,omitempty"`
	// Decisions has one entry per pod on the node, sorted by namespace and
	// name.
	Decisions []Decision `json:"decisions"`
	// Volumes are the pending volume waits.
	Volumes []VolumeWait `json:"volumes,omitempty"`
	// DeleteAttachments are the VolumeAttachments of an unreachable node
	// whose drain is forced that this pass deletes, once no pod is left on
	// it (see VolumeOptions).
	DeleteAttachments []AttachmentRef `json:"deleteAttachments,omitempty"`
	// ForceReason says why the drain is forced, e.g. "drain deadline
	// 2026-01-02T15:04:05Z passed", "node not Ready for more than 5m0s"
	// or "eviction refused 5 times by PodDisruptionBudgets
	// (MaxEvictRetries)", several reasons joined by "; ". It is empty
	// unless the plan deletes pods without the eviction API
	// (ActionForceDelete) or deletes VolumeAttachments; a Result keeps it
	// for the deletions it made.
	ForceReason string `json:"forceReason,omitempty"`
	// Remaining counts the pods that keep the drain from being done, by
	// action. Skipped and gone pods are not counted.
	Remaining map[Action]int `json:"remaining,omitempty"`
	// Done is set when no pod and no volume wait is left.
	Done bool `json:"done"`
	// NextCheck is when the next pass should run; zero when Done.
	NextCheck time.Time `json:"nextCheck,omitzero"`
	// Message is a short summary for people, naming blocking pods and
	// budgets. It contains no times, so it only changes when the situation
	// does.
	Message string `json:"message"`
	// Events are the transitions noticed while planning (pods gone, volumes
	// detached); a Result adds the outcomes of its own requests.
	Events []Event `json:"events,omitempty"`
	// State is the state to hand to the next pass.
	State State `json:"state"`
}

// RemainingPods is the total of Remaining.
func (p *Plan) RemainingPods() int {
	n := 0
	for _, c := range p.Remaining {
		n += c
	}
	return n
}

// Result is the outcome of one Pass: the plan with every decision updated
// to what happened (an accepted eviction becomes ActionWaitTermination, a
// 429 becomes ActionBlocked with a RetryAt), the events of the pass, and
// the state to persist.
type Result struct {
	Plan
	// Evictions and ForceDeletions count the requests the pass issued that
	// the API server accepted.
	Evictions      int `json:"evictions"`
	ForceDeletions int `json:"forceDeletions"`
	// AttachmentDeletions counts the VolumeAttachments the pass deleted.
	AttachmentDeletions int `json:"attachmentDeletions,omitempty"`
}

// AttachmentRef identifies a VolumeAttachment; the UID tells it apart from
// a later one with the same name.
type AttachmentRef struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid,omitempty"`
	// Volume is the persistent volume attached, if the attachment names
	// one.
	Volume string `json:"volume,omitempty"`
}

// State is all a drain remembers between passes. Persist Result.State
// (it marshals to JSON) and hand it to the next Pass; the zero value
// starts a new drain. Losing it is safe: terminating pods are picked up
// again and the final sweep still waits for volumes, only timers and the
// counts of refused evictions restart.
type State struct {
	// Start is when the drain began; set by the first pass.
	Start time.Time `json:"start,omitzero"`
	// Deadline after which pods are force-deleted. The first pass sets it
	// from Options.Timeout unless the caller set it.
	Deadline time.Time `json:"deadline,omitzero"`
	// MaxEvictRetries bounds the evictions of one pod that
	// PodDisruptionBudgets may refuse: once they refused it that many
	// times (Refusals), the next attempt, when the backoff allows it,
	// deletes the pod without the eviction API, with the grace period
	// a deletion at the deadline would have. Zero means no bound: budgets
	// are respected until the deadline. The first pass sets it from
	// Options.MaxEvictRetries unless the caller set it; a caller with a
	// bound per node sets it before every pass, like Deadline. Pass
	// rejects a negative value.
	MaxEvictRetries int `json:"maxEvictRetries,omitempty"`
	// Completed is when a pass first found the drain done.
	Completed time.Time `json:"completed,omitzero"`
	// Tracked are pods that were evicted or seen terminating, until they
	// are gone and their volumes have detached.
	Tracked []Tracked `json:"tracked,omitempty"`
	// Backoffs hold the next attempt after 429 answers.
	Backoffs []Backoff `json:"backoffs,omitempty"`
	// Refusals count, per pod still on the node, the evictions that
	// PodDisruptionBudgets refused, for MaxEvictRetries. They are counted
	// whether or not a bound is set, so that one set later counts the
	// refusals before it.
	Refusals []PodRefusals `json:"refusals,omitempty"`
	// BlockedBy are the PodDisruptionBudgets ("namespace/name") that held
	// back evictions in the last pass; see BlockingBudgets.
	BlockedBy []string `json:"blockedBy,omitempty"`
	// ForcedDetach follows the deletion of an unreachable node's
	// VolumeAttachments.
	ForcedDetach ForcedDetach `json:"forcedDetach,omitzero"`
}

// ForcedDetach follows the deletion of the VolumeAttachments of an
// unreachable node whose drain is forced.
type ForcedDetach struct {
	// Since is when the drain first deleted attachments of the node; the
	// wait for them to be gone ends VolumeOptions.DetachTimeout later.
	Since time.Time `json:"since,omitzero"`
	// GaveUp is set once that time has passed with attachments left.
	GaveUp bool `json:"gaveUp,omitempty"`
}

// Tracked follows one pod from its eviction until its volumes are
// detached (and, if asked, attached elsewhere).
type Tracked struct {
	Pod     PodRef   `json:"pod,omitzero"`
	Group   Group    `json:"group"`
	Volumes []string `json:"volumes,omitempty"`
	// GoneAt is when the pod was first seen gone; DetachedAt when its
	// volumes were first seen detached.
	GoneAt     time.Time `json:"goneAt,omitzero"`
	DetachedAt time.Time `json:"detachedAt,omitzero"`
	// GaveUp is set once DetachTimeout has passed; the entry stays (and
	// holds up nothing) while the volumes remain attached, so that the
	// final sweep does not wait for them a second time.
	GaveUp bool `json:"gaveUp,omitempty"`
}

// PodRefusals counts the refused evictions of one pod. A refusal is a 429
// whose cause is a PodDisruptionBudget (the eviction API's
// DisruptionBudget cause); throttling, errors and the other reasons for
// which an eviction is not sent or not accepted do not count. Since one
// eviction per pass stands for all the pods a budget holds back (see the
// package documentation), its refusal counts for each of them: every pod
// the budget held back in that pass, at most once per pass.
type PodRefusals struct {
	Pod   PodRef `json:"pod"`
	Count int    `json:"count"`
}

// Backoff delays evictions after a 429. Key is "pdb/<namespace>/<name>"
// when the eviction was blocked by exactly one known budget, which then
// holds back all pods it selects, and "pod/<uid>" otherwise.
type Backoff struct {
	Key      string    `json:"key"`
	Attempts int       `json:"attempts"`
	Until    time.Time `json:"until"`
	// Cause is CauseDisruptionBudget, CauseTooManyRequests or
	// CauseNamespaceTerminating.
	Cause Cause `json:"cause,omitempty"`
}

// EventType names a pod event.
type EventType string

const (
	// EventEvictionStarted: the eviction was accepted; the pod terminates.
	EventEvictionStarted EventType = "EvictionStarted"
	// EventStateReset: the State passed in recorded what no drain could
	// have recorded by now (see Decide); the drain starts over from it.
	EventStateReset EventType = "StateReset"
	// EventEvictionBlocked: the eviction was refused with 429 (a budget),
	// or the namespace is terminating; it is retried later.
	EventEvictionBlocked EventType = "EvictionBlocked"
	// EventEvictionFailed: the eviction or deletion of a pod, or the
	// deletion of a VolumeAttachment, failed with an error (Event.Err).
	EventEvictionFailed EventType = "EvictionFailed"
	// EventForceDeleted: the pod was deleted without the eviction API
	// because of the deadline, or because the node has been NotReady for
	// UnreachableOptions.ForceAfter.
	EventForceDeleted EventType = "ForceDeleted"
	// EventEvictRetriesExhausted: the pod was deleted without the
	// eviction API because PodDisruptionBudgets had refused its eviction
	// State.MaxEvictRetries times. It takes the place of
	// EventForceDeleted for such deletions, so that a controller can tell
	// a budget overridden early from a drain that ran out of time.
	EventEvictRetriesExhausted EventType = "EvictRetriesExhausted"
	// EventPodGone: a pod the drain evicted or saw terminating is gone.
	EventPodGone EventType = "PodGone"
	// EventVolumesDetached: the volumes of a gone pod have detached.
	EventVolumesDetached EventType = "VolumesDetached"
	// EventDetachTimedOut: they did not detach within DetachTimeout.
	EventDetachTimedOut EventType = "DetachTimedOut"
	// EventVolumesReattached: they are attached to another node.
	EventVolumesReattached EventType = "VolumesReattached"
	// EventReattachTimedOut: they were not within ReattachTimeout.
	EventReattachTimedOut EventType = "ReattachTimedOut"
	// EventAttachmentDeleted: the drain deleted a VolumeAttachment of an
	// unreachable node whose drain is forced (Event.Volumes names the
	// volume, Event.Message the attachment).
	EventAttachmentDeleted EventType = "AttachmentDeleted"
)

// Event reports something that happened to one pod (or to volumes left
// without a pod, or to the node's VolumeAttachments) during a pass.
type Event struct {
	Type EventType `json:"type"`
	Node string    `json:"node"`
	// Pod is zero for volumes found by the final sweep and for the
	// node's VolumeAttachments.
	Pod     PodRef    `json:"pod,omitzero"`
	Time    time.Time `json:"time"`
	Volumes []string  `json:"volumes,omitempty"`
	// Message is a short human description; it includes the error text.
	Message string `json:"message"`
	// Err is the error of EventEvictionFailed.
	Err error `json:"-"`
}

// String returns a one-line description.
func (e Event) String() string {
	subject := e.Pod.String()
	if e.Pod.IsZero() {
		subject = "volumes"
	}
	return fmt.Sprintf("%s %s: %s", e.Type, subject, e.Message)
}
