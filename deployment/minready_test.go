package deployment

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// minReadySeconds500 is what Gardener's worker actuator, and MCM's
// integration suite, give every MachineDeployment.
const minReadySeconds500 = 500

// TestRollingUpdateMinReadySeconds rolls a deployment of 4 machines with
// maxSurge 2, maxUnavailable 1 and minReadySeconds 500 to a new template in
// the simulated world (world_test.go), whose clock moves 10 s a round: a
// machine comes up Running 10 s after its set creates it. As in MCM, a
// Running machine is available at once, so the rollout is done in three
// rounds, 30 s. With the opt-in, old machines go only once new ones have
// been Running for minReadySeconds, and the last new machine waits as long
// again before the rollout is complete: two waits, no less than 1000 s.
// rapid varies the order in which the controller lists the sets and
// machines; nothing else is drawn.
func TestRollingUpdateMinReadySeconds(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		// The rollout takes at least atLeast and less than below.
		atLeast, below time.Duration
	}{
		{name: "as in MCM: no wait", below: 100 * time.Second},
		{name: "ignore: no wait", annotations: map[string]string{v1alpha1.MinReadySecondsAnnotation: v1alpha1.MinReadySecondsIgnore},
			below: 100 * time.Second},
		{name: "apply: the rollout waits", annotations: map[string]string{v1alpha1.MinReadySecondsAnnotation: v1alpha1.MinReadySecondsApply},
			atLeast: 2 * minReadySeconds500 * time.Second, below: 3 * minReadySeconds500 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				d := newDeployment(4, withRolling("2", "1"), func(d *v1alpha1.MachineDeployment) {
					d.Annotations = tt.annotations
					d.Spec.MinReadySeconds = minReadySeconds500
					d.Spec.Template.Spec.Class.Name = worldClasses[0]
				})
				took := rollOutWorld(t, d, worldClasses[1], 10*time.Second)
				t.Logf("the rollout took %s", took)
				if took < tt.atLeast || took >= tt.below {
					t.Fatalf("the rollout took %s on the world's clock, want at least %s and less than %s", took, tt.atLeast, tt.below)
				}
			})
		})
	}
}

// rollOutWorld settles d in a simulated world, switches it to class and
// runs rounds until the world has converged, checking the world's
// invariants on the way. Each round the deployment takes a step, the sets
// sync, deleted machines go, the clock moves by boot and the machines
// created meanwhile come up Running. It returns how far the clock moved
// from the switch to the end of the rollout.
func rollOutWorld(t *rapid.T, d *v1alpha1.MachineDeployment, class string, boot time.Duration) time.Duration {
	w := &rolloutWorld{now: epoch, d: d, machines: map[string][]*v1alpha1.Machine{}}
	w.addSettledSet(t)
	w.startBounds(t)
	w.check(t, "settled")
	w.d.Spec.Template.Spec.Class.Name = class
	start := w.now
	for round := 0; !w.converged(); round++ {
		if round == 1000 {
			t.Fatalf("not converged after %d rounds:\n%s", round, w)
		}
		w.round(t, "")
		w.now = w.now.Add(boot)
		w.bootPending()
		w.check(t, "machines up")
	}
	for _, s := range w.sets {
		if s.Spec.Template.Spec.Class.Name == class {
			continue
		}
		if s.Spec.Replicas != 0 || len(w.machines[s.Name]) != 0 {
			t.Fatalf("converged with old set %s still sized %d:\n%s", s.Name, s.Spec.Replicas, w)
		}
	}
	return w.now.Sub(start)
}

// TestWantedSetCarriesThePolicy: the deployment's min-ready-seconds policy
// reaches every set of it, old ones too, and leaves them when the
// deployment drops it; annotations copied to the new set only (a) stay as
// they are on old sets.
func TestWantedSetCarriesThePolicy(t *testing.T) {
	key := v1alpha1.MinReadySecondsAnnotation
	apply := withDeploymentAnnotation(key, v1alpha1.MinReadySecondsApply)
	tests := []struct {
		name  string
		d     *v1alpha1.MachineDeployment
		set   *v1alpha1.MachineSet
		isNew bool
		want  map[string]string
	}{
		{"old set gets the opt-in", newDeployment(2, apply, withDeploymentAnnotation("a", "1")),
			newSet("o", 0, 0, withRevision("1")), false, map[string]string{key: "apply", v1alpha1.RevisionAnnotation: "1"}},
		{"new set gets the opt-in", newDeployment(2, apply),
			newSet("n", 2, 1, withRevision("2")), true, map[string]string{key: "apply", v1alpha1.RevisionAnnotation: "2"}},
		{"old set loses it with the deployment", newDeployment(2),
			newSet("o", 0, 0, withRevision("1"), withSetAnnotation(key, "apply")), false, map[string]string{v1alpha1.RevisionAnnotation: "1"}},
		{"new set loses it with the deployment", newDeployment(2),
			newSet("n", 2, 1, withRevision("2"), withSetAnnotation(key, "apply")), true, map[string]string{v1alpha1.RevisionAnnotation: "2"}},
		{"the deployment's value wins over the set's", newDeployment(2, withDeploymentAnnotation(key, "ignore")),
			newSet("o", 0, 0, withSetAnnotation(key, "apply")), false, map[string]string{key: "ignore"}},
		{"an unknown value is passed on, for the set to report", newDeployment(2, withDeploymentAnnotation(key, "yes")),
			newSet("o", 0, 0), false, map[string]string{key: "yes"}},
		{"no annotations at all", newDeployment(2), newSet("o", 0, 0), false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.set.DeepCopy()
			got, err := wantedSet(tt.d, tt.set, tt.isNew, tt.set.Spec.Replicas, false, 2)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.set); diff != "" {
				t.Errorf("set modified (-before +after):\n%s", diff)
			}
		})
	}
}

