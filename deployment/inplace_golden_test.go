package deployment

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// runIPRollout starts a settled world (ipWorld), changes the template's
// class and runs rounds until the world converged, returning the rounds'
// sizes with repeats dropped. In Manual, a person selects two candidate
// nodes every third round. Every round checks the world's invariants.
func runIPRollout(t *testing.T, d *v1alpha1.MachineDeployment, lagging bool) ([]ipRound, *ipWorld) {
	t.Helper()
	w := newIPWorld(d, t.Errorf)
	if lagging {
		w.lagging = w.machines[0].Name
	}
	w.d.Spec.Template.Spec.Class.Name = "class-b"
	var rounds []ipRound
	for range 300 {
		if manual(w.d) && w.rounds%3 == 0 {
			w.selectByHand(2)
		}
		if r := w.round(); len(rounds) == 0 || rounds[len(rounds)-1] != r {
			rounds = append(rounds, r)
		}
		if ok, _ := w.converged(); ok {
			return rounds, w
		}
	}
	_, why := w.converged()
	t.Fatalf("no convergence after 300 rounds: %s\n%s", why, w)
	return nil, nil
}

// The golden in-place rollouts start from one set of R Running machines,
// each on its node, and roll to a new class. Each entry is {new set's
// spec.replicas, old set's, machines unavailable or in flight} after a
// sync of the deployment controller, repeats dropped. Between two syncs
// the machine controller and the agent move each machine one step (fact
// sheet §2.2): candidate, selected, drained (InPlaceUpdating,
// ReadyForUpdate), agent's result, phase past the update, condition
// UpdateSuccessful and Running; then the controller moves it. Lagging: the
// first machine, the first selected, moves every other round only.
//
// With S = maxSurge (Auto; Manual has none, as MCM) and U = maxUnavailable
// (rounded as MCM, 1 when both are 0): the new set starts at S (fresh
// VMs); at most U + S machines are unavailable or in flight, an in-flight
// machine counted once, so a slot freed by the lagging machine's
// neighbours is refilled at once (MCM waits for the whole wave); the new
// set grows by one per machine moved, the old set shrinks by as many, a
// round after the move, once the move shows; at
// R the old set goes to 0, deleting the S machines the surge replaced
// (vms: VMs created and deleted each). In Manual, the person's two
// selections every third round are all updated at once, regardless of U.
var goldenInPlaceCases = []struct {
	replicas           int32
	orchestration      v1alpha1.OrchestrationType
	surge, unavailable string
	vms                int
	instant, lagging   []ipRound
}{
	{
		replicas: 3, orchestration: v1alpha1.OrchestrationTypeAuto, surge: "0", unavailable: "1", vms: 0,
		instant: []ipRound{{0, 3, 0}, {0, 3, 1}, {1, 2, 1}, {2, 1, 1}, {2, 1, 0}, {3, 0, 0}},
		lagging: []ipRound{{0, 3, 0}, {0, 3, 1}, {1, 2, 1}, {2, 1, 1}, {2, 1, 0}, {3, 0, 0}},
	},
	{
		replicas: 3, orchestration: v1alpha1.OrchestrationTypeAuto, surge: "0", unavailable: "2", vms: 0,
		instant: []ipRound{{0, 3, 0}, {0, 3, 2}, {0, 3, 1}, {2, 1, 1}, {2, 1, 0}, {3, 0, 0}},
		lagging: []ipRound{{0, 3, 0}, {0, 3, 2}, {1, 2, 2}, {1, 2, 1}, {2, 1, 0}, {3, 0, 0}},
	},
	{
		replicas: 3, orchestration: v1alpha1.OrchestrationTypeAuto, surge: "1", unavailable: "0", vms: 1,
		instant: []ipRound{{1, 3, 0}, {1, 3, 1}, {2, 2, 1}, {2, 2, 0}, {3, 0, 0}},
		lagging: []ipRound{{1, 3, 0}, {1, 3, 1}, {2, 2, 1}, {2, 2, 0}, {3, 0, 0}},
	},
	{
		replicas: 3, orchestration: v1alpha1.OrchestrationTypeManual, surge: "1", unavailable: "0", vms: 0,
		instant: []ipRound{{0, 3, 0}, {0, 3, 2}, {0, 3, 3}, {0, 3, 1}, {2, 1, 1}, {2, 1, 0}, {3, 0, 0}},
		lagging: []ipRound{{0, 3, 0}, {0, 3, 2}, {0, 3, 3}, {0, 3, 2}, {1, 2, 2}, {1, 2, 0}, {3, 0, 0}},
	},
	{
		replicas: 6, orchestration: v1alpha1.OrchestrationTypeAuto, surge: "0", unavailable: "2", vms: 0,
		instant: []ipRound{{0, 6, 0}, {0, 6, 2}, {2, 4, 2}, {4, 2, 2}, {4, 2, 0}, {6, 0, 0}},
		lagging: []ipRound{{0, 6, 0}, {0, 6, 2}, {1, 5, 2}, {2, 4, 2}, {3, 3, 2}, {4, 2, 1}, {5, 1, 1}, {5, 1, 0}, {6, 0, 0}},
	},
	{
		replicas: 6, orchestration: v1alpha1.OrchestrationTypeAuto, surge: "1", unavailable: "1", vms: 1,
		instant: []ipRound{{1, 6, 0}, {1, 6, 2}, {3, 4, 2}, {3, 4, 1}, {5, 2, 1}, {5, 2, 0}, {6, 0, 0}},
		lagging: []ipRound{{1, 6, 0}, {1, 6, 2}, {2, 5, 2}, {3, 4, 2}, {4, 3, 2}, {4, 3, 1}, {5, 2, 0}, {6, 0, 0}},
	},
	{
		replicas: 6, orchestration: v1alpha1.OrchestrationTypeAuto, surge: "0", unavailable: "50%", vms: 0,
		instant: []ipRound{{0, 6, 0}, {0, 6, 3}, {3, 3, 3}, {3, 3, 0}, {6, 0, 0}},
		lagging: []ipRound{{0, 6, 0}, {0, 6, 3}, {2, 4, 3}, {2, 4, 2}, {4, 2, 1}, {5, 1, 1}, {5, 1, 0}, {6, 0, 0}},
	},
	{
		replicas: 6, orchestration: v1alpha1.OrchestrationTypeManual, surge: "0", unavailable: "1", vms: 0,
		instant: []ipRound{{0, 6, 0}, {0, 6, 2}, {0, 6, 4}, {0, 6, 2}, {2, 4, 2}, {2, 4, 4}, {2, 4, 2}, {4, 2, 2}, {4, 2, 0}, {6, 0, 0}},
		lagging: []ipRound{{0, 6, 0}, {0, 6, 2}, {0, 6, 4}, {0, 6, 3}, {1, 5, 3}, {1, 5, 5}, {1, 5, 2}, {4, 2, 2}, {4, 2, 0}, {6, 0, 0}},
	},
	{
		replicas: 12, orchestration: v1alpha1.OrchestrationTypeAuto, surge: "0", unavailable: "25%", vms: 0,
		instant: []ipRound{{0, 12, 0}, {0, 12, 3}, {3, 9, 3}, {6, 6, 3}, {9, 3, 3}, {9, 3, 0}, {12, 0, 0}},
		lagging: []ipRound{{0, 12, 0}, {0, 12, 3}, {2, 10, 3}, {4, 8, 3}, {5, 7, 3}, {7, 5, 3}, {8, 4, 3}, {8, 4, 2}, {10, 2, 1}, {11, 1, 1}, {11, 1, 0}, {12, 0, 0}},
	},
	{
		replicas: 12, orchestration: v1alpha1.OrchestrationTypeAuto, surge: "25%", unavailable: "0", vms: 3,
		instant: []ipRound{{3, 12, 0}, {3, 12, 3}, {6, 9, 3}, {9, 6, 3}, {9, 6, 0}, {12, 0, 0}},
		lagging: []ipRound{{3, 12, 0}, {3, 12, 3}, {5, 10, 3}, {7, 8, 3}, {8, 7, 3}, {8, 7, 2}, {10, 5, 1}, {11, 4, 1}, {11, 4, 0}, {12, 0, 0}},
	},
	{
		replicas: 12, orchestration: v1alpha1.OrchestrationTypeAuto, surge: "0", unavailable: "5", vms: 0,
		instant: []ipRound{{0, 12, 0}, {0, 12, 5}, {5, 7, 5}, {5, 7, 2}, {10, 2, 2}, {10, 2, 0}, {12, 0, 0}},
		lagging: []ipRound{{0, 12, 0}, {0, 12, 5}, {4, 8, 5}, {4, 8, 4}, {8, 4, 3}, {9, 3, 3}, {9, 3, 0}, {12, 0, 0}},
	},
	{
		replicas: 12, orchestration: v1alpha1.OrchestrationTypeManual, surge: "0", unavailable: "3", vms: 0,
		instant: []ipRound{{0, 12, 0}, {0, 12, 2}, {0, 12, 4}, {0, 12, 2}, {2, 10, 2}, {2, 10, 4}, {2, 10, 2}, {4, 8, 2}, {4, 8, 4}, {4, 8, 2}, {6, 6, 2}, {6, 6, 4}, {6, 6, 2}, {8, 4, 2}, {8, 4, 4}, {8, 4, 2}, {10, 2, 2}, {10, 2, 0}, {12, 0, 0}},
		lagging: []ipRound{{0, 12, 0}, {0, 12, 2}, {0, 12, 4}, {0, 12, 3}, {1, 11, 3}, {1, 11, 5}, {1, 11, 2}, {4, 8, 2}, {4, 8, 4}, {4, 8, 2}, {6, 6, 2}, {6, 6, 4}, {6, 6, 2}, {8, 4, 2}, {8, 4, 4}, {8, 4, 2}, {10, 2, 2}, {10, 2, 0}, {12, 0, 0}},
	},
}

func TestInPlaceGolden(t *testing.T) {
	for _, c := range goldenInPlaceCases {
		for _, lag := range []bool{false, true} {
			want := c.instant
			if lag {
				want = c.lagging
			}
			t.Run(fmt.Sprintf("%d/%s/surge=%s/unavailable=%s/lagging=%v", c.replicas, c.orchestration, c.surge, c.unavailable, lag), func(t *testing.T) {
				got, w := runIPRollout(t, inPlaceDeployment(c.replicas, c.orchestration, c.surge, c.unavailable), lag)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("rounds (-want +got):\n%s", diff)
				}
				if w.created != c.vms || w.deleted != c.vms {
					t.Errorf("%d VMs created and %d deleted, want %d each", w.created, w.deleted, c.vms)
				}
			})
		}
	}
}
