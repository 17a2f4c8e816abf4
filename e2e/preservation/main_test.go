package preservation_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Setup: []func(context.Context, *rest.Config) error{crds.Install}})
}

// Timeouts of the scenarios: short health timeouts make machines Failed in
// seconds; the waits are generous for a loaded two-core machine under -race.
const (
	healthTimeout = 5 * time.Second
	settle        = 4 * time.Minute
)

// poolDeployment is a MachineDeployment of s's class with replicas machines
// labelled pool=name, rolled out one surge machine at a time; config, if not
// nil, is its template's machine configuration.
func poolDeployment(s *simstack.Stack, name string, replicas int32, config *v1alpha1.MachineConfiguration) *v1alpha1.MachineDeployment {
	labels := map[string]string{"pool": name}
	surge, unavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	return &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.NS},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1alpha1.MachineSpec{
					Class:                v1alpha1.ClassSpec{Kind: "MachineClass", Name: s.Class},
					MachineConfiguration: config,
				},
			},
			Strategy: v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge: &surge, MaxUnavailable: &unavailable}}},
		},
	}
}

func createDeployment(t *testing.T, s *simstack.Stack, d *v1alpha1.MachineDeployment) {
	t.Helper()
	if _, err := s.Machines.MachineV1alpha1().MachineDeployments(s.NS).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// poolMachines lists the machines of the pool, oldest first.
func poolMachines(ctx context.Context, s *simstack.Stack, pool string) ([]v1alpha1.Machine, error) {
	list, err := s.Machines.MachineV1alpha1().Machines(s.NS).List(ctx, metav1.ListOptions{LabelSelector: "pool=" + pool})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.Machine) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return list.Items, nil
}

// describe is one line per machine, for failure messages.
func describe(ms []v1alpha1.Machine) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "\n  %s phase=%s node=%s expiry=%v preserve=%q last-applied=%q deleting=%v",
			m.Name, m.Status.CurrentStatus.Phase, nodeOf(&m), m.Status.CurrentStatus.PreserveExpiryTime,
			m.Annotations[v1alpha1.PreserveAnnotation], m.Annotations[v1alpha1.LastAppliedNodePreserveValueAnnotation],
			m.DeletionTimestamp != nil)
	}
	return b.String()
}

// runningPool waits until the pool has exactly n machines, all Running, and
// returns them oldest first.
func runningPool(t *testing.T, s *simstack.Stack, pool string, n int) []v1alpha1.Machine {
	t.Helper()
	var got []v1alpha1.Machine
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		ms, err := poolMachines(ctx, s, pool)
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, m := range ms {
			if m.DeletionTimestamp == nil && m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning && nodeOf(&m) != "" {
				running++
			}
		}
		got = ms
		return len(ms) == n && running == n, fmt.Sprintf("pool %s: want %d Running machines, have:%s", pool, n, describe(ms))
	})
	return got
}

func nodeOf(m *v1alpha1.Machine) string { return m.Labels[v1alpha1.NodeLabelKey] }

func getMachine(ctx context.Context, s *simstack.Stack, name string) (*v1alpha1.Machine, error) {
	return s.Machines.MachineV1alpha1().Machines(s.NS).Get(ctx, name, metav1.GetOptions{})
}

