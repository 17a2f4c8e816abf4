package sim_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/simcluster"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{})
}

// TestKubeletRegistersAndRemovesNodes creates 50 VMs through the driver and
// sees 50 Ready nodes with the VMs' provider IDs; deleting the VMs removes
// the nodes.
func TestKubeletRegistersAndRemovesNodes(t *testing.T) {
	t.Parallel()
	env := testenv.Get(t)
	client := env.Client()
	ns := env.Namespace(t)
	ctx := context.Background()

	c := simcluster.Start(t, client, simcluster.Options{Cloud: sim.Options{BootDelay: time.Second, BootJitter: time.Second, DeleteDelay: time.Second}})
	d := c.Cloud.Driver()

	const count = 50
	prefix := ns[len(ns)-6:] + "-m"
	wantProviderID := map[string]string{}
	for i := range count {
		machine, class, secret := c.MachineObjects(fmt.Sprintf("%s%02d", prefix, i))
		resp, err := d.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: machine, MachineClass: class, Secret: secret})
		if err != nil {
			t.Fatalf("create %s: %v", machine.Name, err)
		}
		wantProviderID[resp.NodeName] = resp.ProviderID
	}
	simNodes := func(ctx context.Context) ([]corev1.Node, error) {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var out []corev1.Node
		for _, n := range list.Items {
			if strings.HasPrefix(n.Name, prefix) {
				out = append(out, n)
			}
		}
		return out, nil
	}
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		nodes, err := simNodes(ctx)
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, n := range nodes {
			if n.Spec.ProviderID != wantProviderID[n.Name] {
				return false, fmt.Sprintf("node %s has providerID %q, want %q", n.Name, n.Spec.ProviderID, wantProviderID[n.Name])
			}
			if simcluster.NodeConditionStatus(&n, corev1.NodeReady) == corev1.ConditionTrue {
				ready++
			}
		}
		return ready == count, fmt.Sprintf("%d nodes, %d Ready", len(nodes), ready)
	})

	for i := range count {
		machine, class, secret := c.MachineObjects(fmt.Sprintf("%s%02d", prefix, i))
		if _, err := d.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: machine, MachineClass: class, Secret: secret}); err != nil {
			t.Fatalf("delete %s: %v", machine.Name, err)
		}
	}
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		nodes, err := simNodes(ctx)
		if err != nil {
			return false, err.Error()
		}
		return len(nodes) == 0, fmt.Sprintf("%d nodes left", len(nodes))
	})
}

// TestKubeletNodeConditions makes a node NotReady and reports a
// node-problem-detector condition.
func TestKubeletNodeConditions(t *testing.T) {
	t.Parallel()
	env := testenv.Get(t)
	client := env.Client()
	ns := env.Namespace(t)
	c := simcluster.Start(t, client, simcluster.Options{Kubelet: sim.KubeletOptions{}})
	node := c.AddNode(t, ns[len(ns)-6:]+"-cond")

	c.Kubelet.SetCondition(node, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "container runtime is down"})
	c.Kubelet.SetCondition(node, corev1.NodeCondition{Type: "KernelDeadlock", Status: corev1.ConditionTrue, Reason: "DockerHung"})
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready, deadlock := simcluster.NodeConditionStatus(n, corev1.NodeReady), simcluster.NodeConditionStatus(n, "KernelDeadlock")
		return ready == corev1.ConditionFalse && deadlock == corev1.ConditionTrue, fmt.Sprintf("Ready=%s KernelDeadlock=%s", ready, deadlock)
	})

	// The node lifecycle controller reacts to the NotReady node with its
	// taint, as in a real cluster.
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady {
				return true, ""
			}
		}
		return false, fmt.Sprintf("taints %v", n.Spec.Taints)
	})

	c.Kubelet.ClearCondition(node, corev1.NodeReady)
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return simcluster.NodeConditionStatus(n, corev1.NodeReady) == corev1.ConditionTrue, "still not Ready"
	})
}

