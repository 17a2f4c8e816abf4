package sim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// podRunner plays the kubelet's part in a pod's life on a live simulated
// node: no containers run, but the status says they do, so that drains,
// PodDisruptionBudgets and controllers see pods as they would on a real
// node. It keeps no state: everything it needs is in the pod.
type podRunner struct {
	client kubernetes.Interface
	// terminationFraction of a pod's grace period after which its
	// termination completes.
	terminationFraction float64
}

// due reports whether sync has anything to do for the pod at now, without
// an API call: most pods are Running, and a sync looks at all of them.
func (r podRunner) due(pod *corev1.Pod, now time.Time) bool {
	if pod.DeletionTimestamp != nil {
		return !now.Before(r.terminated(pod))
	}
	return pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed && !podRunningAndReady(pod)
}

// sync brings one pod bound to a live node forward: a new pod becomes
// Running and Ready; a deleted one is removed after terminationFraction of
// its grace period.
func (r podRunner) sync(ctx context.Context, pod *corev1.Pod, node *corev1.Node, now time.Time) error {
	if !r.due(pod, now) {
		return nil
	}
	if pod.DeletionTimestamp != nil {
		return r.finishTermination(ctx, pod)
	}
	return r.start(ctx, pod, node, now)
}

// terminated is when the simulated containers of a deleted pod have
// stopped. The grace period is read from the pod, since the API server set
// its deletion timestamp that far in the future.
func (r podRunner) terminated(pod *corev1.Pod) time.Time {
	grace := time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 0)) * time.Second
	requested := pod.DeletionTimestamp.Add(-grace)
	return requested.Add(time.Duration(float64(grace) * r.terminationFraction))
}

// finishTermination removes a deleted pod whose termination is over.
func (r podRunner) finishTermination(ctx context.Context, pod *corev1.Pod) error {
	err := r.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("finishing termination of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// start reports the pod Running and Ready, with every container started,
// on the node's internal IP.
func (r podRunner) start(ctx context.Context, pod *corev1.Pod, node *corev1.Node, now time.Time) error {
	updated := pod.DeepCopy()
	start := metav1.NewTime(now)
	updated.Status.Phase = corev1.PodRunning
	updated.Status.StartTime = &start
	if node != nil {
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				updated.Status.HostIP = a.Address
				updated.Status.HostIPs = []corev1.HostIP{{IP: a.Address}}
			}
		}
	}
	updated.Status.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		updated.Status.Conditions = append(updated.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: start})
	}
	updated.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		updated.Status.ContainerStatuses = append(updated.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "sim://" + c.Image, Ready: true, Started: ptr.To(true),
			ContainerID: fmt.Sprintf("sim://%s/%s", pod.UID, c.Name),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}},
		})
	}
	if _, err := r.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // retried at the next sync with a fresh copy
		}
		return fmt.Errorf("starting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func podRunningAndReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