// TestPolicyReachesExistingSets: the opt-in set on a deployment reaches
// the sets it already has, the old one a rollout left too, and so does
// dropping it, through the controller's writes.
func TestPolicyReachesExistingSets(t *testing.T) {
	w := startFakeWorld(t, Options{}, testDeployment(2))
	w.eventually(w.settled(2))
	w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.Template.Spec.Class.Name = "big" })
	w.eventually(w.settled(2))
	policyOfSets := func(want string) func() (bool, string) {
		return func() (bool, string) {
			sets := w.sets()
			got := map[string]string{}
			for _, s := range sets {
				got[s.Name] = s.Annotations[v1alpha1.MinReadySecondsAnnotation]
			}
			ok := len(sets) == 2
			for _, v := range got {
				ok = ok && v == want
			}
			return ok, fmt.Sprintf("policy by set %v, want %q on both", got, want)
		}
	}
	for _, value := range []string{v1alpha1.MinReadySecondsApply, "", v1alpha1.MinReadySecondsIgnore} {
		w.update(func(d *v1alpha1.MachineDeployment) {
			if value == "" {
				delete(d.Annotations, v1alpha1.MinReadySecondsAnnotation)
				return
			}
			d.Annotations = withEntries(d.Annotations, map[string]string{v1alpha1.MinReadySecondsAnnotation: value})
		})
		w.eventually(policyOfSets(value))
	}
}

// TestControllerMinReadySeconds runs the deployment controller on a fake
// clock that starts when the fake world's machines become Running (the
// Unix epoch) and moves 5 s per real second, so that it could not pass
// 500 s within a test. With minReadySeconds 500, as in MCM, the deployment
// comes up and rolls to a new template anyway, its status counting every
// Running machine available. With the opt-in, its machines count only once
// the clock has passed minReadySeconds, and the requeue at that instant
// finds them available.
func TestControllerMinReadySeconds(t *testing.T) {
	start := time.Unix(0, 0)
	deployment := func(annotations map[string]string) *v1alpha1.MachineDeployment {
		d := testDeployment(4)
		d.Annotations = annotations
		d.Spec.MinReadySeconds = minReadySeconds500
		d.Spec.Strategy.RollingUpdate.MaxSurge = new(intstr.FromInt32(2))
		d.Spec.Strategy.RollingUpdate.MaxUnavailable = new(intstr.FromInt32(1))
		return d
	}

	t.Run("as in MCM", func(t *testing.T) {
		clk := runningClock(t, start)
		w := startFakeWorld(t, Options{Clock: clk}, deployment(nil))
		w.eventually(w.settled(4))
		w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.Template.Spec.Class.Name = "big" })
		w.eventually(w.settled(4))
		for _, m := range w.machines() {
			if m.Spec.Class.Name != "big" {
				t.Errorf("machine %s still has class %s", m.Name, m.Spec.Class.Name)
			}
		}
		if took := clk.Since(start); took >= 100*time.Second {
			t.Errorf("the rollout took %s on the controller's clock, want far less than %ds", took, minReadySeconds500)
		}
	})

	t.Run("apply", func(t *testing.T) {
		clk := runningClock(t, start)
		w := startFakeWorld(t, Options{Clock: clk}, deployment(map[string]string{v1alpha1.MinReadySecondsAnnotation: v1alpha1.MinReadySecondsApply}))
		w.eventually(func() (bool, string) {
			st := w.deployment().Status
			return st.Replicas == 4 && len(w.machines()) == 4, fmt.Sprintf("status replicas %d, %d machines", st.Replicas, len(w.machines()))
		})
		// Let the controller sync a few more times before looking.
		time.Sleep(200 * time.Millisecond)
		st, now := w.deployment().Status, clk.Now()
		if !now.Before(start.Add(minReadySeconds500 * time.Second)) {
			t.Fatalf("the clock is %s past the machines' start already; the test ran too slowly to tell", now.Sub(start))
		}
		if st.AvailableReplicas != 0 {
			t.Fatalf("%d machines available %s after they became Running, want none before %ds", st.AvailableReplicas, now.Sub(start), minReadySeconds500)
		}
		clk.Step(minReadySeconds500 * time.Second)
		w.eventually(w.settled(4))
	})
}

// runningClock is a fake clock at start that moves 50 ms every 10 ms of
// real time until the test ends: the controllers' retries and requeues on
// it still fire, and a test that must finish within seconds cannot see it
// pass minutes.
func runningClock(t *testing.T, start time.Time) *clocktesting.FakeClock {
	clk := clocktesting.NewFakeClock(start)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				clk.Step(50 * time.Millisecond)
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return clk
}
