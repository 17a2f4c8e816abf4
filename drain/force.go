package drain

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

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

// unreachable reports whether the fast path applies at now to a node
// NotReady since notReady.
func unreachable(notReady, now time.Time, opts UnreachableOptions) bool {
	return opts.After >= 0 && !notReady.IsZero() && now.Sub(notReady) >= opts.After
}

// forcing is when the drain stops asking and deletes: the caller's
// deadline or, on a node NotReady for UnreachableOptions.ForceAfter, that
// moment, whichever comes first.
type forcing struct {
	// deadline is the effective deadline; zero if there is none.
	deadline time.Time
	// byNode is set when the deadline is the node's NotReady time plus
	// after.
	byNode bool
	after  time.Duration
}

// drainDeadline is the caller's deadline of a drain in state st at now:
// State.Deadline, or Options.Timeout after the start.
func drainDeadline(st State, opts Options, now time.Time) time.Time {
	if !st.deadline.IsZero() || opts.Timeout <= 0 {
		return st.deadline
	}
	start := st.start
	if start.IsZero() {
		start = now
	}
	return start.Add(opts.Timeout)
}

// forcingOf returns the forcing of a drain with the caller's deadline on a
// node NotReady since notReady (zero while Ready).
func forcingOf(deadline, notReady time.Time, opts UnreachableOptions) forcing {
	f := forcing{deadline: deadline, after: opts.ForceAfter}
	if opts.ForceAfter < 0 || notReady.IsZero() {
		return f
	}
	if t := notReady.Add(opts.ForceAfter); deadline.IsZero() || t.Before(deadline) {
		f.deadline, f.byNode = t, true
	}
	return f
}

// forced reports whether the drain is forced at now.
func (f forcing) forced(now time.Time) bool {
	return !f.deadline.IsZero() && !now.Before(f.deadline)
}

// cause is the Cause of the force deletions.
func (f forcing) cause() Cause {
	if f.byNode {
		return CauseNodeNotReady
	}
	return CauseDeadline
}

// reason says why the drain is forced, for Plan.ForceReason. Pods are
// deleted up to their grace period before the deadline, hence the words
// for "not quite yet".
func (f forcing) reason(now time.Time) string {
	switch {
	case f.byNode && f.forced(now):
		return fmt.Sprintf("node not Ready for more than %v", f.after)
	case f.byNode:
		return fmt.Sprintf("node not Ready for nearly %v", f.after)
	case f.forced(now):
		return fmt.Sprintf("drain deadline %s passed", f.deadline.UTC().Format(time.RFC3339))
	default:
		return fmt.Sprintf("drain deadline %s is near", f.deadline.UTC().Format(time.RFC3339))
	}
}

// forceGrace is the grace period of a force deletion at now: the pod's own,
// shortened so that the pod is gone by the deadline (if there is one), at
// least one second.
func forceGrace(grace time.Duration, deadline, now time.Time) time.Duration {
	if deadline.IsZero() {
		return max(grace, time.Second)
	}
	left := deadline.Sub(now).Truncate(time.Second)
	return max(min(grace, left), time.Second)
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// capAt returns t, or the deadline if there is one and it comes earlier:
// after the deadline nothing is waited for.
func capAt(t, deadline time.Time) time.Time {
	if !deadline.IsZero() && deadline.Before(t) {
		return deadline
	}
	return t
}
