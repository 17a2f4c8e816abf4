package machine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// The attacks of these tests are what anyone who may patch machines can
// write: annotations and spec. The deletion flow's step and drain
// parameters, and the times the timeouts count from, must not follow.

// patchMachine merge-patches the machine with the given JSON object.
func patchMachine(t *testing.T, w *world, name string, obj map[string]any) {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.mc.MachineV1alpha1().Machines(w.ns).Patch(context.Background(), name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func annotate(t *testing.T, w *world, name, key, value string) {
	t.Helper()
	patchMachine(t, w, name, map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
}

// vmAlive reports whether the cloud has the VM and is not deleting it.
func vmAlive(w *world, providerID string) bool {
	vm, ok := w.cloud.VM(providerID)
	return ok && vm.State != sim.VMTerminating
}

// drainBlocked waits until the drain of the deleted machine name is held
// by the guarded pod's PodDisruptionBudget.
func drainBlocked(t *testing.T, w *world, name string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		m, err := getMachine(ctx, w.mc, w.ns, name)
		if err != nil {
			return false, err.Error()
		}
		blocked := m.Annotations["mcmkit.io/drain-blocked-by"]
		return blocked != "", fmt.Sprintf("step %s, drain blocked by %q, lastOperation %q", machine.CurrentDeletionStep(m), blocked, m.Status.LastOperation.Description)
	})
}

// runningMachine creates machine i and waits until it runs; it returns the
// machine as it runs.
func runningMachine(t *testing.T, w *world, m *v1alpha1.Machine) *v1alpha1.Machine {
	t.Helper()
	createMachine(t, w.mc, m)
	testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, m.Name, v1alpha1.MachineRunning))
	cur, err := getMachine(context.Background(), w.mc, w.ns, m.Name)
	if err != nil {
		t.Fatal(err)
	}
	return cur
}

// holdsFor checks every quarter second, for d, that the machine's guarded
// pod (when guarded), node, VM and the machine itself are still there,
// and then that the machine is still being deleted at want.
func holdsFor(t *testing.T, w *world, m *v1alpha1.Machine, guarded bool, want machine.DeletionStep, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	node := m.Labels[v1alpha1.NodeLabelKey]
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		// What a skipped step would delete first, the machine last.
		if guarded {
			if p, err := w.core.CoreV1().Pods(w.ns).Get(ctx, "guarded", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
				t.Fatalf("the PodDisruptionBudget's pod was deleted (err %v)", err)
			}
		}
		if n, err := w.core.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil || n.DeletionTimestamp != nil {
			t.Fatalf("node %s deleted (err %v)", node, err)
		}
		if !vmAlive(w, m.Spec.ProviderID) {
			t.Fatalf("VM %s deleted", m.Spec.ProviderID)
		}
		if _, err := getMachine(ctx, w.mc, w.ns, m.Name); err != nil {
			t.Fatalf("machine %s: %v", m.Name, err)
		}
	}
	cur, err := getMachine(ctx, w.mc, w.ns, m.Name)
	if err != nil {
		t.Fatalf("machine %s: %v", m.Name, err)
	}
	if got := machine.CurrentDeletionStep(cur); got != want {
		t.Fatalf("deletion step %s, want %s (lastOperation %q)", got, want, cur.Status.LastOperation.Description)
	}
}

