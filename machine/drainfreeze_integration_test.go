package machine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// TestIntegrationShortenedInPlaceDrainTimeoutDoesNotForceTheDrain: the
// node of a Running machine with a drain timeout of 20s is selected for
// an in-place update; while a PodDisruptionBudget holds the drain, the
// machine's drainTimeout is patched to 1s and maxEvictRetries to 1, and
// the start's mirror annotation to now. The pod is not deleted before the
// deadline in force when the drain began, and is after it, when the
// machine goes InPlaceUpdating.
func TestIntegrationShortenedInPlaceDrainTimeoutDoesNotForceTheDrain(t *testing.T) {
	t.Parallel()
	const timeout = 20 * time.Second
	w := integration(t, worldOptions{})
	ctx := context.Background()
	createClass(t, w.mc, w.core, w.ns, true)
	m := newMachine(w.ns, w.name(0), "sim", nil)
	m.Spec.MachineConfiguration = &v1alpha1.MachineConfiguration{MachineDrainTimeout: &metav1.Duration{Duration: timeout}}
	m = runningMachine(t, w, m)
	node := m.Labels[v1alpha1.NodeLabelKey]
	guardPod(t, w, node)
	labels, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{
		v1alpha1.CandidateForUpdateLabel: "true", v1alpha1.SelectedForUpdateLabel: "true"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.core.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, labels, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The drain's first pass is stored, and the budget holds the pod.
	var start time.Time
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		cur, err := getMachine(ctx, w.mc, w.ns, m.Name)
		if err != nil {
			return false, err.Error()
		}
		s, err := time.Parse(time.RFC3339Nano, cur.Annotations[machine.InPlaceDrainStartedAnnotation])
		start = s
		return err == nil && cur.Annotations[machine.InPlaceDrainStateAnnotation] != "",
			fmt.Sprintf("phase %s, drain started %q, lastOperation %q", cur.Status.CurrentStatus.Phase,
				cur.Annotations[machine.InPlaceDrainStartedAnnotation], cur.Status.LastOperation.Description)
	})
	patchMachine(t, w, m.Name, map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{machine.InPlaceDrainStartedAnnotation: time.Now().UTC().Format(time.RFC3339Nano)}},
		"spec":     map[string]any{"drainTimeout": "1s", "maxEvictRetries": 1},
	})
	// Until a few seconds before the deadline in force when the drain
	// began (recorded to the second), the pod stays and the machine runs.
	guardedPodStays(t, w, start, start.Add(timeout), func(cur *v1alpha1.Machine) {
		if ph := cur.Status.CurrentStatus.Phase; ph != v1alpha1.MachineRunning {
			t.Fatalf("machine %s went %s before the drain's deadline (lastOperation %q)", m.Name, ph, cur.Status.LastOperation.Description)
		}
	})
	cur, err := getMachine(ctx, w.mc, w.ns, m.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got := drainRecord(cur); got != `{"drainTimeout":"20s","maxEvictRetries":360}` {
		t.Errorf("the drain's record says %q", got)
	}
	// After it, the drain forces: the pod goes, and the update starts.
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		p, err := w.core.CoreV1().Pods(w.ns).Get(ctx, "guarded", metav1.GetOptions{})
		deleted := err != nil || p.DeletionTimestamp != nil
		cur, err := getMachine(ctx, w.mc, w.ns, m.Name)
		if err != nil {
			return false, err.Error()
		}
		return deleted && cur.Status.CurrentStatus.Phase == v1alpha1.MachineInPlaceUpdating,
			fmt.Sprintf("pod deleted %v, phase %s, lastOperation %q", deleted, cur.Status.CurrentStatus.Phase, cur.Status.LastOperation.Description)
	})
	if cur, err = getMachine(ctx, w.mc, w.ns, m.Name); err != nil {
		t.Fatal(err)
	}
	if got := drainRecord(cur); got != "" {
		t.Errorf("the drain's record stayed after the drain: %q", got)
	}
}

// drainRecord is the message (the frozen drain parameters) of the
// machine's in-place drain record, "" when it has none. The condition's
// type is spelled out: it is what clients see.
func drainRecord(m *v1alpha1.Machine) string {
	for _, c := range m.Status.Conditions {
		if c.Type == "mcmkit.io/InPlaceDrain" {
			return c.Message
		}
	}
	return ""
}

