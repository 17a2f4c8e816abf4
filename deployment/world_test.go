package deployment

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// The simulated world of TestRolloutWorld: one deployment, its sets and
// their machines, a deployment controller that is nothing but the planners,
// a MachineSet controller, and machines that boot, fail and go away on their
// own schedule. Every event happens at a random moment relative to the
// others, so the deployment plans from whatever state the world is in.
//
// What is checked, after every event unless said otherwise:
//
//   - Surge. Kubernetes bounds the sum of the sets' spec.replicas by
//     replicas + maxSurge and lets the pods of a set that was scaled down
//     linger beyond it. The planners bound footprints instead: each set
//     counts its spec.replicas or its machines not being deleted, whichever
//     is more, so the machines that exist are bounded too. Machines being
//     deleted are not counted: they are on their way out, as Terminating
//     pods are for Kubernetes, and their sets have replaced them already.
//     The footprints must stay within a ceiling: replicas + maxSurge, raised
//     only by a change of spec.replicas, and by the scaling step it causes,
//     to what the sets then hold (a scale-down leaves surplus machines
//     behind, and a scaling event sizes the sets by spec.replicas alone, as
//     Kubernetes does); from there the ceiling only comes down, back to
//     replicas + maxSurge. A scaling step that spec.replicas did not cause
//     (scaling up from no active set) gets no allowance; one that it did
//     cause must keep the sum of spec.replicas within replicas + maxSurge,
//     or not raise it when above.
//   - Availability (RollingUpdate). The available machines the sets keep
//     once they reach their sizes (each set's available machines, at most
//     its spec.replicas, as unavailable ones are deleted first) never drop
//     below replicas - maxUnavailable while that bound is in force, and
//     neither do the machines actually available. The bound is in force
//     from the moment the world meets it; a machine failing on its own, a
//     change of spec.replicas and the scaling step it causes suspend it
//     until the world meets it again.
//   - Capacity (RollingUpdate, steps that are not scaling events). The old
//     sets' spec.replicas and the new set's available machines together do
//     not drop below replicas - maxUnavailable (nor below what they were
//     when already lower): unavailable old machines go only as far as
//     Kubernetes' cleanupUnhealthyReplicas lets them.
//   - Recreate: machines of two sets never exist at the same time, those
//     being deleted included.
//   - No oscillation. In a step that is not a scaling event the new set only
//     grows (or comes back down to spec.replicas from above it, after a
//     scale-down) and the old sets only shrink, so within a rollout without
//     a change of template or replicas every set moves one way. A scaling
//     event only happens after spec.replicas changed, or when no set is
//     active while spec.replicas is above 0.
//   - Restarts. The deployment step keeps no memory between steps; the same
//     state listed in another order gives the same decision, and a restart
//     that re-plans at once must not undo the step before it.
//   - Cleanup deletes only old sets without machines.
//   - Convergence. Once failures and changes stop and every machine comes
//     up, the world settles within a bounded number of rounds: every machine
//     is available and belongs to the new set, which has spec.replicas of
//     them, the old sets are at 0, no more old sets remain than
//     revisionHistoryLimit allows, and a further step changes nothing.

// worldClasses are the templates the deployment switches between; going back
// to one whose set still exists is a rollback to that set.
var worldClasses = []string{"class-a", "class-b", "class-c"}

// worldBoundValues are the maxSurge and maxUnavailable values drawn.
var worldBoundValues = []string{"0", "1", "2", "3", "0%", "10%", "25%", "50%", "100%"}

// worldEvents are the events of the world, repeated to weigh them; some
// runs leave out failures or changes of spec.replicas, so that the bounds
// they suspend are in force for long stretches.
var (
	worldEvents = []string{
		"deploy", "deploy", "deploy", "deploy",
		"syncSet", "syncSet", "syncSet", "syncSet",
		"boot", "boot", "boot",
		"tick", "tick", "tick",
		"vanish", "vanish", "vanish",
		"restart",
		"template",
		"nodeTemplate",
		"minReadyPolicy",
	}
	worldFailures       = []string{"fail"}
	worldReplicaChanges = []string{"replicas"}
)

const worldMaxReplicas = 8

