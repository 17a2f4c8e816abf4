package drain

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
// the pod's grace period, are the only exception.
func Decide(s Snapshot, opts Options) Plan {
	opts = opts.withDefaults()
	now := s.Now
	node := s.Node
	if node == nil {
		node = &corev1.Node{}
	}

	st := State{
		Start:     s.State.Start,
		Deadline:  s.State.Deadline,
		Completed: s.State.Completed,
	}
	if st.Start.IsZero() {
		st.Start = now
	}
	if st.Deadline.IsZero() && opts.Timeout > 0 {
		st.Deadline = st.Start.Add(opts.Timeout)
	}

	p := Plan{
		Node:          node.Name,
		Now:           now,
		Deadline:      st.Deadline,
		NotReadySince: notReadySince(node),
		Decisions:     []Decision{},
	}
	p.Unreachable = opts.Unreachable.After >= 0 && !p.NotReadySince.IsZero() &&
		now.Sub(p.NotReadySince) >= opts.Unreachable.After
	volumesOn := !opts.Volumes.Skip && !p.Unreachable

	att := newAttachments(s.VolumeAttachments, node, s.VolumeIDs)
	budgets := compileBudgets(s.PDBs)

	// Classify every pod on the node.
	infos := make([]*podInfo, 0, len(s.Pods))
	for _, pod := range s.Pods {
		if pod == nil || pod.Spec.NodeName == "" || pod.Spec.NodeName != node.Name {
			continue
		}
		infos = append(infos, classifyPod(pod, opts, now, p.Unreachable, att, s.Claims, budgets))
	}
	slices.SortFunc(infos, func(a, b *podInfo) int {
		return cmp.Or(cmp.Compare(a.pod.Namespace, b.pod.Namespace), cmp.Compare(a.pod.Name, b.pod.Name))
	})

	present := make(map[types.UID]*podInfo, len(infos))
	inUse := map[string]int{} // PV name → number of present pods using it
	drainLeft, refused := false, false
	for _, in := range infos {
		present[in.pod.UID] = in
		if in.pod.Status.Phase != corev1.PodSucceeded && in.pod.Status.Phase != corev1.PodFailed {
			for _, pv := range in.allVolumes {
				inUse[pv]++
			}
		}
		if in.policy != PolicySkip {
			drainLeft = true
		}
		if in.policy == PolicyRefuse && in.pod.DeletionTimestamp == nil {
			refused = true
		}
	}

	// Track pods that are terminating but not tracked yet (evicted by
	// someone else, or by a pass whose state was lost).
	tracked := make([]Tracked, 0, len(s.State.Tracked))
	for _, t := range s.State.Tracked {
		t.Volumes = slices.Clone(t.Volumes)
		tracked = append(tracked, t)
	}
	isTracked := make(map[types.UID]bool, len(tracked))
	for _, t := range tracked {
		if !t.Pod.IsZero() {
			isTracked[t.Pod.UID] = true
		}
	}
	for _, in := range infos {
		if in.pod.DeletionTimestamp != nil && in.policy != PolicySkip && !isTracked[in.pod.UID] {
			tracked = append(tracked, Tracked{Pod: in.ref(), Group: in.group, Volumes: in.volumes})
			isTracked[in.pod.UID] = true
		}
	}

	// The final sweep: once no pod is left to drain, every attachment on
	// the node that no remaining pod uses and nothing tracks yet is waited
	// for like the volumes of a gone pod.
	if volumesOn && !drainLeft && (st.Deadline.IsZero() || now.Before(st.Deadline)) {
		known := map[string]bool{}
		for _, t := range tracked {
			for _, pv := range t.Volumes {
				known[pv] = true
			}
		}
		var orphans []string
		for pv := range att.onNode {
			if inUse[pv] == 0 && !known[pv] && att.tracked(pv) {
				orphans = append(orphans, pv)
			}
		}
		slices.Sort(orphans)
		for _, pv := range orphans {
			tracked = append(tracked, Tracked{Volumes: []string{pv}})
		}
	}

	// Follow tracked pods: gone? volumes detached? re-attached?
	pending := map[Group]bool{} // groups that still hold up later ones
	inFlight := 0               // pods with volumes being evicted or detaching
	keep := tracked[:0:0]
	for _, t := range tracked {
		ev := func(typ EventType, vols []string, msg string) {
			p.Events = append(p.Events, Event{Type: typ, Node: node.Name, Pod: t.Pod, Time: now, Volumes: vols, Message: msg})
		}
		if !t.Pod.IsZero() && present[t.Pod.UID] != nil {
			if volumesOn && len(t.Volumes) > 0 {
				inFlight++
			}
			keep = append(keep, t)
			continue
		}
		if t.GoneAt.IsZero() {
			t.GoneAt = now
			if !t.Pod.IsZero() {
				ev(EventPodGone, nil, "pod is gone from the node")
			}
		}
		if !volumesOn || len(t.Volumes) == 0 {
			continue
		}
		// Volumes still used by a pod on the node cannot detach yet; that
		// pod's own tracking waits for them.
		var mine []string
		for _, pv := range t.Volumes {
			if inUse[pv] == 0 {
				mine = append(mine, pv)
			}
		}
		if len(mine) == 0 {
			continue
		}
		if t.GaveUp {
			if len(att.attachedOf(mine)) > 0 {
				keep = append(keep, t) // remember, so the sweep does not wait again
			}
			continue
		}
		if t.DetachedAt.IsZero() {
			still := att.attachedOf(mine)
			until := capAt(t.GoneAt.Add(opts.Volumes.DetachTimeout), st.Deadline)
			switch {
			case len(still) == 0:
				t.DetachedAt = now
				ev(EventVolumesDetached, mine, "volumes detached from the node")
				if !opts.Volumes.WaitForReattach {
					continue
				}
			case !now.Before(until):
				msg := fmt.Sprintf("volumes still attached after %v", opts.Volumes.DetachTimeout)
				if until.Equal(st.Deadline) {
					msg = "volumes still attached at the drain deadline"
				}
				ev(EventDetachTimedOut, still, msg)
				t.GaveUp = true
				keep = append(keep, t)
				continue
			default:
				p.Volumes = append(p.Volumes, VolumeWait{Pod: t.Pod, Phase: VolumeDetach, Volumes: still, Since: t.GoneAt, Until: until})
				inFlight++
				if !t.Pod.IsZero() {
					pending[t.Group] = true
				}
				keep = append(keep, t)
				continue
			}
		}
		missing := att.notAttachedElsewhere(mine)
		until := capAt(t.DetachedAt.Add(opts.Volumes.ReattachTimeout), st.Deadline)
		switch {
		case len(missing) == 0:
			ev(EventVolumesReattached, mine, "volumes attached to another node")
		case !now.Before(until):
			ev(EventReattachTimedOut, missing, fmt.Sprintf("volumes not attached elsewhere after %v", opts.Volumes.ReattachTimeout))
		default:
			p.Volumes = append(p.Volumes, VolumeWait{Pod: t.Pod, Phase: VolumeReattach, Volumes: missing, Since: t.DetachedAt, Until: until})
			keep = append(keep, t)
		}
	}
	if len(keep) > 0 {
		st.Tracked = keep
	}

	// Which group is draining: the lowest with pods left or volumes
	// detaching.
	for _, in := range infos {
		if in.policy == PolicyDrain || in.policy == PolicyWaitCompleted {
			pending[in.group] = true
		}
	}
	for g := range pending {
		p.Groups = append(p.Groups, g)
	}
	slices.SortFunc(p.Groups, func(a, b Group) int {
		return cmp.Or(cmp.Compare(a.Order, b.Order), cmp.Compare(a.Tier, b.Tier))
	})

	backoffs := make(map[string]Backoff, len(s.State.Backoffs))
	for _, b := range s.State.Backoffs {
		backoffs[b.Key] = b
	}
	slots := opts.Volumes.Parallelism - inFlight
	for _, in := range infos {
		d := decidePod(in, &p, opts, now, refused, backoffs, volumesOn, &slots)
		p.Decisions = append(p.Decisions, d)
	}

	// Keep the backoffs that may still matter: for budgets and pods that
	// still exist.
	for _, key := range slices.Sorted(maps.Keys(backoffs)) {
		b := backoffs[key]
		if kind, rest, _ := strings.Cut(key, "/"); (kind == "pdb" && budgets.byName[rest] != nil) ||
			(kind == "pod" && present[types.UID(rest)] != nil) {
			st.Backoffs = append(st.Backoffs, b)
		}
	}

	p.State = st
	finish(&p, opts)
	return p
}

