package machine

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/apitime"
)

// settle syncs the machine until its syncs write nothing more (the caches
// showing every write first), and returns the machine and node as stored.
func (w *syncWorld) settle(t *testing.T) (*v1alpha1.Machine, *corev1.Node) {
	t.Helper()
	ctx := context.Background()
	quiet := 0
	for i := 0; i < 200 && quiet < 3; i++ {
		w.clearActions()
		res, err := w.c.ReconcileMachine(ctx, "ns/m1")
		if err != nil {
			t.Fatalf("sync: %v", err)
		}
		if len(w.writes(t)) == 0 && res.RequeueAfter != time.Second {
			quiet++
		} else {
			quiet = 0
		}
		time.Sleep(10 * time.Millisecond)
	}
	if quiet < 3 {
		t.Fatalf("the syncs keep writing: %+v", w.writes(t))
	}
	m, err := w.mc.MachineV1alpha1().Machines("ns").Get(ctx, "m1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := w.target.CoreV1().Nodes().Get(ctx, m.Labels[v1alpha1.NodeLabelKey], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m, n
}

// TestSyncPreservesThroughTheNode: through the controller's own writes on
// fake clusters, a Failed machine whose Node asks when-failed is
// preserved (the Node's value recorded, the expiry set, the node tainted,
// marked for the autoscaler, its cordon by the Drainer recorded first,
// drained, the condition saying so); removing the Node's annotation
// stops it and leaves nothing of it behind; the syncs then write nothing.
func TestSyncPreservesThroughTheNode(t *testing.T) {
	var nodeName string
	w := newSyncWorld(t, "", func(cloud *sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node) {
		vm := addVM(t, cloud)
		nodeName = vm.NodeName
		m := syncMachineObj(func(m *v1alpha1.Machine) { withVM(m, vm, v1alpha1.MachineFailed) })
		n := syncNode(vm, true, corev1.ConditionFalse)
		m.Status.Conditions = n.Status.Conditions
		n = planNodeSync(n, m, nil)
		n.Annotations[v1alpha1.PreserveAnnotation] = "when-failed"
		n.Spec.Unschedulable = false
		return []*v1alpha1.Machine{m}, []*corev1.Node{n}
	})
	m, n := w.settle(t)
	until := apitime.Of(t0.Add(v1alpha1.DefaultMachinePreserveTimeout))
	if got := m.Status.CurrentStatus.PreserveExpiryTime; got == nil || !got.Equal(&until) {
		t.Errorf("expiry %v, want %v", got, until)
	}
	for k, want := range map[string]string{v1alpha1.LastAppliedNodePreserveValueAnnotation: "when-failed",
		PreserveCordonedAnnotation: "true", PreserveDrainedAnnotation: formatTime(t0)} {
		if got := m.Annotations[k]; got != want {
			t.Errorf("machine annotation %s = %q, want %q", k, got, want)
		}
	}
	if !hasTaint(n, v1alpha1.PreservedTaintKey) || n.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] != "true" {
		t.Errorf("node not marked: %v %v", n.Spec.Taints, n.Annotations)
	}
	c := preservedCondition(n)
	want := v1alpha1.PreservedNodeDrainSuccessful + " Machine preserved until " + preserveTime(until.Time) + "."
	if c == nil || c.Status != corev1.ConditionTrue || c.Message != want || c.Reason != v1alpha1.PreservedByUser {
		t.Errorf("condition %+v, want True %q", c, want)
	}
	if n.Annotations[v1alpha1.PreserveAnnotation] != "when-failed" {
		t.Errorf("the Node's annotation went: %v", n.Annotations)
	}

	delete(n.Annotations, v1alpha1.PreserveAnnotation)
	if _, err := w.target.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	m, n = w.settle(t)
	if m.Status.CurrentStatus.PreserveExpiryTime != nil {
		t.Errorf("expiry %v after the stop", m.Status.CurrentStatus.PreserveExpiryTime)
	}
	for _, k := range []string{v1alpha1.LastAppliedNodePreserveValueAnnotation, PreserveDrainedAnnotation, PreserveDrainStateAnnotation} {
		if _, ok := m.Annotations[k]; ok {
			t.Errorf("machine annotation %s left after the stop", k)
		}
	}
	if hasTaint(n, v1alpha1.PreservedTaintKey) || n.Annotations[v1alpha1.ScaleDownDisabledAnnotation] != "" ||
		n.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] != "" {
		t.Errorf("node marks left after the stop: %v %v", n.Spec.Taints, n.Annotations)
	}
	if c := preservedCondition(n); c == nil || c.Status != corev1.ConditionFalse || c.Reason != v1alpha1.PreservationStopped {
		t.Errorf("condition after the stop: %+v", c)
	}
	if diff := cmp.Diff(nodeName, n.Name); diff != "" {
		t.Error(diff)
	}
}