type rolloutWorld struct {
	now      time.Time
	d        *v1alpha1.MachineDeployment
	sets     []*v1alpha1.MachineSet
	machines map[string][]*v1alpha1.Machine // by set name, those being deleted included
	serial   int                            // machines created so far, for their names

	// ceiling bounds the sets' footprints (see the surge invariant).
	ceiling int64
	// availabilityBound tells whether replicas - maxUnavailable is in force.
	availabilityBound bool
	// replicasChanged tells that spec.replicas changed and some set may not
	// have been sized for it yet.
	replicasChanged bool
}

func TestRolloutWorld(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newRolloutWorld(t)
		w.check(t, "start")
		events := slices.Clone(worldEvents)
		if rapid.Bool().Draw(t, "failures") {
			events = append(events, worldFailures...)
		}
		if rapid.Bool().Draw(t, "replicaChanges") {
			events = append(events, worldReplicaChanges...)
		}
		for range rapid.IntRange(0, 500).Draw(t, "events") {
			action := rapid.SampledFrom(events).Draw(t, "action")
			w.act(t, action)
			w.check(t, action)
		}
		w.settle(t)
	})
}

func newRolloutWorld(t *rapid.T) *rolloutWorld {
	replicas := int32(rapid.IntRange(0, worldMaxReplicas).Draw(t, "replicas"))
	var d *v1alpha1.MachineDeployment
	if rapid.IntRange(0, 3).Draw(t, "strategy") == 0 {
		d = newDeployment(replicas, withRecreate())
	} else {
		d = newDeployment(replicas, withRolling(
			rapid.SampledFrom(worldBoundValues).Draw(t, "maxSurge"),
			rapid.SampledFrom(worldBoundValues).Draw(t, "maxUnavailable")))
	}
	d.Spec.MinReadySeconds = rapid.SampledFrom([]int32{0, 10, 60}).Draw(t, "minReadySeconds")
	if rapid.Bool().Draw(t, "applyMinReady") {
		d.Annotations = map[string]string{v1alpha1.MinReadySecondsAnnotation: v1alpha1.MinReadySecondsApply}
	}
	if rapid.Bool().Draw(t, "historyLimited") {
		d.Spec.RevisionHistoryLimit = new(int32(rapid.IntRange(0, 2).Draw(t, "revisionHistoryLimit")))
	}
	d.Spec.Template.Spec.Class.Name = rapid.SampledFrom(worldClasses).Draw(t, "class")

	w := &rolloutWorld{now: epoch, d: d, machines: map[string][]*v1alpha1.Machine{}}
	if rapid.Bool().Draw(t, "settled") {
		w.addSettledSet(t)
	}
	w.startBounds(t)
	return w
}

// addSettledSet gives the world the deployment's set for its current
// template, with all its machines Running since now, and moves the clock an
// hour on: a deployment that finished its last rollout an hour ago.
func (w *rolloutWorld) addSettledSet(t *rapid.T) {
	s := w.createSet(t, w.d.Spec.Replicas)
	for range w.d.Spec.Replicas {
		m := w.createMachine(s)
		m.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning, LastUpdateTime: metav1.NewTime(w.now)}
	}
	w.syncSet(s)
	w.now = w.now.Add(time.Hour)
}

// startBounds puts the surge ceiling and the availability bound in force
// for the world as it is.
func (w *rolloutWorld) startBounds(t *rapid.T) {
	w.ceiling = max(w.maxMachines(t), w.footprints())
	w.availabilityBound = w.keptAvailable() >= w.minAvailable(t)
}

// minReady is how long a machine must have been Running to count as
// available in the world: the deployment's minReadySeconds when it opts
// in to them, else no time at all, as in MCM. It is derived here rather
// than with the controller's minReadyOf, which the world checks.
func (w *rolloutWorld) minReady() time.Duration {
	if w.d.Annotations[v1alpha1.MinReadySecondsAnnotation] != v1alpha1.MinReadySecondsApply {
		return 0
	}
	return time.Duration(max(w.d.Spec.MinReadySeconds, 0)) * time.Second
}

