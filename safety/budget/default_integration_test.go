package budget_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// TestIntegrationZeroOptionsReplaceOneAtATime: with the library's zero
// options — a machine controller given no ReplacementGate, no safety piece
// running — a MachineDeployment whose machines carry no name label (none
// this module creates does) still gets MCM's limit: its three nodes
// broken at once, its machines are replaced one at a time. A machine is
// marked Failed only once the previous one's replacement runs, and never
// are two of the broken machines Failed or being deleted together.
func TestIntegrationZeroOptionsReplaceOneAtATime(t *testing.T) {
	t.Parallel()
	const healthTimeout = 5 * time.Second
	s := simstack.Start(t, simstack.Options{
		Deployments: true,
		Machine: machine.Options{Machine: v1alpha1.MachineConfiguration{
			MachineHealthTimeout: &metav1.Duration{Duration: healthTimeout},
		}},
	})
	ctx := context.Background()
	mc := s.Machines.MachineV1alpha1()
	labels := map[string]string{"pool": "unlabelled"}
	if _, err := mc.MachineDeployments(s.NS).Create(ctx, rollingDeployment(s, "unlabelled", 3, labels), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	broken := runningOf(t, s, "unlabelled", 3)
	list, err := mc.Machines(s.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Items {
		if v, ok := m.Labels[v1alpha1.MachineDeploymentNameLabelKey]; ok {
			t.Fatalf("machine %s carries the label %s=%s: the test is about machines without it", m.Name, v1alpha1.MachineDeploymentNameLabelKey, v)
		}
	}

	seen := watchReplacements(t, s, broken)
	for _, name := range broken {
		s.Cluster.Kubelet.SetCondition(name, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"})
	}
	// All three replaced: three Running machines, none of them broken and
	// none other left.
	testenv.Eventually(t, 4*time.Minute, func(ctx context.Context) (bool, string) {
		list, err := mc.Machines(s.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var fresh, others []string
		for _, m := range list.Items {
			if !slices.Contains(broken, m.Name) && m.DeletionTimestamp == nil && m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
				fresh = append(fresh, m.Name)
			} else {
				others = append(others, fmt.Sprintf("%s (%s)", m.Name, m.Status.CurrentStatus.Phase))
			}
		}
		return len(fresh) == 3 && len(others) == 0, fmt.Sprintf("replacements Running %v, others %v", fresh, others)
	})
	r := seen()
	if len(r.failedAfter) != len(broken) {
		t.Fatalf("%d of the %d broken machines were seen Failed: %v", len(r.failedAfter), len(broken), r.failedAfter)
	}
	for i, replacementsRunning := range r.failedAfter {
		if replacementsRunning < i {
			t.Errorf("broken machine %d was marked Failed with %d replacements Running, want %d: %v", i+1, replacementsRunning, i, r.failedAfter)
		}
	}
	if r.mostInReplacement != 1 {
		t.Errorf("up to %d broken machines were Failed or being deleted at once, want 1", r.mostInReplacement)
	}
}

// replacements is what a watch of the machines saw while broken machines
// were replaced.
type replacements struct {
	// failedAfter: for each broken machine seen Failed, in order, how many
	// new machines had been seen Running before.
	failedAfter []int
	// mostInReplacement is the most broken machines seen Failed or being
	// deleted at once.
	mostInReplacement int
}

// watchReplacements watches the machines of s from now on and returns the
// function that tells what it saw of the replacement of broken. A watch,
// not a poll: a set deletes a Failed machine at once, and the events come
// in the order the API server wrote them.
func watchReplacements(t *testing.T, s *simstack.Stack, broken []string) func() replacements {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := s.Machines.MachineV1alpha1().Machines(s.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var mu sync.Mutex
	var r replacements
	failed, inReplacement, newRunning := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range w.ResultChan() {
			m, ok := ev.Object.(*v1alpha1.Machine)
			if !ok {
				continue
			}
			mu.Lock()
			switch {
			case !slices.Contains(broken, m.Name):
				if ev.Type != watch.Deleted && m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
					newRunning[m.Name] = true
				}
			case ev.Type == watch.Deleted:
				delete(inReplacement, m.Name)
			default:
				if m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed && !failed[m.Name] {
					failed[m.Name] = true
					r.failedAfter = append(r.failedAfter, len(newRunning))
				}
				if m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed || m.DeletionTimestamp != nil {
					inReplacement[m.Name] = true
				}
			}
			r.mostInReplacement = max(r.mostInReplacement, len(inReplacement))
			mu.Unlock()
		}
	})
	stop := sync.OnceFunc(func() { cancel(); w.Stop(); wg.Wait() })
	t.Cleanup(stop)
	return func() replacements {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return replacements{failedAfter: slices.Clone(r.failedAfter), mostInReplacement: r.mostInReplacement}
	}
}