// decidePod makes the decision for one classified pod.
func decidePod(in *podInfo, p *Plan, opts Options, now time.Time, refused bool,
	backoffs map[string]Backoff, volumesOn bool, slots *int) Decision {
	pod := in.pod
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
	if volumesOn {
		d.Volumes = in.volumes
	}
	terminating := pod.DeletionTimestamp != nil
	if refused && !terminating && in.policy != PolicyRefuse {
		// Refusal holds everything, force deletions included: the caller
		// asked not to touch a node with such pods.
		d.Action, d.Cause, d.Reason = ActionBlocked, CauseRefusedPods, "drain held: other pods on the node are refused"
		return d
	}
	if !p.Deadline.IsZero() && in.policy != PolicyRefuse {
		d.ForceAt = p.Deadline.Add(-in.grace)
		// A terminating pod is deleted again only if it would outlive the
		// deadline (deletion timestamps have one-second precision).
		outlives := !terminating || pod.DeletionTimestamp.After(p.Deadline.Add(time.Second))
		if !now.Before(d.ForceAt) && outlives {
			d.Action, d.Cause = ActionForceDelete, CauseDeadline
			d.GracePeriod = forceGrace(in.grace, p.Deadline, now)
			d.Reason = fmt.Sprintf("deadline %s is near: delete with %v grace", p.Deadline.UTC().Format(time.RFC3339), d.GracePeriod)
			return d
		}
	}
	switch {
	case terminating:
		d.Action, d.Cause = ActionWaitTermination, ""
		d.Reason = "terminating"
		return d
	case in.policy == PolicyRefuse:
		d.Action = ActionRefuse
		return d
	case len(p.Groups) > 0 && p.Groups[0] != in.group:
		d.Action, d.Cause = ActionWaitGroup, ""
		d.Reason = "waits for " + p.Groups[0].String()
		return d
	case in.policy == PolicyWaitCompleted:
		d.Action = ActionWaitCompletion
		d.Reason = "waits for the pod to complete (" + in.reason + ")"
		return d
	}

	// An eviction candidate of the current group.
	d.Cause, d.Reason = "", ""
	block := func(c Cause, reason string, retry time.Time) Decision {
		d.Action, d.Cause, d.Reason, d.RetryAt = ActionBlocked, c, reason, retry
		return d
	}
	switch {
	case len(in.budgets) > 1:
		return block(CauseMultiplePDBs, "selected by several PodDisruptionBudgets ("+pdbNames(d.PDBs)+
			"); the eviction API refuses such pods", time.Time{})
	case len(in.budgets) == 1 && in.budgets[0].status.Misconfigured:
		return block(CauseMisconfiguredPDB, "PodDisruptionBudget "+in.budgets[0].status.String(), time.Time{})
	}
	key := backoffKey(d)
	if b, ok := backoffs[key]; ok && now.Before(b.Until) {
		c := b.Cause
		switch {
		case c != "":
		case strings.HasPrefix(key, "pdb/"):
			c = CauseDisruptionBudget
		default:
			c = CauseTooManyRequests
		}
		reason := "eviction refused (429); retry after backoff"
		switch {
		case c == CauseNamespaceTerminating:
			reason = "namespace is terminating"
		case len(in.budgets) == 1:
			reason = "blocked by PodDisruptionBudget " + in.budgets[0].status.String()
		}
		return block(c, reason, b.Until)
	}
	hasVolumes := volumesOn && len(in.volumes) > 0
	if hasVolumes && *slots <= 0 {
		d.Action = ActionWaitVolumeSlot
		d.Reason = fmt.Sprintf("waits until fewer than %d pods with volumes are in flight", opts.Volumes.Parallelism)
		return d
	}
	if len(in.budgets) == 1 && in.healthy {
		// Evict no more pods than the budget allows; when it allows none,
		// probe with one eviction so that the API server's answer (and
		// the backoff after a 429) decides, not a possibly stale status.
		b := in.budgets[0]
		switch {
		case b.left > 0:
			b.left--
		case b.status.DisruptionsAllowed <= 0 && !b.probed:
			b.probed = true
		default:
			return block(CauseDisruptionBudget, "blocked by PodDisruptionBudget "+b.status.String(), time.Time{})
		}
	}
	if hasVolumes {
		*slots--
	}
	d.Action = ActionEvict
	d.Reason = "evict"
	switch {
	case p.Unreachable:
		d.GracePeriod = opts.Unreachable.GracePeriod
		d.Reason = fmt.Sprintf("evict with %v grace: node is unreachable", d.GracePeriod)
	case opts.GracePeriod > 0:
		d.GracePeriod = opts.GracePeriod
	}
	return d
}

