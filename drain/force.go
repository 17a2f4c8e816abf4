package drain

import (
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

// forceGrace is the grace period of a force deletion at now: the pod's own,
// shortened so that the pod is gone by the deadline, at least one second.
func forceGrace(grace time.Duration, deadline, now time.Time) time.Duration {
	left := deadline.Sub(now).Truncate(time.Second)
	return max(min(grace, left), time.Second)
}

// capAt returns t, or the deadline if there is one and it comes earlier:
// after the deadline nothing is waited for.
func capAt(t, deadline time.Time) time.Time {
	if !deadline.IsZero() && deadline.Before(t) {
		return deadline
	}
	return t
}
