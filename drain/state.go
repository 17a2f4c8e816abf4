package drain

import (
	"encoding/json"
	"slices"
	"time"
)

// State is all a drain remembers between passes. It is opaque: hand the
// State of one Result to the next Pass, and persist it between processes
// with MarshalJSON and UnmarshalJSON (encoding/json calls them); the zero
// value starts a new drain. A caller sets only what it decides itself,
// the deadline and the bound on refused evictions, before every pass.
// Losing the state is safe: terminating pods are picked up again and the
// final sweep still waits for volumes, only timers and the counts of
// refused evictions restart.
type State struct {
	// start is when the drain began; set by the first pass.
	start time.Time
	// deadline after which pods are force-deleted. The first pass sets it
	// from Options.Timeout unless the caller set it.
	deadline time.Time
	// maxEvictRetries: see SetMaxEvictRetries.
	maxEvictRetries int
	// completed is when a pass first found the drain done.
	completed time.Time
	// tracked are pods that were evicted or seen terminating, until they
	// are gone and their volumes have detached.
	tracked []trackedPod
	// backoffs hold the next attempt after 429 answers.
	backoffs []backoffEntry
	// refusals count, per pod still on the node, the evictions that
	// PodDisruptionBudgets refused, for maxEvictRetries. They are counted
	// whether or not a bound is set, so that one set later counts the
	// refusals before it.
	refusals []podRefusals
	// blockedBy are the PodDisruptionBudgets ("namespace/name") that held
	// back evictions in the last pass; see BlockingBudgets.
	blockedBy []string
	// forcedDetach follows the deletion of an unreachable node's
	// VolumeAttachments.
	forcedDetach forcedDetach
}

// Start is when the drain began: the time of its first pass; zero before
// it.
func (s State) Start() time.Time { return s.start }

// Deadline is when the remaining pods are force-deleted (each at the
// deadline minus its grace period); zero for none. The first pass sets it
// from Options.Timeout unless the caller set one with SetDeadline.
func (s State) Deadline() time.Time { return s.deadline }

// SetDeadline sets the drain deadline, overriding Options.Timeout. A
// caller that keeps the state where others may write it sets it from
// facts of its own before every pass.
func (s *State) SetDeadline(t time.Time) { s.deadline = t }

// MaxEvictRetries is the bound on the evictions of one pod that
// PodDisruptionBudgets may refuse; see SetMaxEvictRetries.
func (s State) MaxEvictRetries() int { return s.maxEvictRetries }

// SetMaxEvictRetries bounds the evictions of one pod that
// PodDisruptionBudgets may refuse: once they refused it n times, the next
// attempt, when the backoff allows it, deletes the pod without the
// eviction API, with the grace period a deletion at the deadline would
// have. Zero means no bound: budgets are respected until the deadline.
// The first pass sets it from Options.MaxEvictRetries unless the caller
// set it; a caller with a bound per node sets it before every pass, like
// the deadline. Pass rejects a negative value.
func (s *State) SetMaxEvictRetries(n int) { s.maxEvictRetries = n }

// BlockingBudgets returns the PodDisruptionBudgets ("namespace/name") the
// drain waits on, sorted: those that held back an eviction in the last
// pass, whether in backoff after a 429 or out of disruptions. A controller
// that indexes its draining nodes by them can run the next pass as soon as
// one of them is updated, instead of at NextCheck; Drain watches them.
func (s State) BlockingBudgets() []string {
	return slices.Clone(s.blockedBy)
}

// storedState is the JSON form of State. Callers persist it (the machine
// controller in an annotation of the machine) and a drain stored by an
// earlier version continues with the next, so the names, order and tags
// of these fields never change; a new field is added with omitempty or
// omitzero.
type storedState struct {
	Start           time.Time      `json:"start,omitzero"`
	Deadline        time.Time      `json:"deadline,omitzero"`
	MaxEvictRetries int            `json:"maxEvictRetries,omitempty"`
	Completed       time.Time      `json:"completed,omitzero"`
	Tracked         []trackedPod   `json:"tracked,omitempty"`
	Backoffs        []backoffEntry `json:"backoffs,omitempty"`
	Refusals        []podRefusals  `json:"refusals,omitempty"`
	BlockedBy       []string       `json:"blockedBy,omitempty"`
	ForcedDetach    forcedDetach   `json:"forcedDetach,omitzero"`
}

// MarshalJSON encodes the state for storage. The encoding is stable
// across versions (see UnmarshalJSON).
func (s State) MarshalJSON() ([]byte, error) {
	return json.Marshal(storedState{
		Start: s.start, Deadline: s.deadline, MaxEvictRetries: s.maxEvictRetries, Completed: s.completed,
		Tracked: s.tracked, Backoffs: s.backoffs, Refusals: s.refusals, BlockedBy: s.blockedBy,
		ForcedDetach: s.forcedDetach,
	})
}

// UnmarshalJSON replaces the state with one stored by MarshalJSON, of
// this version or an earlier one; null leaves it alone. A decoded state
// is not trusted: the next pass checks it against what a drain could have
// recorded by then and starts over from a state that fails (see Decide).
func (s *State) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	var st storedState
	if err := json.Unmarshal(data, &st); err != nil {
		return err
	}
	*s = State{
		start: st.Start, deadline: st.Deadline, maxEvictRetries: st.MaxEvictRetries, completed: st.Completed,
		tracked: st.Tracked, backoffs: st.Backoffs, refusals: st.Refusals, blockedBy: st.BlockedBy,
		forcedDetach: st.ForcedDetach,
	}
	return nil
}

// forcedDetach follows the deletion of the VolumeAttachments of an
// unreachable node whose drain is forced.
type forcedDetach struct {
	// Since is when the drain first deleted attachments of the node; the
	// wait for them to be gone ends VolumeOptions.DetachTimeout later.
	Since time.Time `json:"since,omitzero"`
	// GaveUp is set once that time has passed with attachments left.
	GaveUp bool `json:"gaveUp,omitempty"`
}

// trackedPod follows one pod from its eviction until its volumes are
// detached (and, if asked, attached elsewhere).
type trackedPod struct {
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

// podRefusals counts the refused evictions of one pod. A refusal is a 429
// whose cause is a PodDisruptionBudget (the eviction API's
// DisruptionBudget cause); throttling, errors and the other reasons for
// which an eviction is not sent or not accepted do not count. Since one
// eviction per pass stands for all the pods a budget holds back (see the
// package documentation), its refusal counts for each of them: every pod
// the budget held back in that pass, at most once per pass.
type podRefusals struct {
	Pod   PodRef `json:"pod"`
	Count int    `json:"count"`
}

// backoffEntry delays evictions after a 429. Key is
// "pdb/<namespace>/<name>" when the eviction was blocked by exactly one
// known budget, which then holds back all pods it selects, and
// "pod/<uid>" otherwise.
type backoffEntry struct {
	Key      string    `json:"key"`
	Attempts int       `json:"attempts"`
	Until    time.Time `json:"until"`
	// Cause is CauseDisruptionBudget, CauseTooManyRequests or
	// CauseNamespaceTerminating.
	Cause Cause `json:"cause,omitempty"`
}
