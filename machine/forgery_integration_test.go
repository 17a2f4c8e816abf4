package machine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// untouched checks that nothing was done to a node on a forged machine's
// behalf: it exists, is not cordoned or terminating, is not marked, and
// its binding, if any, is still want's.
func untouched(t *testing.T, w *world, name, wantOwner string) {
	t.Helper()
	n, err := w.core.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("node %s: %v", name, err)
	}
	if n.DeletionTimestamp != nil || n.Spec.Unschedulable {
		t.Errorf("node %s was deleted or cordoned (deletion %v, unschedulable %v)", name, n.DeletionTimestamp, n.Spec.Unschedulable)
	}
	if got := n.Annotations[v1alpha1.MachineUIDAnnotation]; got != wantOwner {
		t.Errorf("node %s is bound to %q, want %q", name, got, wantOwner)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1alpha1.NodeTerminationCondition {
			t.Errorf("node %s was marked %s", name, c.Type)
		}
	}
}

// TestIntegrationForgedClaims: machines whose node label or provider ID
// name a node or VM they do not own — as anyone who may create machines
// can write — never reach it. A victim machine runs; each forgery is
// created, given time to act, and deleted; the victim's node is never
// cordoned, marked, drained or deleted, its VM stays, the victim stays
// Running, and each forgery is reported on the forged machine.
func TestIntegrationForgedClaims(t *testing.T) {
	t.Parallel()
	rec := &eventLog{}
	w := integration(t, worldOptions{ctrl: machine.Options{Recorder: rec}})
	ctx := context.Background()
	createClass(t, w.mc, w.core, w.ns, true)
	machines := w.mc.MachineV1alpha1().Machines(w.ns)

	victim := newMachine(w.ns, w.name(0), "sim", nil)
	createMachine(t, w.mc, victim)
	testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, victim.Name, v1alpha1.MachineRunning))
	v, err := machines.Get(ctx, victim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	victimNode, victimVM := v.Labels[v1alpha1.NodeLabelKey], v.Spec.ProviderID
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		n, err := w.core.CoreV1().Nodes().Get(ctx, victimNode, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := n.Annotations[v1alpha1.MachineUIDAnnotation]
		return got == string(v.UID), "node bound to " + got
	})

	// A node no machine created, whose VM the cloud does not know.
	stray := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "stray-" + w.prefix}, Spec: corev1.NodeSpec{ProviderID: "sim:///stray-" + w.prefix}}
	if _, err := w.core.CoreV1().Nodes().Create(ctx, stray, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.core.CoreV1().Nodes().Delete(context.Background(), stray.Name, metav1.DeleteOptions{}) })

	nodeLabel := map[string]string{v1alpha1.NodeLabelKey: victimNode}
	forgeries := []struct {
		name string
		m    *v1alpha1.Machine
		// ownVM: the forgery gets a VM of its own (its class works).
		ownVM bool
	}{
		{"node label only, no class", func() *v1alpha1.Machine {
			return newMachine(w.ns, w.name(1), "no-such-class", nodeLabel)
		}(), false},
		{"provider ID only", func() *v1alpha1.Machine {
			m := newMachine(w.ns, w.name(2), "sim", nil)
			m.Spec.ProviderID = victimVM
			return m
		}(), true},
		{"provider ID and node label", func() *v1alpha1.Machine {
			m := newMachine(w.ns, w.name(3), "sim", nodeLabel)
			m.Spec.ProviderID = victimVM
			return m
		}(), true},
		{"finalizer, set owner and labels, no class", func() *v1alpha1.Machine {
			m := newMachine(w.ns, w.name(4), "no-such-class", map[string]string{v1alpha1.NodeLabelKey: victimNode, "name": "victims"})
			m.Spec.ProviderID = victimVM
			m.Finalizers = []string{v1alpha1.MachineFinalizer}
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "MachineSet",
				Name: "victims", UID: "6a1f3e0e-0000-4000-8000-000000000001", Controller: new(true)}}
			return m
		}(), false},
	}
	for _, f := range forgeries {
		createMachine(t, w.mc, f.m)
	}
	// Two machines claim the stray node and its VM.
	for i := 5; i <= 6; i++ {
		m := newMachine(w.ns, w.name(i), "sim", map[string]string{v1alpha1.NodeLabelKey: stray.Name})
		m.Spec.ProviderID = stray.Spec.ProviderID
		forgeries = append(forgeries, struct {
			name  string
			m     *v1alpha1.Machine
			ownVM bool
		}{"stray node claimed twice", m, true})
		createMachine(t, w.mc, m)
	}
	for _, f := range forgeries {
		if !f.ownVM {
			continue
		}
		// The forgery's claims are ignored: it gets a VM and node of its
		// own and runs there.
		testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
			m, err := machines.Get(ctx, f.m.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			node, pid := m.Labels[v1alpha1.NodeLabelKey], m.Spec.ProviderID
			return m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning && node != victimNode && node != stray.Name &&
					pid != victimVM && pid != stray.Spec.ProviderID,
				fmt.Sprintf("%s: phase %s node %s provider ID %s", f.name, m.Status.CurrentStatus.Phase, node, pid)
		})
	}
	untouched(t, w, victimNode, string(v.UID))
	untouched(t, w, stray.Name, "")
	for _, f := range forgeries {
		// The one owned by a set that does not exist may be gone already:
		// the garbage collector deletes it.
		if err := machines.Delete(ctx, f.m.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	for _, f := range forgeries {
		testenv.Eventually(t, time.Minute, machineGone(w.mc, w.ns, f.m.Name))
	}
	untouched(t, w, victimNode, string(v.UID))
	untouched(t, w, stray.Name, "")
	if _, ok := w.cloud.VM(victimVM); !ok {
		t.Errorf("the victim's VM %s was deleted", victimVM)
	}
	if m, err := machines.Get(ctx, victim.Name, metav1.GetOptions{}); err != nil || m.DeletionTimestamp != nil ||
		m.Status.CurrentStatus.Phase != v1alpha1.MachineRunning {
		t.Errorf("victim: %v, err %v", m, err)
	}
	for _, f := range forgeries {
		if got := rec.of(f.m.Name, machine.ReasonForeignClaim, machine.ReasonNodeNotOwned); len(got) == 0 {
			t.Errorf("%s (%s): not reported; events: %+v", f.name, f.m.Name, rec.all())
		}
	}
	if got := rec.of(victim.Name, machine.ReasonContestedClaim, machine.ReasonNodeNotOwned); len(got) > 0 {
		t.Errorf("the victim was held up: %+v", got)
	}
}
