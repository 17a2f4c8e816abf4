package deployment_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"

	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// nodeMarks follows one node from a watch and remembers whether it ever
// carried a rollout mark.
type nodeMarks struct {
	mu            sync.Mutex
	tainted, anno bool
}

func (nm *nodeMarks) seen() (tainted, annotated bool) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	return nm.tainted, nm.anno
}

func (nm *nodeMarks) note(n *corev1.Node) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	for _, taint := range n.Spec.Taints {
		nm.tainted = nm.tainted || taint.Key == v1alpha1.PreferNoScheduleTaintKey
	}
	_, a := n.Annotations[v1alpha1.ScaleDownDisabledAnnotation]
	_, b := n.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation]
	nm.anno = nm.anno || a || b
}

// watchNodeMarks watches node until t ends.
func (w *rolloutWorld) watchOneNodeMarks(node string) *nodeMarks {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	watcher, err := w.Core.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String()})
	if err != nil {
		w.t.Fatal(err)
	}
	nm := &nodeMarks{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range watcher.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok {
				nm.note(n)
			}
		}
	}()
	w.t.Cleanup(func() { cancel(); watcher.Stop(); <-done })
	return nm
}

// TestIntegrationRolloutMarksOnlyBoundNodes: a machine forged into a
// deployment's set (its controller reference, labels, a finalizer of its
// own that keeps it Terminating once the set deletes it as foreign) names
// a node no machine is bound to, by its node label and provider ID. A
// rollout of the deployment marks its own nodes, never that one: neither
// the PreferNoSchedule taint nor the scale-down-disabled annotations,
// during the rollout or after it.
func TestIntegrationRolloutMarksOnlyBoundNodes(t *testing.T) {
	t.Parallel()
	w := startRolloutWorld(t)
	ctx := context.Background()
	w.addClass("sim2", func(*sim.ProviderSpec) {})
	w.createDeployment("marks", 1, rolling(1, 0))
	w.complete("marks", 1, w.Class)

	free := "free-" + w.NS
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: free}, Spec: corev1.NodeSpec{ProviderID: "sim:///free/" + free}}
	if _, err := w.Core.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Core.CoreV1().Nodes().Delete(context.Background(), free, metav1.DeleteOptions{}) })
	marks := w.watchOneNodeMarks(free)

	sets, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).List(ctx, metav1.ListOptions{})
	if err != nil || len(sets.Items) != 1 {
		t.Fatalf("want the deployment's one set: %v, %v", sets, err)
	}
	set := &sets.Items[0]
	labels := maps.Clone(set.Spec.Template.Labels)
	labels[v1alpha1.NodeLabelKey] = free
	forged := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: w.NS, Labels: labels, Finalizers: []string{"evil.example/hold"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))}},
		Spec: v1alpha1.MachineSpec{Class: set.Spec.Template.Spec.Class, ProviderID: node.Spec.ProviderID},
	}
	if _, err := w.Machines.MachineV1alpha1().Machines(w.NS).Create(ctx, forged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	release := func() {
		_, _ = w.Machines.MachineV1alpha1().Machines(w.NS).Patch(context.Background(), "forged", types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
	t.Cleanup(release)
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		m, err := w.Machines.MachineV1alpha1().Machines(w.NS).Get(ctx, "forged", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return m.DeletionTimestamp != nil, "the forged machine is not deleted by its set yet"
	})

	// The rollout: the old set (with the forged machine, Terminating)
	// is rolling until the finalizer goes, and its nodes are marked.
	identity := w.kubeletIdentity()
	w.patch("marks", `{"spec":{"template":{"spec":{"class":{"name":"sim2"}}}}}`)
	testenv.Eventually(t, 4*time.Minute, func(ctx context.Context) (bool, string) {
		nodes, err := w.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, n := range nodes.Items {
			// Only this test's kubelet's nodes: the cluster's include
			// other tests', marked by their own rollouts.
			if n.Name != free && n.Annotations[sim.AnnotationSimulated] == identity && n.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] == "true" {
				return true, ""
			}
		}
		return false, "no node of the deployment marked for the rollout yet"
	})
	if tainted, annotated := marks.seen(); tainted || annotated {
		t.Fatalf("the node no machine is bound to was marked during the rollout: tainted %v, scale-down-disabled %v", tainted, annotated)
	}
	release()
	w.complete("marks", 1, "sim2")
	got, err := w.Core.CoreV1().Nodes().Get(ctx, free, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	marks.note(got)
	if tainted, annotated := marks.seen(); tainted || annotated {
		t.Errorf("the node no machine is bound to was marked: tainted %v, scale-down-disabled %v; now %s", tainted, annotated, describeMarks(got))
	}
}

func describeMarks(n *corev1.Node) string {
	return fmt.Sprintf("taints %v, annotations %v", n.Spec.Taints, n.Annotations)
}
