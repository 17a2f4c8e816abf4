//go:build linux

package compare

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/bench/internal/measure"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/reference/manager"
)

// TestWhoMade: the proxy tells the managers' requests from the simulated
// kubelet's, and the node agent's among the kubelet's by field manager.
func TestWhoMade(t *testing.T) {
	for _, tc := range []struct{ userAgent, fieldManager, want string }{
		{"machine-controller-manager/v0.62.1", "", byManager},
		{"mcm-reference", sim.AgentFieldManager, byManager}, // a manager's, whatever its field manager
		{manager.SimKubeletUserAgent, "", byKubelet},
		{manager.SimKubeletUserAgent + "/agent", "", byKubelet}, // the agent's reads
		{manager.SimKubeletUserAgent, sim.AgentFieldManager, byAgent},
	} {
		if got := whoMade(tc.userAgent, tc.fieldManager); got != tc.want {
			t.Errorf("whoMade(%q, %q) = %q, want %q", tc.userAgent, tc.fieldManager, got, tc.want)
		}
	}
}

// TestWatcherFollowsAnInPlaceRollout: the watcher counts the machines not
// Running at once from the mark on, and the VMs created and deleted by
// provider ID, from machines and nodes alike.
func TestWatcherFollowsAnInPlaceRollout(t *testing.T) {
	w := &watcher{machines: map[string]*machineSeen{}, nodeReady: map[string]time.Time{}, nodeSeen: map[string]nodeSeen{}, sets: map[string]setSeen{}}
	machine := func(name string, phase v1alpha1.MachinePhase) *v1alpha1.Machine {
		return &v1alpha1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1alpha1.MachineSpec{ProviderID: "sim:///zone-a/" + name},
			Status:     v1alpha1.MachineStatus{CurrentStatus: v1alpha1.CurrentStatus{Phase: phase}},
		}
	}
	node := func(name, version string) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.NodeSpec{ProviderID: "sim:///zone-a/" + name},
			Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: version}},
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		w.machine(machine(name, v1alpha1.MachinePending), false)
		w.machine(machine(name, v1alpha1.MachineRunning), false)
		w.node(node(name, inPlaceOldVersion), false)
	}
	w.markVMs()
	if _, _, peak := w.vmChanges(); peak != 0 {
		t.Errorf("after the mark: %d not Running at most, want 0 (the set-up's Pending machines are before it)", peak)
	}
	w.machine(machine("a", v1alpha1.MachineInPlaceUpdating), false)
	w.machine(machine("b", v1alpha1.MachineInPlaceUpdating), false)
	w.machine(machine("a", v1alpha1.MachineInPlaceUpdateSuccessful), false) // still not Running
	w.machine(machine("a", v1alpha1.MachineRunning), false)
	w.machine(machine("b", v1alpha1.MachineRunning), false)
	w.machine(machine("c", v1alpha1.MachineInPlaceUpdating), false)
	w.machine(machine("c", v1alpha1.MachineRunning), false)
	w.node(node("a", inPlaceNewVersion), false)
	// A replacement, which an in-place rollout must never make: c's VM
	// gone, d's new.
	w.machine(machine("c", v1alpha1.MachineRunning), true)
	w.node(node("c", inPlaceOldVersion), true)
	w.machine(machine("d", v1alpha1.MachinePending), false)

	created, deleted, peak := w.vmChanges()
	want := struct {
		Created, Deleted []string
		Peak             int
	}{[]string{"sim:///zone-a/d"}, []string{"sim:///zone-a/c"}, 2}
	got := struct {
		Created, Deleted []string
		Peak             int
	}{created, deleted, peak}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("vmChanges (-want +got):\n%s", diff)
	}
	if s := w.state(); s.nodesOfVersion[inPlaceNewVersion] != 1 || s.nodesOfVersion[inPlaceOldVersion] != 1 {
		t.Errorf("nodes by version %v, want one of each", s.nodesOfVersion)
	}
}

// TestInPlaceDone: the end condition of I needs every part of it.
func TestInPlaceDone(t *testing.T) {
	done := func() state {
		d := &v1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
		d.Status = v1alpha1.MachineDeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}
		return state{
			machines: 3, running: 3, nodes: 3,
			nodesOfVersion:     map[string]int{inPlaceNewVersion: 3},
			setReplicasOfClass: map[string]int32{className: 0, nextClassName: 6},
			deployment:         d,
		}
	}
	if !done().inPlaceDone(3, className, inPlaceNewVersion) {
		t.Fatal("a complete rollout is not done")
	}
	for name, change := range map[string]func(*state){
		"a node of the old version": func(s *state) { s.nodesOfVersion = map[string]int{inPlaceNewVersion: 2, inPlaceOldVersion: 1} },
		"the old set not at 0":      func(s *state) { s.setReplicasOfClass[className] = 1 },
		"a machine not Running":     func(s *state) { s.running = 2 },
		"a node too many":           func(s *state) { s.nodes = 4 },
		"the status behind":         func(s *state) { s.deployment.Status.UpdatedReplicas = 2 },
		"an old generation":         func(s *state) { s.deployment.Status.ObservedGeneration = 1 },
	} {
		s := done()
		change(&s)
		if s.inPlaceDone(3, className, inPlaceNewVersion) {
			t.Errorf("%s: done", name)
		}
	}
}

// TestTableInPlace: I's row gives its conditions and VMs, and the node
// agent's writes are listed on their own.
func TestTableInPlace(t *testing.T) {
	got := table([]result{{
		Scenario: "I", Machines: 100, Boot: "0s+0-3s", System: systemRef, Wall: 5 * time.Minute,
		Writes:        measure.Requests{"PATCH nodes": 500, "PATCH machines/status": 300, "PATCH nodes (409)": 2},
		ManagerWrites: measure.Requests{"PATCH nodes": 400, "PATCH machines/status": 300},
		AgentWrites:   measure.Requests{"PATCH nodes": 100, "PATCH nodes (409)": 2},
		UpdateDelay:   30 * time.Second, PeakNotRunning: 10,
	}}, []string{systemRef})
	for _, want := range []string{
		"I  100  0s+0-3s     mcm  300.0 s     802            8.02       7.00",
		"update 30 s, maxUnavailable 10%: at most 10 not Running, 0 VMs created, 0 deleted",
		"  the simulated node agent's (update results), 102:\n       100 PATCH nodes\n         2 PATCH nodes (409)\n",
		"  the control plane's and others, 0:\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
}