// act applies one event to the world.
func (w *rolloutWorld) act(t *rapid.T, action string) {
	switch action {
	case "deploy":
		w.deploy(t)
	case "restart":
		// The controller restarts right after a sync and plans again from
		// what it finds.
		w.deploy(t)
		w.check(t, "restart: the sync before")
		w.deploy(t)
	case "syncSet":
		if len(w.sets) > 0 {
			w.syncSet(drawWorldObject(t, "set", w.sets))
		}
	case "boot":
		if pending := w.machinesWhere(func(m *v1alpha1.Machine) bool {
			return !machinestate.BeingDeleted(m) && worldPhase(m) == v1alpha1.MachinePending
		}); len(pending) > 0 {
			m := drawWorldObject(t, "booting", pending)
			m.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning, LastUpdateTime: metav1.NewTime(w.now)}
		}
	case "tick":
		seconds := rapid.IntRange(1, 2*int(w.d.Spec.MinReadySeconds)+1).Draw(t, "seconds")
		w.now = w.now.Add(time.Duration(seconds) * time.Second)
	case "vanish":
		if deleting := w.machinesWhere(machinestate.BeingDeleted); len(deleting) > 0 {
			w.remove(drawWorldObject(t, "vanishing", deleting))
		}
	case "fail":
		if alive := w.machinesWhere(func(m *v1alpha1.Machine) bool {
			return !machinestate.BeingDeleted(m) && worldPhase(m) != v1alpha1.MachineFailed
		}); len(alive) > 0 {
			m := drawWorldObject(t, "failing", alive)
			m.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachineFailed, LastUpdateTime: metav1.NewTime(w.now)}
			w.availabilityBound = false
		}
	case "template":
		w.d.Spec.Template.Spec.Class.Name = rapid.SampledFrom(worldClasses).Draw(t, "class")
	case "minReadyPolicy":
		// Opting in or out changes which machines are available at once,
		// as a failure does: the availability bound holds again once the
		// world meets it.
		value := v1alpha1.MinReadySecondsApply
		if w.d.Annotations[v1alpha1.MinReadySecondsAnnotation] == v1alpha1.MinReadySecondsApply {
			value = v1alpha1.MinReadySecondsIgnore
		}
		w.d.Annotations = withEntries(w.d.Annotations, map[string]string{v1alpha1.MinReadySecondsAnnotation: value})
		w.availabilityBound = false
	case "nodeTemplate":
		// Node labels reach the machines in place: no rollout.
		before, _ := splitSets(w.d, w.sets)
		w.d.Spec.Template.Spec.NodeTemplateSpec.Labels = map[string]string{"zone": rapid.SampledFrom([]string{"a", "b"}).Draw(t, "zone")}
		if after, _ := splitSets(w.d, w.sets); after != before {
			t.Fatalf("a node template change made %v the new set instead of %v", worldSetName(after), worldSetName(before))
		}
	case "replicas":
		replicas := int32(rapid.IntRange(0, worldMaxReplicas).Draw(t, "newReplicas"))
		if replicas != w.d.Spec.Replicas {
			w.d.Spec.Replicas = replicas
			w.replicasChanged = true
			w.availabilityBound = false
			w.ceiling = max(w.maxMachines(t), w.footprints())
		}
	default:
		t.Fatalf("unknown action %q", action)
	}
}

// worldDecision is what one deployment step decides: the sizes of a scaling
// event, or a rollout plan.
type worldDecision struct {
	Scaling bool
	Sizes   map[string]int32
	Plan    rolloutPlan
}

// decideWorldStep is the deployment step's planning: no state but its arguments.
func decideWorldStep(d *v1alpha1.MachineDeployment, sets []*v1alpha1.MachineSet, machines map[string][]*v1alpha1.Machine, now time.Time) (worldDecision, error) {
	current, old := splitSets(d, sets)
	counts := countSets(sets, machines, minReadyOf(d), now)
	if isScalingEvent(d, current, old) {
		sizes, err := planScale(d, current, old, counts)
		return worldDecision{Scaling: true, Sizes: sizes}, err
	}
	if strategyType(d) == v1alpha1.RecreateMachineDeploymentStrategyType {
		return worldDecision{Plan: planRecreate(d, current, old, counts)}, nil
	}
	plan, err := planRolling(d, current, old, counts)
	return worldDecision{Plan: plan}, err
}

