package machineset

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// psWorld is a simulated world of one set: its machines, a model of the
// machine controller's preservation, and a clock. The set's plan is
// applied to it as the controller would: deletions remove machines,
// creations add Running ones, marks set or remove the annotation.
type psWorld struct {
	now      time.Time
	timeout  time.Duration
	set      *v1alpha1.MachineSet
	keep     bool
	machines []*v1alpha1.Machine
	created  int
}

func (w *psWorld) newMachine() {
	w.created++
	m := rkMachine(fmt.Sprintf("m%03d", w.created))
	m.CreationTimestamp = metav1.NewTime(w.now)
	w.machines = append(w.machines, m)
}

// pick draws one of the world's machines, or nil if there is none.
func (w *psWorld) pick(t *rapid.T) *v1alpha1.Machine {
	if len(w.machines) == 0 {
		return nil
	}
	return w.machines[rapid.IntRange(0, len(w.machines)-1).Draw(t, "machine")]
}

// psValues are the values the actions write, "" meaning removal, "junk"
// one no controller knows.
var psValues = []string{"", string(v1alpha1.PreserveNow), string(v1alpha1.PreserveWhenFailed),
	string(v1alpha1.PreserveAutoPreserved), string(v1alpha1.PreserveFalse), "junk"}

func psSetAnnotation(m *v1alpha1.Machine, key, value string) {
	if value == "" {
		delete(m.Annotations, key)
		return
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[key] = value
}

// machineController models how the machine controller records a
// preservation: it starts one (now + timeout) when asked and allowed,
// clears it when it stops, and keeps a past expiry on a machine still
// Failed, removing the annotation that asked for it.
func (w *psWorld) machineController(m *v1alpha1.Machine) {
	cs := &m.Status.CurrentStatus
	failed := cs.Phase == v1alpha1.MachineFailed
	if until, ok := machinestate.PreservedUntil(m); ok && !w.now.Before(until) {
		delete(m.Annotations, v1alpha1.PreserveAnnotation)
		if !failed {
			cs.PreserveExpiryTime = nil
		}
		return
	}
	v, _ := machinestate.PreserveRequest(m)
	start := v == v1alpha1.PreserveNow || (failed && (v == v1alpha1.PreserveWhenFailed || v == v1alpha1.PreserveAutoPreserved))
	switch {
	case start && cs.PreserveExpiryTime == nil:
		t := metav1.NewTime(w.now.Add(w.timeout))
		cs.PreserveExpiryTime = &t
	case !start:
		cs.PreserveExpiryTime = nil
	}
}

// sync plans the set at the world's clock, checks the plan against the
// rules, and applies it.
func (w *psWorld) sync(t *rapid.T, burst int) {
	wanted := int(w.set.Spec.Replicas)
	s := &scope{key: "ns/pool", now: w.now, set: w.set, policy: DeletionPolicyOldest, wanted: wanted, keepPreserved: w.keep}
	p := planMachines(s, w.machines, nil, burst)

	// A preserved machine goes only when the set is deleted, or, without
	// the option, when the scale-down has no other machine left to take.
	active, notPreserved := 0, 0
	for _, m := range w.machines {
		if !machinestate.BeingDeleted(m) {
			active++
			if !machinestate.Preserved(m, w.now) {
				notPreserved++
			}
		}
	}
	preservedDeleted := 0
	for _, m := range p.Replicas.Delete {
		if machinestate.Preserved(m, w.now) {
			preservedDeleted++
		}
	}
	switch {
	case w.set.DeletionTimestamp != nil:
	case w.keep && preservedDeleted > 0:
		t.Fatalf("deleted %d preserved machines with KeepPreservedOnScaleDown", preservedDeleted)
	case preservedDeleted > max(active-wanted-notPreserved, 0):
		t.Fatalf("deleted %d preserved machines; the scale-down from %d to %d needed at most %d, with %d not preserved",
			preservedDeleted, active, wanted, max(active-wanted-notPreserved, 0), notPreserved)
	}

	for _, m := range p.AutoPreserve.Mark {
		psSetAnnotation(m, v1alpha1.PreserveAnnotation, string(v1alpha1.PreserveAutoPreserved))
	}
	for _, m := range p.AutoPreserve.Unmark {
		delete(m.Annotations, v1alpha1.PreserveAnnotation)
	}
	gone := map[string]bool{}
	for _, m := range p.Replicas.Delete {
		gone[m.Name] = true
	}
	w.machines = slices.DeleteFunc(w.machines, func(m *v1alpha1.Machine) bool { return gone[m.Name] })
	for range p.Replicas.Create {
		w.newMachine()
	}
	if w.set.DeletionTimestamp == nil {
		if n := psCount(w.machines, machinestate.AutoPreserved); n > autoPreserveMax(w.set) {
			t.Fatalf("%d machines marked auto-preserved after the plan, more than the maximum %d", n, autoPreserveMax(w.set))
		}
	}
}

// TestPropertyPreservationHolds: over random sequences of machines failing
// and recovering, preserve annotations on machines and nodes, the machine
// controller starting and ending preservations, clock advances and changes
// of replicas and of the maximum, the set's plan never deletes a machine
// whose preservation holds unless the set is deleted or (by default) the
// scale-down needs it, never with KeepPreservedOnScaleDown, and leaves no
// more auto-preserved marks than the maximum.
func TestPropertyPreservationHolds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		set := testSet(int32(rapid.IntRange(0, 5).Draw(t, "replicas")))
		set.Spec.AutoPreserveFailedMachineMax = psMax(int32(rapid.IntRange(0, 3).Draw(t, "max")))
		w := &psWorld{now: psNow, set: set, keep: rapid.Bool().Draw(t, "keep"),
			timeout: time.Duration(rapid.IntRange(1, 60).Draw(t, "timeoutMinutes")) * time.Minute}
		for range set.Spec.Replicas {
			w.newMachine()
		}
		burst := rapid.IntRange(1, 5).Draw(t, "burst")
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			m := w.pick(t)
			switch rapid.IntRange(0, 9).Draw(t, "event") {
			case 0:
				if m != nil {
					m.Status.CurrentStatus.Phase = rapid.SampledFrom([]v1alpha1.MachinePhase{
						v1alpha1.MachineFailed, v1alpha1.MachineRunning, v1alpha1.MachineUnknown}).Draw(t, "phase")
				}
			case 1:
				if m != nil {
					psSetAnnotation(m, v1alpha1.PreserveAnnotation, rapid.SampledFrom(psValues).Draw(t, "value"))
				}
			case 2:
				if m != nil {
					psSetAnnotation(m, v1alpha1.LastAppliedNodePreserveValueAnnotation, rapid.SampledFrom(psValues).Draw(t, "nodeValue"))
				}
			case 3, 4:
				if m != nil {
					w.machineController(m)
				}
			case 5:
				w.now = w.now.Add(time.Duration(rapid.IntRange(0, 40).Draw(t, "minutes")) * time.Minute)
			case 6:
				w.set.Spec.Replicas = int32(rapid.IntRange(0, 5).Draw(t, "replicas"))
			case 7:
				w.set.Spec.AutoPreserveFailedMachineMax = psMax(int32(rapid.IntRange(0, 3).Draw(t, "max")))
			case 8:
				if rapid.IntRange(0, 9).Draw(t, "deleteSet") == 0 {
					w.set.DeletionTimestamp = &metav1.Time{Time: w.now}
				}
			}
			w.sync(t, burst)
		}
	})
}