// capAt returns t, or the deadline if there is one and it comes earlier:
// after the deadline nothing is waited for.
func capAt(t, deadline time.Time) time.Time {
	if !deadline.IsZero() && deadline.Before(t) {
		return deadline
	}
	return t
}

// podInfo is what the planner derived about one pod.
type podInfo struct {
	pod     *corev1.Pod
	policy  Policy // PolicySkip, PolicyRefuse, PolicyDrain or PolicyWaitCompleted
	cause   Cause
	reason  string
	warning string
	group   Group
	healthy bool
	grace   time.Duration // termination grace period, at least 1s
	// volumes are the bound persistent volumes the drain waits for
	// (narrowed by VolumeIDs); allVolumes are all bound ones.
	volumes, allVolumes []string
	budgets             []*budget
}

func (in *podInfo) ref() PodRef {
	return PodRef{Namespace: in.pod.Namespace, Name: in.pod.Name, UID: in.pod.UID}
}

func classifyPod(pod *corev1.Pod, opts Options, now time.Time, unreachable bool,
	att *attachments, claims map[string]string, budgets *budgetIndex) *podInfo {
	in := &podInfo{
		pod:     pod,
		healthy: podReady(pod),
		grace:   podGrace(pod),
		budgets: budgets.matching(pod),
	}
	in.policy, in.cause, in.reason, in.warning = podPolicy(pod, opts)
	if in.policy != PolicySkip && unreachable && pod.DeletionTimestamp != nil &&
		now.After(pod.DeletionTimestamp.Add(opts.Unreachable.SkipWaitAfter)) {
		in.policy, in.cause = PolicySkip, CauseStuckTerminating
		in.reason = "terminating on an unreachable node since " + pod.DeletionTimestamp.UTC().Format(time.RFC3339) +
			"; treated as gone"
	}

	order := 0
	if v, ok := pod.Annotations[OrderAnnotation]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			in.warning = joinWarning(in.warning, fmt.Sprintf("ignoring %s=%q: not an integer", OrderAnnotation, v))
		} else {
			order = n
		}
	}
	tier := TierRegular
	critical, ds := isCritical(pod), isDaemonSetPod(pod)
	switch {
	case ds && critical:
		tier = TierCriticalDaemonSet
	case ds:
		tier = TierDaemonSet
	case critical:
		tier = TierCritical
	}
	in.group = Group{Order: order, Tier: tier}

	in.allVolumes = podVolumes(pod, claims)
	for _, pv := range in.allVolumes {
		if att.tracked(pv) {
			in.volumes = append(in.volumes, pv)
		}
	}
	return in
}