// deploy is one sync of the deployment controller: plan, apply to the sets'
// specs (and annotations, as the controller writes them), clean up; then
// the checks that are about one step.
func (w *rolloutWorld) deploy(t *rapid.T) {
	decision, err := decideWorldStep(w.d, w.sets, w.machines, w.now)
	if err != nil {
		t.Fatal(err)
	}
	// A restarted controller lists sets and machines in another order.
	var shuffled []*v1alpha1.MachineSet
	for _, name := range rapid.Permutation(worldNames(w.sets)).Draw(t, "listOrder") {
		shuffled = append(shuffled, w.set(t, name))
	}
	reordered := make(map[string][]*v1alpha1.Machine, len(w.machines))
	for name, ms := range w.machines {
		reordered[name] = slices.Clone(ms)
		slices.Reverse(reordered[name])
	}
	if again, err := decideWorldStep(w.d, shuffled, reordered, w.now); err != nil || !gocmp.Equal(decision, again) {
		t.Fatalf("the step depends on the order of the sets: %+v, then %+v (%v)", decision, again, err)
	}

	current, old := splitSets(w.d, w.sets)
	counts := countSets(w.sets, w.machines, minReadyOf(w.d), w.now)
	before := w.specs()
	footprintsBefore, specsBefore := w.footprints(), specReplicas(w.sets)
	capacityBefore := w.capacity(current)
	causedByReplicas := decision.Scaling && w.replicasChanged
	if decision.Scaling && !w.replicasChanged && len(activeSets(w.sets)) > 0 {
		t.Fatalf("scaling event without a change of spec.replicas: %+v", decision)
	}

	revision := maxRevision(old) + 1
	if decision.Scaling {
		for name, r := range decision.Sizes {
			w.resize(t, w.set(t, name), r, true)
		}
	} else {
		if n := decision.Plan.New; n != nil {
			if current == nil {
				current = w.createSet(t, *n)
			} else {
				w.resize(t, current, *n, false)
			}
		}
		for name, r := range decision.Plan.Old {
			if current != nil && name == current.Name {
				t.Fatalf("plan sizes the new set %s as an old one", name)
			}
			w.resize(t, w.set(t, name), r, false)
		}
	}
	if current != nil {
		ann, err := newSetAnnotations(w.d, current.Annotations, revision, false)
		if err != nil {
			t.Fatal(err)
		}
		current.Annotations = ann
	}
	for _, s := range setsToDelete(w.d, current, old, counts) {
		if current != nil && s.Name == current.Name {
			t.Fatalf("cleanup deletes the new set %s", s.Name)
		}
		if len(w.machines[s.Name]) > 0 {
			t.Fatalf("cleanup deletes set %s, which still has %d machines", s.Name, len(w.machines[s.Name]))
		}
		w.sets = slices.DeleteFunc(w.sets, func(x *v1alpha1.MachineSet) bool { return x == s })
		delete(w.machines, s.Name)
	}

	// Surge: see the comment at the top of this file.
	switch {
	case causedByReplicas:
		if specs := specReplicas(w.sets); int64(specs) > max(w.maxMachines(t), int64(specsBefore)) {
			t.Fatalf("scaling sized the sets for %d machines, at most %d allowed (were %d)", specs, w.maxMachines(t), specsBefore)
		}
		w.ceiling = max(w.maxMachines(t), w.footprints())
		w.availabilityBound = false
	default:
		if f := w.footprints(); f > w.ceiling {
			t.Fatalf("step takes the sets to %d machines (from %d), at most %d allowed; decision %+v", f, footprintsBefore, w.ceiling, decision)
		}
	}

	// Capacity: unhealthy old machines go only as far as the old sets, with
	// the new set's available machines, can still give replicas -
	// maxUnavailable available ones.
	if isRollingUpdate(w.d) && !decision.Scaling {
		if c := w.capacity(current); c < min(capacityBefore, w.minAvailable(t)) {
			t.Fatalf("step leaves the old sets sized for %d machines with the new set's available ones (were %d), at least %d needed; decision %+v:\n%s",
				c, capacityBefore, w.minAvailable(t), decision, w)
		}
	}

	// No oscillation: outside scaling events the new set only grows and
	// old sets only shrink.
	if !causedByReplicas {
		replicas := w.d.Spec.Replicas
		for _, s := range w.sets {
			was, existed := before[s.Name]
			now := s.Spec.Replicas
			switch {
			case !existed:
			case current != nil && s.Name == current.Name:
				if now < was && !(was > replicas && now == replicas) {
					t.Fatalf("new set %s shrank from %d to %d (replicas %d)", s.Name, was, now, replicas)
				}
			case now > was:
				t.Fatalf("old set %s grew from %d to %d", s.Name, was, now)
			}
		}
	}
	if w.replicasChanged && !w.setsSizedForReplicas() {
		return
	}
	w.replicasChanged = false
}