// TestIntegrationForgedDeletionStepDoesNotSkipTheDrain: while a
// PodDisruptionBudget holds the drain, the step annotation is set to
// DeleteVM. The VM and the node stay, the pod is not deleted, and the
// drain keeps waiting.
func TestIntegrationForgedDeletionStepDoesNotSkipTheDrain(t *testing.T) {
	t.Parallel()
	w := integration(t, worldOptions{})
	createClass(t, w.mc, w.core, w.ns, true)
	m := runningMachine(t, w, newMachine(w.ns, w.name(0), "sim", nil))
	guardPod(t, w, m.Labels[v1alpha1.NodeLabelKey])
	if err := w.mc.MachineV1alpha1().Machines(w.ns).Delete(context.Background(), m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	drainBlocked(t, w, m.Name)
	annotate(t, w, m.Name, machine.DeletionStepAnnotation, string(machine.StepDeleteVM))
	// Drain passes come every half second: a few seconds are many syncs.
	holdsFor(t, w, m, true, machine.StepDrain, 5*time.Second)
}

// TestIntegrationForgedDeletionStepDoesNotEndTheDeletion: a machine with
// a pre-drain hook gets the step annotation RemoveFinalizer before it is
// deleted. The hook still holds the deletion; once it goes, the flow
// drains, deletes the VM and the node, and only then the machine goes.
func TestIntegrationForgedDeletionStepDoesNotEndTheDeletion(t *testing.T) {
	t.Parallel()
	w := integration(t, worldOptions{})
	ctx := context.Background()
	createClass(t, w.mc, w.core, w.ns, true)
	m := runningMachine(t, w, newMachine(w.ns, w.name(0), "sim", nil))
	hook := machine.PreDrainHookPrefix + "/hold"
	annotate(t, w, m.Name, hook, "")
	annotate(t, w, m.Name, machine.DeletionStepAnnotation, string(machine.StepRemoveFinalizer))
	if err := w.mc.MachineV1alpha1().Machines(w.ns).Delete(ctx, m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		cur, err := getMachine(ctx, w.mc, w.ns, m.Name)
		if err != nil {
			return false, err.Error()
		}
		return cur.Status.CurrentStatus.Phase == v1alpha1.MachineTerminating && machine.CurrentDeletionStep(cur) == machine.StepWaitPreDrainHooks,
			fmt.Sprintf("phase %q, step %s, lastOperation %q", cur.Status.CurrentStatus.Phase, machine.CurrentDeletionStep(cur), cur.Status.LastOperation.Description)
	})
	holdsFor(t, w, m, false, machine.StepWaitPreDrainHooks, 3*time.Second)
	// The hook's owner lets go; a forged step again on the way.
	patchMachine(t, w, m.Name, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		hook: nil, machine.DeletionStepAnnotation: string(machine.StepRemoveFinalizer)}}})
	testenv.Eventually(t, time.Minute, machineGone(w.mc, w.ns, m.Name))
	// The machine went last: its node and VM were gone before.
	if n, err := w.core.CoreV1().Nodes().Get(ctx, m.Labels[v1alpha1.NodeLabelKey], metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node %s still there after its machine went (deletion %v, err %v)", m.Labels[v1alpha1.NodeLabelKey], n.DeletionTimestamp, err)
	}
	if vmAlive(w, m.Spec.ProviderID) {
		t.Errorf("VM %s not deleted before its machine went", m.Spec.ProviderID)
	}
}

