package drain

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Snapshot is everything the planner looks at: the observed objects, the
// time and the state of earlier passes. Pass builds it from listers or the
// API server; tests and custom tooling may build it themselves. The planner
// only reads the objects.
//
// The health inputs are explicit fields of these objects: a pod is healthy
// when its Ready condition is True (as PodDisruptionBudgets count it); a
// node is NotReady since the lastTransitionTime of a Ready condition that is
// not True, or since the timeAdded of a node.kubernetes.io/unreachable
// taint, whichever is earlier.
type Snapshot struct {
	// Node being drained. Required.
	Node *corev1.Node
	// Pods bound to the node; pods with another spec.nodeName are ignored.
	Pods []*corev1.Pod
	// PDBs of the pods' namespaces (others are ignored).
	PDBs []*policyv1.PodDisruptionBudget
	// VolumeAttachments of this node and, for re-attach waits, of others.
	VolumeAttachments []*storagev1.VolumeAttachment
	// Claims maps "namespace/claim" to the name of the bound persistent
	// volume, for the claims of the pods.
	Claims map[string]string
	// VolumeIDs maps persistent volume names to the cloud's volume IDs
	// (see VolumeIDGetter). Nil means no narrowing: every bound volume is
	// waited for, and only through VolumeAttachments.
	VolumeIDs map[string][]string
	// Now is the time of the observation.
	Now time.Time
	// State of the previous pass; zero for a new drain.
	State State
}

// Decide is the planner: a pure function from a snapshot to a plan. It does
// no I/O, reads no clock and changes none of its inputs; the same snapshot
// always gives the same plan. Options are used for their policy fields;
// zero values take their defaults.
//
// Every pod on the node gets exactly one Decision. Pods are evicted only in
// the first order group that still has pods (or volumes detaching), so
// groups never overlap; force deletions, which happen at deadline minus
// the pod's grace period, are the only exception. The deadline is the
// earlier of State.Deadline and the moment the node has been NotReady for
// UnreachableOptions.ForceAfter. Besides the deadline, a pod is deleted
// without the eviction API only once budgets have refused its eviction
// State.MaxEvictRetries times, in its own group and when its next attempt
// is due.
//
// State is not trusted: callers keep it where others may write it. One
// that records what no drain could have recorded by Now (a moment
// outside the drain, more refusals than the backoff allows, a give-up
// before its timeout) is dropped, the drain starts over, and the plan
// says so with an EventStateReset; the caller's Deadline and
// MaxEvictRetries are kept, and are the caller's to derive from facts
// of its own.
func Decide(s Snapshot, opts Options) Plan {
	pl := newPlanner(s, opts.withDefaults()) // times, deadline, node health
	pl.classifyPods()                        // policy, group, volumes, budgets of each pod
	pl.trackTerminating()                    // pods terminating that no pass evicted
	pl.sweepOrphanVolumes()                  // attachments left without a pod
	pl.followTracked()                       // pods gone? volumes detached?
	pl.forceDetach()                         // an unreachable node's attachments
	pl.orderGroups()                         // which group drains now
	pl.decidePods()                          // one decision per pod
	pl.keepBackoffs()                        // backoffs that still matter
	pl.keepRefusals()                        // refusal counts of the pods still there
	pl.explainForce()                        // why pods or attachments are deleted
	pl.p.State = pl.st
	finish(&pl.p, pl.opts)
	return pl.p
}

// planner holds one run of Decide: its inputs and what the steps derived
// so far.
type planner struct {
	s    Snapshot
	opts Options
	now  time.Time
	node *corev1.Node

	p  Plan  // the plan being built
	st State // the state being built

	force     forcing // when the drain is forced, and why
	volumesOn bool    // volume waits apply
	att       *attachments
	budgets   *budgetIndex

	infos     []*podInfo              // the pods on the node, sorted
	present   map[types.UID]*podInfo  // by UID
	inUse     map[string]int          // PV name → present pods using it
	drainLeft bool                    // some pod is not skipped
	refused   bool                    // some pod is refused
	tracked   []trackedPod            // followed pods and volumes
	pending   map[Group]bool          // groups that still hold up later ones
	inFlight  int                     // pods with volumes being evicted or detaching
	backoffs  map[string]backoffEntry // by key
	refusals  map[types.UID]int       // refused evictions by pod
}