// podPolicy applies, in order: the rules nothing overrides (mirror and
// finished pods), PolicyAnnotation, the filters, and the built-in defaults.
func podPolicy(pod *corev1.Pod, opts Options) (Policy, Cause, string, string) {
	if _, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return PolicySkip, CauseMirrorPod, "mirror pod: the kubelet owns it", ""
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return PolicySkip, CauseTerminal, "pod has finished (" + string(pod.Status.Phase) + ")", ""
	}
	warning := ""
	if v, ok := pod.Annotations[PolicyAnnotation]; ok {
		switch Policy(strings.TrimSpace(v)) {
		case PolicySkip:
			return PolicySkip, CauseAnnotation, PolicyAnnotation + "=" + string(PolicySkip), ""
		case PolicyWaitCompleted:
			return PolicyWaitCompleted, CauseAnnotation, PolicyAnnotation + "=" + string(PolicyWaitCompleted), ""
		case PolicyDrain:
			return PolicyDrain, CauseAnnotation, PolicyAnnotation + "=" + string(PolicyDrain), ""
		default:
			warning = fmt.Sprintf("ignoring %s=%q: want skip, wait-completed or drain", PolicyAnnotation, v)
		}
	}
	for i, f := range opts.Filters {
		if f == nil {
			continue
		}
		pol, reason := f(pod)
		if reason == "" {
			reason = fmt.Sprintf("filter %d", i)
		}
		switch pol {
		case "":
			continue
		case PolicySkip, PolicyRefuse, PolicyWaitCompleted, PolicyDrain:
			return pol, CauseFilter, reason, warning
		default:
			warning = joinWarning(warning, fmt.Sprintf("filter %d returned unknown policy %q", i, pol))
		}
	}
	if isDaemonSetPod(pod) && !opts.DrainDaemonSets {
		return PolicySkip, CauseDaemonSet, "DaemonSet pod", warning
	}
	if opts.RefuseUnmanaged && metav1.GetControllerOf(pod) == nil {
		return PolicyRefuse, CauseUnmanaged, "no controller would recreate the pod", warning
	}
	if opts.RefuseLocalStorage && hasLocalStorage(pod) {
		return PolicyRefuse, CauseLocalStorage, "emptyDir data would be lost", warning
	}
	return PolicyDrain, "", "", warning
}

