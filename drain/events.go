package drain

import (
	"fmt"
	"time"
)

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
