package machine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// guardPod runs pod "guarded" on node behind a PodDisruptionBudget that
// allows no disruption (another of its pods never runs, so the budget is
// not misconfigured, which the drain would not retry against), and waits
// until the budget's status says so.
func guardPod(t *testing.T, w *world, node string) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": "guarded-" + w.prefix}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: w.ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []corev1.Container{{Name: "c", Image: "example.com/c"}}},
	}
	stuck := pod.DeepCopy()
	stuck.Name, stuck.Spec.NodeName = "stuck", "nowhere-"+w.prefix
	for _, p := range []*corev1.Pod{pod, stuck} {
		if _, err := w.core.CoreV1().Pods(w.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: w.ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: new(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := w.core.PolicyV1().PodDisruptionBudgets(w.ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		p, err := w.core.PolicyV1().PodDisruptionBudgets(w.ns).Get(ctx, pdb.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 1 && p.Status.ExpectedPods == 2,
			fmt.Sprintf("budget status %+v", p.Status)
	})
}

// TestIntegrationForgedDrainStateDoesNotSkipTheDrain: the drain state of a
// machine whose drain a PodDisruptionBudget holds is rewritten by someone
// who may patch machines — a deadline in 1970, a negative bound on
// refusals, a thousand refusals. The protected pod stays, the drain
// starts over and the machine says why; the drain timeout (10 minutes)
// still decides when the pod goes.
func TestIntegrationForgedDrainStateDoesNotSkipTheDrain(t *testing.T) {
	t.Parallel()
	rec := record.NewFakeRecorder(1000)
	w := integration(t, worldOptions{ctrl: machine.Options{Recorder: rec}})
	ctx := context.Background()
	createClass(t, w.mc, w.core, w.ns, true)
	m := newMachine(w.ns, w.name(0), "sim", nil)
	createMachine(t, w.mc, m)
	testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, m.Name, v1alpha1.MachineRunning))
	guardPod(t, w, m.Name)
	machines := w.mc.MachineV1alpha1().Machines(w.ns)
	if err := machines.Delete(ctx, m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The stored state as anyone who may patch the machine sees it: JSON.
	var stored map[string]any
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		cur, err := machines.Get(ctx, m.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		raw := cur.Annotations[machine.DrainStateAnnotation]
		stored = nil
		if err := json.Unmarshal([]byte(raw), &stored); err != nil {
			return false, "drain state " + raw
		}
		if refusals, _ := stored["refusals"].([]any); len(refusals) == 0 {
			return false, "drain state " + raw
		}
		return true, ""
	})
	forged := stored
	forged["deadline"] = time.Unix(0, 0).UTC()
	forged["maxEvictRetries"] = -5
	for _, r := range forged["refusals"].([]any) {
		r.(map[string]any)["count"] = 1000
	}
	raw, err := json.Marshal(forged)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{machine.DrainStateAnnotation: string(raw)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := machines.Patch(ctx, m.Name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The drain passes every half second: ten seconds are twenty passes,
	// and the forged state asked the first of them to delete the pod.
	var reset bool
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		p, err := w.core.CoreV1().Pods(w.ns).Get(ctx, "guarded", metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			t.Fatalf("the PodDisruptionBudget's pod was deleted by a forged drain state (err %v)", err)
		}
		for len(rec.Events) > 0 {
			if e := <-rec.Events; strings.HasPrefix(e, "Warning "+machine.ReasonDrainStateReset) {
				reset = true
			}
		}
	}
	if !reset {
		t.Errorf("no %s event", machine.ReasonDrainStateReset)
	}
	cur, err := machines.Get(ctx, m.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if machine.CurrentDeletionStep(cur) != machine.StepDrain {
		t.Errorf("deletion step %s, want %s", machine.CurrentDeletionStep(cur), machine.StepDrain)
	}
}
