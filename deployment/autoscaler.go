package deployment

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// The cluster-autoscaler's MCM provider picks the machines it removes by
// writing node.machine.sapcloud.io/trigger-deletion-by-mcm on the
// MachineDeployment ("name~RFC3339time" entries joined by commas) before it
// lowers spec.replicas. The deployment controller turns every entry into
// marks on the machine (machinepriority "1" and marked-for-deletion-time),
// which is what the MachineSet controller reads when it picks victims; the
// MachineSet never reads the deployment's annotation itself.
//
// The MachineSet deletes a marked machine, even without a replica
// decrease, once its mark is not later than the scaler's last replica
// change (machine.sapcloud.io/last-deployment-replica-change-by-scaler-time,
// copied from the deployment to its new set). Autoscalers that write plain
// names write no such time; MCM then stamps one on the deployment and gives
// it to the plain names, so their machines go even when the decrease was
// absorbed (the replicas raised again before the set acted). This does the
// same, with one divergence: MCM stamps only a deployment that has no time
// yet, and its plain names of later scale-downs get that old time, so that
// a set still carrying it may delete their machines before the decrease
// reaches it and replace them. Here plain names always get the time of the
// sync that first sees them, and the deployment's time is set to it: the
// set then learns of the marks' time together with the lower replicas, in
// the deployment's next write to it.

// triggerSeparator separates a machine's name from the time it was named.
// Kubernetes object names cannot contain it, nor the comma between entries.
const triggerSeparator = "~"

// triggerEntry is one machine the autoscaler named.
type triggerEntry struct {
	Machine string
	At      time.Time // when it was named
}

// parseTriggerDeletion reads the annotation value. Plain names get now; an
// unparsable time also gets now (see below); empty entries and whitespace
// are ignored; a name listed twice keeps its earliest time.
//
// Plain names are what autoscalers older than the time stamps write; MCM
// gives them the time it first sees them, and so does this. An entry whose
// time cannot be read still names a machine the autoscaler chose, and
// dropping it would let the MachineSet remove some other machine when the
// replicas go down. Giving it now treats it as a plain name: the mark's
// priority "1" makes it the first victim of the replica decrease, and the
// scaler's time becomes now with it (planTriggerDeletion). The time written
// back is then a readable one, so the entry gets now only once.
//
// Entries without a name ("~time") are ignored like empty ones. Times are
// kept in UTC at second precision, the precision of the RFC 3339 text they
// are written back as, so that what is parsed equals what is formatted.
// Entries come back sorted by name; untimed tells whether one got now.
func parseTriggerDeletion(value string, now time.Time) (entries []triggerEntry, untimed bool) {
	now = triggerTime(now)
	earliest := map[string]time.Time{}
	for raw := range strings.SplitSeq(value, ",") {
		name, stamp, timed := strings.Cut(raw, triggerSeparator)
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		at, read := now, false
		if timed {
			if t, err := time.Parse(time.RFC3339, strings.TrimSpace(stamp)); err == nil {
				at, read = triggerTime(t), true
			}
		}
		untimed = untimed || !read
		if prev, seen := earliest[name]; !seen || at.Before(prev) {
			earliest[name] = at
		}
	}
	if len(earliest) == 0 {
		return nil, false
	}
	entries = make([]triggerEntry, 0, len(earliest))
	for name, at := range earliest {
		entries = append(entries, triggerEntry{Machine: name, At: at})
	}
	slices.SortFunc(entries, func(a, b triggerEntry) int { return strings.Compare(a.Machine, b.Machine) })
	return entries, untimed
}

