package machineset

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// psNow is the instant the preservation tests plan at.
var psNow = rkEpoch.Add(10 * time.Hour)

// psUntil records a preservation ending minutes after psNow (before it
// when negative), as the machine controller does.
func psUntil(minutes int) rkOpt {
	return func(m *v1alpha1.Machine) {
		t := metav1.NewTime(psNow.Add(time.Duration(minutes) * time.Minute))
		m.Status.CurrentStatus.PreserveExpiryTime = &t
	}
}

// psAsk puts the preserve annotation on the machine itself; psNode records
// the Node's value, as the machine controller does.
func psAsk(v v1alpha1.PreserveValue) rkOpt {
	return rkAnnotate(v1alpha1.PreserveAnnotation, string(v))
}

func psNode(v v1alpha1.PreserveValue) rkOpt {
	return rkAnnotate(v1alpha1.LastAppliedNodePreserveValueAnnotation, string(v))
}

var psFailed = rkPhase(v1alpha1.MachineFailed)

// psScope is what planMachines reads of a sync of a set with replicas
// machines and the given maximum (nil: unset).
func psScope(replicas int, max *int32, keep bool) *scope {
	set := testSet(int32(replicas))
	set.Spec.AutoPreserveFailedMachineMax = max
	return &scope{key: "ns/pool", now: psNow, set: set, policy: DeletionPolicyOldest, wanted: replicas, keepPreserved: keep}
}

func psMax(n int32) *int32 { return &n }

