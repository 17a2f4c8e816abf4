//go:build linux

// Scenarios S and P: a deployment whose every node runs a pod of a
// workload is scaled down.

package compare

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// workloadName is the ReplicaSet whose pods the scale-downs drain: one pod
// on every node (required anti-affinity by hostname), no
// PodDisruptionBudget. An evicted pod's replacement finds no node without
// one and stays Pending, so that every drain evicts exactly one pod.
const workloadName = "bench-workload"

// scaleDownTo is scenarios S (to 0) and P (to a tenth): a deployment of N
// Running machines, a pod of the workload on each node, scaled to target,
// until target machines and nodes are left and the deployment says so.
func (r *run) scaleDownTo(target int) func(context.Context) error {
	return func(ctx context.Context) error {
		n := r.spec.Machines
		if err := r.createClasses(ctx, r.spec.Boot, className); err != nil {
			return err
		}
		progress("%s: setting up: the deployment's %d machines", r.spec, n)
		if _, err := r.scaleUp(ctx, n, rollingStrategy()); err != nil {
			return fmt.Errorf("setting up: %w", err)
		}
		progress("%s: setting up: a pod of the workload on each of the %d nodes", r.spec, n)
		if err := r.runWorkload(ctx, n); err != nil {
			return fmt.Errorf("setting up: %w", err)
		}
		if err := r.sleep(r.spec.Settle); err != nil {
			return err
		}
		progress("%s: set up; scaling the deployment to %d", r.spec, target)
		p, err := r.begin(ctx)
		if err != nil {
			return err
		}
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, target)
		if _, err := r.genMachines.MachineV1alpha1().MachineDeployments(r.ns).Patch(ctx, deploymentName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("scaling the deployment to %d: %w", target, err)
		}
		done, err := r.waitUntil(fmt.Sprintf("%d machines and nodes left", target), func(s state) bool {
			d := s.deployment
			return s.machines == target && s.running == target && s.nodes == target &&
				d != nil && d.Status.ObservedGeneration >= d.Generation && d.Status.Replicas == int32(target)
		})
		if err != nil {
			return err
		}
		r.res.Deleted = n - target
		return r.end(ctx, p, done)
	}
}

// runWorkload creates the workload with a pod for each of n nodes and
// waits until all n run, each on a node of its own.
func (r *run) runWorkload(ctx context.Context, n int) error {
	labels := map[string]string{"app": workloadName}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: workloadName, Namespace: r.ns},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(int32(n)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
							TopologyKey:   corev1.LabelHostname,
						}},
					}},
				},
			},
		},
	}
	if _, err := r.genCore.AppsV1().ReplicaSets(r.ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the workload: %w", err)
	}
	start, lastProgress := time.Now(), time.Now()
	for {
		pods, err := r.core.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + workloadName})
		if err != nil {
			return err
		}
		running, nodes := 0, map[string]bool{}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
				nodes[p.Spec.NodeName] = true
			}
		}
		if running == n && len(nodes) == n {
			progress("%s: the workload's %d pods run after %v", r.spec, n, time.Since(start).Round(time.Second))
			return nil
		}
		if err := r.sys.exited(); err != nil {
			return err
		}
		if time.Now().After(r.deadline) {
			return fmt.Errorf("timed out waiting for the workload: %d of %d pods running on %d nodes", running, n, len(nodes))
		}
		if time.Since(lastProgress) >= 10*time.Second {
			lastProgress = time.Now()
			progress("%s: %d of %d pods of the workload running", r.spec, running, n)
		}
		time.Sleep(time.Second)
	}
}

// scaleDownExtra is the machines a scale-down deleted.
func scaleDownExtra(r result) string {
	return fmt.Sprintf("%d of %d machines deleted, 1 pod each", r.Deleted, r.Machines)
}
