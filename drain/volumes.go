package drain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

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
	// nodeVAs are the VolumeAttachments of this node, by name.
	nodeVAs []*storagev1.VolumeAttachment
}

func newAttachments(vas []*storagev1.VolumeAttachment, node *corev1.Node, ids map[string][]string) *attachments {
	a := &attachments{onNode: map[string]bool{}, elsewhere: map[string]bool{}, ids: ids}
	for _, va := range vas {
		if va != nil && va.Spec.NodeName == node.Name {
			a.nodeVAs = append(a.nodeVAs, va)
		}
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
	slices.SortFunc(a.nodeVAs, func(x, y *storagev1.VolumeAttachment) int { return cmp.Compare(x.Name, y.Name) })
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

// sweepOrphanVolumes is the final sweep: once no pod is left to drain,
// every attachment on the node that no remaining pod uses and nothing
// tracks yet is waited for like the volumes of a gone pod.
func (pl *planner) sweepOrphanVolumes() {
	if !pl.volumesOn || pl.drainLeft || (!pl.p.Deadline.IsZero() && !pl.now.Before(pl.p.Deadline)) {
		return
	}
	known := map[string]bool{}
	for _, t := range pl.tracked {
		for _, pv := range t.Volumes {
			known[pv] = true
		}
	}
	var orphans []string
	for pv := range pl.att.onNode {
		if pl.inUse[pv] == 0 && !known[pv] && pl.att.tracked(pv) {
			orphans = append(orphans, pv)
		}
	}
	slices.Sort(orphans)
	for _, pv := range orphans {
		pl.tracked = append(pl.tracked, trackedPod{Volumes: []string{pv}})
	}
}

// followTracked follows every tracked pod: is it gone, have its volumes
// detached, re-attached elsewhere? It keeps in the state what is still
// followed, adds the volume waits to the plan, marks the groups that
// volumes still hold up, and counts the pods with volumes in flight.
func (pl *planner) followTracked() {
	var keep []trackedPod
	for _, t := range pl.tracked {
		if pl.follow(&t) {
			keep = append(keep, t)
		}
	}
	if len(keep) > 0 {
		pl.st.tracked = keep
	}
}

// follow advances one tracked entry and reports whether to keep it.
func (pl *planner) follow(t *trackedPod) bool {
	now, opts := pl.now, pl.opts
	ev := func(typ EventType, vols []string, msg string) {
		pl.p.Events = append(pl.p.Events, Event{Type: typ, Node: pl.p.Node, Pod: t.Pod, Time: now, Volumes: vols, Message: msg})
	}
	if !t.Pod.IsZero() && pl.present[t.Pod.UID] != nil {
		if pl.volumesOn && len(t.Volumes) > 0 {
			pl.inFlight++
		}
		return true
	}
	if t.GoneAt.IsZero() {
		t.GoneAt = now
		if !t.Pod.IsZero() {
			ev(EventPodGone, nil, "pod is gone from the node")
		}
	}
	if !pl.volumesOn || len(t.Volumes) == 0 {
		return false
	}
	// Volumes still used by a pod on the node cannot detach yet; that
	// pod's own tracking waits for them.
	var mine []string
	for _, pv := range t.Volumes {
		if pl.inUse[pv] == 0 {
			mine = append(mine, pv)
		}
	}
	if len(mine) == 0 {
		return false
	}
	if t.GaveUp {
		// Remembered while attached, so the sweep does not wait again.
		return len(pl.att.attachedOf(mine)) > 0
	}
	deadline := pl.p.Deadline
	if t.DetachedAt.IsZero() {
		still := pl.att.attachedOf(mine)
		until := capAt(t.GoneAt.Add(opts.Volumes.DetachTimeout), deadline)
		switch {
		case len(still) == 0:
			t.DetachedAt = now
			ev(EventVolumesDetached, mine, "volumes detached from the node")
			if !opts.Volumes.WaitForReattach {
				return false
			}
		case !now.Before(until):
			msg := fmt.Sprintf("volumes still attached after %v", opts.Volumes.DetachTimeout)
			if until.Equal(deadline) {
				msg = "volumes still attached at the drain deadline"
			}
			ev(EventDetachTimedOut, still, msg)
			t.GaveUp = true
			return true
		default:
			pl.p.Volumes = append(pl.p.Volumes, VolumeWait{Pod: t.Pod, Phase: VolumeDetach, Volumes: still, Since: t.GoneAt, Until: until})
			pl.inFlight++
			if !t.Pod.IsZero() {
				pl.pending[t.Group] = true
			}
			return true
		}
	}
	missing := pl.att.notAttachedElsewhere(mine)
	until := capAt(t.DetachedAt.Add(opts.Volumes.ReattachTimeout), deadline)
	switch {
	case len(missing) == 0:
		ev(EventVolumesReattached, mine, "volumes attached to another node")
		return false
	case !now.Before(until):
		ev(EventReattachTimedOut, missing, fmt.Sprintf("volumes not attached elsewhere after %v", opts.Volumes.ReattachTimeout))
		return false
	default:
		pl.p.Volumes = append(pl.p.Volumes, VolumeWait{Pod: t.Pod, Phase: VolumeReattach, Volumes: missing, Since: t.DetachedAt, Until: until})
		return true
	}
}

// forceDetach handles the VolumeAttachments of a node whose kubelet is
// gone, once no pod is left to drain on it: they cannot detach cleanly, and
// the attach/detach controller would wait minutes before detaching them by
// force. Until the drain is forced they are waited for; from then on they
// are deleted and waited for until gone, at most DetachTimeout after the
// first deletion. On a Ready node, with VolumeOptions.Skip or
// KeepAttachments, or without any force moment ahead, nothing happens.
func (pl *planner) forceDetach() {
	opts, now := pl.opts, pl.now
	if opts.Volumes.Skip || opts.Volumes.KeepAttachments || pl.drainLeft || len(pl.att.nodeVAs) == 0 {
		return
	}
	forced := pl.force.forced(now)
	if !pl.p.Unreachable && !(forced && pl.force.byNode) {
		return // a kubelet may still have the volumes mounted
	}
	var pvs, names []string
	for _, va := range pl.att.nodeVAs {
		names = append(names, va.Name)
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil {
			pvs = append(pvs, *pv)
		}
	}
	slices.Sort(pvs)
	pvs = slices.Compact(pvs)
	if !forced {
		if !pl.p.Deadline.IsZero() {
			pl.p.Volumes = append(pl.p.Volumes, VolumeWait{Phase: VolumeDetach, Volumes: pvs, Attachments: names,
				Since: pl.p.NotReadySince, Until: pl.p.Deadline})
		}
		return
	}
	fd := pl.st.forcedDetach
	if fd.GaveUp {
		return
	}
	if fd.Since.IsZero() {
		fd.Since = now
	}
	until := fd.Since.Add(opts.Volumes.DetachTimeout)
	if !now.Before(until) {
		fd.GaveUp = true
		pl.st.forcedDetach = fd
		pl.p.Events = append(pl.p.Events, Event{Type: EventDetachTimedOut, Node: pl.p.Node, Time: now, Volumes: pvs,
			Message: fmt.Sprintf("volume attachments %s still present %v after their deletion", strings.Join(names, ", "), opts.Volumes.DetachTimeout)})
		return
	}
	pl.st.forcedDetach = fd
	for _, va := range pl.att.nodeVAs {
		if va.DeletionTimestamp == nil {
			ref := AttachmentRef{Name: va.Name, UID: va.UID}
			if pv := va.Spec.Source.PersistentVolumeName; pv != nil {
				ref.Volume = *pv
			}
			pl.p.DeleteAttachments = append(pl.p.DeleteAttachments, ref)
		}
	}
	pl.p.Volumes = append(pl.p.Volumes, VolumeWait{Phase: VolumeForceDetach, Volumes: pvs, Attachments: names, Since: fd.Since, Until: until})
}
