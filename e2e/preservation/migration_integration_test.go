package preservation_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/simcluster"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// TestIntegrationSwitchFromMCMKeepsPreservation (acceptance 4): a machine
// MCM v0.62.1 preserved stays preserved after the switch. The controllers
// build a deployment of two machines and stop; then, with no controller
// running, one machine and its node are rewritten as MCM v0.62.1 leaves a
// Failed machine preserved through preserve=when-failed on its Node: the
// machine Failed with an expiry in the future and the Node's value in
// last-applied-node-preserve-value (MCM strips the machine's own
// annotation), the Node unreachable, annotated, cordoned by MCM's drain,
// kept from the cluster-autoscaler's scale-down (with MCM's marker) and
// carrying Preserved=True "Preserved node drained successfully. Machine
// preserved until ...". The controllers start again: the set and the
// deployment count the machine in preservedFailedReplicas; the machine is
// neither deleted nor replaced, its VM stays, its expiry is the same, its
// node keeps the condition, the annotations and a guard against new pods
// (MCM's cordon or our taint); a scale-up adds machines beside it.
func TestIntegrationSwitchFromMCMKeepsPreservation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := simstack.Prepare(t, simcluster.Options{})
	opts := simstack.Options{Deployments: true, Machine: machine.Options{
		Machine: v1alpha1.MachineConfiguration{MachineHealthTimeout: &metav1.Duration{Duration: healthTimeout}},
	}}
	stop := s.Run(t, opts)
	createDeployment(t, s, poolDeployment(s, "web", 2, nil))
	ms := runningPool(t, s, "web", 2)
	stop()

	preserved := ms[1]
	node := nodeOf(&preserved)
	// A broken node, as MCM's Failed machine has; a silent kubelet also
	// leaves the Node's status to the rest of the control plane.
	s.Cluster.Kubelet.StopHeartbeats(node)
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, s, node)
		if err != nil {
			return false, err.Error()
		}
		c := nodeCondition(n, corev1.NodeReady)
		return c != nil && c.Status != corev1.ConditionTrue, fmt.Sprintf("node %s: Ready %+v, want not True", node, c)
	})
	expiry := rewriteAsMCMPreserved(t, s, preserved.Name, node)
	uid := preserved.UID

	stop = s.Run(t, opts)
	defer stop()
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		set, deployment, err := preservedCounts(ctx, s, "web")
		if err != nil {
			return false, err.Error()
		}
		return set == 1 && deployment == 1, fmt.Sprintf("preservedFailedReplicas: set %d, deployment %d; want 1 and 1", set, deployment)
	})
	untouched := func(ctx context.Context) (bool, string) {
		got, err := poolMachines(ctx, s, "web")
		if err != nil {
			return false, err.Error()
		}
		for _, m := range got {
			if m.Name != preserved.Name {
				continue
			}
			cs := m.Status.CurrentStatus
			ok := m.UID == uid && m.DeletionTimestamp == nil && cs.Phase == v1alpha1.MachineFailed &&
				cs.PreserveExpiryTime != nil && cs.PreserveExpiryTime.Equal(&expiry) && vmLive(s, m.Spec.ProviderID) &&
				m.Annotations[v1alpha1.LastAppliedNodePreserveValueAnnotation] == string(v1alpha1.PreserveWhenFailed)
			return ok && len(got) == 2, fmt.Sprintf("want %s as MCM left it (uid %s, Failed, preserved until %v, when-failed applied, VM live) and no replacement:%s",
				preserved.Name, uid, expiry, describe(got))
		}
		return false, fmt.Sprintf("machine %s gone:%s", preserved.Name, describe(got))
	}
	// Long enough for what the controllers do on their own to show.
	holds(t, 15*time.Second, untouched)
	n, err := getNode(ctx, s, node)
	if err != nil {
		t.Fatal(err)
	}
	if c := nodeCondition(n, v1alpha1.NodePreserved); c == nil || c.Status != corev1.ConditionTrue || c.Reason != v1alpha1.PreservedByUser ||
		!strings.HasPrefix(c.Message, v1alpha1.PreservedNodeDrainSuccessful) {
		t.Errorf("node %s: condition %s = %+v; want it kept True, %q, %q...", node, v1alpha1.NodePreserved, c, v1alpha1.PreservedByUser, v1alpha1.PreservedNodeDrainSuccessful)
	}
	for _, k := range []string{v1alpha1.ScaleDownDisabledAnnotation, v1alpha1.ScaleDownDisabledByMCMAnnotation} {
		if n.Annotations[k] != "true" {
			t.Errorf("node %s: %s=%q, want MCM's true kept", node, k, n.Annotations[k])
		}
	}
	if v := n.Annotations[v1alpha1.PreserveAnnotation]; v != string(v1alpha1.PreserveWhenFailed) {
		t.Errorf("node %s: %s=%q, want the operator's when-failed kept", node, v1alpha1.PreserveAnnotation, v)
	}
	if !n.Spec.Unschedulable && !preservedTaint(n) {
		t.Errorf("node %s: neither cordoned nor tainted %s (taints %v): new pods may land on a preserved Failed machine's node",
			node, v1alpha1.PreservedTaintKey, n.Spec.Taints)
	}

	// The namespace is the controllers' own: a scale-up adds a machine
	// beside the preserved one, which still counts toward the replicas.
	patchDeployment(t, s, "web", `{"spec":{"replicas":3}}`)
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		got, err := poolMachines(ctx, s, "web")
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, m := range got {
			if m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning && m.DeletionTimestamp == nil {
				running++
			}
		}
		return len(got) == 3 && running == 2, "want the preserved machine and two Running ones:" + describe(got)
	})
	checkStillPreserved(t, s, preserved.Name, uid, expiry)
}

