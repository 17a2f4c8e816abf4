package preservation_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// TestIntegrationPreserveWhenFailed (acceptance 1): in a deployment of 5,
// a machine whose Node carries preserve=when-failed and whose node goes
// NotReady until the machine is Failed is preserved: its workload pod is
// drained, its node tainted node.machine.sapcloud.io/preserved:NoSchedule
// and kept from the cluster-autoscaler's scale-down, its Node condition
// Preserved=True says the drain succeeded, its expiry is MCM's default
// 96h, its VM stays, the set neither deletes nor replaces it and counts
// it in status.preservedFailedReplicas, as the deployment does. When the
// node is Ready again the machine is Running and nothing of the
// preservation is left but the operator's annotation.
// TestIntegrationPreserveWhenFailedExpires shows the other end.
func TestIntegrationPreserveWhenFailed(t *testing.T) {
	t.Parallel()
	s := preservationStack(t)
	createDeployment(t, s, poolDeployment(s, "web", 5, nil))
	web := runningPool(t, s, "web", 5)
	victim := web[2]
	node := nodeOf(&victim)
	pod := runPod(t, s, node)

	failedAt := failPreservedWhenFailed(t, s, &victim)
	checkPreservedFailed(t, s, victim.Name, pod, failedAt, v1alpha1.DefaultMachinePreserveTimeout)
	checkKeptBySet(t, s, "web", 5, victim.Name)

	// The node recovers: the preservation stops and leaves nothing behind
	// but the operator's annotation.
	healNode(s, node)
	checkRecovered(t, s, "web", victim.Name, node)
}

// TestIntegrationPreserveWhenFailedExpires (acceptance 1, the other end):
// in a pool with a short machinePreserveTimeout, a machine whose Node
// carries preserve=when-failed and whose node goes NotReady is Failed and
// preserved until its failure plus that timeout, kept by the set until
// then, and once the preservation expires the set replaces it and its VM
// goes.
func TestIntegrationPreserveWhenFailedExpires(t *testing.T) {
	t.Parallel()
	const shortPreserve = 25 * time.Second
	s := preservationStack(t)
	createDeployment(t, s, poolDeployment(s, "short", 2, &v1alpha1.MachineConfiguration{
		MachinePreserveTimeout: &metav1.Duration{Duration: shortPreserve},
	}))
	short := runningPool(t, s, "short", 2)
	doomed := short[0]
	brokeAt := failPreservedWhenFailed(t, s, &doomed)
	m, err := getMachine(context.Background(), s, doomed.Name)
	if err != nil {
		t.Fatal(err)
	}
	expiry := m.Status.CurrentStatus.PreserveExpiryTime.Time
	if expiry.Before(brokeAt.Add(shortPreserve).Add(-time.Second)) || expiry.After(time.Now().Add(shortPreserve+time.Second)) {
		t.Errorf("machine %s preserved until %v; want its failure (after %v) plus the template's machinePreserveTimeout %v",
			doomed.Name, expiry, brokeAt, shortPreserve)
	}
	if d := time.Until(expiry) - 3*time.Second; d > 0 {
		checkKeptBySetFor(t, s, "short", 2, doomed.Name, d)
	}
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		ms, err := poolMachines(ctx, s, "short")
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, m := range ms {
			if m.Name == doomed.Name {
				return false, fmt.Sprintf("machine %s, preserved until %v, still there after it:%s", doomed.Name, expiry, describe(ms))
			}
			if m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning && m.DeletionTimestamp == nil {
				running++
			}
		}
		return len(ms) == 2 && running == 2, "want 2 Running machines, the expired one replaced:" + describe(ms)
	})
	testenv.Eventually(t, settle, func(context.Context) (bool, string) {
		return !vmLive(s, doomed.Spec.ProviderID), fmt.Sprintf("VM %s of the replaced machine still live", doomed.Spec.ProviderID)
	})
}

// preservationStack runs the controllers with MachineDeployments and the
// short health timeout, so that a broken node's machine fails in seconds.
func preservationStack(t *testing.T) *simstack.Stack {
	t.Helper()
	return simstack.Start(t, simstack.Options{
		Deployments: true,
		Machine: machine.Options{Machine: v1alpha1.MachineConfiguration{
			MachineHealthTimeout: &metav1.Duration{Duration: healthTimeout},
		}},
	})
}

