package machineset

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/testsupport/fakeapi"
)

// TestForeignRanksFirst: a foreign machine goes before every machine of
// the set's own, whatever its priority or phase; among foreign machines
// and among own ones the ladder is unchanged.
func TestForeignRanksFirst(t *testing.T) {
	l := ladder{Policy: DeletionPolicyOldest, Foreign: map[types.UID]bool{"uid-forged-a": true, "uid-forged-b": true}}
	machines := []*v1alpha1.Machine{
		rkMachine("own-failed", rkPhase(v1alpha1.MachineFailed)),
		rkMachine("own-old", rkAge(1)),
		rkMachine("own-new", rkAge(2)),
		rkMachine("forged-a", rkPriority("5"), rkAge(3)),
		rkMachine("forged-b", rkPriority("9"), rkAge(4)),
		rkMachine("own-deleting", rkPhase(v1alpha1.MachineTerminating)),
	}
	want := []string{"own-deleting", "forged-a", "forged-b", "own-failed", "own-old", "own-new"}
	var got []string
	for _, m := range rankForDeletion(machines, l) {
		got = append(got, m.Name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ranking (-want +got):\n%s", diff)
	}
}

func TestProvenanceForeign(t *testing.T) {
	set := testSet(3)
	now := time.Unix(1000, 0)
	ttl := time.Minute
	controlled := func(name string, uid types.UID) *v1alpha1.Machine {
		return &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid,
			OwnerReferences: []metav1.OwnerReference{controllerRef(set)}}}
	}
	var p provenance
	p.initial(controlled("inherited", "u-inherited"))
	p.initial(controlled("listed", "u-listed"))
	p.initial(&v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "orphan", UID: "u-orphan"}})
	p.sending("ns/pool", "created", now)
	p.sending("ns/pool", "answered", now)
	p.answered("ns/pool", "answered", controlled("answered", "u-answered"), now)
	p.sending("ns/pool", "never-seen", now)
	machines := []*v1alpha1.Machine{
		controlled("inherited", "u-inherited"),
		controlled("listed", "u-listed"),     // persisted as foreign
		controlled("orphan", "u-orphan"),     // adopted since
		controlled("created", "u-created"),   // the answer was lost
		controlled("answered", "u-answered"), // the answer was seen
		controlled("forged", "u-forged"),     // appeared with the reference
		controlled("held", "u-held"),         // the same, deleted, kept by its finalizer
	}
	machines[len(machines)-1].DeletionTimestamp = &metav1.Time{Time: now}
	names := func(ms []*v1alpha1.Machine) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Name)
		}
		return out
	}
	got := p.foreign("ns/pool", set, machines, map[types.UID]bool{"u-listed": true}, noSiblings, now, ttl)
	if diff := cmp.Diff([]string{"forged", "held", "listed", "orphan"}, names(got)); diff != "" {
		t.Errorf("foreign (-want +got):\n%s", diff)
	}
	// "created" is bound to its UID now: a machine that takes its name
	// after it is gone is not the set's.
	p.gone("ns/pool", machines[3])
	got = p.foreign("ns/pool", set, []*v1alpha1.Machine{controlled("created", "u-squatter")}, nil, noSiblings, now, ttl)
	if diff := cmp.Diff([]string{"created"}, names(got)); diff != "" {
		t.Errorf("a machine under a name the set used, after it was gone (-want +got):\n%s", diff)
	}
	// A creation never seen is forgotten after the TTL.
	p.foreign("ns/pool", set, nil, nil, noSiblings, now.Add(2*ttl), ttl)
	got = p.foreign("ns/pool", set, []*v1alpha1.Machine{controlled("never-seen", "u-late")}, nil, noSiblings, now.Add(2*ttl), ttl)
	if diff := cmp.Diff([]string{"never-seen"}, names(got)); diff != "" {
		t.Errorf("a creation unseen past the TTL (-want +got):\n%s", diff)
	}
	// Another set of the same name is not this one.
	other := testSet(3)
	other.UID = "other-uid"
	if got := p.foreign("ns/pool", other, []*v1alpha1.Machine{controlled("inherited", "u-inherited")}, nil, noSiblings, now, ttl); len(got) != 1 {
		t.Errorf("a machine inherited under another set's UID is own: %v", names(got))
	}
}

func noSiblings() []*v1alpha1.MachineSet { return nil }