func joinWarning(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func isDaemonSetPod(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "DaemonSet"
}

// systemCriticalPriority is the lowest priority of the built-in
// system-cluster-critical class.
const systemCriticalPriority = 2000000000

func isCritical(pod *corev1.Pod) bool {
	switch pod.Spec.PriorityClassName {
	case "system-cluster-critical", "system-node-critical":
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}

func hasLocalStorage(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			return true
		}
	}
	return false
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podGrace is the pod's termination grace period (the API default of 30s
// when unset), never below one second: a zero grace period would let a
// replacement start before the old pod has stopped.
func podGrace(pod *corev1.Pod) time.Duration {
	secs := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		secs = *pod.Spec.TerminationGracePeriodSeconds
	}
	return max(time.Duration(secs)*time.Second, time.Second)
}

// forceGrace is the grace period of a force deletion at now: the pod's own,
// shortened so that the pod is gone by the deadline, at least one second.
func forceGrace(grace time.Duration, deadline, now time.Time) time.Duration {
	left := deadline.Sub(now).Truncate(time.Second)
	return max(min(grace, left), time.Second)
}

// notReadySince returns when the node stopped being Ready or became
// unreachable, or zero while it is Ready.
func notReadySince(node *corev1.Node) time.Time {
	var since time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (since.IsZero() || t.Before(since)) {
			since = t
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			earliest(c.LastTransitionTime.Time)
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeUnreachable && t.TimeAdded != nil {
			earliest(t.TimeAdded.Time)
		}
	}
	return since
}

// podVolumes returns the names of the persistent volumes bound to the
// pod's claims, sorted and without duplicates.
func podVolumes(pod *corev1.Pod, claims map[string]string) []string {
	var pvs []string
	for _, key := range claimNames(pod) {
		if pv := claims[key]; pv != "" {
			pvs = append(pvs, pv)
		}
	}
	slices.Sort(pvs)
	return slices.Compact(pvs)
}

// claimNames returns "namespace/claim" for every claim the pod uses.
func claimNames(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, pod.Namespace+"/"+v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, pod.Namespace+"/"+pod.Name+"-"+v.Name) // the name generic ephemeral volumes get
		}
	}
	return out
}