// newPlanner starts the plan and the state: when the drain started, its
// deadline, and whether the node is on the unreachable fast path.
func newPlanner(s Snapshot, opts Options) *planner {
	pl := &planner{s: s, opts: opts, now: s.Now, node: s.Node}
	var distrusted string
	pl.s.State, distrusted = distrust(s.State, s.Now, opts)
	s = pl.s
	if pl.node == nil {
		pl.node = &corev1.Node{}
	}
	pl.st = State{
		start:           s.State.start,
		deadline:        drainDeadline(s.State, opts, pl.now),
		maxEvictRetries: cmp.Or(s.State.maxEvictRetries, opts.MaxEvictRetries),
		completed:       s.State.completed,
		forcedDetach:    s.State.forcedDetach,
	}
	if pl.st.start.IsZero() {
		pl.st.start = pl.now
	}
	pl.p = Plan{
		Node:          pl.node.Name,
		Now:           pl.now,
		NotReadySince: notReadySince(pl.node),
		Decisions:     []Decision{},
	}
	if distrusted != "" {
		pl.p.Events = append(pl.p.Events, Event{Type: EventStateReset, Node: pl.node.Name, Time: pl.now,
			Message: "drain restarted: " + distrusted})
	}
	pl.force = forcingOf(pl.st.deadline, pl.p.NotReadySince, opts.Unreachable)
	pl.p.Deadline = pl.force.deadline
	pl.p.Unreachable = unreachable(pl.p.NotReadySince, pl.now, opts.Unreachable)
	pl.volumesOn = !opts.Volumes.Skip && !pl.p.Unreachable
	pl.att = newAttachments(s.VolumeAttachments, pl.node, s.VolumeIDs)
	pl.budgets = compileBudgets(s.PDBs)
	pl.pending = map[Group]bool{}
	pl.backoffs = make(map[string]backoffEntry, len(s.State.backoffs))
	for _, b := range s.State.backoffs {
		pl.backoffs[b.Key] = b
	}
	pl.refusals = make(map[types.UID]int, len(s.State.refusals))
	for _, r := range s.State.refusals {
		if r.Pod.UID != "" {
			pl.refusals[r.Pod.UID] += r.Count
		}
	}
	return pl
}

// classifyPods classifies every pod bound to the node and notes which
// volumes are in use and whether anything is left to drain or refused.
func (pl *planner) classifyPods() {
	pl.infos = make([]*podInfo, 0, len(pl.s.Pods))
	for _, pod := range pl.s.Pods {
		if pod == nil || pod.Spec.NodeName == "" || pod.Spec.NodeName != pl.node.Name {
			continue
		}
		pl.infos = append(pl.infos, classifyPod(pod, pl.opts, pl.now, pl.p.Unreachable, pl.att, pl.s.Claims, pl.budgets))
	}
	slices.SortFunc(pl.infos, func(a, b *podInfo) int {
		return cmp.Or(cmp.Compare(a.pod.Namespace, b.pod.Namespace), cmp.Compare(a.pod.Name, b.pod.Name))
	})
	pl.present = make(map[types.UID]*podInfo, len(pl.infos))
	pl.inUse = map[string]int{}
	for _, in := range pl.infos {
		pl.present[in.pod.UID] = in
		if in.pod.Status.Phase != corev1.PodSucceeded && in.pod.Status.Phase != corev1.PodFailed {
			for _, pv := range in.allVolumes {
				pl.inUse[pv]++
			}
		}
		if in.policy != PolicySkip {
			pl.drainLeft = true
		}
		if in.policy == PolicyRefuse && in.pod.DeletionTimestamp == nil {
			pl.refused = true
		}
	}
}

// trackTerminating starts tracking pods that are terminating but not
// tracked yet (evicted by someone else, or by a pass whose state was lost).
func (pl *planner) trackTerminating() {
	pl.tracked = make([]trackedPod, 0, len(pl.s.State.tracked))
	isTracked := make(map[types.UID]bool, len(pl.s.State.tracked))
	for _, t := range pl.s.State.tracked {
		t.Volumes = slices.Clone(t.Volumes)
		pl.tracked = append(pl.tracked, t)
		if !t.Pod.IsZero() {
			isTracked[t.Pod.UID] = true
		}
	}
	for _, in := range pl.infos {
		if in.pod.DeletionTimestamp != nil && in.policy != PolicySkip && !isTracked[in.pod.UID] {
			pl.tracked = append(pl.tracked, trackedPod{Pod: in.ref(), Group: in.group, Volumes: in.volumes})
			isTracked[in.pod.UID] = true
		}
	}
}

// orderGroups lists the groups with pods left or volumes detaching; the
// first one is the one draining.
func (pl *planner) orderGroups() {
	for _, in := range pl.infos {
		if in.policy == PolicyDrain || in.policy == PolicyWaitCompleted {
			pl.pending[in.group] = true
		}
	}
	for g := range pl.pending {
		pl.p.Groups = append(pl.p.Groups, g)
	}
	slices.SortFunc(pl.p.Groups, func(a, b Group) int {
		return cmp.Or(cmp.Compare(a.Order, b.Order), cmp.Compare(a.Tier, b.Tier))
	})
}

