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
	"k8s.io/apimachinery/pkg/watch"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// quiet is how long a test watches a rollout that must not move (nothing
// selected in Manual, nothing further selected after a failure) before it
// acts.
const quiet = 10 * time.Second

// TestIntegrationInPlaceManual (issue acceptance 2): a deployment of 4
// machines, InPlaceUpdate with orchestration Manual, rolled to a new
// class. Once its old set refuses to grow and its nodes are candidates,
// nothing happens for a while: no machine leaves Running, no node is
// selected or cordoned, no node's version changes. Then two nodes are
// labelled selected-for-update, as a person would: exactly those two are
// drained, updated to the new version, moved to the new set and
// uncordoned, while the other two stay in the old set, Running, on the
// old version, never cordoned. The sets end at 2 and 2, on the same VMs.
func TestIntegrationInPlaceManual(t *testing.T) {
	t.Parallel()
	s, oldClass, newClass := inPlaceStack(t)

	d := inPlaceDeployment(s.NS, "manual", 4, oldClass)
	d.Spec.Strategy.InPlaceUpdate.OrchestrationType = v1alpha1.OrchestrationTypeManual
	create(t, s, d)
	machines := waitRunning(t, s, 4)
	before := providerIDs(t, machines)
	oldSet := metav1.GetControllerOf(&machines[0]).Name
	seen := watchHistory(t, s)

	setClass(t, s, "manual", newClass)
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) { return marked(ctx, s, oldSet, 4) })
	msg, moved := testenv.Poll(quiet, func(ctx context.Context) (bool, string) {
		ok, why := untouched(ctx, s, oldSet, nodeNames(machines), "v1.37.1")
		return !ok, why
	})
	if moved {
		t.Fatalf("a Manual rollout moved before anyone selected a node: %s", msg)
	}

	nodes := nodeNames(machines)
	picked, left := nodes[2:], nodes[:2]
	for _, n := range picked {
		labelNode(t, s, n, v1alpha1.SelectedForUpdateLabel, "true")
	}
	var newSet string
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		var ok bool
		var why string
		newSet, ok, why = manualDone(ctx, s, oldSet, picked, left)
		return ok, why
	})

	after := providerIDs(t, waitRunning(t, s, 4))
	if !slices.Equal(before, after) {
		t.Errorf("the VMs changed: before %v, after %v", before, after)
	}
	if got := seen.leftRunning(); !slices.Equal(got, picked) {
		t.Errorf("machines seen leaving Running: %v, want exactly the selected %v", got, picked)
	}
	if got := seen.cordonedOf(nodes); !slices.Equal(got, picked) {
		t.Errorf("nodes seen cordoned: %v, want exactly the selected %v", got, picked)
	}
	t.Logf("%v moved to %s, %v stayed in %s", picked, newSet, left, oldSet)
}

