package drain

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// maxNamed is how many pods a message names per reason before it says
// "and N more".
const maxNamed = 3

// finish computes the summary fields of p from its decisions and volume
// waits: Remaining, Done, NextCheck, Message, and the budgets that block it
// (State.BlockingBudgets).
func finish(p *Plan, opts Options) {
	opts = opts.withDefaults()
	now := p.Now
	var next time.Time
	wake := func(t time.Time) {
		if t.Before(now) {
			t = now
		}
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	poll := now.Add(opts.PollInterval)

	p.Remaining = map[Action]int{}
	for _, d := range p.Decisions {
		if d.Action == ActionSkip || d.Action == ActionGone {
			continue
		}
		p.Remaining[d.Action]++
		switch d.Action {
		case ActionEvict, ActionForceDelete:
			if d.Error == "" {
				wake(now) // work left for this very moment
			} else {
				wake(poll) // failed: do not retry in a hot loop
			}
		case ActionBlocked:
			if !d.RetryAt.IsZero() {
				wake(d.RetryAt)
			} else {
				wake(poll)
			}
		default:
			wake(poll)
		}
		if d.ForceAt.After(now) {
			wake(d.ForceAt)
		}
	}
	for _, v := range p.Volumes {
		wake(poll)
		wake(v.Until)
	}
	if len(p.Remaining) == 0 {
		p.Remaining = nil
	}
	p.Done = len(p.Remaining) == 0 && len(p.Volumes) == 0
	p.NextCheck = time.Time{}
	if !p.Done {
		if !p.Unreachable && !p.NotReadySince.IsZero() && opts.Unreachable.After >= 0 {
			wake(p.NotReadySince.Add(opts.Unreachable.After))
		}
		if p.Deadline.After(now) {
			wake(p.Deadline) // the drain is forced then
		}
		p.NextCheck = next
	}
	p.Message = message(p)
	p.State.blockedBy = blockingBudgets(p.Decisions)
}

// message renders the short human summary of a plan. It names pods and
// budgets but no times, so that it is stable while nothing changes.
func message(p *Plan) string {
	if p.Done {
		return doneMessage(p)
	}
	type bucket struct {
		title string
		pods  []string
	}
	var order []string
	buckets := map[string]*bucket{}
	for _, d := range p.Decisions {
		key, title, entry, ok := bucketOf(p, d)
		if !ok {
			continue
		}
		b, seen := buckets[key]
		if !seen {
			b = &bucket{title: title}
			buckets[key] = b
			order = append(order, key)
		}
		b.pods = append(b.pods, entry)
	}
	slices.Sort(order)

	parts := make([]string, 0, len(order)+3)
	for _, key := range order {
		b := buckets[key]
		if key == "8group" || key == "9held" {
			parts = append(parts, fmt.Sprintf("%s %s", plural(len(b.pods), "pod"), b.title))
			continue
		}
		parts = append(parts, b.title+": "+nameList(b.pods))
	}
	parts = append(parts, volumeParts(p.Volumes)...)
	n := p.RemainingPods()
	return fmt.Sprintf("%s remaining: %s", plural(n, "pod"), strings.Join(parts, "; "))
}

// doneMessage is the message of a drained node.
func doneMessage(p *Plan) string {
	skipped := 0
	for _, d := range p.Decisions {
		if d.Action == ActionSkip {
			skipped++
		}
	}
	if skipped == 0 {
		return fmt.Sprintf("node %s is drained", p.Node)
	}
	return fmt.Sprintf("node %s is drained (%s left on it by policy)", p.Node, plural(skipped, "pod"))
}

// bucketOf returns the part of the message that names a pod's decision:
// its key, whose rank prefix fixes the order of the parts, its title, and
// how the pod is named in it. ok is false for decisions the message does
// not name.
func bucketOf(p *Plan, d Decision) (key, title, entry string, ok bool) {
	pod := d.Pod.String()
	switch d.Action {
	case ActionRefuse:
		return "0", "refused", pod + " (" + d.Reason + ")", true
	case ActionBlocked:
		switch {
		case d.Cause == CauseRefusedPods:
			return "9held", "held back by the refused pods", pod, true
		case d.Cause == CauseMultiplePDBs:
			return "1multi", "selected by several PDBs, which the eviction API refuses", pod + " (" + pdbNames(d.PDBs) + ")", true
		case len(d.PDBs) == 1 && (d.Cause == CauseDisruptionBudget || d.Cause == CauseMisconfiguredPDB):
			return "1pdb " + d.PDBs[0].Name, "blocked by PDB " + d.PDBs[0].String(), pod, true
		case d.Cause == CauseNamespaceTerminating:
			return "2ns", "in a terminating namespace", pod, true
		default:
			return "2tmr", "eviction refused with 429, retrying", pod, true
		}
	case ActionForceDelete:
		if d.Error != "" {
			return "3fail", "deletion failed", pod + ": " + d.Error, true
		}
		return "3force", "to force-delete", pod, true
	case ActionEvict:
		if d.Error != "" {
			return "4fail", "eviction failed", pod + ": " + d.Error, true
		}
		return "4evict", "to evict", pod, true
	case ActionWaitTermination:
		return "5term", "terminating", pod, true
	case ActionWaitCompletion:
		return "6compl", "waiting to complete", pod, true
	case ActionWaitVolumeSlot:
		return "7slot", "waiting for a volume slot", pod, true
	case ActionWaitGroup:
		current := ""
		if len(p.Groups) > 0 {
			current = " " + p.Groups[0].String()
		}
		return "8group", "in later groups, waiting for" + current, pod, true
	}
	return "", "", "", false
}

// volumeParts are the parts of the message about volume waits.
func volumeParts(waits []VolumeWait) []string {
	var detach, reattach, deleted []string
	for _, v := range waits {
		owner := ""
		if !v.Pod.IsZero() {
			owner = " (" + v.Pod.String() + ")"
		}
		if v.Phase == VolumeForceDetach {
			deleted = append(deleted, v.Attachments...)
			continue
		}
		for _, pv := range v.Volumes {
			if v.Phase == VolumeReattach {
				reattach = append(reattach, pv+owner)
			} else {
				detach = append(detach, pv+owner)
			}
		}
	}
	var parts []string
	if len(detach) > 0 {
		parts = append(parts, "volumes to detach: "+nameList(detach))
	}
	if len(reattach) > 0 {
		parts = append(parts, "volumes to re-attach elsewhere: "+nameList(reattach))
	}
	if len(deleted) > 0 {
		parts = append(parts, "VolumeAttachments of the unreachable node deleted, waiting for them to go: "+nameList(deleted))
	}
	return parts
}

func nameList(names []string) string {
	if len(names) <= maxNamed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxNamed], ", "), len(names)-maxNamed)
}

func pdbNames(pdbs []PDBStatus) string {
	names := make([]string, len(pdbs))
	for i, s := range pdbs {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
