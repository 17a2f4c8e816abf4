package deployment

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestIsScalingEvent(t *testing.T) {
	tests := []struct {
		name     string
		replicas int32
		newSet   *v1alpha1.MachineSet
		old      []*v1alpha1.MachineSet
		want     bool
	}{
		{"no new set: a rollout first", 3, nil, []*v1alpha1.MachineSet{newSet("o", 2, 0, withDesired(2))}, false},
		{"from zero", 3, newSet("n", 0, 5), nil, true},
		{"zero stays zero", 0, newSet("n", 0, 5), nil, false},
		{"replicas changed", 3, newSet("n", 2, 5, withDesired(2)), nil, true},
		{"an old set was sized for other replicas", 3, newSet("n", 2, 5, withDesired(3)), []*v1alpha1.MachineSet{newSet("o", 1, 0, withDesired(4))}, true},
		{"inactive sets do not count", 3, newSet("n", 3, 5, withDesired(3)), []*v1alpha1.MachineSet{newSet("o", 0, 0, withDesired(4))}, false},
		{"unchanged", 3, newSet("n", 2, 5, withDesired(3)), []*v1alpha1.MachineSet{newSet("o", 2, 0, withDesired(3))}, false},
		{"no annotation", 3, newSet("n", 2, 5), nil, false},
		{"malformed annotation", 3, newSet("n", 2, 5, withSetAnnotation(v1alpha1.DesiredReplicasAnnotation, "x")), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isScalingEvent(newDeployment(tt.replicas), tt.newSet, tt.old); got != tt.want {
				t.Errorf("isScalingEvent = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPlanScale(t *testing.T) {
	tests := []struct {
		name    string
		d       *v1alpha1.MachineDeployment
		newSet  *v1alpha1.MachineSet
		old     []*v1alpha1.MachineSet
		counts  map[string]machineCounts
		want    map[string]int32
		wantErr bool
	}{
		{
			name:   "one active set takes the replicas",
			d:      newDeployment(5),
			newSet: newSet("n", 0, 9),
			old:    []*v1alpha1.MachineSet{newSet("o", 3, 0, withClass("a"))},
			want:   map[string]int32{"o": 5},
		},
		{
			name:   "one active set already sized: still listed, for its annotations",
			d:      newDeployment(3),
			newSet: newSet("n", 3, 9),
			want:   map[string]int32{"n": 3},
		},
		{
			name:   "scale from zero: the new set",
			d:      newDeployment(4),
			newSet: newSet("n", 0, 9),
			old:    []*v1alpha1.MachineSet{newSet("o", 0, 10, withClass("a"))},
			want:   map[string]int32{"n": 4},
		},
		{
			name: "scale from zero without a new set: the newest set",
			d:    newDeployment(4),
			old:  []*v1alpha1.MachineSet{newSet("o1", 0, 0, withClass("a")), newSet("o2", 0, 5, withClass("b"))},
			want: map[string]int32{"o2": 4},
		},
		{
			name: "paused before the first rollout: no set to size",
			d:    newDeployment(3),
			want: nil,
		},
		{
			// A rollout with maxUnavailable 100% scales the old set to 0
			// before the new one: no set is active, and the old machines
			// are still there. Sizing the new set to spec.replicas now
			// would double the machines.
			name:   "from zero, rolling: within the surge, old machines included",
			d:      newDeployment(3, withRolling("0", "100%")),
			newSet: newSet("n", 0, 9),
			old:    []*v1alpha1.MachineSet{newSet("o", 0, 0, withClass("a"))},
			counts: map[string]machineCounts{"o": counted(3, 3)},
			want:   map[string]int32{"n": 0},
		},
		{
			name:   "from zero, rolling: grows into the room left",
			d:      newDeployment(3, withRolling("1", "100%")),
			newSet: newSet("n", 0, 9),
			old:    []*v1alpha1.MachineSet{newSet("o", 0, 0, withClass("a"))},
			counts: map[string]machineCounts{"o": counted(2, 2)},
			want:   map[string]int32{"n": 2},
		},
		{
			name:   "from zero, rolling: machines being deleted make room",
			d:      newDeployment(3, withRolling("1", "100%")),
			newSet: newSet("n", 0, 9),
			old:    []*v1alpha1.MachineSet{newSet("o", 0, 0, withClass("a"))},
			counts: map[string]machineCounts{"o": {Deleting: 3}},
			want:   map[string]int32{"n": 3},
		},
		{
			// A Recreate back to a set that still exists: the old set went
			// to 0, its machines are being deleted.
			name:   "from zero, recreate: waits for the old machines",
			d:      newDeployment(3, withRecreate()),
			newSet: newSet("n", 0, 9),
			old:    []*v1alpha1.MachineSet{newSet("o", 0, 0, withClass("a"))},
			counts: map[string]machineCounts{"o": {Deleting: 3}},
			want:   map[string]int32{"n": 0},
		},
		{
			name:   "from zero, recreate: no old machine left",
			d:      newDeployment(3, withRecreate()),
			newSet: newSet("n", 0, 9),
			old:    []*v1alpha1.MachineSet{newSet("o", 0, 0, withClass("a"))},
			want:   map[string]int32{"n": 3},
		},
		{
			name: "from zero, in place: spec.replicas",
			d: newDeployment(3, func(d *v1alpha1.MachineDeployment) {
				d.Spec.Strategy = v1alpha1.MachineDeploymentStrategy{
					Type:          v1alpha1.InPlaceUpdateMachineDeploymentStrategyType,
					InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{},
				}
			}),
			newSet: newSet("n", 0, 9),
			old:    []*v1alpha1.MachineSet{newSet("o", 0, 0, withClass("a"))},
			counts: map[string]machineCounts{"o": counted(3, 3)},
			want:   map[string]int32{"n": 3},
		},
		{
			name:   "saturated new set: old sets go",
			d:      newDeployment(3),
			newSet: newSet("n", 3, 9, withDesired(3)),
			old:    []*v1alpha1.MachineSet{newSet("o", 1, 0, withClass("a")), newSet("gone", 0, 1, withClass("b"))},
			counts: map[string]machineCounts{"n": counted(3, 3)},
			want:   map[string]int32{"o": 0},
		},
		{
			name:   "scale in: proportional, leftover from the largest (the older on a tie)",
			d:      newDeployment(5, withRolling("2", "0")),
			newSet: newSet("n", 6, 9, withMax(12), withDesired(10)),
			old:    []*v1alpha1.MachineSet{newSet("o", 6, 0, withClass("a"), withMax(12), withDesired(10))},
			// Allowed 7 of 12: each keeps round(3.5) = 4, one more must go.
			want: map[string]int32{"o": 3, "n": 4},
		},
		{
			name:   "scale in: three sets",
			d:      newDeployment(10, withRolling("2", "0")),
			newSet: newSet("n", 4, 9, withMax(22), withDesired(20)),
			old: []*v1alpha1.MachineSet{
				newSet("o1", 8, 0, withClass("a"), withMax(22), withDesired(20)),
				newSet("o2", 10, 5, withClass("b"), withMax(22), withDesired(20)),
			},
			// Allowed 12 of 22: 10 -> 5.45 -> 5, 8 -> 4.36 -> 4, 4 -> 2.18 -> 2
			// would keep 11; the cuts stop once 10 are gone, which spares
			// the smallest set one machine.
			want: map[string]int32{"o2": 5, "o1": 4, "n": 3},
		},
		{
			name:   "scale in to zero",
			d:      newDeployment(0),
			newSet: newSet("n", 2, 9, withMax(5), withDesired(4)),
			old:    []*v1alpha1.MachineSet{newSet("o", 3, 0, withClass("a"), withMax(5), withDesired(4))},
			want:   map[string]int32{"o": 0, "n": 0},
		},
		{
			name:   "scale in without max-replicas: the deployment's replicas stand in",
			d:      newDeployment(2, func(d *v1alpha1.MachineDeployment) { d.Status.Replicas = 6 }),
			newSet: newSet("n", 3, 9),
			old:    []*v1alpha1.MachineSet{newSet("o", 3, 0, withClass("a"))},
			// Allowed 3 of 6: each keeps round(1.5) = 2, one more from the older.
			want: map[string]int32{"o": 1, "n": 2},
		},
		{
			name:   "scale out: only the new set grows",
			d:      newDeployment(5),
			newSet: newSet("n", 1, 9, withMax(4), withDesired(3)),
			old:    []*v1alpha1.MachineSet{newSet("o", 3, 0, withClass("a"), withMax(4), withDesired(3))},
			want:   map[string]int32{"o": 3, "n": 3},
		},
		{
			name:   "scale out: the new set never above replicas",
			d:      newDeployment(4, withRolling("3", "0")),
			newSet: newSet("n", 3, 9, withDesired(3)),
			old:    []*v1alpha1.MachineSet{newSet("o", 1, 0, withClass("a"), withDesired(3))},
			want:   map[string]int32{"o": 1, "n": 4},
		},
		{
			name: "scale out without a new set: the newest active set grows",
			d:    newDeployment(6),
			old: []*v1alpha1.MachineSet{
				newSet("o1", 2, 0, withClass("a"), withDesired(3)),
				newSet("o2", 2, 5, withClass("b"), withDesired(3)),
				newSet("o0", 0, 7, withClass("c")),
			},
			want: map[string]int32{"o1": 2, "o2": 5},
		},
		{
			name:   "recreate: left to the rollout",
			d:      newDeployment(5, withRecreate()),
			newSet: newSet("n", 1, 9),
			old:    []*v1alpha1.MachineSet{newSet("o", 3, 0, withClass("a"))},
			want:   nil,
		},
		{
			name:    "unreadable maxSurge",
			d:       newDeployment(5, withRolling("many", "0")),
			newSet:  newSet("n", 1, 9),
			old:     []*v1alpha1.MachineSet{newSet("o", 3, 0, withClass("a"))},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := planScale(tt.d, tt.newSet, tt.old, tt.counts)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("planScale (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProportionalSize(t *testing.T) {
	d := newDeployment(0)
	tests := []struct {
		name    string
		set     *v1alpha1.MachineSet
		allowed int32
		want    int64
	}{
		{"half rounds up", newSet("s", 3, 0, withMax(6)), 5, 3},
		{"below half rounds down", newSet("s", 1, 0, withMax(3)), 4, 1},
		{"nothing allowed", newSet("s", 3, 0, withMax(6)), 0, 0},
		{"annotation zero: falls back to 1", newSet("s", 3, 0, withMax(0)), 2, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := proportionalSize(d, tt.set, tt.allowed); got != tt.want {
				t.Errorf("proportionalSize = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestProportionalScalingProperties: whatever the sets and their
// annotations, a scaling event with several active sets sizes them to
// exactly replicas + maxSurge when shrinking, leaves no set negative, and
// moves every set in the direction of the change: shrinking never grows a
// set, growing only grows the new set, up to replicas at most.
func TestProportionalScalingProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		before := rapid.Int32Range(1, 40).Draw(t, "replicasBefore")
		d := genDeployment(t, before)
		surgeBefore, _, err := rolloutBounds(d)
		if err != nil {
			t.Fatal(err)
		}
		sets := rapid.IntRange(2, 4).Draw(t, "sets")
		annotate := func(i int) []msOpt {
			opts := []msOpt{withClass(fmt.Sprintf("c%d", i)), withDesired(int(before))}
			switch rapid.IntRange(0, 3).Draw(t, "maxAnnotation") {
			case 0: // missing
			case 1:
				opts = append(opts, withSetAnnotation(v1alpha1.MaxReplicasAnnotation, "garbage"))
			default:
				opts = append(opts, withMax(int(before+surgeBefore)))
			}
			return opts
		}
		var old []*v1alpha1.MachineSet
		for i := range sets - 1 {
			old = append(old, newSet(fmt.Sprintf("o%d", i), rapid.Int32Range(1, 15).Draw(t, "old"), i, annotate(i)...))
		}
		var newS *v1alpha1.MachineSet
		if rapid.Bool().Draw(t, "hasNew") {
			newS = newSet("n", rapid.Int32Range(1, 15).Draw(t, "new"), 50, annotate(99)...)
		} else {
			old = append(old, newSet("o-last", rapid.Int32Range(1, 15).Draw(t, "lastOld"), 40, annotate(sets)...))
		}
		d.Status.Replicas = rapid.Int32Range(0, 50).Draw(t, "statusReplicas")

		after := rapid.Int32Range(0, 40).Draw(t, "replicasAfter")
		d.Spec.Replicas = after
		surge, _, err := rolloutBounds(d)
		if err != nil {
			t.Fatal(err)
		}
		allowed := int64(0)
		if after > 0 {
			allowed = int64(after) + int64(surge)
		}

		all := withNew(newS, old)
		sizes, err := planScale(d, newS, old, nil)
		if err != nil {
			t.Fatal(err)
		}
		sumBefore := int64(specReplicas(all))
		var sumAfter int64
		target := newS
		if target == nil {
			target = newest(all)
		}
		for _, s := range all {
			got, ok := sizes[s.Name]
			if !ok {
				t.Fatalf("set %s not sized: %v", s.Name, sizes)
			}
			if got < 0 {
				t.Fatalf("set %s sized %d", s.Name, got)
			}
			sumAfter += int64(got)
			switch {
			case allowed < sumBefore && got > s.Spec.Replicas:
				t.Fatalf("shrinking grew %s from %d to %d", s.Name, s.Spec.Replicas, got)
			case allowed > sumBefore && s != target && got != s.Spec.Replicas:
				t.Fatalf("growing changed %s (not the target %s) from %d to %d", s.Name, target.Name, s.Spec.Replicas, got)
			case allowed > sumBefore && s == target && (got < s.Spec.Replicas || got > max(after, s.Spec.Replicas)):
				t.Fatalf("growing took %s from %d to %d for %d replicas", s.Name, s.Spec.Replicas, got, after)
			}
		}
		switch {
		case allowed < sumBefore:
			if sumAfter != allowed {
				t.Fatalf("shrunk to %d machines, want %d (replicas %d + surge %d): %v", sumAfter, allowed, after, surge, sizes)
			}
		case allowed > sumBefore:
			if sumAfter > allowed || sumAfter < allowed && sizes[target.Name] != max(after, target.Spec.Replicas) {
				t.Fatalf("grew to %d machines, allowed %d, target %s at %d: %v", sumAfter, allowed, target.Name, sizes[target.Name], sizes)
			}
		default:
			if sumAfter != sumBefore {
				t.Fatalf("no change asked, sizes moved: %v", sizes)
			}
		}
	})
}