// marked tells whether the in-place rollout has marked the old set
// oldSet (scale-up-disabled) and the n nodes of its machines
// (candidate-for-update, seen by the machine controller as
// CandidateForUpdate), and made a new set at 0.
func marked(ctx context.Context, s *simstack.Stack, oldSet string, n int) (bool, string) {
	sets, err := s.Machines.MachineV1alpha1().MachineSets(s.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	var problems []string
	for _, set := range sets.Items {
		_, disabled := set.Labels[v1alpha1.ScaleUpDisabledLabel]
		switch {
		case set.Name == oldSet && !disabled:
			problems = append(problems, "old set "+set.Name+" can still grow")
		case set.Name != oldSet && set.Spec.Replicas != 0:
			problems = append(problems, fmt.Sprintf("new set %s has replicas %d", set.Name, set.Spec.Replicas))
		}
	}
	if len(sets.Items) != 2 {
		problems = append(problems, fmt.Sprintf("%d sets, want 2", len(sets.Items)))
	}
	ms, err := s.Machines.MachineV1alpha1().Machines(s.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	candidates := 0
	for _, m := range ms.Items {
		node, err := s.Core.CoreV1().Nodes().Get(ctx, m.Labels[v1alpha1.NodeLabelKey], metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if _, ok := node.Labels[v1alpha1.CandidateForUpdateLabel]; ok && inPlaceReason(node) == v1alpha1.CandidateForUpdate {
			candidates++
		}
	}
	if candidates != n {
		problems = append(problems, fmt.Sprintf("%d candidate nodes, want %d", candidates, n))
	}
	return len(problems) == 0, strings.Join(problems, "; ")
}

// untouched tells whether the machines of nodes are all still Running in
// oldSet, their nodes neither selected nor cordoned and reporting version.
func untouched(ctx context.Context, s *simstack.Stack, oldSet string, nodes []string, version string) (bool, string) {
	var problems []string
	for _, name := range nodes {
		m, err := s.Machines.MachineV1alpha1().Machines(s.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if ref := metav1.GetControllerOf(m); ref == nil || ref.Name != oldSet || m.Status.CurrentStatus.Phase != v1alpha1.MachineRunning {
			problems = append(problems, fmt.Sprintf("machine %s is %s in %v", name, m.Status.CurrentStatus.Phase, ref))
		}
		node, err := s.Core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if _, ok := node.Labels[v1alpha1.SelectedForUpdateLabel]; ok {
			problems = append(problems, "node "+name+" is selected")
		}
		if node.Spec.Unschedulable {
			problems = append(problems, "node "+name+" is cordoned")
		}
		if v := node.Status.NodeInfo.KubeletVersion; v != version {
			problems = append(problems, fmt.Sprintf("node %s reports %s", name, v))
		}
	}
	return len(problems) == 0, strings.Join(problems, "; ")
}

// manualDone tells whether the machines of picked moved to the new set
// (the other set than oldSet) and are Running on the new version with no
// in-place mark left on their nodes but the autoscaler's (it goes when
// the rollout ends), the machines of left are untouched in oldSet, and
// both sets hold 2; it returns the new set's name.
func manualDone(ctx context.Context, s *simstack.Stack, oldSet string, picked, left []string) (string, bool, string) {
	ok, why := untouched(ctx, s, oldSet, left, "v1.37.1")
	problems := []string{}
	if !ok {
		problems = append(problems, why)
	}
	sets, err := s.Machines.MachineV1alpha1().MachineSets(s.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", false, err.Error()
	}
	newSet, newHash := "", ""
	for _, set := range sets.Items {
		if set.Name != oldSet {
			newSet, newHash = set.Name, set.Spec.Template.Labels[v1alpha1.MachineTemplateHashLabelKey]
		}
		if set.Spec.Replicas != 2 || set.Status.Replicas != 2 {
			problems = append(problems, fmt.Sprintf("set %s at %d/%d, want 2/2", set.Name, set.Spec.Replicas, set.Status.Replicas))
		}
	}
	for _, name := range picked {
		m, err := s.Machines.MachineV1alpha1().Machines(s.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", false, err.Error()
		}
		ref := metav1.GetControllerOf(m)
		if ref == nil || ref.Name != newSet || m.Status.CurrentStatus.Phase != v1alpha1.MachineRunning {
			problems = append(problems, fmt.Sprintf("machine %s is %s in %v", name, m.Status.CurrentStatus.Phase, ref))
		}
		if hash := m.Labels[v1alpha1.MachineTemplateHashLabelKey]; hash == "" || hash != newHash {
			problems = append(problems, fmt.Sprintf("machine %s has template hash %q, not the new set's", name, hash))
		}
		node, err := s.Core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", false, err.Error()
		}
		if v := node.Status.NodeInfo.KubeletVersion; v != "v1.37.2" {
			problems = append(problems, fmt.Sprintf("node %s reports %s", name, v))
		}
		// The rollout is not over (the old set keeps 2): the autoscaler's
		// scale-down-disabled annotation stays on every node, as in MCM.
		autoscaler := "annotation " + v1alpha1.ScaleDownDisabledByMCMAnnotation
		if left := slices.DeleteFunc(marks(node), func(m string) bool { return m == autoscaler }); len(left) > 0 {
			problems = append(problems, fmt.Sprintf("node %s keeps %v", name, left))
		}
	}
	return newSet, len(problems) == 0, strings.Join(problems, "; ")
}

// nodeNames are the names of the machines' nodes, sorted. The simulated
// cloud names a node after its machine, so they are the machines' names too.
func nodeNames(ms []v1alpha1.Machine) []string {
	var names []string
	for _, m := range ms {
		names = append(names, m.Labels[v1alpha1.NodeLabelKey])
	}
	sort.Strings(names)
	return names
}

// inPlaceReason is the reason of the node's InPlaceUpdate condition, ""
// without one.
func inPlaceReason(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == v1alpha1.NodeInPlaceUpdate {
			return c.Reason
		}
	}
	return ""
}

// labelNode sets one label on a node, as a person or an agent would: a
// merge patch naming that key only.
func labelNode(t *testing.T, s *simstack.Stack, node, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if _, err := s.Core.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// history records, from watches that run until the test ends, the
// namespace's machines ever seen in another phase than Running and the
// nodes ever seen cordoned.
type history struct {
	mu                      sync.Mutex
	notRunning, cordoned    map[string]bool
	machineWatch, nodeWatch watch.Interface
}

func watchHistory(t *testing.T, s *simstack.Stack) *history {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &history{notRunning: map[string]bool{}, cordoned: map[string]bool{}}
	var err error
	if h.machineWatch, err = s.Machines.MachineV1alpha1().Machines(s.NS).Watch(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if h.nodeWatch, err = s.Core.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range h.machineWatch.ResultChan() {
			if m, ok := ev.Object.(*v1alpha1.Machine); ok && m.Status.CurrentStatus.Phase != v1alpha1.MachineRunning {
				h.record(h.notRunning, m.Name)
			}
		}
	})
	wg.Go(func() {
		for ev := range h.nodeWatch.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && n.Spec.Unschedulable {
				h.record(h.cordoned, n.Name)
			}
		}
	})
	t.Cleanup(func() { cancel(); h.machineWatch.Stop(); h.nodeWatch.Stop(); wg.Wait() })
	return h
}

func (h *history) record(set map[string]bool, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	set[name] = true
}

// leftRunning are the machines seen not Running, sorted.
func (h *history) leftRunning() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return sortedKeys(h.notRunning, nil)
}

// cordonedOf are those of nodes seen cordoned, sorted: the cluster's other
// nodes are other tests'.
func (h *history) cordonedOf(nodes []string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return sortedKeys(h.cordoned, nodes)
}

// sortedKeys are set's keys that are in only (all without only), sorted.
func sortedKeys(set map[string]bool, only []string) []string {
	keys := []string{}
	for k := range set {
		if only == nil || slices.Contains(only, k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}
