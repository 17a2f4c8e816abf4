package deployment

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestPlanRolling(t *testing.T) {
	tests := []struct {
		name   string
		d      *v1alpha1.MachineDeployment
		newSet *v1alpha1.MachineSet
		old    []*v1alpha1.MachineSet
		counts map[string]machineCounts
		want   rolloutPlan
	}{
		{
			name: "first rollout: the new set is created with all replicas",
			d:    newDeployment(3),
			want: rolloutPlan{New: new(int32(3))},
		},
		{
			name:   "new set created within the surge; nothing to remove yet",
			d:      newDeployment(3),
			old:    []*v1alpha1.MachineSet{newSet("old", 3, 0, withClass("a"))},
			counts: map[string]machineCounts{"old": counted(3, 3)},
			want:   rolloutPlan{New: new(int32(1))},
		},
		{
			name:   "new set created with 0 when the surge is used up",
			d:      newDeployment(3, withRolling("0", "1")),
			old:    []*v1alpha1.MachineSet{newSet("old", 3, 0, withClass("a"))},
			counts: map[string]machineCounts{"old": counted(3, 3)},
			want:   rolloutPlan{New: new(int32(0)), Old: map[string]int32{"old": 2}},
		},
		{
			name:   "new machine available: one old goes",
			d:      newDeployment(3),
			newSet: newSet("new", 1, 5),
			old:    []*v1alpha1.MachineSet{newSet("old", 3, 0, withClass("a"))},
			counts: map[string]machineCounts{"old": counted(3, 3), "new": counted(1, 1)},
			want:   rolloutPlan{Old: map[string]int32{"old": 2}},
		},
		{
			name:   "new machine not available yet: wait",
			d:      newDeployment(3),
			newSet: newSet("new", 1, 5),
			old:    []*v1alpha1.MachineSet{newSet("old", 3, 0, withClass("a"))},
			counts: map[string]machineCounts{"old": counted(3, 3), "new": counted(1, 0)},
			want:   rolloutPlan{},
		},
		{
			name:   "old set not caught up with its scale-down: its machines count against the surge",
			d:      newDeployment(3),
			newSet: newSet("new", 1, 5),
			old:    []*v1alpha1.MachineSet{newSet("old", 2, 0, withClass("a"))},
			counts: map[string]machineCounts{"old": counted(3, 3), "new": counted(1, 1)},
			want:   rolloutPlan{},
		},
		{
			name:   "available machines of a pending scale-down are not counted twice",
			d:      newDeployment(3),
			newSet: newSet("new", 2, 5),
			old:    []*v1alpha1.MachineSet{newSet("old", 2, 0, withClass("a"))},
			counts: map[string]machineCounts{"old": counted(3, 3), "new": counted(1, 1)},
			want:   rolloutPlan{},
		},
		{
			name:   "unhealthy old machines go first, even below minimum availability",
			d:      newDeployment(3),
			newSet: newSet("new", 1, 5),
			old:    []*v1alpha1.MachineSet{newSet("old", 3, 0, withClass("a"))},
			counts: map[string]machineCounts{"old": counted(3, 1), "new": counted(1, 1)},
			want:   rolloutPlan{Old: map[string]int32{"old": 2}},
		},
		{
			name:   "unhealthy old machines go only as far as the new set's missing ones allow",
			d:      newDeployment(3),
			newSet: newSet("new", 1, 5),
			old:    []*v1alpha1.MachineSet{newSet("old", 3, 0, withClass("a"))},
			counts: map[string]machineCounts{"old": counted(3, 1), "new": counted(1, 0)},
			want:   rolloutPlan{},
		},
		{
			name:   "oldest set first, unhealthy before healthy",
			d:      newDeployment(6, withRolling("0", "3")),
			newSet: newSet("new", 0, 9),
			old: []*v1alpha1.MachineSet{
				newSet("mid", 3, 5, withClass("b")),
				newSet("oldest", 3, 0, withClass("a")),
			},
			counts: map[string]machineCounts{"oldest": counted(3, 3), "mid": counted(3, 2)},
			// 6 machines, 5 available, at least 3 must stay: the broken
			// machine of mid goes (removes no capacity), then 2 healthy ones
			// of the oldest set.
			want: rolloutPlan{Old: map[string]int32{"mid": 2, "oldest": 1}},
		},
		{
			name:   "new set above replicas goes back to replicas",
			d:      newDeployment(3),
			newSet: newSet("new", 5, 5),
			counts: map[string]machineCounts{"new": counted(5, 5)},
			want:   rolloutPlan{New: new(int32(3))},
		},
		{
			name:   "complete: nothing to do",
			d:      newDeployment(3),
			newSet: newSet("new", 3, 5),
			old:    []*v1alpha1.MachineSet{newSet("old", 0, 0, withClass("a"))},
			counts: map[string]machineCounts{"new": counted(3, 3)},
			want:   rolloutPlan{},
		},
		{
			name:   "scaled to zero: old sets go",
			d:      newDeployment(0),
			newSet: newSet("new", 0, 5),
			old:    []*v1alpha1.MachineSet{newSet("old", 2, 0, withClass("a"))},
			counts: map[string]machineCounts{"old": counted(2, 1)},
			want:   rolloutPlan{Old: map[string]int32{"old": 0}},
		},
		{
			name:   "missing counts mean no machines",
			d:      newDeployment(2),
			newSet: newSet("new", 0, 5),
			old:    []*v1alpha1.MachineSet{newSet("old", 2, 0, withClass("a"))},
			// The old set's machines are all unavailable as far as the
			// planner knows; the new one grows within the surge and
			// nothing may go because the new set has nothing available.
			want: rolloutPlan{New: new(int32(1))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := planRolling(tt.d, tt.newSet, tt.old, tt.counts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("planRolling (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanRollingInvalidBounds(t *testing.T) {
	if _, err := planRolling(newDeployment(3, withRolling("x", "0")), nil, nil, nil); err == nil {
		t.Error("want an error for an unreadable maxSurge")
	}
}

func TestPlanRecreate(t *testing.T) {
	d := newDeployment(3, withRecreate())
	tests := []struct {
		name   string
		newSet *v1alpha1.MachineSet
		old    []*v1alpha1.MachineSet
		counts map[string]machineCounts
		want   rolloutPlan
	}{
		{
			name: "old sets go to zero first",
			old: []*v1alpha1.MachineSet{
				newSet("a", 2, 0, withClass("a")), newSet("b", 1, 1, withClass("b")), newSet("c", 0, 2, withClass("c")),
			},
			counts: map[string]machineCounts{"a": counted(2, 2), "b": counted(1, 1)},
			want:   rolloutPlan{Old: map[string]int32{"a": 0, "b": 0}},
		},
		{
			name:   "old machines still there: wait",
			old:    []*v1alpha1.MachineSet{newSet("a", 0, 0, withClass("a"))},
			counts: map[string]machineCounts{"a": counted(1, 1)},
			want:   rolloutPlan{},
		},
		{
			name:   "old machines being deleted: wait",
			old:    []*v1alpha1.MachineSet{newSet("a", 0, 0, withClass("a"))},
			counts: map[string]machineCounts{"a": {Deleting: 2}},
			want:   rolloutPlan{},
		},
		{
			name: "old set status still reports machines: wait",
			old: []*v1alpha1.MachineSet{newSet("a", 0, 0, withClass("a"), func(s *v1alpha1.MachineSet) {
				s.Status.Replicas = 1
			})},
			want: rolloutPlan{},
		},
		{
			name: "no old machine left: create the new set",
			old:  []*v1alpha1.MachineSet{newSet("a", 0, 0, withClass("a"))},
			want: rolloutPlan{New: new(int32(3))},
		},
		{
			name:   "no old machine left: scale the new set",
			newSet: newSet("n", 0, 5),
			old:    []*v1alpha1.MachineSet{newSet("a", 0, 0, withClass("a"))},
			want:   rolloutPlan{New: new(int32(3))},
		},
		{
			name:   "done",
			newSet: newSet("n", 3, 5),
			counts: map[string]machineCounts{"n": counted(3, 0)},
			want:   rolloutPlan{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, planRecreate(d, tt.newSet, tt.old, tt.counts)); diff != "" {
				t.Errorf("planRecreate (-want +got):\n%s", diff)
			}
		})
	}
}

// simSet is a set of the simulated cluster with its machines: the first
// Available of them are available.
type simSet struct {
	set                 *v1alpha1.MachineSet
	machines, available int32
}

// sim is a deployment with its sets, standing in for the controllers and
// the cloud: sets reach their size at once (unavailable machines are
// removed first, new machines start unavailable), and the test decides when
// machines become available.
type sim struct {
	d    *v1alpha1.MachineDeployment
	new  *simSet
	old  []*simSet
	tick int
}

func (s *sim) all() []*simSet {
	all := append([]*simSet{}, s.old...)
	if s.new != nil {
		all = append(all, s.new)
	}
	return all
}

func (s *sim) counts() map[string]machineCounts {
	c := map[string]machineCounts{}
	for _, x := range s.all() {
		c[x.set.Name] = counted(x.machines, x.available)
	}
	return c
}

func (s *sim) oldSets() []*v1alpha1.MachineSet {
	var sets []*v1alpha1.MachineSet
	for _, x := range s.old {
		sets = append(sets, x.set)
	}
	return sets
}

// footprintAndAvailable is what the invariants are about: the machines the
// sets may have at the same time, and the available machines they keep once
// they reach their sizes.
func (s *sim) footprintAndAvailable() (int64, int64) {
	var total, available int64
	for _, x := range s.all() {
		c := counted(x.machines, x.available)
		total += int64(footprint(x.set, c))
		available += int64(keptAvailable(x.set.Spec.Replicas, c))
	}
	return total, available
}

func (s *sim) machineTotals() (machines, available int64) {
	for _, x := range s.all() {
		machines += int64(x.machines)
		available += int64(x.available)
	}
	return machines, available
}

// step plans one rolling step and applies it to the sets. It reports
// whether the plan changed anything.
func (s *sim) step() (bool, error) {
	s.tick++
	var newSet *v1alpha1.MachineSet
	if s.new != nil {
		newSet = s.new.set
	}
	plan, err := planRolling(s.d, newSet, s.oldSets(), s.counts())
	if err != nil {
		return false, err
	}
	if plan.New != nil {
		if s.new == nil {
			s.new = &simSet{set: newSetAt(*plan.New, s.tick)}
		}
		s.new.set.Spec.Replicas = *plan.New
	}
	for _, x := range s.old {
		if r, ok := plan.Old[x.set.Name]; ok {
			x.set.Spec.Replicas = r
		}
	}
	return plan.New != nil || plan.Old != nil, nil
}

// newSetAt is the new set the simulation creates at a tick.
func newSetAt(replicas int32, tick int) *v1alpha1.MachineSet {
	return newSet("new", replicas, 100+tick)
}

// converge brings every set to its size: surplus machines go, unavailable
// ones first; missing machines are created unavailable.
func (s *sim) converge() {
	for _, x := range s.all() {
		spec := x.set.Spec.Replicas
		if x.machines > spec {
			surplus := x.machines - spec
			unavailable := x.machines - x.available
			x.machines -= surplus
			if surplus > unavailable {
				x.available -= surplus - unavailable
			}
		}
		if x.machines < spec {
			x.machines = spec
		}
	}
}

func (s *sim) replicasOf() (newReplicas, oldReplicas int32) {
	if s.new != nil {
		newReplicas = s.new.set.Spec.Replicas
	}
	for _, x := range s.old {
		oldReplicas += x.set.Spec.Replicas
	}
	return newReplicas, oldReplicas
}

// bounds are what a rollout keeps to: at most maxTotal machines
// (replicas + maxSurge) and at least minAvailable available ones
// (replicas - maxUnavailable). A deployment that starts outside them must
// not move further out.
type bounds struct{ maxTotal, minAvailable int64 }

func boundsOf(t interface{ Fatal(...any) }, d *v1alpha1.MachineDeployment) bounds {
	surge, unavailable, err := rolloutBounds(d)
	if err != nil {
		t.Fatal(err)
	}
	return bounds{int64(d.Spec.Replicas) + int64(surge), int64(d.Spec.Replicas) - int64(unavailable)}
}

func TestRollingSequences(t *testing.T) {
	type pair struct{ New, Old int32 }
	tests := []struct {
		name string
		d    *v1alpha1.MachineDeployment
		old  []*simSet
		want []pair
	}{
		{
			name: "3 machines, maxSurge 1, maxUnavailable 0",
			d:    newDeployment(3),
			old:  []*simSet{{set: newSet("old", 3, 0, withClass("a")), machines: 3, available: 3}},
			want: []pair{{1, 3}, {1, 2}, {2, 2}, {2, 1}, {3, 1}, {3, 0}},
		},
		{
			name: "10 machines, 25%/25%",
			d:    newDeployment(10, withRolling("25%", "25%")),
			old:  []*simSet{{set: newSet("old", 10, 0, withClass("a")), machines: 10, available: 10}},
			want: []pair{{3, 8}, {5, 5}, {8, 3}, {10, 0}},
		},
		{
			name: "3 machines, maxSurge 0, maxUnavailable 1",
			d:    newDeployment(3, withRolling("0", "1")),
			old:  []*simSet{{set: newSet("old", 3, 0, withClass("a")), machines: 3, available: 3}},
			want: []pair{{0, 2}, {1, 2}, {1, 1}, {2, 1}, {2, 0}, {3, 0}},
		},
		{
			name: "two old sets, one machine broken",
			d:    newDeployment(4, withRolling("1", "1")),
			old: []*simSet{
				{set: newSet("older", 2, 0, withClass("a")), machines: 2, available: 1},
				{set: newSet("old", 2, 5, withClass("b")), machines: 2, available: 2},
			},
			// The broken machine goes first, before anything is available
			// in the new set; then one machine at a time within the bounds,
			// the older set emptying first.
			want: []pair{{1, 3}, {2, 2}, {3, 1}, {4, 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &sim{d: tt.d, old: tt.old}
			b := boundsOf(t, tt.d)
			var got []pair
			for range 50 {
				_, availableBefore := s.footprintAndAvailable()
				changed, err := s.step()
				if err != nil {
					t.Fatal(err)
				}
				if !changed {
					break
				}
				n, o := s.replicasOf()
				got = append(got, pair{n, o})
				total, available := s.footprintAndAvailable()
				if total > b.maxTotal {
					t.Errorf("step %d: %d machines planned, at most %d allowed", s.tick, total, b.maxTotal)
				}
				if available < min(availableBefore, b.minAvailable) {
					t.Errorf("step %d: %d machines stay available, at least %d needed", s.tick, available, b.minAvailable)
				}
				s.converge()
				machines, available := s.machineTotals()
				if machines > b.maxTotal || available < min(availableBefore, b.minAvailable) {
					t.Errorf("step %d: %d machines, %d available; bounds %+v", s.tick, machines, available, b)
				}
				for _, x := range s.all() {
					x.available = x.machines // every machine comes up
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(new, old) replicas per step (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecreateSequence(t *testing.T) {
	d := newDeployment(3, withRecreate())
	old := &simSet{set: newSet("old", 3, 0, withClass("a")), machines: 3, available: 3}
	var newSet *v1alpha1.MachineSet
	counts := func() map[string]machineCounts {
		c := map[string]machineCounts{"old": counted(old.machines, old.available)}
		if newSet != nil {
			c[newSet.Name] = counted(newSet.Spec.Replicas, 0)
		}
		return c
	}
	var got []string
	for step := range 6 {
		plan := planRecreate(d, newSet, []*v1alpha1.MachineSet{old.set}, counts())
		got = append(got, fmt.Sprintf("new=%s old=%v", ptrString(plan.New), plan.Old))
		if r, ok := plan.Old["old"]; ok {
			old.set.Spec.Replicas = r
		}
		if plan.New != nil {
			if newSet == nil {
				newSet = newSetAt(*plan.New, step)
			}
			newSet.Spec.Replicas = *plan.New
		}
		// Old machines are deleted one per step; the new set is created
		// only once the last one is gone.
		if old.machines > old.set.Spec.Replicas {
			old.machines--
			old.available = min(old.available, old.machines)
		}
	}
	want := []string{
		"new=<nil> old=map[old:0]",
		"new=<nil> old=map[]",
		"new=<nil> old=map[]",
		"new=3 old=map[]",
		"new=<nil> old=map[]",
		"new=<nil> old=map[]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recreate steps (-want +got):\n%s", diff)
	}
}

func ptrString(p *int32) string {
	if p == nil {
		return "<nil>"
	}
	return strconv.Itoa(int(*p))
}

// genDeployment draws a rolling deployment whose maxSurge and maxUnavailable
// are numbers or percentages.
func genDeployment(t *rapid.T, replicas int32) *v1alpha1.MachineDeployment {
	value := func(label string) string {
		if rapid.Bool().Draw(t, label+"Percent") {
			return strconv.Itoa(rapid.IntRange(0, 100).Draw(t, label)) + "%"
		}
		return strconv.Itoa(rapid.IntRange(0, 5).Draw(t, label))
	}
	return newDeployment(replicas, withRolling(value("surge"), value("unavailable")))
}

// genSim draws a deployment in the middle of anything: old sets of several
// sizes with some machines missing, surplus or unavailable, and perhaps a
// new set.
func genSim(t *rapid.T) *sim {
	d := genDeployment(t, rapid.Int32Range(0, 20).Draw(t, "replicas"))
	s := &sim{d: d}
	for i := range rapid.IntRange(0, 3).Draw(t, "oldSets") {
		spec := rapid.Int32Range(0, 12).Draw(t, "oldSpec")
		machines := rapid.Int32Range(0, spec+2).Draw(t, "oldMachines")
		s.old = append(s.old, &simSet{
			set:       newSet(fmt.Sprintf("old%d", i), spec, i, withClass(fmt.Sprintf("c%d", i))),
			machines:  machines,
			available: rapid.Int32Range(0, machines).Draw(t, "oldAvailable"),
		})
	}
	if rapid.Bool().Draw(t, "hasNew") {
		spec := rapid.Int32Range(0, d.Spec.Replicas+2).Draw(t, "newSpec")
		machines := rapid.Int32Range(0, spec+1).Draw(t, "newMachines")
		s.new = &simSet{set: newSet("new", spec, 50), machines: machines, available: rapid.Int32Range(0, machines).Draw(t, "newAvailable")}
	}
	return s
}

// TestRollingStepInvariants: from any state, one step never adds machines
// beyond replicas + maxSurge (or beyond what there already is, when a
// deployment starts above it), never takes availability below
// replicas - maxUnavailable (or below where it was), never grows an old set
// and never takes the new set above replicas.
func TestRollingStepInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSim(t)
		b := boundsOf(t, s.d)
		totalBefore, availableBefore := s.footprintAndAvailable()
		oldBefore := map[string]int32{}
		for _, x := range s.old {
			oldBefore[x.set.Name] = x.set.Spec.Replicas
		}
		var newBefore int32
		if s.new != nil {
			newBefore = s.new.set.Spec.Replicas
		}
		if _, err := s.step(); err != nil {
			t.Fatal(err)
		}
		total, available := s.footprintAndAvailable()
		if total > max(totalBefore, b.maxTotal) {
			t.Fatalf("footprint %d, was %d, bound %d", total, totalBefore, b.maxTotal)
		}
		if available < min(availableBefore, b.minAvailable) {
			t.Fatalf("available %d, was %d, bound %d", available, availableBefore, b.minAvailable)
		}
		for _, x := range s.old {
			if r := x.set.Spec.Replicas; r < 0 || r > oldBefore[x.set.Name] {
				t.Fatalf("old set %s went from %d to %d", x.set.Name, oldBefore[x.set.Name], r)
			}
		}
		if s.new != nil {
			r := s.new.set.Spec.Replicas
			if r < 0 || r > s.d.Spec.Replicas {
				t.Fatalf("new set at %d for %d replicas", r, s.d.Spec.Replicas)
			}
			if r > newBefore && total > b.maxTotal {
				t.Fatalf("new set grew to %d with %d machines above the bound %d", r, total, b.maxTotal)
			}
		}
	})
}

// TestRollingRolloutConverges runs whole rollouts from healthy old sets with
// machines coming up at random: the bounds hold at every step, and the
// rollout ends with all replicas in the new set.
func TestRollingRolloutConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		replicas := rapid.Int32Range(0, 15).Draw(t, "replicas")
		d := genDeployment(t, replicas)
		s := &sim{d: d}
		left := replicas
		for i := 0; left > 0; i++ {
			n := rapid.Int32Range(1, left).Draw(t, "oldSize")
			left -= n
			s.old = append(s.old, &simSet{set: newSet(fmt.Sprintf("old%d", i), n, i, withClass(fmt.Sprintf("c%d", i))), machines: n, available: n})
		}
		b := boundsOf(t, d)
		for range 200 {
			_, availableBefore := s.footprintAndAvailable()
			if _, err := s.step(); err != nil {
				t.Fatal(err)
			}
			total, available := s.footprintAndAvailable()
			if total > b.maxTotal || available < min(availableBefore, b.minAvailable) {
				t.Fatalf("step %d planned %d machines, %d available; bounds %+v", s.tick, total, available, b)
			}
			s.converge()
			machines, available := s.machineTotals()
			if machines > b.maxTotal || available < min(availableBefore, b.minAvailable) {
				t.Fatalf("step %d: %d machines, %d available; bounds %+v", s.tick, machines, available, b)
			}
			for _, x := range s.all() {
				if x.available < x.machines && rapid.Bool().Draw(t, "comesUp") {
					x.available += rapid.Int32Range(1, x.machines-x.available).Draw(t, "up")
				}
			}
			if n, o := s.replicasOf(); n == replicas && o == 0 && s.new != nil {
				return
			}
		}
		n, o := s.replicasOf()
		t.Fatalf("rollout did not finish: new %d, old %d, replicas %d", n, o, replicas)
	})
}