// decidePods makes the decision for every pod, in order, handing out
// budget disruptions and volume slots as it goes.
func (pl *planner) decidePods() {
	slots := pl.opts.Volumes.Parallelism - pl.inFlight
	for _, in := range pl.infos {
		pl.p.Decisions = append(pl.p.Decisions, pl.decidePod(in, &slots))
	}
}

// keepBackoffs keeps the backoffs that may still matter: those of budgets
// and pods that still exist.
func (pl *planner) keepBackoffs() {
	for _, key := range slices.Sorted(maps.Keys(pl.backoffs)) {
		kind, rest, _ := strings.Cut(key, "/")
		if (kind == "pdb" && pl.budgets.byName[rest] != nil) || (kind == "pod" && pl.present[types.UID(rest)] != nil) {
			pl.st.backoffs = append(pl.st.backoffs, pl.backoffs[key])
		}
	}
}

// keepRefusals keeps the refusal counts of the pods still on the node, in
// the order of the decisions.
func (pl *planner) keepRefusals() {
	for _, in := range pl.infos {
		if n := pl.refusals[in.pod.UID]; n > 0 {
			pl.st.refusals = append(pl.st.refusals, podRefusals{Pod: in.ref(), Count: n})
		}
	}
}

// retriesExhausted reports whether budgets have refused the pod's
// eviction as often as State.MaxEvictRetries allows.
func (pl *planner) retriesExhausted(in *podInfo) bool {
	return pl.st.maxEvictRetries > 0 && pl.refusals[in.pod.UID] >= pl.st.maxEvictRetries
}

// explainForce sets Plan.ForceReason when the plan deletes pods without
// the eviction API or deletes VolumeAttachments: the deadline's reason,
// the bound on refused evictions, or both.
func (pl *planner) explainForce() {
	byDeadline, byRefusals := len(pl.p.DeleteAttachments) > 0, false
	for _, d := range pl.p.Decisions {
		switch {
		case d.Action != ActionForceDelete:
		case d.Cause == CauseEvictRetries:
			byRefusals = true
		default:
			byDeadline = true
		}
	}
	var reasons []string
	if byDeadline {
		reasons = append(reasons, pl.force.reason(pl.now))
	}
	if byRefusals {
		reasons = append(reasons, refusalsReason(pl.st.maxEvictRetries))
	}
	pl.p.ForceReason = strings.Join(reasons, "; ")
}

// refusalsReason is the ForceReason of deletions after max refusals.
func refusalsReason(n int) string {
	return fmt.Sprintf("eviction refused %s by PodDisruptionBudgets (MaxEvictRetries)", times(n))
}

// times returns "once" or "n times".
func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// decidePod makes the decision for one classified pod: first what holds it
// whatever the budgets say, then, for an eviction candidate of the current
// group, its budgets, backoffs and volume slot.
func (pl *planner) decidePod(in *podInfo, slots *int) Decision {
	d := Decision{
		Pod:     in.ref(),
		Cause:   in.cause,
		Reason:  in.reason,
		Warning: in.warning,
		Group:   in.group,
		Healthy: in.healthy,
	}
	if in.policy == PolicySkip {
		d.Action = ActionSkip
		d.Group = Group{}
		return d
	}
	for _, b := range in.budgets {
		d.PDBs = append(d.PDBs, b.status)
	}
	if pl.volumesOn {
		d.Volumes = in.volumes
	}
	if pl.holdPod(in, &d) {
		return d
	}
	pl.decideEviction(in, &d, slots)
	return d
}

