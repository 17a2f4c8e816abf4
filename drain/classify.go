package drain

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

// classifyPod derives everything the planner needs about one pod: its
// policy, order group, health, grace period, volumes and budgets.
func classifyPod(pod *corev1.Pod, opts Options, now time.Time, unreachable bool,
	att *attachments, claims map[string]string, budgets *budgetIndex) *podInfo {
	in := &podInfo{
		pod:     pod,
		healthy: podReady(pod),
		grace:   podGrace(pod),
		budgets: budgets.matching(pod),
	}
	in.policy, in.cause, in.reason, in.warning = effectivePolicy(pod, opts, now, unreachable)
	in.group, in.warning = podGroup(pod, in.warning)
	in.allVolumes = podVolumes(pod, claims)
	for _, pv := range in.allVolumes {
		if att.tracked(pv) {
			in.volumes = append(in.volumes, pv)
		}
	}
	return in
}

// effectivePolicy is podPolicy plus the one rule that depends on the node:
// on an unreachable node, a pod terminating for longer than SkipWaitAfter
// past its deletion time counts as gone.
func effectivePolicy(pod *corev1.Pod, opts Options, now time.Time, unreachable bool) (Policy, Cause, string, string) {
	policy, cause, reason, warning := podPolicy(pod, opts)
	if policy != PolicySkip && unreachable && pod.DeletionTimestamp != nil &&
		now.After(pod.DeletionTimestamp.Add(opts.Unreachable.SkipWaitAfter)) {
		return PolicySkip, CauseStuckTerminating, "terminating on an unreachable node since " +
			pod.DeletionTimestamp.UTC().Format(time.RFC3339) + "; treated as gone", warning
	}
	return policy, cause, reason, warning
}

// podGroup returns the pod's order group: OrderAnnotation, then the tier.
// An unparsable order counts as 0 and is added to warning.
func podGroup(pod *corev1.Pod, warning string) (Group, string) {
	order := 0
	if v, ok := pod.Annotations[OrderAnnotation]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			warning = joinWarning(warning, fmt.Sprintf("ignoring %s=%q: not an integer", OrderAnnotation, v))
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
	return Group{Order: order, Tier: tier}, warning
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