// attachments answers which volumes are attached where.
type attachments struct {
	onNode    map[string]bool     // PV name → a VolumeAttachment on this node exists
	elsewhere map[string]bool     // PV name → attached to another node
	ids       map[string][]string // nil: no narrowing
	nodeNames []string            // node.status.volumesAttached names
}

func newAttachments(vas []*storagev1.VolumeAttachment, node *corev1.Node, ids map[string][]string) *attachments {
	a := &attachments{onNode: map[string]bool{}, elsewhere: map[string]bool{}, ids: ids}
	for _, va := range vas {
		if va == nil || va.Spec.Source.PersistentVolumeName == nil {
			continue
		}
		pv := *va.Spec.Source.PersistentVolumeName
		if va.Spec.NodeName == node.Name {
			// Existence is what counts: the object is deleted once the
			// volume is detached, whatever status.attached says.
			a.onNode[pv] = true
		} else if va.Status.Attached && va.DeletionTimestamp == nil {
			a.elsewhere[pv] = true
		}
	}
	for _, v := range node.Status.VolumesAttached {
		a.nodeNames = append(a.nodeNames, string(v.Name))
	}
	return a
}

// tracked reports whether the drain waits for pv at all.
func (a *attachments) tracked(pv string) bool {
	return a.ids == nil || len(a.ids[pv]) > 0
}

// attachedOf returns the volumes of pvs still attached to the node.
func (a *attachments) attachedOf(pvs []string) []string {
	var out []string
	for _, pv := range pvs {
		if a.attached(pv) {
			out = append(out, pv)
		}
	}
	return out
}

func (a *attachments) attached(pv string) bool {
	if a.onNode[pv] {
		return true
	}
	for _, id := range a.ids[pv] {
		if id == "" {
			continue
		}
		for _, n := range a.nodeNames {
			if n == id || strings.HasSuffix(n, "^"+id) || strings.HasSuffix(n, "/"+id) {
				return true
			}
		}
	}
	return false
}

func (a *attachments) notAttachedElsewhere(pvs []string) []string {
	var out []string
	for _, pv := range pvs {
		if !a.elsewhere[pv] {
			out = append(out, pv)
		}
	}
	return out
}

// budget is a PodDisruptionBudget prepared for matching, with the
// disruptions this plan has handed out so far.
type budget struct {
	selector labels.Selector
	status   PDBStatus
	left     int32 // disruptions not yet handed out
	probed   bool  // a probe eviction was handed out while left was 0
}

type budgetIndex struct {
	byNamespace map[string][]*budget
	byName      map[string]*budget
}

func compileBudgets(pdbs []*policyv1.PodDisruptionBudget) *budgetIndex {
	idx := &budgetIndex{byNamespace: map[string][]*budget{}, byName: map[string]*budget{}}
	sorted := slices.Clone(pdbs)
	slices.SortFunc(sorted, func(a, b *policyv1.PodDisruptionBudget) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, pdb := range sorted {
		if pdb == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			sel = labels.Nothing() // the disruption controller cannot use it either
		}
		b := &budget{selector: sel, status: pdbStatus(pdb), left: max(pdb.Status.DisruptionsAllowed, 0)}
		idx.byNamespace[pdb.Namespace] = append(idx.byNamespace[pdb.Namespace], b)
		idx.byName[b.status.Name] = b
	}
	return idx
}

func (idx *budgetIndex) matching(pod *corev1.Pod) []*budget {
	var out []*budget
	set := labels.Set(pod.Labels)
	for _, b := range idx.byNamespace[pod.Namespace] {
		if b.selector.Matches(set) {
			out = append(out, b)
		}
	}
	return out
}

// misconfigured reports a budget that allows no disruption although every
// pod it expects is healthy and none is being disrupted: it will never allow
// one by itself (minAvailable equal to the replicas, maxUnavailable 0).
func misconfigured(pdb *policyv1.PodDisruptionBudget) bool {
	s := pdb.Status
	return s.ObservedGeneration >= pdb.Generation &&
		s.ExpectedPods > 0 &&
		s.CurrentHealthy >= s.ExpectedPods &&
		len(s.DisruptedPods) == 0 &&
		s.DisruptionsAllowed <= 0
}