// holdPod decides the pods that are no eviction candidates now: held by
// refused pods, due for force deletion, terminating, refused, waiting for
// an earlier group or for completion. It reports whether it decided.
func (pl *planner) holdPod(in *podInfo, d *Decision) bool {
	pod, now, deadline := in.pod, pl.now, pl.p.Deadline
	terminating := pod.DeletionTimestamp != nil
	if pl.refused && !terminating && in.policy != PolicyRefuse {
		// Refusal holds everything, force deletions included: the caller
		// asked not to touch a node with such pods.
		d.Action, d.Cause, d.Reason = ActionBlocked, CauseRefusedPods, "drain held: other pods on the node are refused"
		return true
	}
	if !deadline.IsZero() && in.policy != PolicyRefuse {
		d.ForceAt = deadline.Add(-in.grace)
		// A terminating pod is deleted again only if it would outlive the
		// deadline, and a deletion now would end it sooner (deletion
		// timestamps have one-second precision).
		g := forceGrace(in.grace, deadline, now)
		outlives := !terminating || pod.DeletionTimestamp.After(latest(deadline, now.Add(g)).Add(time.Second))
		if !now.Before(d.ForceAt) && outlives {
			d.Action, d.Cause = ActionForceDelete, pl.force.cause()
			d.GracePeriod = g
			d.Reason = fmt.Sprintf("deadline %s is near: delete with %v grace", deadline.UTC().Format(time.RFC3339), d.GracePeriod)
			if pl.force.byNode {
				d.Reason = fmt.Sprintf("node not Ready since %s: delete with %v grace",
					pl.p.NotReadySince.UTC().Format(time.RFC3339), d.GracePeriod)
			}
			return true
		}
	}
	switch {
	case terminating:
		d.Action, d.Cause = ActionWaitTermination, ""
		d.Reason = "terminating"
	case in.policy == PolicyRefuse:
		d.Action = ActionRefuse
	case len(pl.p.Groups) > 0 && pl.p.Groups[0] != in.group:
		d.Action, d.Cause = ActionWaitGroup, ""
		d.Reason = "waits for " + pl.p.Groups[0].String()
	case in.policy == PolicyWaitCompleted:
		d.Action = ActionWaitCompletion
		d.Reason = "waits for the pod to complete (" + in.reason + ")"
	default:
		return false
	}
	return true
}

// decideEviction decides an eviction candidate of the current group: it
// is blocked by a budget problem, a backoff or its budget's disruptions,
// waits for a volume slot, is evicted, or, once budgets have refused it
// State.MaxEvictRetries times, deleted.
func (pl *planner) decideEviction(in *podInfo, d *Decision, slots *int) {
	d.Cause, d.Reason = "", ""
	block := func(c Cause, reason string, retry time.Time) {
		d.Action, d.Cause, d.Reason, d.RetryAt = ActionBlocked, c, reason, retry
	}
	// A pod out of retries no longer asks its budgets, so their problems
	// no longer hold it; their backoff still paces the next attempt.
	exhausted := pl.retriesExhausted(in)
	if c, reason, ok := budgetProblem(in, d.PDBs); ok && !exhausted {
		block(c, reason, time.Time{})
		return
	}
	key := backoffKey(*d)
	if b, ok := activeBackoff(pl.backoffs, key, pl.now, in); ok {
		c, reason := backoffHold(in, key, b)
		if exhausted {
			reason += fmt.Sprintf("; refused %s, it is deleted at the next attempt", times(pl.refusals[in.pod.UID]))
		}
		block(c, reason, b.Until)
		return
	}
	hasVolumes := pl.volumesOn && len(in.volumes) > 0
	if hasVolumes && *slots <= 0 {
		d.Action = ActionWaitVolumeSlot
		d.Reason = fmt.Sprintf("waits until fewer than %d pods with volumes are in flight", pl.opts.Volumes.Parallelism)
		return
	}
	if exhausted {
		if hasVolumes {
			*slots--
		}
		pl.deleteAfterRefusals(in, d)
		return
	}
	if len(in.budgets) == 1 && in.healthy && !in.budgets[0].admit() {
		block(CauseDisruptionBudget, "blocked by PodDisruptionBudget "+in.budgets[0].status.String(), time.Time{})
		return
	}
	if hasVolumes {
		*slots--
	}
	d.Action = ActionEvict
	d.Reason = "evict"
	switch {
	case pl.p.Unreachable:
		d.GracePeriod = pl.opts.Unreachable.GracePeriod
		d.Reason = fmt.Sprintf("evict with %v grace: node is unreachable", d.GracePeriod)
	case pl.opts.GracePeriod > 0:
		d.GracePeriod = pl.opts.GracePeriod
	}
}

// deleteAfterRefusals decides the deletion of a pod whose eviction budgets
// refused State.MaxEvictRetries times. It is the deletion the deadline
// would make: the pod's own grace period, shortened so that the pod is
// gone by the deadline if there is one. A disruption its budget still
// allows is taken, so that this plan does not hand it out to another pod
// as well.
func (pl *planner) deleteAfterRefusals(in *podInfo, d *Decision) {
	if len(in.budgets) == 1 && in.healthy {
		in.budgets[0].take()
	}
	d.Action, d.Cause = ActionForceDelete, CauseEvictRetries
	d.GracePeriod = forceGrace(in.grace, pl.p.Deadline, pl.now)
	d.Reason = fmt.Sprintf("eviction refused %s by PodDisruptionBudgets (MaxEvictRetries %d): delete with %v grace",
		times(pl.refusals[in.pod.UID]), pl.st.maxEvictRetries, d.GracePeriod)
}
