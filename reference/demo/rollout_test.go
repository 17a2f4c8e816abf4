package main

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// The rollout line and its end, over the states of a 2-replica rollout.
func TestRolloutProgress(t *testing.T) {
	running := v1alpha1.MachineRunning
	oldSet := func(n int32) setRow { return setRow{name: "demo-aaa", class: classV1, replicas: n} }
	newSet := func(n int32) setRow { return setRow{name: "demo-bbb", class: classV2, replicas: n} }
	up := func(name, set string) row { return row{name: name, set: set, phase: string(running)} }
	tests := []struct {
		name     string
		sets     []setRow
		rows     []row
		line     string
		complete bool
	}{
		{"before the new set", []setRow{oldSet(2)}, []row{up("a1", "demo-aaa"), up("a2", "demo-aaa")},
			"old set demo-aaa 2 → new set -, available 2 (floor 2)", false},
		{"surge", []setRow{oldSet(2), newSet(1)},
			[]row{up("a1", "demo-aaa"), up("a2", "demo-aaa"), {name: "b1", set: "demo-bbb", phase: "Pending"}},
			"old set demo-aaa 2 → new set demo-bbb 1, available 2 (floor 2)", false},
		{"an old machine being deleted is not available", []setRow{oldSet(1), newSet(1)},
			[]row{{name: "a1", set: "demo-aaa", phase: string(running), deleting: true}, up("a2", "demo-aaa"), up("b1", "demo-bbb")},
			"old set demo-aaa 1 → new set demo-bbb 1, available 2 (floor 2)", false},
		{"old set at 0 with a machine left", []setRow{oldSet(0), newSet(2)},
			[]row{{name: "a2", set: "demo-aaa", phase: "Terminating", deleting: true}, up("b1", "demo-bbb"), up("b2", "demo-bbb")},
			"old set demo-aaa 0 → new set demo-bbb 2, available 2 (floor 2)", false},
		{"new machine not up yet", []setRow{oldSet(0), newSet(2)},
			[]row{up("b1", "demo-bbb"), {name: "b2", set: "demo-bbb", phase: "Pending"}},
			"old set demo-aaa 0 → new set demo-bbb 2, available 1 (floor 2)", false},
		{"complete", []setRow{oldSet(0), newSet(2)}, []row{up("b1", "demo-bbb"), up("b2", "demo-bbb")},
			"old set demo-aaa 0 → new set demo-bbb 2, available 2 (floor 2)", true},
		{"several old sets", []setRow{oldSet(1), {name: "demo-ccc", class: "other", replicas: 0}, newSet(2)},
			[]row{up("a1", "demo-aaa"), up("b1", "demo-bbb"), up("b2", "demo-bbb")},
			"old sets demo-aaa 1, demo-ccc 0 → new set demo-bbb 2, available 3 (floor 2)", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := rolloutProgress(tt.sets, tt.rows, running, 2)
			if got := p.String(); got != tt.line {
				t.Errorf("line:\n got %s\nwant %s", got, tt.line)
			}
			if p.complete != tt.complete {
				t.Errorf("complete = %v, want %v", p.complete, tt.complete)
			}
		})
	}
}

// The floor check sees a dip that the events leave behind even when the
// cache has moved on, and does not arm on a count that lags the cache.
func TestFloorCheck(t *testing.T) {
	machine := func(name string, phase v1alpha1.MachinePhase, deleting bool) *v1alpha1.Machine {
		m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name}}
		m.Status.CurrentStatus.Phase = phase
		if deleting {
			m.DeletionTimestamp = &metav1.Time{}
		}
		return m
	}
	f := newFloorCheck(v1alpha1.MachineRunning)
	f.observe(machine("a1", v1alpha1.MachineRunning, false), false)
	f.observe(machine("a2", v1alpha1.MachinePending, false), false)
	if f.armAt(2) {
		t.Fatal("armed with 1 available machine, want 2")
	}
	f.observe(machine("a2", v1alpha1.MachineRunning, false), false)
	if !f.armAt(2) {
		t.Fatal("not armed with 2 available machines")
	}
	f.observe(machine("b1", v1alpha1.MachinePending, false), false)
	f.observe(machine("a1", v1alpha1.MachineRunning, true), false) // deleted before b1 is up: a dip
	f.observe(machine("b1", v1alpha1.MachineRunning, false), false)
	f.observe(cache.DeletedFinalStateUnknown{Key: "ns/a1", Obj: machine("a1", v1alpha1.MachineRunning, true)}, true)
	if lowest, available := f.counts(); lowest != 1 || available != 2 {
		t.Errorf("counts = lowest %d, available %d; want 1, 2", lowest, available)
	}
}
