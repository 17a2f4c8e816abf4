package machineset_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// setWorld is the machine and MachineSet controllers on a simulated cloud
// against the real control plane.
type setWorld struct {
	t *testing.T
	*simstack.Stack
}

func startSetWorld(t *testing.T) *setWorld {
	return &setWorld{t: t, Stack: simstack.Start(t, simstack.Options{})}
}

// createSet creates the set name of replicas machines.
func (w *setWorld) createSet(name string, replicas int32, annotations map[string]string, config *v1alpha1.MachineConfiguration) {
	w.t.Helper()
	labels := map[string]string{"pool": name}
	set := &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS, Annotations: annotations},
		Spec: v1alpha1.MachineSetSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: w.Class},
					MachineConfiguration: config},
			},
		},
	}
	if _, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).Create(context.Background(), set, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// patchSet merge-patches the set name.
func (w *setWorld) patchSet(name, patch string) {
	w.t.Helper()
	if _, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// patchMachine merge-patches the machine name.
func (w *setWorld) patchMachine(name, patch string) {
	w.t.Helper()
	if _, err := w.Machines.MachineV1alpha1().Machines(w.NS).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// live lists the machines that are not being deleted.
func (w *setWorld) live(ctx context.Context) ([]v1alpha1.Machine, error) {
	list, err := w.Machines.MachineV1alpha1().Machines(w.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.Items, func(m v1alpha1.Machine) bool { return m.DeletionTimestamp != nil }), nil
}

// running waits until exactly want machines exist (not counting those
// being deleted), all Running, and returns them.
func (w *setWorld) running(want int) []v1alpha1.Machine {
	w.t.Helper()
	var got []v1alpha1.Machine
	testenv.Eventually(w.t, 3*time.Minute, func(ctx context.Context) (bool, string) {
		live, err := w.live(ctx)
		if err != nil {
			return false, err.Error()
		}
		run := 0
		for _, m := range live {
			if m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
				run++
			}
		}
		got = live
		return len(live) == want && run == want, fmt.Sprintf("%d machines, %d Running, want %d", len(live), run, want)
	})
	return got
}

func names(machines []v1alpha1.Machine) []string {
	out := make([]string, 0, len(machines))
	for _, m := range machines {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}

// TestIntegrationLadder scales a set 0 → 30 → 29 → 5 → 0 on the real control
// plane: a machine that fails is replaced; the machine the cluster-autoscaler
// marked is the one removed when the replicas drop, and not before; 30 → 5
// deletes exactly the machines the ladder names (a higher priority kept,
// then the newest, as the Oldest policy keeps them).
func TestIntegrationLadder(t *testing.T) {
	t.Parallel()
	w := startSetWorld(t)
	ctx := context.Background()
	scalerAt := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	w.createSet("ladder", 30, map[string]string{v1alpha1.LastReplicaChangeByScalerAnnotation: scalerAt},
		&v1alpha1.MachineConfiguration{MachineHealthTimeout: &metav1.Duration{Duration: 10 * time.Second}})
	machines := w.running(30)

	// A machine whose node turns NotReady goes Unknown, then Failed after
	// the health timeout; the set deletes and replaces it.
	failed := machines[7]
	w.Cluster.Kubelet.SetCondition(failed.Labels[v1alpha1.NodeLabelKey], corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletDown"})
	testenv.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
		live, err := w.live(ctx)
		if err != nil {
			return false, err.Error()
		}
		run := 0
		for _, m := range live {
			if m.Name == failed.Name {
				return false, fmt.Sprintf("%s is %s", m.Name, m.Status.CurrentStatus.Phase)
			}
			if m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
				run++
			}
		}
		return len(live) == 30 && run == 30, fmt.Sprintf("%d machines, %d Running after %s failed", len(live), run, failed.Name)
	})
	machines = w.running(30)

	// The ladder, by hand: creationTimestamp, then name, oldest first.
	slices.SortFunc(machines, func(a, b v1alpha1.Machine) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	// The autoscaler marks the newest machine, which age alone would keep,
	// after the set's last replica change by the scaler: nothing happens
	// until the replicas drop with a newer change time.
	marked := machines[len(machines)-1]
	markedAt := time.Now().UTC().Format(time.RFC3339)
	w.patchMachine(marked.Name, fmt.Sprintf(`{"metadata":{"annotations":{%q:"1",%q:%q}}}`,
		v1alpha1.MachinePriorityAnnotation, v1alpha1.MarkedForDeletionTimeAnnotation, markedAt))
	// A higher priority keeps the oldest machine through the scale-down.
	kept := machines[0]
	w.patchMachine(kept.Name, fmt.Sprintf(`{"metadata":{"annotations":{%q:"5"}}}`, v1alpha1.MachinePriorityAnnotation))
	time.Sleep(2 * time.Second)
	if live, err := w.live(ctx); err != nil || len(live) != 30 {
		t.Fatalf("a mark newer than the scaler's last change removed a machine: %d live, %v", len(live), err)
	}
	w.patchSet("ladder", fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"replicas":29}}`,
		v1alpha1.LastReplicaChangeByScalerAnnotation, markedAt))
	after := w.running(29)
	if slices.Contains(names(after), marked.Name) {
		t.Fatalf("the marked machine %s survived the scale-down", marked.Name)
	}
	rest := slices.DeleteFunc(slices.Clone(machines), func(m v1alpha1.Machine) bool { return m.Name == marked.Name })
	if diff := cmp.Diff(names(rest), names(after)); diff != "" {
		t.Fatalf("scale-down to 29 removed other machines than the marked one (-want +got):\n%s", diff)
	}

	// 29 → 5: the priority-5 machine and the four newest others stay.
	rest = slices.DeleteFunc(rest, func(m v1alpha1.Machine) bool { return m.Name == kept.Name })
	want := append(names(rest[len(rest)-4:]), kept.Name)
	slices.Sort(want)
	w.patchSet("ladder", `{"spec":{"replicas":5}}`)
	if diff := cmp.Diff(want, names(w.running(5))); diff != "" {
		t.Fatalf("scale-down to 5 kept other machines than the ladder names (-want +got):\n%s", diff)
	}

	w.patchSet("ladder", `{"spec":{"replicas":0}}`)
	w.running(0)
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		list, _ := w.Machines.MachineV1alpha1().Machines(w.NS).List(ctx, metav1.ListOptions{})
		return len(list.Items) == 0, fmt.Sprintf("%d machines still being deleted", len(list.Items))
	})
}

// TestIntegrationScaleFreezeAndDelete: the set reaches each count with
// Running machines, freeze=True stops scale-up only, and a deleted set
// leaves no machine, VM or node behind.
func TestIntegrationScaleFreezeAndDelete(t *testing.T) {
	t.Parallel()
	w := startSetWorld(t)
	w.createSet("workers", 0, nil, nil)
	for _, n := range []int{6, 2} {
		w.patchSet("workers", fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
		w.running(n)
	}
	// Frozen: scaling up does nothing, scaling down still works.
	w.patchSet("workers", `{"metadata":{"labels":{"freeze":"True"}},"spec":{"replicas":5}}`)
	time.Sleep(3 * time.Second)
	w.running(2)
	w.patchSet("workers", `{"spec":{"replicas":1}}`)
	w.running(1)

	if err := w.Machines.MachineV1alpha1().MachineSets(w.NS).Delete(context.Background(), "workers", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		sets, _ := w.Machines.MachineV1alpha1().MachineSets(w.NS).List(ctx, metav1.ListOptions{})
		machines, _ := w.Machines.MachineV1alpha1().Machines(w.NS).List(ctx, metav1.ListOptions{})
		vms := 0
		for _, vm := range w.Cluster.Cloud.VMs() {
			if vm.State != sim.VMTerminating {
				vms++
			}
		}
		nodes := 0
		list, _ := w.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		for _, n := range list.Items {
			// This test's kubelet's nodes only: other tests' sets may be
			// called workers too.
			if n.Annotations[sim.AnnotationSimulated] == w.Cluster.Kubelet.Identity() && strings.HasPrefix(n.Labels[v1alpha1.MachineNameLabelKey], "workers-") {
				nodes++
			}
		}
		return len(sets.Items) == 0 && len(machines.Items) == 0 && vms == 0 && nodes == 0,
			fmt.Sprintf("%d sets, %d machines, %d VMs, %d nodes left", len(sets.Items), len(machines.Items), vms, nodes)
	})
}