// round is one round of the world: the deployment takes a step, the sets
// sync, and the machines they deleted go; the checks after each part are
// labelled with prefix.
func (w *rolloutWorld) round(t *rapid.T, prefix string) {
	w.deploy(t)
	w.check(t, prefix+"deploy")
	for _, s := range slices.Clone(w.sets) {
		w.syncSet(s)
	}
	w.check(t, prefix+"sync sets")
	for _, m := range w.machinesWhere(machinestate.BeingDeleted) {
		w.remove(m)
	}
}

// bootPending brings every Pending machine up: Running since now.
func (w *rolloutWorld) bootPending() {
	for _, m := range w.machinesWhere(func(m *v1alpha1.Machine) bool { return worldPhase(m) == v1alpha1.MachinePending }) {
		m.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning, LastUpdateTime: metav1.NewTime(w.now)}
	}
}

// settle stops failures and changes and lets every machine come up, round
// after round, until the world has converged.
func (w *rolloutWorld) settle(t *rapid.T) {
	var live int32
	for _, s := range w.sets {
		live += countMachines(w.machines[s.Name], 0, w.now).Machines
	}
	// Each round moves at least one machine, and a rolling update needs two
	// rounds per machine when it can replace only one at a time.
	rounds := 2*(int(w.d.Spec.Replicas)+int(live)) + 6
	for round := 0; ; round++ {
		if w.converged() {
			break
		}
		if round == rounds {
			t.Fatalf("not converged after %d rounds:\n%s", rounds, w)
		}
		w.round(t, "settle: ")
		for _, s := range slices.Clone(w.sets) {
			w.syncSet(s) // replaces Failed machines deleted by the first sync
		}
		w.bootPending()
		w.now = w.now.Add(w.minReady())
		w.check(t, "settle: machines up")
	}

	// Settled: a further step changes nothing, and a few more rounds delete
	// the old sets beyond the history limit.
	before := w.specs()
	decision, err := decideWorldStep(w.d, w.sets, w.machines, w.now)
	if err != nil {
		t.Fatal(err)
	}
	if decision.Scaling || !gocmp.Equal(decision.Plan, rolloutPlan{}) {
		t.Fatalf("converged, yet the next step decides %+v:\n%s", decision, w)
	}
	for range 2 {
		w.deploy(t)
		for _, s := range w.sets {
			w.syncSet(s)
		}
	}
	for _, s := range w.sets {
		if was, ok := before[s.Name]; !ok || was != s.Spec.Replicas {
			t.Fatalf("converged, yet set %s went from %d (existing: %v) to %d:\n%s", s.Name, was, ok, s.Spec.Replicas, w)
		}
	}
	if limit := w.d.Spec.RevisionHistoryLimit; limit != nil && len(w.sets)-1 > int(*limit) {
		t.Fatalf("%d old sets remain, history limit %d:\n%s", len(w.sets)-1, *limit, w)
	}
}

// converged: all machines available in the new set, which has exactly
// spec.replicas of them; old sets at 0 with no machine left; and the sets
// told that they are sized for spec.replicas (a change of spec.replicas to
// what the new set happens to have still takes a scaling step that writes
// only that).
func (w *rolloutWorld) converged() bool {
	current, old := splitSets(w.d, w.sets)
	if current == nil || current.Spec.Replicas != w.d.Spec.Replicas || len(w.machines[current.Name]) != int(w.d.Spec.Replicas) {
		return false
	}
	if !w.setsSizedForReplicas() {
		return false
	}
	if w.availableIn(current) != int64(w.d.Spec.Replicas) {
		return false
	}
	for _, s := range old {
		if s.Spec.Replicas != 0 || len(w.machines[s.Name]) > 0 {
			return false
		}
	}
	return true
}