// failPreservedWhenFailed annotates the node of m preserve=when-failed,
// waits until the machine controller records the Node's value on the
// machine, breaks the node and waits until the machine is Failed and
// preserved. It returns when the node was broken.
func failPreservedWhenFailed(t *testing.T, s *simstack.Stack, m *v1alpha1.Machine) time.Time {
	t.Helper()
	node := nodeOf(m)
	annotateNode(t, s, node, v1alpha1.PreserveAnnotation, preserveValue(v1alpha1.PreserveWhenFailed))
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		got, err := getMachine(ctx, s, m.Name)
		if err != nil {
			return false, err.Error()
		}
		v := got.Annotations[v1alpha1.LastAppliedNodePreserveValueAnnotation]
		return v == string(v1alpha1.PreserveWhenFailed), fmt.Sprintf("machine %s: %s=%q, want the Node's when-failed recorded",
			m.Name, v1alpha1.LastAppliedNodePreserveValueAnnotation, v)
	})
	brokeAt := time.Now()
	breakNode(s, node)
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		got, err := getMachine(ctx, s, m.Name)
		if err != nil {
			return false, fmt.Sprintf("machine %s: %v", m.Name, err)
		}
		cs := got.Status.CurrentStatus
		return cs.Phase == v1alpha1.MachineFailed && cs.PreserveExpiryTime != nil && got.DeletionTimestamp == nil,
			"want Failed and preserved, not deleted:" + describe([]v1alpha1.Machine{*got})
	})
	return brokeAt
}

// checkPreservedFailed checks a preserved Failed machine and its node: the
// expiry (timeout after its failure), the VM, the taint, the
// cluster-autoscaler annotations, the drained pod and the Preserved
// condition.
func checkPreservedFailed(t *testing.T, s *simstack.Stack, name string, pod *corev1.Pod, failedAfter time.Time, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	m, err := getMachine(ctx, s, name)
	if err != nil {
		t.Fatal(err)
	}
	if expiry := m.Status.CurrentStatus.PreserveExpiryTime.Time; expiry.Before(failedAfter.Add(timeout).Add(-time.Second)) || expiry.After(time.Now().Add(timeout+time.Second)) {
		t.Errorf("machine %s preserved until %v; want its failure (after %v) plus %v", name, expiry, failedAfter, timeout)
	}
	if !vmLive(s, m.Spec.ProviderID) {
		t.Errorf("VM %s of the preserved machine %s is gone or being deleted", m.Spec.ProviderID, name)
	}
	node := nodeOf(m)
	soon(t, time.Minute, func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, s, node)
		if err != nil {
			return false, err.Error()
		}
		ok := preservedTaint(n) && n.Annotations[v1alpha1.ScaleDownDisabledAnnotation] == "true" &&
			n.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] == "true"
		return ok, fmt.Sprintf("node %s: taints %v, annotations %v; want the preserved taint and both autoscaler annotations",
			node, n.Spec.Taints, n.Annotations)
	})
	soon(t, time.Minute, func(ctx context.Context) (bool, string) {
		got, err := s.Core.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("pod %s still on node %s (phase %s, deleting %v): not drained", got.Name, node, got.Status.Phase, got.DeletionTimestamp != nil)
	})
	soon(t, time.Minute, func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, s, node)
		if err != nil {
			return false, err.Error()
		}
		c := nodeCondition(n, v1alpha1.NodePreserved)
		ok := c != nil && c.Status == corev1.ConditionTrue && c.Reason == v1alpha1.PreservedByUser &&
			strings.HasPrefix(c.Message, v1alpha1.PreservedNodeDrainSuccessful)
		return ok, fmt.Sprintf("node %s: condition %s = %+v; want True, %q, %q...", node, v1alpha1.NodePreserved, c,
			v1alpha1.PreservedByUser, v1alpha1.PreservedNodeDrainSuccessful)
	})
}