// TestProvenanceMovesWithTheMachine: a machine that an in-place rollout
// moves from a deployment's old set to its new one is the new set's own
// when the old set created or inherited it, and stays foreign when the old
// set held it as foreign or the old set has another controller.
func TestProvenanceMovesWithTheMachine(t *testing.T) {
	now, ttl := time.Unix(1000, 0), time.Minute
	deploymentRef := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "machine.sapcloud.io/v1alpha1", Kind: "MachineDeployment", Name: "md", UID: uid, Controller: new(true)}}
	}
	oldSet, newSet, stranger := testSet(3), testSet(3), testSet(3)
	oldSet.Name, oldSet.UID, oldSet.OwnerReferences = "pool-old", "uid-old", deploymentRef("uid-md")
	oldSet.Annotations = map[string]string{v1alpha1.ForeignMachinesAnnotation: "u-foreign-there"}
	newSet.Name, newSet.UID, newSet.OwnerReferences = "pool-new", "uid-new", deploymentRef("uid-md")
	stranger.Name, stranger.UID = "stranger", "uid-stranger"
	machine := func(name string, uid types.UID, owner *v1alpha1.MachineSet) *v1alpha1.Machine {
		return &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid,
			OwnerReferences: []metav1.OwnerReference{controllerRef(owner)}}}
	}
	var p provenance
	p.sending("ns/pool-old", "created-there", now)
	p.answered("ns/pool-old", "created-there", machine("created-there", "u-created-there", oldSet), now)
	p.initial(machine("inherited-there", "u-inherited-there", oldSet))
	p.initial(machine("foreign-there", "u-foreign-there", oldSet))
	p.initial(machine("strangers", "u-strangers", stranger))
	moved := []*v1alpha1.Machine{
		machine("created-there", "u-created-there", newSet),
		machine("inherited-there", "u-inherited-there", newSet),
		machine("foreign-there", "u-foreign-there", newSet),
		machine("strangers", "u-strangers", newSet),
	}
	siblings := func() []*v1alpha1.MachineSet { return []*v1alpha1.MachineSet{oldSet} }
	var names []string
	for _, m := range p.foreign("ns/pool-new", newSet, moved, nil, siblings, now, ttl) {
		names = append(names, m.Name)
	}
	if diff := cmp.Diff([]string{"foreign-there", "strangers"}, names); diff != "" {
		t.Errorf("foreign after the move (-want +got):\n%s", diff)
	}
	// The provenance stays with the new set once the old one is gone.
	p.forgetSet("ns/pool-old")
	if got := p.foreign("ns/pool-new", newSet, moved[:2], nil, noSiblings, now, ttl); len(got) != 0 {
		t.Errorf("moved machines foreign once the old set is gone: %v", got)
	}
}

func TestForeignAnnotationAndMessage(t *testing.T) {
	var ms []*v1alpha1.Machine
	for _, n := range []string{"c", "a", "b"} {
		ms = append(ms, &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: n, UID: types.UID("uid-" + n)}})
	}
	if got := foreignAnnotation(ms); got != "uid-a,uid-b,uid-c" {
		t.Errorf("annotation %q", got)
	}
	if foreignMessage(nil) != "" || !strings.Contains(foreignMessage(ms), "3 machine(s)") {
		t.Errorf("messages %q, %q", foreignMessage(nil), foreignMessage(ms))
	}
}

// forged is a Running machine with the set's labels and controller
// reference and priority 5, as anyone who may create machines can make.
func forged(set *v1alpha1.MachineSet, name string) *v1alpha1.Machine {
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
		Labels:          map[string]string{"pool": "a"},
		Annotations:     map[string]string{v1alpha1.MachinePriorityAnnotation: "5"},
		OwnerReferences: []metav1.OwnerReference{controllerRef(set)}}}
	m.Status.CurrentStatus.Phase = v1alpha1.MachineRunning
	return m
}

