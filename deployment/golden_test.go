package deployment

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// goldenPair is what the sets are sized for after one step of a rollout: the
// new set's spec.replicas and the old set's.
type goldenPair struct{ New, Old int32 }

// The golden rollouts start from one old set with all its machines
// available and roll to a new template. Between two steps every set reaches
// its size (surplus machines are gone, missing ones created) and the new
// machines come up:
//
//   - instant: all of them are available at the next step;
//   - lagging: one machine of each batch the new set grows by stays
//     unavailable for one more step.
//
// Each table was worked out by hand from Kubernetes' rules, with R replicas,
// S = maxSurge (a percentage rounds up) and U = maxUnavailable (a percentage
// rounds down; 1 when both are 0). With n and o the new and old sets'
// replicas and a the new set's available machines before a step:
//
//	new' = n + min(R - n, max(0, R + S - n - o))   (reconcileNewReplicaSet)
//	old' = o - min(o, max(0, a + o - (R - U)))     (scaleDownOldReplicaSetsForRollingUpdate)
//
// The old set never has unavailable machines here, so Kubernetes'
// cleanupUnhealthyReplicas has nothing to do. Kubernetes returns from a sync
// that scaled the new set up and shrinks old sets in the next one; the
// planner does both in one step, which is the same as long as no machine
// comes up in between, so the formulas take a before the step.
var goldenRollingCases = []struct {
	replicas           int32
	surge, unavailable string
	instant, lagging   []goldenPair
}{
	// S=1 U=0: one machine at a time, created before an old one goes.
	{
		replicas: 3, surge: "1", unavailable: "0",
		instant: []goldenPair{{1, 3}, {1, 2}, {2, 2}, {2, 1}, {3, 1}, {3, 0}},
		lagging: []goldenPair{{1, 3}, {1, 3}, {1, 2}, {2, 2}, {2, 2}, {2, 1}, {3, 1}, {3, 1}, {3, 0}},
	},
	// S=0 U=1: an old machine goes before a new one is created.
	{
		replicas: 3, surge: "0", unavailable: "1",
		instant: []goldenPair{{0, 2}, {1, 2}, {1, 1}, {2, 1}, {2, 0}, {3, 0}},
		lagging: []goldenPair{{0, 2}, {1, 2}, {1, 2}, {1, 1}, {2, 1}, {2, 1}, {2, 0}, {3, 0}},
	},
	// 25% of 3: S = ceil(0.75) = 1, U = floor(0.75) = 0, as 1/0.
	{
		replicas: 3, surge: "25%", unavailable: "25%",
		instant: []goldenPair{{1, 3}, {1, 2}, {2, 2}, {2, 1}, {3, 1}, {3, 0}},
		lagging: []goldenPair{{1, 3}, {1, 3}, {1, 2}, {2, 2}, {2, 2}, {2, 1}, {3, 1}, {3, 1}, {3, 0}},
	},
	// S=3 U=0: the whole new set at once; the old one goes as it comes up.
	{
		replicas: 3, surge: "3", unavailable: "0",
		instant: []goldenPair{{3, 3}, {3, 0}},
		lagging: []goldenPair{{3, 3}, {3, 1}, {3, 0}},
	},
	{
		replicas: 3, surge: "100%", unavailable: "0",
		instant: []goldenPair{{3, 3}, {3, 0}},
		lagging: []goldenPair{{3, 3}, {3, 1}, {3, 0}},
	},
	// S=0 U=3: the old set goes at once, then the new set is sized.
	{
		replicas: 3, surge: "0", unavailable: "100%",
		instant: []goldenPair{{0, 0}, {3, 0}},
		lagging: []goldenPair{{0, 0}, {3, 0}},
	},
	// S=2 U=2 (at least 1 available): 2 new, 2 old gone, then the rest.
	{
		replicas: 3, surge: "2", unavailable: "2",
		instant: []goldenPair{{2, 1}, {3, 0}},
		lagging: []goldenPair{{2, 1}, {3, 0}},
	},
	// Both 0: U becomes 1, as 0/1.
	{
		replicas: 3, surge: "0", unavailable: "0",
		instant: []goldenPair{{0, 2}, {1, 2}, {1, 1}, {2, 1}, {2, 0}, {3, 0}},
		lagging: []goldenPair{{0, 2}, {1, 2}, {1, 2}, {1, 1}, {2, 1}, {2, 1}, {2, 0}, {3, 0}},
	},
	// 10% of 3: S = ceil(0.3) = 1, U = floor(0.3) = 0, as 1/0.
	{
		replicas: 3, surge: "10%", unavailable: "10%",
		instant: []goldenPair{{1, 3}, {1, 2}, {2, 2}, {2, 1}, {3, 1}, {3, 0}},
		lagging: []goldenPair{{1, 3}, {1, 3}, {1, 2}, {2, 2}, {2, 2}, {2, 1}, {3, 1}, {3, 1}, {3, 0}},
	},

	{
		replicas: 6, surge: "1", unavailable: "0",
		instant: []goldenPair{{1, 6}, {1, 5}, {2, 5}, {2, 4}, {3, 4}, {3, 3}, {4, 3}, {4, 2}, {5, 2}, {5, 1}, {6, 1}, {6, 0}},
		lagging: []goldenPair{
			{1, 6}, {1, 6}, {1, 5}, {2, 5}, {2, 5}, {2, 4}, {3, 4}, {3, 4}, {3, 3},
			{4, 3}, {4, 3}, {4, 2}, {5, 2}, {5, 2}, {5, 1}, {6, 1}, {6, 1}, {6, 0},
		},
	},
	{
		replicas: 6, surge: "0", unavailable: "1",
		instant: []goldenPair{{0, 5}, {1, 5}, {1, 4}, {2, 4}, {2, 3}, {3, 3}, {3, 2}, {4, 2}, {4, 1}, {5, 1}, {5, 0}, {6, 0}},
		lagging: []goldenPair{
			{0, 5}, {1, 5}, {1, 5}, {1, 4}, {2, 4}, {2, 4}, {2, 3}, {3, 3}, {3, 3},
			{3, 2}, {4, 2}, {4, 2}, {4, 1}, {5, 1}, {5, 1}, {5, 0}, {6, 0},
		},
	},
	// 25% of 6: S = ceil(1.5) = 2, U = floor(1.5) = 1: at most 8
	// machines, at least 5 available.
	{
		replicas: 6, surge: "25%", unavailable: "25%",
		instant: []goldenPair{{2, 5}, {3, 3}, {5, 2}, {6, 0}},
		lagging: []goldenPair{{2, 5}, {3, 4}, {4, 3}, {5, 2}, {6, 1}, {6, 0}},
	},
	{
		replicas: 6, surge: "3", unavailable: "0",
		instant: []goldenPair{{3, 6}, {3, 3}, {6, 3}, {6, 0}},
		lagging: []goldenPair{{3, 6}, {3, 4}, {5, 3}, {6, 2}, {6, 1}, {6, 0}},
	},
	{
		replicas: 6, surge: "100%", unavailable: "0",
		instant: []goldenPair{{6, 6}, {6, 0}},
		lagging: []goldenPair{{6, 6}, {6, 1}, {6, 0}},
	},
	{
		replicas: 6, surge: "0", unavailable: "100%",
		instant: []goldenPair{{0, 0}, {6, 0}},
		lagging: []goldenPair{{0, 0}, {6, 0}},
	},
	// At most 8 machines, at least 4 available.
	{
		replicas: 6, surge: "2", unavailable: "2",
		instant: []goldenPair{{2, 4}, {4, 2}, {6, 0}},
		lagging: []goldenPair{{2, 4}, {4, 3}, {5, 1}, {6, 0}},
	},
	{
		replicas: 6, surge: "0", unavailable: "0",
		instant: []goldenPair{{0, 5}, {1, 5}, {1, 4}, {2, 4}, {2, 3}, {3, 3}, {3, 2}, {4, 2}, {4, 1}, {5, 1}, {5, 0}, {6, 0}},
		lagging: []goldenPair{
			{0, 5}, {1, 5}, {1, 5}, {1, 4}, {2, 4}, {2, 4}, {2, 3}, {3, 3}, {3, 3},
			{3, 2}, {4, 2}, {4, 2}, {4, 1}, {5, 1}, {5, 1}, {5, 0}, {6, 0},
		},
	},
	// 10% of 6: S = ceil(0.6) = 1, U = floor(0.6) = 0, as 1/0.
	{
		replicas: 6, surge: "10%", unavailable: "10%",
		instant: []goldenPair{{1, 6}, {1, 5}, {2, 5}, {2, 4}, {3, 4}, {3, 3}, {4, 3}, {4, 2}, {5, 2}, {5, 1}, {6, 1}, {6, 0}},
		lagging: []goldenPair{
			{1, 6}, {1, 6}, {1, 5}, {2, 5}, {2, 5}, {2, 4}, {3, 4}, {3, 4}, {3, 3},
			{4, 3}, {4, 3}, {4, 2}, {5, 2}, {5, 2}, {5, 1}, {6, 1}, {6, 1}, {6, 0},
		},
	},

	{
		replicas: 12, surge: "1", unavailable: "0",
		instant: []goldenPair{
			{1, 12}, {1, 11}, {2, 11}, {2, 10}, {3, 10}, {3, 9}, {4, 9}, {4, 8}, {5, 8}, {5, 7}, {6, 7}, {6, 6},
			{7, 6}, {7, 5}, {8, 5}, {8, 4}, {9, 4}, {9, 3}, {10, 3}, {10, 2}, {11, 2}, {11, 1}, {12, 1}, {12, 0},
		},
		lagging: []goldenPair{
			{1, 12}, {1, 12}, {1, 11}, {2, 11}, {2, 11}, {2, 10}, {3, 10}, {3, 10}, {3, 9},
			{4, 9}, {4, 9}, {4, 8}, {5, 8}, {5, 8}, {5, 7}, {6, 7}, {6, 7}, {6, 6},
			{7, 6}, {7, 6}, {7, 5}, {8, 5}, {8, 5}, {8, 4}, {9, 4}, {9, 4}, {9, 3},
			{10, 3}, {10, 3}, {10, 2}, {11, 2}, {11, 2}, {11, 1}, {12, 1}, {12, 1}, {12, 0},
		},
	},
	{
		replicas: 12, surge: "0", unavailable: "1",
		instant: []goldenPair{
			{0, 11}, {1, 11}, {1, 10}, {2, 10}, {2, 9}, {3, 9}, {3, 8}, {4, 8}, {4, 7}, {5, 7}, {5, 6}, {6, 6},
			{6, 5}, {7, 5}, {7, 4}, {8, 4}, {8, 3}, {9, 3}, {9, 2}, {10, 2}, {10, 1}, {11, 1}, {11, 0}, {12, 0},
		},
		lagging: []goldenPair{
			{0, 11}, {1, 11}, {1, 11}, {1, 10}, {2, 10}, {2, 10}, {2, 9}, {3, 9}, {3, 9}, {3, 8},
			{4, 8}, {4, 8}, {4, 7}, {5, 7}, {5, 7}, {5, 6}, {6, 6}, {6, 6}, {6, 5},
			{7, 5}, {7, 5}, {7, 4}, {8, 4}, {8, 4}, {8, 3}, {9, 3}, {9, 3}, {9, 2},
			{10, 2}, {10, 2}, {10, 1}, {11, 1}, {11, 1}, {11, 0}, {12, 0},
		},
	},
	// 25% of 12: S = 3, U = 3: at most 15 machines, at least 9 available.
	{
		replicas: 12, surge: "25%", unavailable: "25%",
		instant: []goldenPair{{3, 9}, {6, 6}, {9, 3}, {12, 0}},
		lagging: []goldenPair{{3, 9}, {6, 7}, {8, 4}, {11, 2}, {12, 0}},
	},
	// At most 15 machines, all 12 available. Lagging, the sets settle at
	// 14 machines with one always coming up.
	{
		replicas: 12, surge: "3", unavailable: "0",
		instant: []goldenPair{{3, 12}, {3, 9}, {6, 9}, {6, 6}, {9, 6}, {9, 3}, {12, 3}, {12, 0}},
		lagging: []goldenPair{{3, 12}, {3, 10}, {5, 9}, {6, 8}, {7, 7}, {8, 6}, {9, 5}, {10, 4}, {11, 3}, {12, 2}, {12, 1}, {12, 0}},
	},
	{
		replicas: 12, surge: "100%", unavailable: "0",
		instant: []goldenPair{{12, 12}, {12, 0}},
		lagging: []goldenPair{{12, 12}, {12, 1}, {12, 0}},
	},
	{
		replicas: 12, surge: "0", unavailable: "100%",
		instant: []goldenPair{{0, 0}, {12, 0}},
		lagging: []goldenPair{{0, 0}, {12, 0}},
	},
	// At most 14 machines, at least 10 available.
	{
		replicas: 12, surge: "2", unavailable: "2",
		instant: []goldenPair{{2, 10}, {4, 8}, {6, 6}, {8, 4}, {10, 2}, {12, 0}},
		lagging: []goldenPair{{2, 10}, {4, 9}, {5, 7}, {7, 6}, {8, 4}, {10, 3}, {11, 1}, {12, 0}},
	},
	{
		replicas: 12, surge: "0", unavailable: "0",
		instant: []goldenPair{
			{0, 11}, {1, 11}, {1, 10}, {2, 10}, {2, 9}, {3, 9}, {3, 8}, {4, 8}, {4, 7}, {5, 7}, {5, 6}, {6, 6},
			{6, 5}, {7, 5}, {7, 4}, {8, 4}, {8, 3}, {9, 3}, {9, 2}, {10, 2}, {10, 1}, {11, 1}, {11, 0}, {12, 0},
		},
		lagging: []goldenPair{
			{0, 11}, {1, 11}, {1, 11}, {1, 10}, {2, 10}, {2, 10}, {2, 9}, {3, 9}, {3, 9}, {3, 8},
			{4, 8}, {4, 8}, {4, 7}, {5, 7}, {5, 7}, {5, 6}, {6, 6}, {6, 6}, {6, 5},
			{7, 5}, {7, 5}, {7, 4}, {8, 4}, {8, 4}, {8, 3}, {9, 3}, {9, 3}, {9, 2},
			{10, 2}, {10, 2}, {10, 1}, {11, 1}, {11, 1}, {11, 0}, {12, 0},
		},
	},
	// 10% of 12: S = ceil(1.2) = 2, U = floor(1.2) = 1: at most 14
	// machines, at least 11 available.
	{
		replicas: 12, surge: "10%", unavailable: "10%",
		instant: []goldenPair{{2, 11}, {3, 9}, {5, 8}, {6, 6}, {8, 5}, {9, 3}, {11, 2}, {12, 0}},
		lagging: []goldenPair{{2, 11}, {3, 10}, {4, 9}, {5, 8}, {6, 7}, {7, 6}, {8, 5}, {9, 4}, {10, 3}, {11, 2}, {12, 1}, {12, 0}},
	},
}