// checkKeptBySet checks that the pool's set and deployment count the
// preserved Failed machine, then that for a while the pool keeps replicas
// machines in all, the preserved one among them with its VM: neither
// deleted nor replaced.
func checkKeptBySet(t *testing.T, s *simstack.Stack, pool string, replicas int, preserved string) {
	t.Helper()
	checkKeptBySetFor(t, s, pool, replicas, preserved, 10*time.Second)
}

func checkKeptBySetFor(t *testing.T, s *simstack.Stack, pool string, replicas int, preserved string, d time.Duration) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		set, deployment, err := preservedCounts(ctx, s, pool)
		if err != nil {
			return false, err.Error()
		}
		return set == 1 && deployment == 1, fmt.Sprintf("preservedFailedReplicas: set %d, deployment %d; want 1 and 1", set, deployment)
	})
	holds(t, d, func(ctx context.Context) (bool, string) {
		ms, err := poolMachines(ctx, s, pool)
		if err != nil {
			return false, err.Error()
		}
		kept := false
		for _, m := range ms {
			if m.Name == preserved {
				kept = m.DeletionTimestamp == nil && m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed && vmLive(s, m.Spec.ProviderID)
			}
		}
		set, deployment, err := preservedCounts(ctx, s, pool)
		if err != nil {
			return false, err.Error()
		}
		return kept && len(ms) == replicas && set == 1 && deployment == 1,
			fmt.Sprintf("want %d machines with %s Failed, not deleted, its VM live, counted 1/1 (counts set %d, deployment %d):%s",
				replicas, preserved, set, deployment, describe(ms))
	})
}

// checkRecovered checks that a preserved machine whose node is Ready again
// is Running and no longer preserved, that its node keeps only the
// operator's when-failed annotation, and that the counts are back to 0.
func checkRecovered(t *testing.T, s *simstack.Stack, pool, name, node string) {
	t.Helper()
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		m, err := getMachine(ctx, s, name)
		if err != nil {
			return false, err.Error()
		}
		cs := m.Status.CurrentStatus
		return cs.Phase == v1alpha1.MachineRunning && cs.PreserveExpiryTime == nil && m.DeletionTimestamp == nil,
			"want Running, the expiry cleared:" + describe([]v1alpha1.Machine{*m})
	})
	soon(t, time.Minute, func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, s, node)
		if err != nil {
			return false, err.Error()
		}
		left := preservationTraces(n)
		if n.Spec.Unschedulable {
			left = append(left, "cordon")
		}
		return len(left) == 0 && n.Annotations[v1alpha1.PreserveAnnotation] == string(v1alpha1.PreserveWhenFailed),
			fmt.Sprintf("node %s: left behind %v; %s=%q, want it kept", node, left, v1alpha1.PreserveAnnotation, n.Annotations[v1alpha1.PreserveAnnotation])
	})
	soon(t, time.Minute, func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, s, node)
		if err != nil {
			return false, err.Error()
		}
		c := nodeCondition(n, v1alpha1.NodePreserved)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == v1alpha1.PreservationStopped,
			fmt.Sprintf("node %s: condition %s = %+v; want False, %q", node, v1alpha1.NodePreserved, c, v1alpha1.PreservationStopped)
	})
	soon(t, time.Minute, func(ctx context.Context) (bool, string) {
		set, deployment, err := preservedCounts(ctx, s, pool)
		if err != nil {
			return false, err.Error()
		}
		return set == 0 && deployment == 0, fmt.Sprintf("preservedFailedReplicas: set %d, deployment %d; want 0 and 0", set, deployment)
	})
}

// runPod runs a bare pod on node that tolerates the node being NotReady or
// unreachable for ever, so that only a drain takes it off, and waits until
// the kubelet runs it.
func runPod(t *testing.T, s *simstack.Stack, node string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "evidence", Namespace: s.NS},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			},
		},
	}
	created, err := s.Core.CoreV1().Pods(s.NS).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		got, err := s.Core.CoreV1().Pods(s.NS).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.Phase == corev1.PodRunning, fmt.Sprintf("pod %s on %s is %s", got.Name, node, got.Status.Phase)
	})
	return created
}
