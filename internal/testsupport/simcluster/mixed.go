package simcluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// MixedWorkload is what MixedNode put on a node: the kinds of pods a drain
// treats differently, side by side.
type MixedWorkload struct {
	// Node carries the workload; Spare takes the replacements.
	Node, Spare string
	// Guarded is the app label (and name) of a Deployment of
	// GuardedReplicas pods behind a PodDisruptionBudget of the same name
	// with maxUnavailable 1.
	Guarded         string
	GuardedReplicas int32
	// Free is a Deployment of FreeReplicas pods without a budget.
	Free         string
	FreeReplicas int32
	// DaemonSet has one pod on Node.
	DaemonSet string
	// Bare is a pod without a controller, with an emptyDir volume.
	Bare string
	// Critical is a Deployment of one system-cluster-critical pod.
	Critical string
}

// MixedNode adds a node and a spare node and puts a MixedWorkload into ns
// on the node; replacements can only go to the spare node. It returns once
// every pod runs and the budget's status counts all its pods healthy. Drain
// benchmarks and tests use it so that every drain implementation gets the
// same workload.
func (c *Cluster) MixedNode(tb testing.TB, ns, name string) MixedWorkload {
	tb.Helper()
	ctx := context.Background()
	prefix := ns[len(ns)-6:] + "-" + name
	w := MixedWorkload{
		Node: c.AddNode(tb, prefix), Spare: c.AddNode(tb, prefix+"-spare"),
		Guarded: name + "-guarded", GuardedReplicas: 6,
		Free: name + "-free", FreeReplicas: 10,
		DaemonSet: name + "-agent", Bare: name + "-bare", Critical: name + "-critical",
	}
	// Everything starts on Node: the spare node takes no pods until the
	// workload runs.
	if err := setUnschedulable(ctx, c.client, w.Spare, true); err != nil {
		tb.Fatal(err)
	}
	onBoth := func(tpl *corev1.PodTemplateSpec) {
		tpl.Spec.NodeSelector = nil
		tpl.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{w.Node, w.Spare},
				}},
			}}},
		}}
	}
	critical := func(tpl *corev1.PodTemplateSpec) {
		onBoth(tpl)
		tpl.Spec.PriorityClassName = "system-cluster-critical"
	}
	for _, d := range []struct {
		name     string
		replicas int32
		mutate   func(*corev1.PodTemplateSpec)
	}{{w.Guarded, w.GuardedReplicas, onBoth}, {w.Free, w.FreeReplicas, onBoth}, {w.Critical, 1, critical}} {
		if err := CreateDeployment(ctx, c.client, ns, d.name, w.Node, d.replicas, d.mutate); err != nil {
			tb.Fatal(err)
		}
	}
	if err := createDaemonSet(ctx, c.client, ns, w.DaemonSet, w.Node); err != nil {
		tb.Fatal(err)
	}
	bare := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: w.Bare, Namespace: ns, Labels: map[string]string{"app": w.Bare}},
		Spec: corev1.PodSpec{
			NodeName:                      w.Node,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
			Volumes:                       []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	if _, err := c.client.CoreV1().Pods(ns).Create(ctx, bare, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("simcluster: creating pod %s/%s: %v", ns, w.Bare, err)
	}
	for app, n := range map[string]int{w.Guarded: int(w.GuardedReplicas), w.Free: int(w.FreeReplicas), w.Critical: 1, w.DaemonSet: 1, w.Bare: 1} {
		if err := WaitPodsRunning(ctx, c.client, ns, "app="+app, n); err != nil {
			tb.Fatal(err)
		}
	}
	if err := createBudget(ctx, c.client, ns, w.Guarded, w.GuardedReplicas); err != nil {
		tb.Fatal(err)
	}
	if err := setUnschedulable(ctx, c.client, w.Spare, false); err != nil {
		tb.Fatal(err)
	}
	return w
}

func setUnschedulable(ctx context.Context, client kubernetes.Interface, node string, on bool) error {
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if !on {
		patch = []byte(`{"spec":{"unschedulable":null}}`)
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("simcluster: setting node %s unschedulable=%v: %w", node, on, err)
	}
	return nil
}

// DaemonSetOn is a DaemonSet whose one pod runs on node: what the
// simulated kubelet runs as a node agent.
func DaemonSetOn(ns, name, node string) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{corev1.LabelHostname: node},
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers:                    []corev1.Container{{Name: "agent", Image: "registry.invalid/agent:1"}},
				},
			},
		},
	}
}

// createDaemonSet runs DaemonSetOn(ns, name, node).
func createDaemonSet(ctx context.Context, client kubernetes.Interface, ns, name, node string) error {
	if _, err := client.AppsV1().DaemonSets(ns).Create(ctx, DaemonSetOn(ns, name, node), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("simcluster: creating DaemonSet %s/%s: %w", ns, name, err)
	}
	return nil
}

// createBudget creates a budget with maxUnavailable 1 over app=app and
// waits until the disruption controller counts all replicas healthy.
func createBudget(ctx context.Context, client kubernetes.Interface, ns, app string, replicas int32) error {
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("simcluster: creating PodDisruptionBudget %s/%s: %w", ns, app, err)
	}
	var last policyv1.PodDisruptionBudgetStatus
	err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		got, err := client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = got.Status
		return got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy == replicas, nil
	})
	if err != nil {
		return fmt.Errorf("simcluster: PodDisruptionBudget %s/%s never counted %d healthy pods (status %+v): %w", ns, app, replicas, last, err)
	}
	return nil
}

// Availability watches the pods of a Deployment and records the most that
// were ever unavailable at once: replicas minus the pods that are Ready
// and not terminating, as a PodDisruptionBudget counts them.
type Availability struct {
	replicas int
	mu       sync.Mutex
	pods     map[types.UID]*corev1.Pod
	worst    int
}

// WatchAvailability starts watching the pods of ns matching selector, of
// which replicas should be available, until tb ends.
func WatchAvailability(tb testing.TB, client kubernetes.Interface, ns, selector string, replicas int) *Availability {
	tb.Helper()
	a := &Availability{replicas: replicas, pods: map[types.UID]*corev1.Pod{}}
	ctx, cancel := context.WithCancel(context.Background())
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		cancel()
		tb.Fatalf("simcluster: listing pods %s: %v", selector, err)
	}
	for i := range list.Items {
		a.pods[list.Items[i].UID] = &list.Items[i]
	}
	a.record()
	w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		cancel()
		tb.Fatalf("simcluster: watching pods %s: %v", selector, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			a.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(a.pods, pod.UID)
			} else {
				a.pods[pod.UID] = pod
			}
			a.mu.Unlock()
			a.record()
		}
	}()
	tb.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return a
}

func (a *Availability) record() {
	a.mu.Lock()
	defer a.mu.Unlock()
	available := 0
	for _, p := range a.pods {
		if p.DeletionTimestamp == nil && PodReady(p) {
			available++
		}
	}
	a.worst = max(a.worst, a.replicas-available)
}

// WorstUnavailable is the most pods that were unavailable at once so far.
func (a *Availability) WorstUnavailable() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.worst
}
