// Package simcluster puts simulated machines into a test environment
// cluster: a sim.Cloud whose VMs a sim.Kubelet turns into Ready nodes (and,
// with Options.Agent, a sim.Agent that carries out in-place updates on
// them), plus helpers that place workloads on those nodes. Drain tests and benchmarks
// (in this module and in the benchmark module) share it so that they
// measure the same workload.
//
// # Usage
//
//	env := testenv.Get(t)
//	c := simcluster.Start(t, env.Client(), simcluster.Options{})
//	node := c.AddNode(t, "worker-1")
//	err := simcluster.CreateDeployment(ctx, env.Client(), ns, "web", node, 20, nil)
//	err = simcluster.WaitPodsRunning(ctx, env.Client(), ns, "app=web", 20)
package simcluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

// Options configure the simulated cloud and kubelet.
type Options struct {
	Cloud   sim.Options
	Kubelet sim.KubeletOptions
	// Capacity of each node; the default fits several hundred small pods.
	Capacity corev1.ResourceList
	// Agent runs the cloud's in-place update agent beside the kubelet.
	Agent AgentOptions
}

// AgentOptions configure the simulated node agent (sim.Agent). It is off
// unless Machines is set: it reads the classes the machines are to have
// from the control cluster, which the rest of the cluster does not need,
// and serves only the VMs of classes whose providerSpec enables it.
type AgentOptions struct {
	// Machines is the control cluster's machine client; nil runs no agent.
	Machines versioned.Interface
	// Options of the agent; an empty Identity becomes the kubelet's.
	Options sim.AgentOptions
}

// Cluster is a simulated cloud with a running kubelet.
type Cluster struct {
	Cloud   *sim.Cloud
	Kubelet *sim.Kubelet
	// Agent is the node agent, nil unless Options.Agent.Machines was set.
	Agent  *sim.Agent
	client kubernetes.Interface
	opts   Options
}

// Start creates the cloud and runs its kubelet against client until tb
// ends.
func Start(tb testing.TB, client kubernetes.Interface, opts Options) *Cluster {
	tb.Helper()
	cloud, err := sim.New(opts.Cloud)
	if err != nil {
		tb.Fatalf("simcluster: %v", err)
	}
	if opts.Capacity == nil {
		opts.Capacity = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("64"),
			corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods:   resource.MustParse("500"),
		}
	}
	k := RunKubelet(tb, cloud, client, opts.Kubelet)
	c := &Cluster{Cloud: cloud, Kubelet: k, client: client, opts: opts}
	if opts.Agent.Machines != nil {
		agentOpts := opts.Agent.Options
		if agentOpts.Identity == "" {
			agentOpts.Identity = k.Identity()
		}
		c.Agent = RunAgent(tb, cloud, client, opts.Agent.Machines, agentOpts)
	}
	return c
}

// RunAgent runs the simulated node agent of cloud against the target
// cluster client and the control cluster machines until tb ends, and
// returns once its caches have synced. Give it the identity of the
// kubelet whose nodes it serves (Kubelet.Identity).
func RunAgent(tb testing.TB, cloud *sim.Cloud, client kubernetes.Interface, machines versioned.Interface, opts sim.AgentOptions) *sim.Agent {
	tb.Helper()
	a, err := sim.NewAgent(cloud, client, machines, opts)
	if err != nil {
		tb.Fatalf("simcluster: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("simcluster: agent: %v", err)
		}
	})
	waitCtx, waitCancel := context.WithTimeout(ctx, time.Minute)
	defer waitCancel()
	if err := a.WaitRunning(waitCtx); err != nil {
		tb.Fatalf("simcluster: agent caches never synced: %v", err)
	}
	return a
}

// RunKubelet runs a simulated kubelet for cloud against client until tb
// ends, and returns once its caches have synced.
func RunKubelet(tb testing.TB, cloud *sim.Cloud, client kubernetes.Interface, opts sim.KubeletOptions) *sim.Kubelet {
	tb.Helper()
	k := sim.NewKubelet(cloud, client, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("simcluster: kubelet: %v", err)
		}
	})
	waitCtx, waitCancel := context.WithTimeout(ctx, time.Minute)
	defer waitCancel()
	if err := k.WaitRunning(waitCtx); err != nil {
		tb.Fatalf("simcluster: kubelet caches never synced: %v", err)
	}
	return k
}

// MachineObjects are what the sim driver needs to create or delete the VM
// of machine name.
func (c *Cluster) MachineObjects(name string) (*v1alpha1.Machine, *v1alpha1.MachineClass, *corev1.Secret) {
	class := &v1alpha1.MachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: "sim"},
		Provider:   sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{
			Zone: "zone-a", InstanceType: "large", Capacity: c.opts.Capacity,
		}.RawExtension(),
	}
	machine := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: class.Name}},
	}
	secret := &corev1.Secret{Data: map[string][]byte{
		sim.CredentialsKey: []byte("token"), v1alpha1.UserDataKey: []byte("#!/bin/sh\n"),
	}}
	return machine, class, secret
}

