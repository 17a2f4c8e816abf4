package inplace_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Setup: []func(context.Context, *rest.Config) error{crds.Install}})
}

// settle bounds each wait: generous for a loaded two-core machine under
// -race.
const settle = 4 * time.Minute

// TestIntegrationInPlaceRolloutAuto (issue acceptance 1): a deployment of
// 6 machines, InPlaceUpdate with orchestration Auto, maxUnavailable 2 and
// no surge, rolled from a class whose nodes report kubelet v1.37.1 to one
// whose nodes report v1.37.2. The simulated node agent updates each node
// the machine controller drained. The VMs (provider IDs) are the same
// before and after, a watch never sees more than 2 machines not Running
// at once, every node ends up reporting the new version, the old set ends
// at 0 and no in-place mark is left on any node.
func TestIntegrationInPlaceRolloutAuto(t *testing.T) {
	t.Parallel()
	s, oldClass, newClass := inPlaceStack(t)

	d := inPlaceDeployment(s.NS, "web", 6, oldClass)
	if _, err := s.Machines.MachineV1alpha1().MachineDeployments(s.NS).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := providerIDs(t, waitRunning(t, s, 6))

	notRunning := watchNotRunning(t, s)
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"class":{"name":%q}}}}}`, newClass)
	if _, err := s.Machines.MachineV1alpha1().MachineDeployments(s.NS).Patch(context.Background(), "web",
		types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) { return rolledOut(ctx, s, "v1.37.2") })

	after := providerIDs(t, waitRunning(t, s, 6))
	if !slices.Equal(before, after) {
		t.Errorf("the VMs changed: before %v, after %v", before, after)
	}
	switch most := notRunning(); {
	case most > 2:
		t.Errorf("a watch saw %d machines not Running at once, want at most maxUnavailable 2", most)
	case most == 0:
		t.Error("a watch never saw a machine leave Running: nothing was updated")
	default:
		t.Logf("at most %d machines not Running at once", most)
	}
}

// createClass creates a MachineClass of the simulated cloud in s.NS whose
// nodes report version and run the node agent, with s's secret; tune
// changes its providerSpec further (the agent's retry delay, say).
func createClass(t *testing.T, s *simstack.Stack, name, version string, tune ...func(*sim.ProviderSpec)) string {
	t.Helper()
	ctx := context.Background()
	base, err := s.Machines.MachineV1alpha1().MachineClasses(s.NS).Get(ctx, s.Class, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := sim.ProviderSpec{
		Zone: "zone-a", InstanceType: "large", KubeletVersion: version,
		InPlaceUpdate: &sim.InPlaceUpdate{Agent: true, UpdateDelay: &metav1.Duration{Duration: 2 * time.Second}},
	}
	for _, f := range tune {
		f(&spec)
	}
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: name, Namespace: s.NS},
		Provider:     base.Provider,
		SecretRef:    base.SecretRef,
		ProviderSpec: spec.RawExtension(),
	}
	if _, err := s.Machines.MachineV1alpha1().MachineClasses(s.NS).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

func inPlaceDeployment(ns, name string, replicas int32, class string) *v1alpha1.MachineDeployment {
	labels := map[string]string{"pool": name}
	unavailable, surge := intstr.FromInt32(2), intstr.FromInt32(0)
	return &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: class}},
			},
			Strategy: v1alpha1.MachineDeploymentStrategy{
				Type: v1alpha1.InPlaceUpdateMachineDeploymentStrategyType,
				InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{
					UpdateConfiguration: v1alpha1.UpdateConfiguration{MaxUnavailable: &unavailable, MaxSurge: &surge},
					OrchestrationType:   v1alpha1.OrchestrationTypeAuto,
				},
			},
		},
	}
}

// waitRunning waits until the namespace has exactly n machines, all Running
// and none being deleted, and returns them.
func waitRunning(t *testing.T, s *simstack.Stack, n int) []v1alpha1.Machine {
	t.Helper()
	var ms []v1alpha1.Machine
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		list, err := s.Machines.MachineV1alpha1().Machines(s.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ms = list.Items
		running := 0
		for _, m := range ms {
			if m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning && m.DeletionTimestamp == nil {
				running++
			}
		}
		return len(ms) == n && running == n, fmt.Sprintf("want %d Running machines:%s", n, describe(ms))
	})
	return ms
}

func providerIDs(t *testing.T, ms []v1alpha1.Machine) []string {
	t.Helper()
	var ids []string
	for _, m := range ms {
		if m.Spec.ProviderID == "" {
			t.Fatalf("machine %s has no provider ID", m.Name)
		}
		ids = append(ids, m.Spec.ProviderID)
	}
	sort.Strings(ids)
	return ids
}

// watchNotRunning watches the namespace's machines until t ends and
// returns a function that tells the most machines it saw not Running at
// once (a machine being deleted counts as not Running).
func watchNotRunning(t *testing.T, s *simstack.Stack) func() int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	list, err := s.Machines.MachineV1alpha1().Machines(s.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Machines.MachineV1alpha1().Machines(s.NS).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	down, most := map[string]bool{}, 0
	record := func(m *v1alpha1.Machine, deleted bool) {
		mu.Lock()
		defer mu.Unlock()
		down[m.Name] = deleted || m.DeletionTimestamp != nil || m.Status.CurrentStatus.Phase != v1alpha1.MachineRunning
		if deleted {
			delete(down, m.Name)
		}
		n := 0
		for _, d := range down {
			if d {
				n++
			}
		}
		most = max(most, n)
	}
	for i := range list.Items {
		record(&list.Items[i], false)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if m, ok := ev.Object.(*v1alpha1.Machine); ok {
				record(m, ev.Type == watch.Deleted)
			}
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return most
	}
}

// rolledOut tells whether the rollout is done: one set with machines, the
// old one at 0, every node reporting version and carrying no in-place
// mark, cordon, prefer-no-schedule taint or autoscaler annotation of ours.
func rolledOut(ctx context.Context, s *simstack.Stack, version string) (bool, string) {
	return rolledOutOver(ctx, s, version, 2)
}

// rolledOutOver is rolledOut for a deployment that made want sets, all
// but one at 0 (a template changed again during the rollout).
func rolledOutOver(ctx context.Context, s *simstack.Stack, version string, want int) (bool, string) {
	sets, err := s.Machines.MachineV1alpha1().MachineSets(s.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	var sizes []string
	active := 0
	for _, set := range sets.Items {
		sizes = append(sizes, fmt.Sprintf("%s=%d/%d", set.Name, set.Spec.Replicas, set.Status.Replicas))
		if set.Spec.Replicas != 0 || set.Status.Replicas != 0 {
			active++
		}
	}
	if len(sets.Items) != want || active != 1 {
		return false, fmt.Sprintf("want %d sets, all but one at 0: %v", want, sizes)
	}
	machines, err := s.Machines.MachineV1alpha1().Machines(s.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	// Only the namespace's machines' nodes: the cluster's nodes include
	// other tests', named after sets of the same names.
	ours := map[string]bool{}
	for _, m := range machines.Items {
		ours[m.Labels[v1alpha1.NodeLabelKey]] = true
	}
	nodes, err := s.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	var problems []string
	for _, n := range nodes.Items {
		if !ours[n.Name] {
			continue
		}
		if n.Status.NodeInfo.KubeletVersion != version {
			problems = append(problems, fmt.Sprintf("%s reports %s", n.Name, n.Status.NodeInfo.KubeletVersion))
		}
		if left := marks(&n); len(left) > 0 {
			problems = append(problems, fmt.Sprintf("%s keeps %v", n.Name, left))
		}
	}
	return len(problems) == 0, fmt.Sprintf("sets %v; nodes: %v", sizes, problems)
}

// marks lists what an in-place rollout leaves on a node that it should
// have removed.
func marks(n *corev1.Node) []string {
	var left []string
	for _, k := range []string{v1alpha1.CandidateForUpdateLabel, v1alpha1.SelectedForUpdateLabel, v1alpha1.UpdateResultLabel} {
		if _, ok := n.Labels[k]; ok {
			left = append(left, "label "+k)
		}
	}
	for _, k := range []string{v1alpha1.UpdateFailedReasonAnnotation, v1alpha1.ScaleDownDisabledByMCMAnnotation} {
		if _, ok := n.Annotations[k]; ok {
			left = append(left, "annotation "+k)
		}
	}
	if n.Spec.Unschedulable {
		left = append(left, "cordon")
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == v1alpha1.PreferNoScheduleTaintKey {
			left = append(left, "taint "+taint.Key)
		}
	}
	return left
}

func describe(ms []v1alpha1.Machine) string {
	var b strings.Builder
	for _, m := range ms {
		owner := ""
		if ref := metav1.GetControllerOf(&m); ref != nil {
			owner = ref.Name
		}
		fmt.Fprintf(&b, "\n  %s phase=%s set=%s node=%s deleting=%v", m.Name, m.Status.CurrentStatus.Phase, owner,
			m.Labels[v1alpha1.NodeLabelKey], m.DeletionTimestamp != nil)
	}
	return b.String()
}