func TestGoldenRollingUpdate(t *testing.T) {
	for _, tc := range goldenRollingCases {
		for _, lagging := range []bool{false, true} {
			want, variant := tc.instant, "instant"
			if lagging {
				want, variant = tc.lagging, "lagging"
			}
			name := strconv.Itoa(int(tc.replicas)) + "/" + tc.surge + "/" + tc.unavailable + "/" + variant
			t.Run(name, func(t *testing.T) {
				d := newDeployment(tc.replicas, withRolling(tc.surge, tc.unavailable))
				if diff := cmp.Diff(want, goldenRollout(t, d, lagging)); diff != "" {
					t.Errorf("(new, old) replicas per step (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// goldenRollout runs a rolling update from one fully available old set to
// the end and returns the sets' replicas after each step. It fails t when
// a step leaves the bounds or the rollout does not end.
func goldenRollout(t *testing.T, d *v1alpha1.MachineDeployment, lagging bool) []goldenPair {
	t.Helper()
	surge, unavailable, err := rolloutBounds(d)
	if err != nil {
		t.Fatal(err)
	}
	replicas := d.Spec.Replicas
	old := newSet("old", replicas, 0, withClass("previous"))
	var current *v1alpha1.MachineSet
	// late is how many of the new set's machines are not available yet.
	var late int32
	var got []goldenPair
	for step := 1; step <= 100; step++ {
		counts := map[string]machineCounts{"old": counted(old.Spec.Replicas, old.Spec.Replicas)}
		var before, availableBefore int32
		if current != nil {
			before, availableBefore = current.Spec.Replicas, current.Spec.Replicas-late
			counts["new"] = counted(before, availableBefore)
		}
		plan, err := planRolling(d, current, []*v1alpha1.MachineSet{old}, counts)
		if err != nil {
			t.Fatal(err)
		}
		if plan.New != nil {
			if current == nil {
				current = newSet("new", 0, 10)
			}
			current.Spec.Replicas = *plan.New
		}
		for name, r := range plan.Old {
			if name != old.Name {
				t.Fatalf("step %d: plan for a set that does not exist: %s", step, name)
			}
			old.Spec.Replicas = r
		}
		if current == nil {
			t.Fatalf("step %d: no new set planned", step)
		}
		n, o := current.Spec.Replicas, old.Spec.Replicas
		got = append(got, goldenPair{n, o})

		// The bounds of the rollout, once the sets have their sizes: the
		// old set loses available machines, the new set's new ones are not
		// available yet.
		if n+o > replicas+surge {
			t.Errorf("step %d: %d+%d machines, at most %d+%d allowed", step, n, o, replicas, surge)
		}
		if available := availableBefore + o; available < replicas-unavailable {
			t.Errorf("step %d: %d machines available, at least %d-%d needed", step, available, replicas, unavailable)
		}

		late = 0
		if lagging && n > before {
			late = 1
		}
		if n == replicas && o == 0 {
			// Done: once the last machine is up, nothing is left to do.
			done, err := planRolling(d, current, []*v1alpha1.MachineSet{old}, map[string]machineCounts{"new": counted(n, n)})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(rolloutPlan{}, done); diff != "" {
				t.Errorf("after the rollout (-want +got):\n%s", diff)
			}
			return got
		}
	}
	t.Fatalf("no end after 100 steps: %v", got)
	return nil
}

// goldenRecreateStep is one step of a Recreate rollout: how many old machines
// the step saw (those being deleted included), and what the sets are sized
// for after it; New is "-" while the new set does not exist.
type goldenRecreateStep struct {
	Seen int32
	New  string
	Old  int32
}

// TestGoldenRecreate: the old sets go to 0 in one step, the new set waits
// until the last old machine is gone, however long deletion takes, and then
// gets all replicas in one step. Machines being deleted stay for
// deletionSteps steps.
func TestGoldenRecreate(t *testing.T) {
	tests := []struct {
		name          string
		replicas      int32
		oldSizes      []int32
		deletionSteps int
		want          []goldenRecreateStep
	}{
		{
			name: "3 from two old sets, deletion within a step", replicas: 3, oldSizes: []int32{2, 1}, deletionSteps: 1,
			want: []goldenRecreateStep{{3, "-", 0}, {3, "-", 0}, {0, "3", 0}},
		},
		{
			name: "6 from one old set, deletion over two steps", replicas: 6, oldSizes: []int32{6}, deletionSteps: 2,
			want: []goldenRecreateStep{{6, "-", 0}, {6, "-", 0}, {6, "-", 0}, {0, "6", 0}},
		},
		{
			name: "12 from three old sets", replicas: 12, oldSizes: []int32{4, 4, 4}, deletionSteps: 1,
			want: []goldenRecreateStep{{12, "-", 0}, {12, "-", 0}, {0, "12", 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDeployment(tt.replicas, withRecreate())
			var old []*v1alpha1.MachineSet
			// Live and deleting machines per old set; deleting machines
			// vanish when their countdown reaches 0.
			live := map[string]int32{}
			deleting := map[string]int32{}
			countdown := map[string]int{}
			for i, size := range tt.oldSizes {
				s := newSet("old"+strconv.Itoa(i), size, i, withClass("previous"+strconv.Itoa(i)))
				s.Status.Replicas = size
				old = append(old, s)
				live[s.Name] = size
			}
			var current *v1alpha1.MachineSet
			var got []goldenRecreateStep
			for step := 1; step <= 20; step++ {
				counts := map[string]machineCounts{}
				var seen int32
				for _, s := range old {
					counts[s.Name] = machineCounts{Machines: live[s.Name], Ready: live[s.Name], Available: live[s.Name], Deleting: deleting[s.Name]}
					seen += live[s.Name] + deleting[s.Name]
				}
				if current != nil {
					counts[current.Name] = counted(current.Spec.Replicas, current.Spec.Replicas)
				}
				plan := planRecreate(d, current, old, counts)
				if plan.New != nil && seen > 0 {
					t.Fatalf("step %d: new set sized %d while %d old machines exist", step, *plan.New, seen)
				}
				if plan.New != nil {
					if current == nil {
						current = newSet("new", 0, 10)
					}
					current.Spec.Replicas = *plan.New
				}
				row := goldenRecreateStep{Seen: seen, New: "-"}
				if current != nil {
					row.New = strconv.Itoa(int(current.Spec.Replicas))
				}
				for _, s := range old {
					if r, ok := plan.Old[s.Name]; ok {
						s.Spec.Replicas = r
					}
					row.Old += s.Spec.Replicas
				}
				got = append(got, row)
				if current != nil && current.Spec.Replicas == tt.replicas {
					break
				}
				// The machine set controller: machines being deleted
				// count down, surplus machines start being deleted.
				for _, s := range old {
					if deleting[s.Name] > 0 {
						if countdown[s.Name]--; countdown[s.Name] == 0 {
							deleting[s.Name] = 0
						}
					}
					if surplus := live[s.Name] - s.Spec.Replicas; surplus > 0 {
						live[s.Name] -= surplus
						deleting[s.Name] += surplus
						countdown[s.Name] = tt.deletionSteps
					}
					s.Status.Replicas = live[s.Name]
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("recreate steps (-want +got):\n%s", diff)
			}
		})
	}
}
