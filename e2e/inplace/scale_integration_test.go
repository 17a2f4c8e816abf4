package inplace_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// TestIntegrationInPlaceScaleDuringRollout: a deployment of 6 rolled in
// place one machine at a time is scaled to 8 once its first machine moved
// to the new set, then to 4 before the rollout ends. The rollout goes on
// through both (MCM's stalls while two sets are active): it ends with 4
// machines, all of the new version, on VMs that were there before the
// rollout — the growth's machines were new VMs of the new class, and the
// shrink took them first or took old ones, never a VM that was mid-update;
// the moved machines are the new set's own.
func TestIntegrationInPlaceScaleDuringRollout(t *testing.T) {
	t.Parallel()
	s, oldClass, newClass := inPlaceStack(t)
	create(t, s, slowInPlaceDeployment(s.NS, "scale", 6, oldClass))
	before := providerIDs(t, waitRunning(t, s, 6))

	setClass(t, s, "scale", newClass)
	waitMoved(t, s, 1)
	scale(t, s, "scale", 8)
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		ms, err := s.Machines.MachineV1alpha1().Machines(s.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(ms.Items) == 8, fmt.Sprintf("want 8 machines:%s", describe(ms.Items))
	})
	scale(t, s, "scale", 4)
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) { return rolledOut(ctx, s, "v1.37.2") })

	after := providerIDs(t, waitRunning(t, s, 4))
	kept := 0
	for _, id := range after {
		if slices.Contains(before, id) {
			kept++
		}
	}
	// The scale-up added 2 VMs of the new class; the scale-down removed 4
	// machines, which may be any mix of those and old ones: at least 2 of
	// the 4 left are VMs from before the rollout, updated in place.
	if kept < 2 {
		t.Errorf("only %d of the 4 machines left run VMs from before the rollout (%v, before %v): the rollout replaced VMs", kept, after, before)
	}
	noForeignMachines(t, s)
}

// noForeignMachines fails t if a set holds machines as foreign: machines
// moved between a deployment's sets are the sets' own, not strangers to
// delete first.
func noForeignMachines(t *testing.T, s *simstack.Stack) {
	t.Helper()
	sets, err := s.Machines.MachineV1alpha1().MachineSets(s.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range sets.Items {
		if foreign := set.Annotations[v1alpha1.ForeignMachinesAnnotation]; foreign != "" {
			t.Errorf("set %s holds machines as foreign: %s", set.Name, foreign)
		}
	}
}

// TestIntegrationInPlaceRollback: a deployment of 6 rolled in place one
// machine at a time gets its old class back once two machines moved to
// the new set. The rollback is itself an in-place rollout: the old set is
// the new one again, the two moved machines are updated back and move
// back, and the deployment ends with the same 6 VMs, all reporting the old
// version, at most one machine not Running at a time.
func TestIntegrationInPlaceRollback(t *testing.T) {
	t.Parallel()
	s, oldClass, newClass := inPlaceStack(t)
	create(t, s, slowInPlaceDeployment(s.NS, "back", 6, oldClass))
	before := providerIDs(t, waitRunning(t, s, 6))
	notRunning := watchNotRunning(t, s)

	setClass(t, s, "back", newClass)
	waitMoved(t, s, 2)
	setClass(t, s, "back", oldClass)
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) { return rolledOut(ctx, s, "v1.37.1") })

	after := providerIDs(t, waitRunning(t, s, 6))
	if !slices.Equal(before, after) {
		t.Errorf("the VMs changed: before %v, after %v", before, after)
	}
	if most := notRunning(); most > 1 {
		t.Errorf("a watch saw %d machines not Running at once, want at most maxUnavailable 1", most)
	}
	sets, err := s.Machines.MachineV1alpha1().MachineSets(s.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range sets.Items {
		if set.Spec.Replicas == 6 && set.Spec.Template.Spec.Class.Name != oldClass {
			t.Errorf("set %s holds the machines with class %s, want the rolled-back %s", set.Name, set.Spec.Template.Spec.Class.Name, oldClass)
		}
	}
}

// inPlaceStack prepares a stack with the simulated node agent and two
// classes (v1.37.1 and v1.37.2) and runs the controllers.
func inPlaceStack(t *testing.T) (s *simstack.Stack, oldClass, newClass string) {
	t.Helper()
	s = agentStack(t)
	oldClass = createClass(t, s, "ip-old", "v1.37.1")
	newClass = createClass(t, s, "ip-new", "v1.37.2")
	s.Run(t, simstack.Options{Deployments: true})
	return s, oldClass, newClass
}

// slowInPlaceDeployment is inPlaceDeployment updating one machine at a
// time, so that a test can act part-way through.
func slowInPlaceDeployment(ns, name string, replicas int32, class string) *v1alpha1.MachineDeployment {
	d := inPlaceDeployment(ns, name, replicas, class)
	one := intstr.FromInt32(1)
	d.Spec.Strategy.InPlaceUpdate.MaxUnavailable = &one
	return d
}

func create(t *testing.T, s *simstack.Stack, d *v1alpha1.MachineDeployment) {
	t.Helper()
	if _, err := s.Machines.MachineV1alpha1().MachineDeployments(s.NS).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func setClass(t *testing.T, s *simstack.Stack, deployment, class string) {
	t.Helper()
	mergePatch(t, s, deployment, fmt.Sprintf(`{"spec":{"template":{"spec":{"class":{"name":%q}}}}}`, class))
}

func scale(t *testing.T, s *simstack.Stack, deployment string, replicas int32) {
	t.Helper()
	mergePatch(t, s, deployment, fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
}

func mergePatch(t *testing.T, s *simstack.Stack, deployment, patch string) {
	t.Helper()
	if _, err := s.Machines.MachineV1alpha1().MachineDeployments(s.NS).Patch(context.Background(), deployment,
		types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitMoved waits until at least n machines belong to a set other than
// the one that created them (and named them after itself): moved there by
// the rollout.
func waitMoved(t *testing.T, s *simstack.Stack, n int) {
	t.Helper()
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		ms, err := s.Machines.MachineV1alpha1().Machines(s.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		moved := 0
		for _, m := range ms.Items {
			ref := metav1.GetControllerOf(&m)
			if ref != nil && m.Labels[v1alpha1.NodeLabelKey] != "" && !strings.HasPrefix(m.Name, ref.Name+"-") {
				moved++
			}
		}
		return moved >= n, fmt.Sprintf("want %d machines moved to the new set:%s", n, describe(ms.Items))
	})
}