// check verifies what must hold after every event.
func (w *rolloutWorld) check(t *rapid.T, after string) {
	for name := range w.machines {
		if !slices.ContainsFunc(w.sets, func(s *v1alpha1.MachineSet) bool { return s.Name == name }) && len(w.machines[name]) > 0 {
			t.Fatalf("after %s: machines of set %s, which does not exist", after, name)
		}
	}
	if f := w.footprints(); f > w.ceiling {
		t.Fatalf("after %s: the sets hold %d machines, at most %d allowed:\n%s", after, f, w.ceiling, w)
	}
	w.ceiling = max(w.maxMachines(t), w.footprints())

	if isRollingUpdate(w.d) {
		minimum := w.minAvailable(t)
		kept := w.keptAvailable()
		if w.availabilityBound {
			if kept < minimum {
				t.Fatalf("after %s: the sets keep %d available machines, at least %d needed:\n%s", after, kept, minimum, w)
			}
			if available := w.available(); available < minimum {
				t.Fatalf("after %s: %d machines available, at least %d needed:\n%s", after, available, minimum, w)
			}
		}
		w.availabilityBound = kept >= minimum
	} else {
		var withMachines []string
		for _, s := range w.sets {
			if len(w.machines[s.Name]) > 0 {
				withMachines = append(withMachines, s.Name)
			}
		}
		if len(withMachines) > 1 {
			t.Fatalf("after %s: Recreate with machines in %v at once:\n%s", after, withMachines, w)
		}
	}
}

// syncSet is one sync of the MachineSet controller: Failed machines and the
// surplus are deleted, in ladder order; missing machines are created
// Pending. A deleted Failed machine is replaced by a later sync, once its
// deletion counts (as package machineset does).
func (w *rolloutWorld) syncSet(s *v1alpha1.MachineSet) {
	var alive []*v1alpha1.Machine
	for _, m := range w.machines[s.Name] {
		if !machinestate.BeingDeleted(m) {
			alive = append(alive, m)
		}
	}
	surplus := len(alive) - int(s.Spec.Replicas)
	slices.SortStableFunc(alive, w.deletionOrder)
	for i, m := range alive {
		if i < surplus || worldPhase(m) == v1alpha1.MachineFailed {
			m.DeletionTimestamp = new(metav1.NewTime(w.now))
		}
	}
	for range -surplus {
		w.createMachine(s)
	}
	s.Status.Replicas = countMachines(w.machines[s.Name], 0, w.now).Machines
	s.Status.ObservedGeneration = s.Generation
}

// deletionOrder ranks machines the way package machineset's ladder does for
// machines that differ only in phase and age (no priorities, no marks):
// Failed first, then Pending, then Running, oldest first within a rung,
// then by name. Among Running machines, those not available yet go before
// available ones, as in Kubernetes' ReplicaSet controller: the planners
// count on it (keptAvailable). Package machineset does so on sets that
// apply minReadySeconds, which the deployment's sets do exactly when it
// does (withSetPolicy); without the opt-in every Running machine is
// available, and age alone orders them.
func (w *rolloutWorld) deletionOrder(a, b *v1alpha1.Machine) int {
	rung := func(m *v1alpha1.Machine) int {
		switch {
		case worldPhase(m) == v1alpha1.MachineFailed:
			return 0
		case worldPhase(m) == v1alpha1.MachinePending:
			return 1
		case !machinestate.Available(m, w.minReady(), w.now):
			return 2
		default:
			return 3
		}
	}
	return cmp.Or(cmp.Compare(rung(a), rung(b)), a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
}

// createSet creates the deployment's new set, as the controller does.
func (w *rolloutWorld) createSet(t *rapid.T, replicas int32) *v1alpha1.MachineSet {
	_, old := splitSets(w.d, w.sets)
	ann, err := newSetAnnotations(w.d, nil, maxRevision(old)+1, true)
	if err != nil {
		t.Fatal(err)
	}
	name := w.d.Name + "-" + templateHash(&w.d.Spec.Template, w.d.Status.CollisionCount)
	if slices.ContainsFunc(w.sets, func(s *v1alpha1.MachineSet) bool { return s.Name == name }) {
		t.Fatalf("creating set %s, which exists", name)
	}
	s := &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: w.d.Namespace, UID: types.UID("uid-" + name), Generation: 1,
			CreationTimestamp: metav1.NewTime(w.now), Annotations: ann,
		},
		Spec: v1alpha1.MachineSetSpec{Replicas: replicas, Template: *w.d.Spec.Template.DeepCopy(), MinReadySeconds: w.d.Spec.MinReadySeconds},
	}
	w.sets = append(w.sets, s)
	return s
}