// TestIntegrationShortenedDrainTimeoutDoesNotForceTheDrain: a machine
// with a drain timeout of 20s is deleted; while a PodDisruptionBudget
// holds the drain, its drainTimeout is patched to 1s and maxEvictRetries
// to 1. The pod is not deleted before the deadline in force when the
// deletion began, and is after it.
func TestIntegrationShortenedDrainTimeoutDoesNotForceTheDrain(t *testing.T) {
	t.Parallel()
	const timeout = 20 * time.Second
	w := integration(t, worldOptions{})
	ctx := context.Background()
	createClass(t, w.mc, w.core, w.ns, true)
	m := newMachine(w.ns, w.name(0), "sim", nil)
	m.Spec.MachineConfiguration = &v1alpha1.MachineConfiguration{MachineDrainTimeout: &metav1.Duration{Duration: timeout}}
	m = runningMachine(t, w, m)
	guardPod(t, w, m.Labels[v1alpha1.NodeLabelKey])
	if err := w.mc.MachineV1alpha1().Machines(w.ns).Delete(ctx, m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	drainBlocked(t, w, m.Name)
	patchMachine(t, w, m.Name, map[string]any{"spec": map[string]any{"drainTimeout": "1s", "maxEvictRetries": 1}})
	cur, err := getMachine(ctx, w.mc, w.ns, m.Name)
	if err != nil {
		t.Fatal(err)
	}
	// Until a few seconds before the deadline in force when the deletion
	// began (the API server's deletion timestamp has whole seconds), the
	// pod stays and the drain waits.
	deadline := cur.DeletionTimestamp.Add(timeout)
	if wait := time.Until(deadline.Add(-3 * time.Second)); wait > 0 {
		holdsFor(t, w, m, true, machine.StepDrain, wait)
	} else {
		t.Fatalf("the drain took %v to be blocked; the test cannot tell", time.Since(cur.DeletionTimestamp.Time))
	}
	// After it, the drain forces: the pod goes, and so does the machine.
	testenv.Eventually(t, time.Minute, machineGone(w.mc, w.ns, m.Name))
	p, err := w.core.CoreV1().Pods(w.ns).Get(ctx, "guarded", metav1.GetOptions{})
	if err == nil && p.DeletionTimestamp == nil {
		t.Errorf("the guarded pod is still there after the drain")
	}
}

// TestIntegrationFutureCreationStartTimesOut: of two machines whose node
// never joins, one carries a creation start in 2099. Both fail at the
// creation timeout, and the forged time is reported.
func TestIntegrationFutureCreationStartTimesOut(t *testing.T) {
	t.Parallel()
	rec := &eventLog{}
	w := integration(t, worldOptions{cloud: sim.Options{BootDelay: time.Hour}, ctrl: machine.Options{Recorder: rec,
		Machine: v1alpha1.MachineConfiguration{MachineCreationTimeout: &metav1.Duration{Duration: 5 * time.Second}}}})
	createClass(t, w.mc, w.core, w.ns, true)
	twin, forged := newMachine(w.ns, w.name(0), "sim", nil), newMachine(w.ns, w.name(1), "sim", nil)
	forged.Annotations = map[string]string{machine.CreationStartedAnnotation: "2099-01-01T00:00:00Z"}
	createMachine(t, w.mc, twin)
	createMachine(t, w.mc, forged)
	for _, name := range []string{twin.Name, forged.Name} {
		testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, name, v1alpha1.MachineFailed))
	}
	if got := rec.of(forged.Name, machine.ReasonFutureTimestamp); len(got) != 1 {
		t.Errorf("%d %s events for %s, want 1: %+v", len(got), machine.ReasonFutureTimestamp, forged.Name, got)
	}
	if got := rec.of(twin.Name, machine.ReasonFutureTimestamp); len(got) != 0 {
		t.Errorf("%s events for %s: %+v", machine.ReasonFutureTimestamp, twin.Name, got)
	}
}

// TestIntegrationFutureUnhealthySinceTimesOut: an Unknown machine's
// unhealthy-since is set to 2099. It still fails after the health
// timeout, and the forged time is reported.
func TestIntegrationFutureUnhealthySinceTimesOut(t *testing.T) {
	t.Parallel()
	rec := &eventLog{}
	w := integration(t, worldOptions{ctrl: machine.Options{Recorder: rec,
		Machine: v1alpha1.MachineConfiguration{MachineHealthTimeout: &metav1.Duration{Duration: 10 * time.Second}}}})
	createClass(t, w.mc, w.core, w.ns, true)
	m := runningMachine(t, w, newMachine(w.ns, w.name(0), "sim", nil))
	w.kubelet.SetCondition(m.Labels[v1alpha1.NodeLabelKey], corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"})
	testenv.Eventually(t, 30*time.Second, phaseIs(w.mc, w.ns, m.Name, v1alpha1.MachineUnknown))
	annotate(t, w, m.Name, machine.UnhealthySinceAnnotation, "2099-01-01T00:00:00Z")
	testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, m.Name, v1alpha1.MachineFailed))
	if got := rec.of(m.Name, machine.ReasonFutureTimestamp); len(got) != 1 {
		t.Errorf("%d %s events, want 1: %+v", len(got), machine.ReasonFutureTimestamp, got)
	}
}