func getNode(ctx context.Context, s *simstack.Stack, name string) (*corev1.Node, error) {
	return s.Core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// annotateNode sets (or, with value nil, removes) one annotation of a Node
// with a merge patch, as kubectl annotate does.
func annotateNode(t *testing.T, s *simstack.Stack, node, key string, value *string) {
	t.Helper()
	v := "null"
	if value != nil {
		v = fmt.Sprintf("%q", *value)
	}
	data := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, key, v)
	if _, err := s.Core.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(data), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func preserveValue(v v1alpha1.PreserveValue) *string { return ptr.To(string(v)) }

// breakNode makes the node's kubelet report NotReady; healNode undoes it.
func breakNode(s *simstack.Stack, node string) {
	s.Cluster.Kubelet.SetCondition(node, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"})
}

func healNode(s *simstack.Stack, node string) {
	s.Cluster.Kubelet.ClearCondition(node, corev1.NodeReady)
}

// nodeCondition returns the node's condition of type ct, or nil.
func nodeCondition(n *corev1.Node, ct corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == ct {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// preservedTaint reports whether the node carries the preservation taint.
func preservedTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool {
		return tn.Key == v1alpha1.PreservedTaintKey && tn.Effect == corev1.TaintEffectNoSchedule
	})
}

// preservationTraces lists what a preservation leaves on a Node: the taint
// and the cluster-autoscaler annotations.
func preservationTraces(n *corev1.Node) []string {
	var left []string
	if preservedTaint(n) {
		left = append(left, "taint "+v1alpha1.PreservedTaintKey)
	}
	for _, k := range []string{v1alpha1.ScaleDownDisabledAnnotation, v1alpha1.ScaleDownDisabledByMCMAnnotation} {
		if v, ok := n.Annotations[k]; ok {
			left = append(left, k+"="+v)
		}
	}
	return left
}

// vmLive reports whether the simulated cloud still has the VM, not being
// deleted.
func vmLive(s *simstack.Stack, providerID string) bool {
	vm, ok := s.Cluster.Cloud.VM(providerID)
	return ok && vm.State != sim.VMTerminating
}

// poolSet returns the pool's only MachineSet.
func poolSet(ctx context.Context, s *simstack.Stack, pool string) (*v1alpha1.MachineSet, error) {
	sets, err := s.Machines.MachineV1alpha1().MachineSets(s.NS).List(ctx, metav1.ListOptions{LabelSelector: "pool=" + pool})
	if err != nil {
		return nil, err
	}
	if len(sets.Items) != 1 {
		return nil, fmt.Errorf("pool %s has %d machine sets", pool, len(sets.Items))
	}
	return &sets.Items[0], nil
}

// preservedCounts is status.preservedFailedReplicas of the pool's set and
// of its deployment.
func preservedCounts(ctx context.Context, s *simstack.Stack, pool string) (set, deployment int32, err error) {
	ms, err := poolSet(ctx, s, pool)
	if err != nil {
		return 0, 0, err
	}
	d, err := s.Machines.MachineV1alpha1().MachineDeployments(s.NS).Get(ctx, pool, metav1.GetOptions{})
	if err != nil {
		return 0, 0, err
	}
	return ms.Status.PreservedFailedReplicas, d.Status.PreservedFailedReplicas, nil
}

// within reports whether got is within slack of want.
func within(got, want time.Time, slack time.Duration) bool {
	d := got.Sub(want)
	return d >= -slack && d <= slack
}

// holds checks cond every 200ms for d and fails t with cond's explanation
// the first time it does not hold: for what must stay true (no replacement,
// no deletion) rather than become true.
func holds(t *testing.T, d time.Duration, cond func(context.Context) (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ok, why := cond(ctx)
		cancel()
		if !ok {
			t.Fatalf("stopped holding after %v: %s", d-time.Until(deadline), why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// soon is testenv.Eventually that reports a miss with t.Errorf and lets the test
// go on, for checks later steps do not depend on: one run then shows
// every miss.
func soon(t *testing.T, timeout time.Duration, cond func(context.Context) (bool, string)) {
	t.Helper()
	if why, ok := testenv.Poll(timeout, cond); !ok {
		t.Errorf("not within %v: %s", timeout, why)
	}
}

// patchDeployment sends a merge patch to the pool's deployment.
func patchDeployment(t *testing.T, s *simstack.Stack, name, data string) {
	t.Helper()
	_, err := s.Machines.MachineV1alpha1().MachineDeployments(s.NS).Patch(context.Background(), name, types.MergePatchType, []byte(data), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
}