// resize sets a set's spec.replicas; the controller writes the replica
// annotations whenever it resizes a set, and for every set a scaling event
// sizes.
func (w *rolloutWorld) resize(t *rapid.T, s *v1alpha1.MachineSet, replicas int32, scaled bool) {
	if replicas < 0 {
		t.Fatalf("set %s sized %d", s.Name, replicas)
	}
	if replicas == s.Spec.Replicas && !scaled {
		return
	}
	if replicas != s.Spec.Replicas {
		s.Spec.Replicas = replicas
		s.Generation++
	}
	ann, err := replicaAnnotations(w.d)
	if err != nil {
		t.Fatal(err)
	}
	annotations := maps.Clone(s.Annotations)
	if annotations == nil {
		annotations = make(map[string]string, len(ann))
	}
	maps.Copy(annotations, ann)
	s.Annotations = annotations
}

func (w *rolloutWorld) createMachine(s *v1alpha1.MachineSet) *v1alpha1.Machine {
	w.serial++
	m := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m%04d", w.serial), Namespace: s.Namespace, CreationTimestamp: metav1.NewTime(w.now)},
		Status:     v1alpha1.MachineStatus{CurrentStatus: v1alpha1.CurrentStatus{Phase: v1alpha1.MachinePending, LastUpdateTime: metav1.NewTime(w.now)}},
	}
	w.machines[s.Name] = append(w.machines[s.Name], m)
	return m
}

func (w *rolloutWorld) remove(m *v1alpha1.Machine) {
	for name, ms := range w.machines {
		w.machines[name] = slices.DeleteFunc(ms, func(x *v1alpha1.Machine) bool { return x == m })
	}
}

// machinesWhere lists the machines that match, in a stable order (sets in
// creation order, machines in creation order) for rapid to pick from.
func (w *rolloutWorld) machinesWhere(match func(*v1alpha1.Machine) bool) []*v1alpha1.Machine {
	var out []*v1alpha1.Machine
	for _, s := range w.sets {
		for _, m := range w.machines[s.Name] {
			if match(m) {
				out = append(out, m)
			}
		}
	}
	return out
}