// formatTriggerDeletion writes entries back, sorted by name, times in RFC3339
// UTC; "" for none. A name given twice is written once, with its earliest
// time, as parseTriggerDeletion would read it; the input is not modified.
func formatTriggerDeletion(entries []triggerEntry) string {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b triggerEntry) int {
		return cmp.Or(strings.Compare(a.Machine, b.Machine), a.At.Compare(b.At))
	})
	var b strings.Builder
	for i, e := range sorted {
		if e.Machine == "" || (i > 0 && sorted[i-1].Machine == e.Machine) {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e.Machine)
		b.WriteString(triggerSeparator)
		b.WriteString(e.At.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// triggerTime is t as the annotations hold it: UTC, whole seconds.
func triggerTime(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// machineMark is a machine to annotate with priority "1" and
// marked-for-deletion-time At.
type machineMark struct {
	Machine string
	At      time.Time
}

// triggerPlan is what the controller writes for the annotation.
type triggerPlan struct {
	// Annotation is the pruned, normalised annotation value ("" to remove
	// it); Changed tells whether it differs from the stored value (so nothing
	// is written when nothing changed).
	Annotation string
	Changed    bool
	// ScalerTime is the scaler's last replica change to record on the
	// deployment (RFC 3339), "" to leave it as it is.
	ScalerTime string
	// Mark are the machines whose annotations must be written: named, alive,
	// and not already carrying priority "1" with the same marked time
	// (RFC3339, second precision).
	Mark []machineMark
}

// planTriggerDeletion: d is the deployment, machines the machines of all its
// sets (by name). Entries naming machines that do not exist, are being
// deleted (beingDeleted: deletionTimestamp or phase Terminating) or are
// Failed are dropped from the annotation (MCM does: a Failed machine is
// replaced by its set anyway; one being deleted is gone). The others stay in
// the annotation (so a restart re-marks them if the mark got lost) and are
// marked unless already marked identically.
//
// A machine of another deployment counts as missing: machines holds only
// this deployment's, and the autoscaler names only machines of the
// deployment whose replicas it lowers. The annotation is removed (Changed with Annotation
// "") when nothing is left in it, an empty stored value included. Mark is
// sorted by machine name; At is the time the autoscaler named the machine,
// which the MachineSet compares with the scaler's last replica change, so it
// is never replaced by the time of the sync.
//
// ScalerTime is now when an entry got now (no readable time: the
// autoscaler lowered the replicas in this very write, without recording
// when), or when the deployment records no scaler time although the
// annotation is set (MCM stamps it then too); see the package comment
// above for why a stamp already there is replaced.
func planTriggerDeletion(d *v1alpha1.MachineDeployment, machines map[string]*v1alpha1.Machine, now time.Time) triggerPlan {
	if d == nil {
		return triggerPlan{}
	}
	stored, has := d.Annotations[v1alpha1.TriggerDeletionByMCMAnnotation]
	var kept []triggerEntry
	var plan triggerPlan
	entries, untimed := parseTriggerDeletion(stored, now)
	if stamp := triggerTime(now).Format(time.RFC3339); untimed ||
		(stored != "" && d.Annotations[v1alpha1.LastReplicaChangeByScalerAnnotation] == "") {
		if d.Annotations[v1alpha1.LastReplicaChangeByScalerAnnotation] != stamp {
			plan.ScalerTime = stamp
		}
	}
	for _, e := range entries {
		m := machines[e.Machine]
		if m == nil || machinestate.BeingDeleted(m) || m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed {
			continue
		}
		kept = append(kept, e)
		if !markedAt(m, e.At) {
			plan.Mark = append(plan.Mark, machineMark{Machine: e.Machine, At: e.At})
		}
	}
	plan.Annotation = formatTriggerDeletion(kept)
	if has {
		plan.Changed = plan.Annotation == "" || plan.Annotation != stored
	} else {
		plan.Changed = plan.Annotation != ""
	}
	return plan
}

// markedAt tells whether m already carries priority "1" and a
// marked-for-deletion-time at the instant at (which is in whole seconds).
// The time is compared as an instant, so a mark written in another zone
// is not rewritten; one with a fraction of a second is, because the
// MachineSet compares it with the scaler's time, which has none.
func markedAt(m *v1alpha1.Machine, at time.Time) bool {
	if m.Annotations[v1alpha1.MachinePriorityAnnotation] != v1alpha1.MachinePriorityDeleteFirst {
		return false
	}
	t, ok := machinestate.MarkedForDeletionAt(m)
	return ok && t.Equal(at)
}