// TestIntegrationShortenedPreserveDrainTimeoutDoesNotForceTheDrain: a
// machine preserved when-failed, with a drain timeout of 20s and a
// preserve timeout of 1h, fails; while a PodDisruptionBudget holds the
// drain of its preserved node, its drainTimeout is patched to 1s,
// maxEvictRetries to 1 and machinePreserveTimeout to 10000h (which would
// move the preservation's start, the drain's, far back). The pod is not
// deleted before the deadline in force when the drain began, and is
// after it.
func TestIntegrationShortenedPreserveDrainTimeoutDoesNotForceTheDrain(t *testing.T) {
	t.Parallel()
	const timeout, preserve = 20 * time.Second, time.Hour
	w := integration(t, worldOptions{})
	createClass(t, w.mc, w.core, w.ns, true)
	m := newMachine(w.ns, w.name(0), "sim", nil)
	m.Annotations = map[string]string{v1alpha1.PreserveAnnotation: string(v1alpha1.PreserveWhenFailed)}
	m.Spec.MachineConfiguration = &v1alpha1.MachineConfiguration{MachineDrainTimeout: &metav1.Duration{Duration: timeout},
		MachineHealthTimeout: &metav1.Duration{Duration: 2 * time.Second}, MachinePreserveTimeout: &metav1.Duration{Duration: preserve}}
	m = runningMachine(t, w, m)
	node := m.Labels[v1alpha1.NodeLabelKey]
	guardPod(t, w, node)
	w.kubelet.SetCondition(node, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"})
	// Failed and preserved, and the drain's first pass stored.
	var start time.Time
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		cur, err := getMachine(ctx, w.mc, w.ns, m.Name)
		if err != nil {
			return false, err.Error()
		}
		cs := cur.Status.CurrentStatus
		if cs.PreserveExpiryTime != nil {
			start = cs.PreserveExpiryTime.Add(-preserve)
		}
		return cs.Phase == v1alpha1.MachineFailed && cs.PreserveExpiryTime != nil && cur.Annotations[machine.PreserveDrainStateAnnotation] != "",
			fmt.Sprintf("phase %s, preserved until %v, drain state %q, lastOperation %q", cs.Phase, cs.PreserveExpiryTime,
				cur.Annotations[machine.PreserveDrainStateAnnotation], cur.Status.LastOperation.Description)
	})
	patchMachine(t, w, m.Name, map[string]any{"spec": map[string]any{"drainTimeout": "1s", "maxEvictRetries": 1, "machinePreserveTimeout": "10000h"}})
	deadline := start.Add(timeout)
	guardedPodStays(t, w, start, deadline, nil)
	// After it, the drain forces: the pod goes.
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		p, err := w.core.CoreV1().Pods(w.ns).Get(ctx, "guarded", metav1.GetOptions{})
		return err != nil || p.DeletionTimestamp != nil, fmt.Sprintf("the guarded pod is still there %v after the deadline", time.Since(deadline))
	})
}

// guardedPodStays fails t if the guarded pod goes before a few seconds
// ahead of deadline, the deadline of a drain that began at start, and
// hands the machine (w.name(0)) to check, if any, on each look.
func guardedPodStays(t *testing.T, w *world, start, deadline time.Time, check func(*v1alpha1.Machine)) {
	t.Helper()
	ctx := context.Background()
	wait := time.Until(deadline.Add(-3 * time.Second))
	if wait <= 0 {
		t.Fatalf("the drain took %v to be blocked; the test cannot tell", time.Since(start))
	}
	for end := time.Now().Add(wait); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		p, err := w.core.CoreV1().Pods(w.ns).Get(ctx, "guarded", metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			t.Fatalf("the PodDisruptionBudget's pod was deleted %v before the drain's deadline (err %v)", time.Until(deadline), err)
		}
		if check == nil {
			continue
		}
		cur, err := getMachine(ctx, w.mc, w.ns, w.name(0))
		if err != nil {
			t.Fatal(err)
		}
		check(cur)
	}
}