func (w *rolloutWorld) set(t *rapid.T, name string) *v1alpha1.MachineSet {
	for _, s := range w.sets {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("plan for set %s, which does not exist", name)
	return nil
}

func (w *rolloutWorld) specs() map[string]int32 {
	out := make(map[string]int32, len(w.sets))
	for _, s := range w.sets {
		out[s.Name] = s.Spec.Replicas
	}
	return out
}

// setsSizedForReplicas: every active set carries the current spec.replicas
// in its desired-replicas annotation.
func (w *rolloutWorld) setsSizedForReplicas() bool {
	for _, s := range activeSets(w.sets) {
		if desired, ok := desiredReplicasOf(s); !ok || desired != w.d.Spec.Replicas {
			return false
		}
	}
	return true
}

// footprints sums what each set may hold: its spec.replicas, or the machines
// (not being deleted) it still has when more. It is computed here rather
// than with the planners' own helpers, which it checks.
func (w *rolloutWorld) footprints() int64 {
	var sum int64
	for _, s := range w.sets {
		var alive int64
		for _, m := range w.machines[s.Name] {
			if !machinestate.BeingDeleted(m) {
				alive++
			}
		}
		sum += max(int64(s.Spec.Replicas), alive)
	}
	return sum
}

// capacity is what the sets could give in available machines without
// counting new machines that are not up: the old sets' spec.replicas and the
// new set's available machines (at most its spec.replicas).
func (w *rolloutWorld) capacity(current *v1alpha1.MachineSet) int64 {
	var sum int64
	for _, s := range w.sets {
		if s == current {
			sum += min(w.availableIn(s), int64(s.Spec.Replicas))
		} else {
			sum += int64(s.Spec.Replicas)
		}
	}
	return sum
}

// keptAvailable sums the available machines each set keeps once it reaches
// its spec.replicas.
func (w *rolloutWorld) keptAvailable() int64 {
	var sum int64
	for _, s := range w.sets {
		sum += min(w.availableIn(s), int64(s.Spec.Replicas))
	}
	return sum
}

func (w *rolloutWorld) available() int64 {
	var sum int64
	for _, s := range w.sets {
		sum += w.availableIn(s)
	}
	return sum
}

// availableIn counts the machines of s that are not being deleted and have
// been Running for w.minReady.
func (w *rolloutWorld) availableIn(s *v1alpha1.MachineSet) int64 {
	var n int64
	for _, m := range w.machines[s.Name] {
		if !machinestate.BeingDeleted(m) && worldPhase(m) == v1alpha1.MachineRunning &&
			!w.now.Before(m.Status.CurrentStatus.LastUpdateTime.Add(w.minReady())) {
			n++
		}
	}
	return n
}

func (w *rolloutWorld) maxMachines(t *rapid.T) int64 {
	surge, _, err := rolloutBounds(w.d)
	if err != nil {
		t.Fatal(err)
	}
	return int64(w.d.Spec.Replicas) + int64(surge)
}

func (w *rolloutWorld) minAvailable(t *rapid.T) int64 {
	_, unavailable, err := rolloutBounds(w.d)
	if err != nil {
		t.Fatal(err)
	}
	return int64(w.d.Spec.Replicas) - int64(unavailable)
}

// String describes the world for failure messages.
func (w *rolloutWorld) String() string {
	current, _ := splitSets(w.d, w.sets)
	out := fmt.Sprintf("deployment: replicas %d, template %s, now +%s\n", w.d.Spec.Replicas, w.d.Spec.Template.Spec.Class.Name, w.now.Sub(epoch))
	for _, s := range w.sets {
		role := "old"
		if s == current {
			role = "new"
		}
		c := countMachines(w.machines[s.Name], w.minReady(), w.now)
		desired, _ := desiredReplicasOf(s)
		out += fmt.Sprintf("  %s set %s (%s): replicas %d (desired %d), machines %d, available %d, deleting %d\n",
			role, s.Name, s.Spec.Template.Spec.Class.Name, s.Spec.Replicas, desired, c.Machines, c.Available, c.Deleting)
		for _, m := range w.machines[s.Name] {
			state := string(worldPhase(m))
			switch {
			case machinestate.BeingDeleted(m):
				state += ", being deleted"
			case machinestate.Available(m, w.minReady(), w.now):
				state += ", available"
			}
			out += fmt.Sprintf("    %s created +%s, %s since +%s\n", m.Name, m.CreationTimestamp.Sub(epoch),
				state, m.Status.CurrentStatus.LastUpdateTime.Sub(epoch))
		}
	}
	return out
}

// drawWorldObject draws one of objects by name, so that a failing run lists names
// rather than whole objects.
func drawWorldObject[T metav1.Object](t *rapid.T, label string, objects []T) T {
	names := worldNames(objects)
	return objects[slices.Index(names, rapid.SampledFrom(names).Draw(t, label))]
}

func worldNames[T metav1.Object](objects []T) []string {
	names := make([]string, len(objects))
	for i, o := range objects {
		names[i] = o.GetName()
	}
	return names
}

func worldPhase(m *v1alpha1.Machine) v1alpha1.MachinePhase { return m.Status.CurrentStatus.Phase }

func worldSetName(s *v1alpha1.MachineSet) string {
	if s == nil {
		return "<none>"
	}
	return s.Name
}
