package testenv_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/internal/controlplane"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{})
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestGarbageCollector deletes an owner in the foreground: the API server
// keeps it until the garbage collector has removed the dependent that blocks
// its deletion.
func TestGarbageCollector(t *testing.T) {
	env := testenv.Get(t)
	ctx := testContext(t)
	ns := env.Namespace(t)
	cms := env.Client().CoreV1().ConfigMaps(ns)

	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "dependent",
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}},
	}}
	if _, err := cms.Create(ctx, dependent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		for _, name := range []string{"dependent", "owner"} {
			_, err := cms.Get(ctx, name, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("%s still there (err=%v)", name, err)
			}
		}
		return true, ""
	})
}

// TestDisruptionController shows kube-controller-manager computing a
// PodDisruptionBudget's status from the Deployment behind its pods.
func TestDisruptionController(t *testing.T) {
	env := testenv.Get(t)
	ctx := testContext(t)
	ns := env.Namespace(t)
	client := env.Client()

	if _, err := client.AppsV1().Deployments(ns).Create(ctx, deployment("web", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		got, err := client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, pdb.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		s := got.Status
		// No kubelet runs the pods, so none is healthy and no disruption is
		// allowed; expectedPods comes from the Deployment's scale.
		return s.ObservedGeneration == got.Generation && s.ExpectedPods == 2 && s.DesiredHealthy == 1 && s.DisruptionsAllowed == 0,
			fmt.Sprintf("status %+v at generation %d", s, got.Generation)
	})
}

// TestScheduler registers a Ready node and sees the scheduler bind a pod of a
// Deployment to it.
func TestScheduler(t *testing.T) {
	env := testenv.Get(t)
	ctx := testContext(t)
	ns := env.Namespace(t)
	client := env.Client()

	node := registerReadyNode(ctx, t, client, ns+"-node")
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, deployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error()
		}
		if len(pods.Items) != 1 {
			return false, fmt.Sprintf("%d pods", len(pods.Items))
		}
		return pods.Items[0].Spec.NodeName == node, fmt.Sprintf("pod %s on node %q", pods.Items[0].Name, pods.Items[0].Spec.NodeName)
	})
}

// TestSeparateTargetCluster checks that the target cluster is a different
// control plane, not another view of the control cluster.
func TestSeparateTargetCluster(t *testing.T) {
	control := testenv.Get(t)
	target := testenv.GetTarget(t)
	ctx := testContext(t)
	if control.Config().Host == target.Config().Host {
		t.Fatalf("both clusters serve at %s", control.Config().Host)
	}
	ns := control.Namespace(t)
	if _, err := target.Client().CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace %s of the control cluster is visible in the target cluster: %v", ns, err)
	}
	// The target cluster is a full control plane too.
	targetNS := target.Namespace(t)
	if out, err := target.Kubectl(ctx, "get", "serviceaccount", "default", "-n", targetNS, "-o", "name"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.invalid/app:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
				}}},
			},
		},
	}
}

// registerReadyNode does what a kubelet does when it joins: create the Node,
// report it Ready with capacity and take its lease. Nobody renews the lease,
// so the node lifecycle controller marks the node unreachable after its grace
// period (20 s here) — long after the scheduler has acted.
func registerReadyNode(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) string {
	t.Helper()
	node, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	now := metav1.Now()
	node.Status = corev1.NodeStatus{
		Capacity:    resources,
		Allocatable: resources,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}},
	}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: &metav1.MicroTime{Time: time.Now()},
		},
	}
	if _, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestStartOutsideTests starts and stops a standalone cluster, as a local
// demo does, and checks that it leaves no files behind.
func TestStartOutsideTests(t *testing.T) {
	testenv.Get(t) // skips or fails like every integration test without binaries
	ctx := testContext(t)
	env, err := controlplane.Start(ctx, "standalone", controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client().CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("standalone cluster does not answer: %v", err)
	}
	dir := env.Dir()
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster dir %s still there after Stop (%v)", dir, err)
	}
}