func liveNames(t *testing.T, h *harness) []string {
	t.Helper()
	list, err := h.client.MachineV1alpha1().Machines("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range list.Items {
		if m.DeletionTimestamp == nil {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestForgedMachinesGoFirst: two machines that appear with the set's
// labels, its controller reference and priority 5 are deleted as the
// surplus, not the set's Running machines; each is told of once, and the
// set lists them until they are gone.
func TestForgedMachinesGoFirst(t *testing.T) {
	set := testSet(2)
	rec := &fakeapi.Events{}
	h := newHarness(t, Options{Recorder: rec}, set)
	own := h.settle(t, 2)
	for _, m := range own {
		m.Status.CurrentStatus.Phase = v1alpha1.MachineRunning
		if _, err := h.client.MachineV1alpha1().Machines("ns").UpdateStatus(context.Background(), m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"forged-a", "forged-b"} {
		if _, err := h.client.MachineV1alpha1().Machines("ns").Create(context.Background(), forged(set, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cached, _ := h.c.machines.Machines("ns").List(everything); len(cached) == 4 {
			break
		}
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		_, _ = h.c.Reconcile(context.Background(), "ns/pool")
		if got := liveNames(t, h); len(got) == 2 && !slices.Contains(got, "forged-a") && !slices.Contains(got, "forged-b") {
			break
		}
	}
	want := []string{own[0].Name, own[1].Name}
	slices.Sort(want)
	if diff := cmp.Diff(want, liveNames(t, h)); diff != "" {
		t.Fatalf("machines left (-want +got):\n%s", diff)
	}
	if n := rec.Count(ReasonForeignMachine); n != 2 {
		t.Errorf("%d %s events, want 2", n, ReasonForeignMachine)
	}
	var listed bool
	for _, a := range h.client.Actions() {
		if p, ok := a.(interface{ GetPatch() []byte }); ok && a.GetResource().Resource == "machinesets" &&
			strings.Contains(string(p.GetPatch()), `"`+v1alpha1.ForeignMachinesAnnotation+`":"uid-forged-a,uid-forged-b"`) {
			listed = true
		}
	}
	if !listed {
		t.Error("the set never listed the forged machines in its annotation")
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		_, _ = h.c.Reconcile(context.Background(), "ns/pool")
		got, _ := h.c.sets.MachineSets("ns").Get("pool")
		if _, ok := got.Annotations[v1alpha1.ForeignMachinesAnnotation]; !ok && conditionOf(&got.Status, ConditionForeignMachines) == nil {
			return
		}
	}
	t.Error("the annotation or the condition outlived the forged machines")
}

// TestForeignMachinesStayForeignAcrossRestarts: a controller that starts
// with a set listing a machine as foreign deletes that machine first,
// priority 5 and all, though the informer's initial list showed it
// controlled by the set; the other machine of that list is the set's own.
func TestForeignMachinesStayForeignAcrossRestarts(t *testing.T) {
	set := testSet(1)
	set.Annotations = map[string]string{v1alpha1.ForeignMachinesAnnotation: "uid-forged"}
	own := forged(set, "own")
	own.Annotations = nil
	rec := &fakeapi.Events{}
	h := newHarness(t, Options{Recorder: rec}, set, own, forged(set, "forged"))
	h.settle(t, 1)
	if diff := cmp.Diff([]string{"own"}, liveNames(t, h)); diff != "" {
		t.Errorf("machines left (-want +got):\n%s", diff)
	}
	if n := rec.Count(ReasonForeignMachine); n != 0 {
		t.Errorf("%d %s events for a machine listed already", n, ReasonForeignMachine)
	}
}

// TestAdoptedMachinesRankFirst: an orphan the set adopts is not the set's
// own; at the next scale-down it goes first, though it is the newest
// machine and Oldest would keep it.
func TestAdoptedMachinesRankFirst(t *testing.T) {
	set := testSet(1)
	own := forged(set, "own")
	own.Annotations = nil
	own.CreationTimestamp = metav1.NewTime(time.Unix(100, 0))
	orphan := forged(set, "orphan")
	orphan.OwnerReferences, orphan.Annotations = nil, nil
	orphan.CreationTimestamp = metav1.NewTime(time.Unix(200, 0))
	h := newHarness(t, Options{}, []runtime.Object{set, own, orphan}...)
	h.settle(t, 1)
	if diff := cmp.Diff([]string{"own"}, liveNames(t, h)); diff != "" {
		t.Errorf("machines left (-want +got):\n%s", diff)
	}
}

// TestPlanListsForeignMachinesUntilGone: the set's annotation lists its
// foreign machines until they are gone, those being deleted included (a
// finalizer of their creator may keep them for good, and the replacement
// budget must not count them as the deployment's); the condition and the
// events name only those not being deleted, which the set still has to
// delete.
func TestPlanListsForeignMachinesUntilGone(t *testing.T) {
	set := testSet(1)
	live, held := forged(set, "forged-live"), forged(set, "forged-held")
	held.DeletionTimestamp = &metav1.Time{Time: psNow}
	own := forged(set, "own")
	type result struct {
		Foreign    []string
		Annotation string
		Record     bool
	}
	tests := []struct {
		name    string
		foreign []*v1alpha1.Machine
		have    map[string]string
		want    result
	}{
		{"a foreign machine being deleted stays listed", []*v1alpha1.Machine{held}, map[string]string{v1alpha1.ForeignMachinesAnnotation: "uid-forged-held"},
			result{Annotation: "uid-forged-held"}},
		{"one being deleted, one not, neither listed yet", []*v1alpha1.Machine{held, live}, nil,
			result{Foreign: []string{"forged-live"}, Annotation: "uid-forged-held,uid-forged-live", Record: true}},
		{"gone: the list goes", nil, map[string]string{v1alpha1.ForeignMachinesAnnotation: "uid-forged-held"}, result{Record: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := psScope(1, nil, false)
			s.set.Annotations = tt.have
			machines := append([]*v1alpha1.Machine{own}, tt.foreign...)
			p := planMachines(s, machines, tt.foreign, 100)
			got := result{Annotation: p.ForeignAnnotation, Record: p.RecordForeign}
			for _, m := range p.Foreign {
				got.Foreign = append(got.Foreign, m.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