// TestPlanPreservation: which Failed machines a set keeps, which it marks
// auto-preserved or releases, and which a scale-down takes.
func TestPlanPreservation(t *testing.T) {
	tests := []struct {
		name     string
		replicas int
		max      *int32
		keep     bool
		deleting bool
		machines []*v1alpha1.Machine
		// want
		mark, unmark, del []string
		heldBy            string
		nextExpiry        time.Time
	}{
		{name: "a Failed machine asked to be preserved when Failed is kept before its preservation starts", replicas: 1,
			machines: []*v1alpha1.Machine{rkMachine("f", psFailed, psAsk(v1alpha1.PreserveWhenFailed))}},
		{name: "a Failed machine whose preservation holds is kept", replicas: 1,
			machines:   []*v1alpha1.Machine{rkMachine("f", psFailed, psAsk(v1alpha1.PreserveNow), psUntil(30))},
			nextExpiry: psNow.Add(30 * time.Minute)},
		{name: "a preservation that ran out keeps nothing", replicas: 1,
			machines: []*v1alpha1.Machine{rkMachine("f", psFailed, psAsk(v1alpha1.PreserveWhenFailed), psUntil(-1))},
			del:      []string{"f"}},
		{name: "false keeps nothing and is not auto-preserved", replicas: 1, max: psMax(1),
			machines: []*v1alpha1.Machine{rkMachine("f", psFailed, psAsk(v1alpha1.PreserveFalse))},
			del:      []string{"f"}},
		{name: "the newest candidates are marked and kept, the others replaced", replicas: 3, max: psMax(2),
			machines: []*v1alpha1.Machine{rkMachine("a", psFailed, rkAge(1)), rkMachine("b", psFailed, rkAge(3)), rkMachine("c", psFailed, rkAge(2))},
			mark:     []string{"b", "c"}, del: []string{"a"}},
		{name: "creation ties go by name", replicas: 2, max: psMax(1),
			machines: []*v1alpha1.Machine{rkMachine("b", psFailed), rkMachine("a", psFailed)},
			mark:     []string{"a"}, del: []string{"b"}},
		{name: "a machine preserved through its Node is no candidate: no ping-pong", replicas: 2, max: psMax(1),
			machines: []*v1alpha1.Machine{rkMachine("node-preserved", psFailed, rkAge(5), psNode(v1alpha1.PreserveWhenFailed)), rkMachine("plain", psFailed, rkAge(1))},
			mark:     []string{"plain"}},
		{name: "a preservation that ran out is never renewed: the machine is replaced", replicas: 1, max: psMax(1),
			machines: []*v1alpha1.Machine{rkMachine("expired", psFailed, psUntil(-5))},
			del:      []string{"expired"}},
		{name: "the capacity comes from the machines: a mark being deleted does not count", replicas: 2, max: psMax(1),
			machines: []*v1alpha1.Machine{rkMachine("going", psFailed, psAsk(v1alpha1.PreserveAutoPreserved), rkDeleting()), rkMachine("f", psFailed)},
			mark:     []string{"f"}},
		{name: "a lowered maximum releases the oldest marks; a running preservation still holds", replicas: 3, max: psMax(1),
			machines: []*v1alpha1.Machine{
				rkMachine("old", psFailed, rkAge(1), psAsk(v1alpha1.PreserveAutoPreserved), psUntil(60)),
				rkMachine("mid", psFailed, rkAge(2), psAsk(v1alpha1.PreserveAutoPreserved)),
				rkMachine("new", psFailed, rkAge(3), psAsk(v1alpha1.PreserveAutoPreserved)),
			},
			unmark: []string{"old", "mid"}, del: []string{"mid"}, nextExpiry: psNow.Add(time.Hour)},
		{name: "an unset maximum releases every mark", replicas: 1,
			machines: []*v1alpha1.Machine{rkMachine("r", psAsk(v1alpha1.PreserveAutoPreserved))},
			unmark:   []string{"r"}},
		{name: "a scale-down takes the preserved machine last", replicas: 1,
			machines: []*v1alpha1.Machine{rkMachine("kept", rkAge(5), psAsk(v1alpha1.PreserveNow), psUntil(60)), rkMachine("a", rkAge(1)), rkMachine("b", rkAge(2))},
			del:      []string{"a", "b"}, nextExpiry: psNow.Add(time.Hour)},
		{name: "by default the scale-down deletes the preserved machine it needs", replicas: 0,
			machines: []*v1alpha1.Machine{rkMachine("kept", psAsk(v1alpha1.PreserveNow), psUntil(60)), rkMachine("a", rkAge(1))},
			del:      []string{"a", "kept"}, nextExpiry: psNow.Add(time.Hour)},
		{name: "KeepPreservedOnScaleDown stops short of it", replicas: 0, keep: true,
			machines: []*v1alpha1.Machine{rkMachine("kept", psAsk(v1alpha1.PreserveNow), psUntil(60)), rkMachine("a", rkAge(1))},
			del:      []string{"a"}, heldBy: "kept", nextExpiry: psNow.Add(time.Hour)},
		{name: "KeepPreservedOnScaleDown: the first preserved machine of the ladder holds it", replicas: 0, keep: true, max: psMax(1),
			machines: []*v1alpha1.Machine{rkMachine("user", psAsk(v1alpha1.PreserveNow), psUntil(10)), rkMachine("auto", psFailed, psAsk(v1alpha1.PreserveAutoPreserved), psUntil(90))},
			heldBy:   "auto", nextExpiry: psNow.Add(10 * time.Minute)},
		{name: "a set being deleted deletes preserved machines and marks nothing, whatever the option", replicas: 0, max: psMax(3), keep: true, deleting: true,
			machines: []*v1alpha1.Machine{rkMachine("kept", psAsk(v1alpha1.PreserveNow), psUntil(60)), rkMachine("f", psFailed)},
			del:      []string{"f", "kept"}, nextExpiry: psNow.Add(time.Hour)},
		{name: "a preserved machine the autoscaler marked is not taken without a surplus", replicas: 1,
			machines:   []*v1alpha1.Machine{rkMachine("kept", rkCAMarked(0), psAsk(v1alpha1.PreserveNow), psUntil(60))},
			nextExpiry: psNow.Add(time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := psScope(tt.replicas, tt.max, tt.keep)
			// The autoscaler's marks count (markedByAutoscaler).
			s.set.Annotations = map[string]string{v1alpha1.LastReplicaChangeByScalerAnnotation: rkAt(1)}
			if tt.deleting {
				s.set.DeletionTimestamp = &metav1.Time{Time: psNow}
			}
			before := rkCopy(tt.machines)
			p := planMachines(s, tt.machines, nil, 100)
			if diff := cmp.Diff(before, tt.machines); diff != "" {
				t.Fatalf("the plan modified the machines (-before +after):\n%s", diff)
			}
			var heldBy string
			if p.Replicas.HeldBy != nil {
				heldBy = p.Replicas.HeldBy.Name
			}
			got := []any{rkNames(p.AutoPreserve.Mark), rkNames(p.AutoPreserve.Unmark), rkNames(p.Replicas.Delete), heldBy, p.NextExpiry}
			want := []any{tt.mark, tt.unmark, tt.del, tt.heldBy, tt.nextExpiry}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("mark, unmark, delete, held by, next expiry (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLadderPreservationRung: preserved machines go after all others;
// among them auto-preserved ones (the Node's value winning) first, then the
// earlier expiry; the older rungs order the rest.
func TestLadderPreservationRung(t *testing.T) {
	machines := []*v1alpha1.Machine{
		rkMachine("user-early", psAsk(v1alpha1.PreserveNow), psUntil(10)),
		rkMachine("auto-late", psFailed, psAsk(v1alpha1.PreserveAutoPreserved), psUntil(90)),
		rkMachine("running", rkAge(1)),
		rkMachine("auto-early", psFailed, psAsk(v1alpha1.PreserveAutoPreserved), psUntil(20)),
		rkMachine("node-wins", psFailed, psAsk(v1alpha1.PreserveAutoPreserved), psNode(v1alpha1.PreserveWhenFailed), psUntil(5)),
		rkMachine("expired", psFailed, psAsk(v1alpha1.PreserveNow), psUntil(-1)),
		rkMachine("low-priority", rkPriority("1"), rkAge(2)),
		rkMachine("user-late", psAsk(v1alpha1.PreserveNow), psUntil(50), rkPriority("1")),
		rkMachine("deleting", psAsk(v1alpha1.PreserveNow), psUntil(50), rkDeleting()),
	}
	want := []string{"deleting", "low-priority", "expired", "running",
		"auto-early", "auto-late", "node-wins", "user-early", "user-late"}
	got := rkNames(rankForDeletion(machines, ladder{Policy: DeletionPolicyOldest, Now: psNow}))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ladder (-want +got):\n%s", diff)
	}
	// At the expiry the preservation no longer holds: the machine takes its
	// place among the others.
	got = rkNames(rankForDeletion(machines, ladder{Policy: DeletionPolicyOldest, Now: psNow.Add(10 * time.Minute)}))
	want = []string{"deleting", "low-priority", "expired", "node-wins", "user-early", "running",
		"auto-early", "auto-late", "user-late"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ladder ten minutes later (-want +got):\n%s", diff)
	}
}

// TestStatusPreservation: the preservation counts of a set's status and
// what failedMachines leaves out.
func TestStatusPreservation(t *testing.T) {
	lastOpFailed := func(m *v1alpha1.Machine) { m.Status.LastOperation.State = v1alpha1.MachineStateFailed }
	set := testSet(5)
	stale := int32(7)
	set.Status.AutoPreserveFailedMachineCount = &stale
	two := int32(2)
	tests := []struct {
		name           string
		machines       []*v1alpha1.Machine
		preserved      int32
		autoPreserved  *int32
		failedMachines []string
	}{
		{name: "none: the stale count goes", machines: []*v1alpha1.Machine{rkMachine("r")}},
		{name: "kept Failed machines are counted, not reported failed", machines: []*v1alpha1.Machine{
			rkMachine("held", psFailed, lastOpFailed, psAsk(v1alpha1.PreserveWhenFailed), psUntil(5)),
			rkMachine("starting", psFailed, lastOpFailed, psAsk(v1alpha1.PreserveWhenFailed)),
			rkMachine("auto", psFailed, lastOpFailed, psAsk(v1alpha1.PreserveAutoPreserved), psUntil(5)),
			rkMachine("auto-recovered", psAsk(v1alpha1.PreserveAutoPreserved)),
			rkMachine("expired", psFailed, lastOpFailed, psAsk(v1alpha1.PreserveWhenFailed), psUntil(0)),
			rkMachine("plain", psFailed, lastOpFailed),
			rkMachine("running-preserved", lastOpFailed, psAsk(v1alpha1.PreserveNow), psUntil(5)),
			rkMachine("going", psFailed, lastOpFailed, psAsk(v1alpha1.PreserveAutoPreserved), psUntil(5), rkDeleting()),
		}, preserved: 2, autoPreserved: &two, failedMachines: []string{"expired", "plain", "running-preserved"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := calculateStatus(statusInput{Now: psNow, Set: set, Machines: tt.machines})
			var failed []string
			if st.FailedMachines != nil {
				for _, f := range *st.FailedMachines {
					failed = append(failed, f.Name)
				}
			}
			got := []any{st.PreservedFailedReplicas, st.AutoPreserveFailedMachineCount, failed}
			if diff := cmp.Diff([]any{tt.preserved, tt.autoPreserved, tt.failedMachines}, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("preservedFailedReplicas, autoPreserveFailedMachineCount, failedMachines (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRequeueAfter: a set syncs again at its machines' next expiry when
// that comes before the resync.
func TestRequeueAfter(t *testing.T) {
	for _, tt := range []struct {
		expiry time.Time
		want   time.Duration
	}{
		{time.Time{}, time.Hour},
		{psNow.Add(time.Minute), time.Minute},
		{psNow.Add(2 * time.Hour), time.Hour},
	} {
		if got := requeueAfter(psNow, tt.expiry, time.Hour); got != tt.want {
			t.Errorf("requeueAfter(expiry %v) = %v, want %v", tt.expiry, got, tt.want)
		}
	}
}

// TestPreservedScaleDown: a scale-down that needs a preserved machine
// deletes it and says so; with KeepPreservedOnScaleDown it stops short,
// says which machine holds it until when, and syncs again at that expiry.
func TestPreservedScaleDown(t *testing.T) {
	until := metav1.NewTime(psNow.Add(45 * time.Minute).Truncate(time.Second))
	preserved := func() runtime.Object {
		set := testSet(0)
		m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "pool-kept", Namespace: "ns", UID: "uid-kept",
			Labels: map[string]string{"pool": "a"}, OwnerReferences: []metav1.OwnerReference{controllerRef(set)},
			Annotations: map[string]string{v1alpha1.PreserveAnnotation: string(v1alpha1.PreserveNow)}},
			Spec: set.Spec.Template.Spec}
		m.Status.CurrentStatus.Phase = v1alpha1.MachineRunning
		m.Status.CurrentStatus.PreserveExpiryTime = &until
		return m
	}
	for _, keep := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "KeepPreservedOnScaleDown"}[keep], func(t *testing.T) {
			rec := record.NewFakeRecorder(100)
			set := testSet(0)
			set.Finalizers = []string{Finalizer}
			h := newHarness(t, Options{Recorder: rec, Clock: testingclock.NewFakeClock(psNow), Resync: 2 * time.Hour, KeepPreservedOnScaleDown: keep}, set, preserved())
			waitForCache(t, h, 1)
			res, err := h.c.Reconcile(context.Background(), "ns/pool")
			if err != nil {
				t.Fatal(err)
			}
			m, err := h.client.MachineV1alpha1().Machines("ns").Get(context.Background(), "pool-kept", metav1.GetOptions{})
			if keep != (err == nil) {
				t.Errorf("machine after the scale-down: %v, %v; want it kept: %v", m, err, keep)
			}
			reason := map[bool]string{false: ReasonPreservedDeleted, true: ReasonScaleDownHeld}[keep]
			var told []string
			for len(rec.Events) > 0 {
				if e := <-rec.Events; strings.Contains(e, reason) {
					told = append(told, e)
				}
			}
			if len(told) != 1 || !strings.HasPrefix(told[0], "Normal ") || !strings.Contains(told[0], "pool-kept") ||
				!strings.Contains(told[0], until.UTC().Format(time.RFC3339)) {
				t.Errorf("%s events %q, want one Normal event naming pool-kept and %v", reason, told, until)
			}
			if keep && res.RequeueAfter != 45*time.Minute {
				t.Errorf("requeue after %v, want the 45m to the expiry", res.RequeueAfter)
			}
			if keep {
				// Told once: a second sync holds again without a new event.
				if _, err := h.c.Reconcile(context.Background(), "ns/pool"); err != nil {
					t.Fatal(err)
				}
				if n := len(rec.Events); n != 0 {
					t.Errorf("%d more events from a sync that held again", n)
				}
			}
		})
	}
}

// psCount counts the machines not being deleted for which f holds.
func psCount(machines []*v1alpha1.Machine, f func(*v1alpha1.Machine) bool) int {
	n := 0
	for _, m := range machines {
		if !machinestate.BeingDeleted(m) && f(m) {
			n++
		}
	}
	return n
}