// AddNode creates a VM for machine name, waits until its node is Ready and
// returns the node name. The VM is deleted when tb ends.
func (c *Cluster) AddNode(tb testing.TB, name string) string {
	tb.Helper()
	machine, class, secret := c.MachineObjects(name)
	d := c.Cloud.Driver()
	resp, err := d.CreateMachine(context.Background(), &driver.CreateMachineRequest{Machine: machine, MachineClass: class, Secret: secret})
	if err != nil {
		tb.Fatalf("simcluster: creating VM %s: %v", name, err)
	}
	tb.Cleanup(func() {
		_, _ = d.DeleteMachine(context.Background(), &driver.DeleteMachineRequest{Machine: machine, MachineClass: class, Secret: secret})
		// The kubelet may stop before it sees the VM gone.
		_ = c.client.CoreV1().Nodes().Delete(context.Background(), resp.NodeName, metav1.DeleteOptions{})
	})
	err = poll(context.Background(), 2*time.Minute, func(ctx context.Context) (bool, error) {
		n, err := c.client.CoreV1().Nodes().Get(ctx, resp.NodeName, metav1.GetOptions{})
		return err == nil && NodeConditionStatus(n, corev1.NodeReady) == corev1.ConditionTrue, nil
	})
	if err != nil {
		tb.Fatalf("simcluster: node %s never became Ready: %v", resp.NodeName, err)
	}
	return resp.NodeName
}

// CreateDeployment runs replicas pods labelled app=name on node (by node
// selector, through the scheduler), each with a one-second grace period.
// mutate, if not nil, adjusts the pod template.
func CreateDeployment(ctx context.Context, client kubernetes.Interface, ns, name, node string, replicas int32, mutate func(*corev1.PodTemplateSpec)) error {
	labels := map[string]string{"app": name}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{corev1.LabelHostname: node},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.invalid/app:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}},
			}},
		},
	}
	if mutate != nil {
		mutate(&template)
	}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: template,
		},
	}
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating deployment %s/%s: %w", ns, name, err)
	}
	return nil
}

// WaitPodsRunning waits until want pods matching selector in ns run on a
// node and are Ready.
func WaitPodsRunning(ctx context.Context, client kubernetes.Interface, ns, selector string, want int) error {
	var last int
	err := poll(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil
		}
		last = 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && PodReady(&p) {
				last++
			}
		}
		return last >= want, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d pods %s in %s running: %w", last, want, selector, ns, err)
	}
	return nil
}

// PodsOnNode counts the pods bound to node that are not terminal, deleting
// ones included.
func PodsOnNode(ctx context.Context, client kubernetes.Interface, node string) (int, error) {
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n, nil
}

// PodReady reports the pod's Ready condition, as PodDisruptionBudgets
// count it.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NodeConditionStatus is the status of the node's condition of type t, or
// "" if it has none.
func NodeConditionStatus(n *corev1.Node, t corev1.NodeConditionType) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// NodeWithDeployment adds a node and runs a Deployment of pods pods,
// labelled app=name, on it in ns; it returns once they all run. Drain
// benchmarks use it so that every drain implementation gets the same
// workload.
func (c *Cluster) NodeWithDeployment(tb testing.TB, ns, name string, pods int32) string {
	tb.Helper()
	node := c.AddNode(tb, ns[len(ns)-6:]+"-"+name)
	ctx := context.Background()
	if err := CreateDeployment(ctx, c.client, ns, name, node, pods, nil); err != nil {
		tb.Fatal(err)
	}
	if err := WaitPodsRunning(ctx, c.client, ns, "app="+name, int(pods)); err != nil {
		tb.Fatal(err)
	}
	return node
}

// CreateBoundClaim creates a PersistentVolume of the simulated CSI driver
// (registering the CSIDriver, attach required, if needed) and a claim name
// in ns bound to it, waits until the claim is Bound and returns the
// volume's name. The volume is deleted when tb ends.
func CreateBoundClaim(tb testing.TB, client kubernetes.Interface, ns, name string) string {
	tb.Helper()
	ctx := context.Background()
	csiDriver := &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: sim.CSIDriverName},
		Spec:       storagev1.CSIDriverSpec{AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(false)},
	}
	if _, err := client.StorageV1().CSIDrivers().Create(ctx, csiDriver, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("simcluster: %v", err)
	}
	pvName := ns + "-" + name
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      size,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: sim.CSIDriverName, VolumeHandle: "vol-" + pvName,
			}},
			ClaimRef: &corev1.ObjectReference{Namespace: ns, Name: name},
		},
	}
	if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("simcluster: %v", err)
	}
	tb.Cleanup(func() {
		_ = client.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
	})
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: size},
			VolumeName:       pvName,
			StorageClassName: ptr.To(""),
		},
	}
	if _, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("simcluster: %v", err)
	}
	// The attach-detach controller builds a pod's volumes when it sees the
	// pod; a claim that is not bound yet would postpone that by minutes.
	err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		got, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.ClaimBound, nil
	})
	if err != nil {
		tb.Fatalf("simcluster: claim %s/%s never bound: %v", ns, name, err)
	}
	return pvName
}

func poll(ctx context.Context, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, cond)
}
