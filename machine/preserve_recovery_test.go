package machine

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver/sim"
)

// A preserved Failed machine whose node is healthy again runs again, as in
// MCM, and its when-failed preservation stops: the expiry, the taint, the
// cordon of the drain and the autoscaler annotations go, the condition
// turns False and the operator's annotation stays. A Failed machine that
// is not preserved stays Failed, for its set to replace.
func TestSyncPreservedFailedMachineRecovers(t *testing.T) {
	for _, preserved := range []bool{true, false} {
		w := newSyncWorld(t, "", func(cloud *sim.Cloud) ([]*v1alpha1.Machine, []*corev1.Node) {
			vm := addVM(t, cloud)
			m := syncMachineObj(func(m *v1alpha1.Machine) { withVM(m, vm, v1alpha1.MachineFailed) })
			n := syncNode(vm, true, corev1.ConditionFalse)
			m.Status.Conditions = n.Status.Conditions
			n = planNodeSync(n, m, nil)
			n.Spec.Unschedulable = false
			if preserved {
				n.Annotations[v1alpha1.PreserveAnnotation] = "when-failed"
			}
			return []*v1alpha1.Machine{m}, []*corev1.Node{n}
		})
		m, n := w.settle(t)
		if got := m.Status.CurrentStatus.PreserveExpiryTime != nil; got != preserved {
			t.Fatalf("preserved=%v: machine has an expiry: %v", preserved, got)
		}

		for i, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				n.Status.Conditions[i] = cond(corev1.NodeReady, corev1.ConditionTrue)
			}
		}
		if _, err := w.target.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		m, n = w.settle(t)
		if !preserved {
			if m.Status.CurrentStatus.Phase != v1alpha1.MachineFailed {
				t.Errorf("a Failed machine that is not preserved is %s once its node is healthy, want Failed", m.Status.CurrentStatus.Phase)
			}
			continue
		}
		if m.Status.CurrentStatus.Phase != v1alpha1.MachineRunning || m.Status.CurrentStatus.PreserveExpiryTime != nil {
			t.Errorf("phase %s, expiry %v; want Running and no expiry", m.Status.CurrentStatus.Phase, m.Status.CurrentStatus.PreserveExpiryTime)
		}
		if op := m.Status.LastOperation; op.Type != v1alpha1.MachineOperationHealthCheck || op.State != v1alpha1.MachineStateSuccessful {
			t.Errorf("lastOperation %+v, want a successful HealthCheck", op)
		}
		if hasTaint(n, v1alpha1.PreservedTaintKey) || n.Spec.Unschedulable ||
			n.Annotations[v1alpha1.ScaleDownDisabledAnnotation] != "" || n.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] != "" {
			t.Errorf("node marks left after the recovery: taints %v, unschedulable %v, annotations %v", n.Spec.Taints, n.Spec.Unschedulable, n.Annotations)
		}
		if c := preservedCondition(n); c == nil || c.Status != corev1.ConditionFalse || c.Reason != v1alpha1.PreservationStopped {
			t.Errorf("condition after the recovery: %+v", c)
		}
		if n.Annotations[v1alpha1.PreserveAnnotation] != "when-failed" {
			t.Errorf("the Node's when-failed annotation went: %v", n.Annotations)
		}
	}
}
