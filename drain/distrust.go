package drain

import (
	"fmt"
	"time"
)

// distrust checks a State read back from storage against what the drain
// could have recorded by now, and returns the state to plan with. A State
// usually round-trips through an object that others can write (the
// machine controller keeps it in an annotation), so none of it may
// weaken the drain: a moment outside [Start, now], a give-up before its
// timeout could have passed, or more refused evictions than the backoff
// allows since Start, restart the drain — a zero State, whose first pass
// starts the clock again — and problem says why. Restarting is always
// safe: every wait begins anew and nothing is forced sooner. Deadline
// and MaxEvictRetries are the caller's; it sets them from facts of its
// own before every pass.
func distrust(st State, now time.Time, o Options) (_ State, problem string) {
	keep := State{deadline: st.deadline, maxEvictRetries: st.maxEvictRetries}
	if st.start.IsZero() {
		if !recordsNothing(st) {
			return keep, "drain state records progress but no start"
		}
		return st, ""
	}
	inRange := func(t time.Time) bool { return t.IsZero() || (!t.Before(st.start) && !t.After(now)) }
	if st.start.After(now) {
		return keep, fmt.Sprintf("drain start %s is in the future", st.start.Format(time.RFC3339))
	}
	if !inRange(st.completed) || !inRange(st.forcedDetach.Since) {
		return keep, "drain state holds a moment outside the drain"
	}
	if st.forcedDetach.GaveUp && (st.forcedDetach.Since.IsZero() || now.Before(st.forcedDetach.Since.Add(o.Volumes.DetachTimeout))) {
		return keep, "drain state gives up on volume attachments before their timeout"
	}
	for _, t := range st.tracked {
		if !inRange(t.GoneAt) || !inRange(t.DetachedAt) || (!t.DetachedAt.IsZero() && t.DetachedAt.Before(t.GoneAt)) {
			return keep, fmt.Sprintf("drain state holds a moment outside the drain for pod %s", t.Pod)
		}
		timedOut := !t.GoneAt.IsZero() && !now.Before(t.GoneAt.Add(o.Volumes.DetachTimeout))
		atDeadline := !st.deadline.IsZero() && !now.Before(st.deadline)
		if t.GaveUp && !timedOut && !atDeadline {
			return keep, fmt.Sprintf("drain state gives up on the volumes of pod %s before their timeout", t.Pod)
		}
	}
	most := maxAttempts(now.Sub(st.start), o.BackoffInitial, o.BackoffMax)
	for _, r := range st.refusals {
		if r.Count < 0 || r.Count > most {
			return keep, fmt.Sprintf("drain state counts %d refused evictions of pod %s; at most %d fit since the drain started", r.Count, r.Pod, most)
		}
	}
	for _, b := range st.backoffs {
		if b.Attempts < 0 || b.Attempts > most {
			return keep, fmt.Sprintf("drain state counts %d eviction attempts for %s; at most %d fit since the drain started", b.Attempts, b.Key, most)
		}
	}
	return st, ""
}

// recordsNothing reports whether a State without a start holds no
// progress either: the state of a drain not begun.
func recordsNothing(st State) bool {
	return st.completed.IsZero() && st.forcedDetach == (forcedDetach{}) &&
		len(st.tracked) == 0 && len(st.backoffs) == 0 && len(st.refusals) == 0
}

// maxAttempts is the most evictions of one pod (or under one budget) a
// drain can have tried in elapsed: one at once, then one after each
// backoff wait, which starts at initial and doubles up to most. Passes
// cannot retry sooner, so a count above it was not recorded by a drain.
func maxAttempts(elapsed, initial, most time.Duration) int {
	if initial <= 0 {
		initial = DefaultBackoffInitial
	}
	if most < initial {
		most = initial
	}
	n, wait, spent := 1, initial, time.Duration(0)
	for spent+wait <= elapsed {
		spent += wait
		n++
		if wait < most {
			wait = min(wait*2, most)
		}
		if wait == most {
			// The rest are evenly spaced.
			return n + int((elapsed-spent)/most)
		}
	}
	return n
}