// checkStillPreserved checks the machine MCM preserved is unchanged.
func checkStillPreserved(t *testing.T, s *simstack.Stack, name string, uid types.UID, expiry metav1.Time) {
	t.Helper()
	m, err := getMachine(context.Background(), s, name)
	if err != nil {
		t.Fatalf("machine %s: %v", name, err)
	}
	cs := m.Status.CurrentStatus
	if m.UID != uid || m.DeletionTimestamp != nil || cs.Phase != v1alpha1.MachineFailed ||
		cs.PreserveExpiryTime == nil || !cs.PreserveExpiryTime.Equal(&expiry) {
		t.Errorf("after the scale-up, machine %s is no longer as MCM left it (uid %v, preserved until %v):%s", name, uid, expiry, describe([]v1alpha1.Machine{*m}))
	}
}

// rewriteAsMCMPreserved rewrites machine name and its node as MCM v0.62.1
// leaves a Failed machine preserved by preserve=when-failed on its Node,
// ten minutes after it failed, and returns the expiry.
func rewriteAsMCMPreserved(t *testing.T, s *simstack.Stack, name, node string) metav1.Time {
	t.Helper()
	ctx := context.Background()
	ours := func(annotations map[string]string) {
		maps.DeleteFunc(annotations, func(k, _ string) bool { return strings.Contains(k, "mcmkit.io/") })
	}
	failedAt := metav1.NewTime(time.Now().Add(-10 * time.Minute).Truncate(time.Second))
	expiry := metav1.NewTime(failedAt.Add(v1alpha1.DefaultMachinePreserveTimeout))

	machines := s.Machines.MachineV1alpha1().Machines(s.NS)
	m, err := machines.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ours(m.Annotations)
	delete(m.Annotations, v1alpha1.PreserveAnnotation)
	m.Annotations[v1alpha1.LastAppliedNodePreserveValueAnnotation] = string(v1alpha1.PreserveWhenFailed)
	if m, err = machines.Update(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// MCM's health timeout, then its preservation, which moves
	// lastUpdateTime to its own start.
	m.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachineFailed, LastUpdateTime: failedAt, PreserveExpiryTime: &expiry}
	m.Status.LastOperation = v1alpha1.LastOperation{
		Description: fmt.Sprintf("Machine %s health checks failing since last %s minutes. Updating machine phase to Failed. Node Conditions: %+v",
			name, healthTimeout, m.Status.Conditions),
		State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationHealthCheck, LastUpdateTime: failedAt,
	}
	if _, err := machines.UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// kube-controller-manager taints the unreachable node meanwhile:
	// each write is retried on a conflict with a fresh read.
	nodes := s.Core.CoreV1().Nodes()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ours(n.Annotations)
		n.Annotations[v1alpha1.PreserveAnnotation] = string(v1alpha1.PreserveWhenFailed)
		n.Annotations[v1alpha1.ScaleDownDisabledAnnotation] = "true"
		n.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] = "true"
		n.Spec.Unschedulable = true // MCM v0.62.1's drain cordons; it has no preserved taint
		_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: v1alpha1.NodePreserved, Status: corev1.ConditionTrue, Reason: v1alpha1.PreservedByUser,
			Message:            fmt.Sprintf("%s Machine preserved until %v.", v1alpha1.PreservedNodeDrainSuccessful, &expiry),
			LastTransitionTime: failedAt, LastHeartbeatTime: failedAt,
		})
		_, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return expiry
}
