package drain

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

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
