package writes

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// replicas is the size of TestRolloutWrites' deployment: every count it
// pins is for that many replaced machines.
const replicas = 3

// TestRolloutWrites pins the writes of a rollout step by step: a
// MachineDeployment of 3 machines (RollingUpdate, maxSurge 1,
// maxUnavailable 0) gets a new class, and every write the deployment,
// MachineSet and machine controllers make until the rollout has settled
// is counted. The figures are for 3 replaced machines; a write whose
// count is not a multiple of 3 is made per step or per rollout rather
// than per machine.
func TestRolloutWrites(t *testing.T) {
	secret, classObjs := classes("#!/bin/sh\n", "small", "big")
	s := startStack(t, secret, classObjs...)
	s.keep("small")
	s.keep("big")
	d := &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: ns, Generation: 1},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"pool": "a"}},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "small"}},
			},
			Strategy: v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge: new(intstr.FromInt32(1)), MaxUnavailable: new(intstr.FromInt32(0))}}},
		},
	}
	ctx := context.Background()
	deployments := s.machines.MachineV1alpha1().MachineDeployments(ns)
	if _, err := deployments.Create(ctx, d, metav1.CreateOptions{FieldManager: testManager}); err != nil {
		t.Fatal(err)
	}
	s.settle(s.rolledOut("small"))

	from := s.mark()
	d, err := deployments.Get(ctx, "pool", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Class.Name = "big"
	d.Generation++ // the API server's doing, which the fake API leaves to its client
	if _, err := deployments.Update(ctx, d, metav1.UpdateOptions{FieldManager: testManager}); err != nil {
		t.Fatal(err)
	}
	s.settle(s.rolledOut("big"))
	pin(t, fmt.Sprintf("rollout of %d machines", replicas), map[string]int{
		// The deployment: the new set, the revision annotation, 1 +
		// 3 per wave status writes (a machine created, one Running, one
		// gone), the sets' sizes (the new set created at 1 and grown to
		// 3, the old one shrunk from 3 to 0).
		"create machinesets":              1,
		"patch machinedeployments":        1,
		"patch machinedeployments/status": 10,
		"patch machinesets":               6, // 5 sizes and the new set's finalizer
		// The sets: their machines, and their status, per machine: the
		// new set's replicas, written by the sync that created the
		// machine, and then its availability; the old set's replicas,
		// written by the sync that deleted the machine (the first of
		// each with its lastOperation).
		"create machines":          3,
		"delete machines":          3,
		"patch machinesets/status": 9,
		// The machines: provider ID, Running, and the finalizer's
		// removal at the end of a deletion that ran in one sync.
		"patch machines":        6,
		"patch machines/status": 3,
		// Nodes, per replaced machine 6 patches: on the old node the
		// deployment's taint and scale-down-disabled annotation, the
		// drain's cordon and the finalizer's removal; on the new node
		// the machine controller's label, binding and finalizer, and the
		// deployment's scale-down-disabled annotation, put on during the
		// rollout and taken off at its end (2). Then the Terminating
		// condition and the old node's deletion.
		"patch nodes":        18,
		"patch nodes/status": 3,
		"delete nodes":       3,
	}, s.writes(from))
}

// rolledOut: the deployment's status tells, for its generation, of
// replicas updated and available machines; they are of class, Running,
// their Nodes finalized; no other machine of the deployment is left, nor
// any Node but theirs and the kept machines'.
func (s *stack) rolledOut(class string) func(context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		d, err := s.machines.MachineV1alpha1().MachineDeployments(ns).Get(ctx, "pool", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := d.Status
		if st.ObservedGeneration != d.Generation || st.Replicas != replicas || st.UpdatedReplicas != replicas || st.AvailableReplicas != replicas {
			return false, fmt.Sprintf("deployment status %d/%d/%d observed %d of %d",
				st.Replicas, st.UpdatedReplicas, st.AvailableReplicas, st.ObservedGeneration, d.Generation)
		}
		ok, why := s.machinesUp(ctx, func(m *v1alpha1.Machine) bool { return m.Labels["pool"] == "a" && m.Spec.Class.Name == class }, replicas)
		if !ok {
			return false, why
		}
		// machinesUp saw none being deleted; all of the deployment's are
		// of class, as many as it wants.
		if ok, why := s.machinesUp(ctx, func(m *v1alpha1.Machine) bool { return m.Labels["pool"] == "a" }, replicas); !ok {
			return false, why
		}
		nodes, err := s.core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		if want := replicas + 2; len(nodes.Items) != want {
			return false, fmt.Sprintf("%d nodes, want %d", len(nodes.Items), want)
		}
		return true, ""
	}
}
