package writes

import (
	"context"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/machine"
)

// TestSetCreatedMachineWrites pins the writes that take one machine of a
// MachineSet from the set's POST to Running, its Node finalized.
//
// The machine's own floor is three writes: its provider ID with the node
// label (and the creation start, which a machine born with its finalizer
// needs no earlier write for), its Running status, and the Node's label,
// binding and finalizer in one patch. The set adds its own: its finalizer,
// the machine's POST and its status as the machine comes up. A class
// whose user data asks for a bootstrap token adds the token's Secret and
// its deletion once the machine runs.
func TestSetCreatedMachineWrites(t *testing.T) {
	for _, tc := range []struct {
		name, userData string
		want           map[string]int
	}{
		{name: "plain", userData: "#!/bin/sh\n", want: map[string]int{
			"patch machinesets":        1, // the set's finalizer
			"create machines":          1,
			"patch machinesets/status": 2, // lastOperation Created with replicas 1; ready and available 1
			"patch machines":           1, // provider ID, node label, creation start
			"patch machines/status":    1, // Running
			"patch nodes":              1, // machine-name label, binding, finalizer
		}},
		{name: "bootstrap token", userData: "#!/bin/sh\njoin --token <<BOOTSTRAP_TOKEN>>\n", want: map[string]int{
			"patch machinesets":        1,
			"create machines":          1,
			"patch machinesets/status": 2,
			"patch machines":           1,
			"patch machines/status":    1,
			"patch nodes":              1,
			"create secrets":           1, // the token, in the target's kube-system
			"delete secrets":           1, // once the machine runs
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret, classObjs := classes(tc.userData, "small")
			s := startStack(t, secret, classObjs...)
			s.keep("small")
			from := s.mark()
			s.createSet("set", "small")
			s.settle(s.runningWithNodes("set", 1))
			pin(t, "one set-created machine", tc.want, s.writes(from))
			s.bornFinalized(from)
		})
	}
}

// bornFinalized fails the test unless every machine created since from
// carried the machine finalizer in its POST: that is what lets the machine
// controller create its VM without a write first, and the floor above
// stand without a VM that could leak.
func (s *stack) bornFinalized(from int) {
	s.t.Helper()
	s.mu.Lock()
	log := slices.Clone(s.log[from:])
	s.mu.Unlock()
	for _, a := range log {
		create, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetResource().Resource != "machines" {
			continue
		}
		if m := create.GetObject().(*v1alpha1.Machine); !slices.Contains(m.Finalizers, v1alpha1.MachineFinalizer) {
			s.t.Errorf("machine %s created without the finalizer %s: %v", m.Name, v1alpha1.MachineFinalizer, m.Finalizers)
		}
	}
}

// keep runs a machine of class in a set of its own, so that the class is
// in use, and has its finalizer, before and after what a test counts: a
// class's finalizer comes and goes with its first and last machine, not
// with each.
func (s *stack) keep(class string) {
	s.t.Helper()
	s.createSet("keep-"+class, class)
	s.settle(s.runningWithNodes("keep-"+class, 1))
}

// createSet posts a MachineSet of one machine of class, labelled set=name.
func (s *stack) createSet(name, class string) {
	s.t.Helper()
	labels := map[string]string{"set": name}
	set := &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.MachineSetSpec{
			Replicas: 1,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: class}},
			},
		},
	}
	if _, err := s.machines.MachineV1alpha1().MachineSets(ns).Create(context.Background(), set, metav1.CreateOptions{FieldManager: testManager}); err != nil {
		s.t.Fatal(err)
	}
}

// runningWithNodes: the set has want machines, all Running with their
// Nodes finalized, and its status says they are available.
func (s *stack) runningWithNodes(setName string, want int32) func(context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		set, err := s.machines.MachineV1alpha1().MachineSets(ns).Get(ctx, setName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if set.Status.AvailableReplicas != want || set.Status.ReadyReplicas != want {
			return false, fmt.Sprintf("set %s status %d ready, %d available", setName, set.Status.ReadyReplicas, set.Status.AvailableReplicas)
		}
		return s.machinesUp(ctx, func(m *v1alpha1.Machine) bool { return metav1.IsControlledBy(m, set) }, want)
	}
}

// machinesUp: exactly want machines pass owned, none being deleted, each
// Running with its Node finalized and no machine being deleted.
func (s *stack) machinesUp(ctx context.Context, owned func(*v1alpha1.Machine) bool, want int32) (bool, string) {
	list, err := s.machines.MachineV1alpha1().Machines(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	var n int32
	for _, m := range list.Items {
		if m.DeletionTimestamp != nil {
			return false, fmt.Sprintf("machine %s being deleted, step %q", m.Name, m.Annotations[machine.DeletionStepAnnotation])
		}
		if !owned(&m) {
			continue
		}
		n++
		if m.Status.CurrentStatus.Phase != v1alpha1.MachineRunning {
			return false, fmt.Sprintf("machine %s phase %q, lastOperation %+v", m.Name, m.Status.CurrentStatus.Phase, m.Status.LastOperation)
		}
		node, err := s.core.CoreV1().Nodes().Get(ctx, m.Labels[v1alpha1.NodeLabelKey], metav1.GetOptions{})
		if err != nil || !slices.Contains(node.Finalizers, v1alpha1.NodeFinalizer) {
			return false, fmt.Sprintf("node of machine %s not finalized (%v)", m.Name, err)
		}
	}
	return n == want, fmt.Sprintf("%d machines, want %d", n, want)
}