// TestKubeletRunsAndTerminatesPods binds pods to a simulated node, sees them
// Running and Ready, and sees a pod deleted with a 10 s grace period go
// only after the simulated termination.
func TestKubeletRunsAndTerminatesPods(t *testing.T) {
	t.Parallel()
	env := testenv.Get(t)
	client := env.Client()
	ns := env.Namespace(t)
	c := simcluster.Start(t, client, simcluster.Options{Kubelet: sim.KubeletOptions{TerminationFraction: 0.5}})
	node := c.AddNode(t, ns[len(ns)-6:]+"-pods")

	ctx := context.Background()
	for i := range 3 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)},
			Spec: corev1.PodSpec{
				NodeName:                      node,
				TerminationGracePeriodSeconds: ptr.To[int64](10),
				Containers:                    []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
			},
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && simcluster.PodReady(&p) {
				running++
			}
		}
		return running == 3, fmt.Sprintf("%d of 3 pods Running and Ready", running)
	})

	deleted := time.Now()
	if err := client.CoreV1().Pods(ns).Delete(ctx, "p0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		_, err := client.CoreV1().Pods(ns).Get(ctx, "p0", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("pod still there (err=%v)", err)
	})
	// Half of the 10 s grace period, less the server's second-granular
	// deletion timestamp.
	if took := time.Since(deleted); took < 4*time.Second {
		t.Errorf("pod with a 10 s grace period was gone after %v, before its simulated termination", took)
	}
}

// TestKubeletStoppedVMFallsSilent stops a VM: the node lifecycle controller
// sees its heartbeats end and marks the node unknown.
func TestKubeletStoppedVMFallsSilent(t *testing.T) {
	t.Parallel()
	env := testenv.Get(t)
	client := env.Client()
	ns := env.Namespace(t)
	// Renew leases every 2.5 s so the environment's 20 s grace period is
	// the only wait.
	c := simcluster.Start(t, client, simcluster.Options{Kubelet: sim.KubeletOptions{LeaseDuration: 10 * time.Second}})
	node := c.AddNode(t, ns[len(ns)-6:]+"-stop")
	vm, ok := findVM(c.Cloud, node)
	if !ok {
		t.Fatalf("no VM for node %s", node)
	}
	if err := c.Cloud.StopVM(vm.ProviderID); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, string) {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		s := simcluster.NodeConditionStatus(n, corev1.NodeReady)
		return s == corev1.ConditionUnknown, fmt.Sprintf("Ready=%s", s)
	})
}

func findVM(cloud *sim.Cloud, node string) (sim.VM, bool) {
	for _, vm := range cloud.VMs() {
		if vm.NodeName == node {
			return vm, true
		}
	}
	return sim.VM{}, false
}

// TestKubeletAttachesAndDetachesVolumes runs kube-controller-manager's
// attach-detach controller against simulated CSI volumes: a pod's volume is
// attached to its node, and detached only after the pod is gone and the
// detach delay has passed.
//
// It runs alone, not in parallel: it measures the delay between two moments
// it sees by polling, and polls slowed down by other tests on a loaded
// machine can see the pod gone late and shorten the delay.
func TestKubeletAttachesAndDetachesVolumes(t *testing.T) {
	env := testenv.Get(t)
	client := env.Client()
	ns := env.Namespace(t)
	const detachDelay = 3 * time.Second
	c := simcluster.Start(t, client, simcluster.Options{Kubelet: sim.KubeletOptions{DetachDelay: detachDelay}})
	node := c.AddNode(t, ns[len(ns)-6:]+"-vol")
	ctx := context.Background()

	pvName := simcluster.CreateBoundClaim(t, client, ns, "data")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers:                    []corev1.Container{{Name: "db", Image: "registry.invalid/db:1", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes:                       []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	attachment := func(ctx context.Context) (*storagev1.VolumeAttachment, error) {
		list, err := client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i, va := range list.Items {
			if va.Spec.Source.PersistentVolumeName != nil && *va.Spec.Source.PersistentVolumeName == pvName {
				return &list.Items[i], nil
			}
		}
		return nil, nil
	}
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		va, err := attachment(ctx)
		switch {
		case err != nil:
			return false, err.Error()
		case va == nil:
			return false, "no VolumeAttachment yet"
		}
		return va.Status.Attached && va.Spec.NodeName == node, fmt.Sprintf("attachment %s on %s attached=%v", va.Name, va.Spec.NodeName, va.Status.Attached)
	})

	if err := client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var podGone, detached time.Time
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		if podGone.IsZero() {
			if _, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				podGone = time.Now()
			}
		}
		va, err := attachment(ctx)
		if err != nil {
			return false, err.Error()
		}
		if va == nil {
			detached = time.Now()
			return true, ""
		}
		return false, fmt.Sprintf("attachment %s still there (deleting=%v)", va.Name, va.DeletionTimestamp != nil)
	})
	if podGone.IsZero() || detached.Sub(podGone) < detachDelay-time.Second {
		t.Errorf("volume detached %v after the pod was gone, want at least the detach delay %v", detached.Sub(podGone), detachDelay)
	}
}
