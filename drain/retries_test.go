package drain

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"
)

// refused returns the refusal counts of pods named like newPod names them.
func refused(counts map[string]int) []podRefusals {
	var out []podRefusals
	for name, n := range counts {
		out = append(out, podRefusals{Pod: PodRef{Namespace: "default", Name: name, UID: types.UID("uid-" + name)}, Count: n})
	}
	return out
}

func TestDecideEvictRetries(t *testing.T) {
	now := epoch
	notAllowed := newPDB("web", "web", 0, 3, 2, 3) // one pod down: not misconfigured
	backoff := backoffEntry{Key: "pdb/default/web", Attempts: 3, Until: now.Add(4 * time.Second), Cause: CauseDisruptionBudget}
	tests := []struct {
		name       string
		pods       []*corev1.Pod
		pdbs       []*policyv1.PodDisruptionBudget
		opts       Options
		state      State
		want       []row
		wantReason string
	}{
		{
			name:  "below the bound the budget decides",
			pdbs:  []*policyv1.PodDisruptionBudget{notAllowed},
			state: State{maxEvictRetries: 3, refusals: refused(map[string]int{"a": 2, "b": 2})},
			pods:  []*corev1.Pod{newPod("a"), newPod("b")},
			want: []row{
				{Pod: "a", Action: ActionEvict},
				{Pod: "b", Action: ActionBlocked, Cause: CauseDisruptionBudget},
			},
		},
		{
			// b still has retries: it is the budget's probe of this plan.
			name:  "at the bound the next attempt deletes, with the pod's own grace",
			pdbs:  []*policyv1.PodDisruptionBudget{notAllowed},
			state: State{maxEvictRetries: 3, refusals: refused(map[string]int{"a": 3, "b": 1})},
			pods:  []*corev1.Pod{newPod("a", grace(45)), newPod("b")},
			want: []row{
				{Pod: "a", Action: ActionForceDelete, Cause: CauseEvictRetries, Grace: 45 * time.Second},
				{Pod: "b", Action: ActionEvict},
			},
			wantReason: "eviction refused 3 times by PodDisruptionBudgets (MaxEvictRetries)",
		},
		{
			name:  "the backoff after the last refusal still paces the deletion",
			pdbs:  []*policyv1.PodDisruptionBudget{notAllowed},
			state: State{maxEvictRetries: 3, refusals: refused(map[string]int{"a": 3, "b": 3}), backoffs: []backoffEntry{backoff}},
			pods:  []*corev1.Pod{newPod("a"), newPod("b")},
			want: []row{
				{Pod: "a", Action: ActionBlocked, Cause: CauseDisruptionBudget, RetryAt: backoff.Until},
				{Pod: "b", Action: ActionBlocked, Cause: CauseDisruptionBudget, RetryAt: backoff.Until},
			},
		},
		{
			name:  "an expired backoff: every pod out of retries goes",
			pdbs:  []*policyv1.PodDisruptionBudget{notAllowed},
			state: State{maxEvictRetries: 3, refusals: refused(map[string]int{"a": 3, "b": 4}), backoffs: []backoffEntry{{Key: backoff.Key, Attempts: 3, Until: now}}},
			pods:  []*corev1.Pod{newPod("a"), newPod("b")},
			want: []row{
				{Pod: "a", Action: ActionForceDelete, Cause: CauseEvictRetries, Grace: 30 * time.Second},
				{Pod: "b", Action: ActionForceDelete, Cause: CauseEvictRetries, Grace: 30 * time.Second},
			},
			wantReason: "eviction refused 3 times by PodDisruptionBudgets (MaxEvictRetries)",
		},
		{
			name:  "no bound: refusals are counted, budgets are respected",
			pdbs:  []*policyv1.PodDisruptionBudget{notAllowed},
			state: State{refusals: refused(map[string]int{"a": 100})},
			pods:  []*corev1.Pod{newPod("a"), newPod("b")},
			want: []row{
				{Pod: "a", Action: ActionEvict},
				{Pod: "b", Action: ActionBlocked, Cause: CauseDisruptionBudget},
			},
		},
		{
			name:       "the bound of Options when the state has none",
			opts:       Options{MaxEvictRetries: 2},
			pdbs:       []*policyv1.PodDisruptionBudget{notAllowed},
			state:      State{refusals: refused(map[string]int{"a": 2})},
			pods:       []*corev1.Pod{newPod("a")},
			want:       []row{{Pod: "a", Action: ActionForceDelete, Cause: CauseEvictRetries, Grace: 30 * time.Second}},
			wantReason: "eviction refused 2 times by PodDisruptionBudgets (MaxEvictRetries)",
		},
		{
			name:  "the state's bound wins over Options",
			opts:  Options{MaxEvictRetries: 1},
			pdbs:  []*policyv1.PodDisruptionBudget{notAllowed},
			state: State{maxEvictRetries: 5, refusals: refused(map[string]int{"a": 2})},
			pods:  []*corev1.Pod{newPod("a")},
			want:  []row{{Pod: "a", Action: ActionEvict}},
		},
		{
			name:  "with a deadline ahead: deleted now, ForceAt still the deadline's",
			pdbs:  []*policyv1.PodDisruptionBudget{notAllowed},
			state: State{deadline: now.Add(time.Hour), maxEvictRetries: 1, refusals: refused(map[string]int{"a": 1})},
			pods:  []*corev1.Pod{newPod("a", grace(30))},
			want: []row{{Pod: "a", Action: ActionForceDelete, Cause: CauseEvictRetries,
				ForceAt: now.Add(time.Hour - 30*time.Second), Grace: 30 * time.Second}},
			wantReason: "eviction refused once by PodDisruptionBudgets (MaxEvictRetries)",
		},
		{
			name: "the deadline and the bound in one plan: both reasons",
			pdbs: []*policyv1.PodDisruptionBudget{notAllowed},
			state: State{deadline: now.Add(10 * time.Second), maxEvictRetries: 1,
				refusals: refused(map[string]int{"b-short": 1})},
			pods: []*corev1.Pod{newPod("a-long", grace(30)), newPod("b-short", grace(5))},
			want: []row{
				{Pod: "a-long", Action: ActionForceDelete, Cause: CauseDeadline, ForceAt: now.Add(-20 * time.Second), Grace: 10 * time.Second},
				{Pod: "b-short", Action: ActionForceDelete, Cause: CauseEvictRetries, ForceAt: now.Add(5 * time.Second), Grace: 5 * time.Second},
			},
			wantReason: "drain deadline 2025-01-01T12:00:10Z is near; eviction refused once by PodDisruptionBudgets (MaxEvictRetries)",
		},
		{
			name:  "a pod out of retries in a later group waits for its group",
			pdbs:  []*policyv1.PodDisruptionBudget{notAllowed},
			state: State{maxEvictRetries: 1, refusals: refused(map[string]int{"late": 1})},
			pods:  []*corev1.Pod{newPod("first", app("other")), newPod("late", order(1))},
			want: []row{
				{Pod: "first", Action: ActionEvict},
				{Pod: "late", Action: ActionWaitGroup, Group: Group{Order: 1}},
			},
		},
		{
			name:  "a terminating pod out of retries is waited for",
			state: State{maxEvictRetries: 1, refusals: refused(map[string]int{"a": 1})},
			pods:  []*corev1.Pod{newPod("a", terminating(now.Add(20*time.Second)))},
			want:  []row{{Pod: "a", Action: ActionWaitTermination}},
		},
		{
			name:  "refused pods hold a pod out of retries too",
			opts:  Options{RefuseUnmanaged: true},
			state: State{maxEvictRetries: 1, refusals: refused(map[string]int{"a": 1})},
			pods:  []*corev1.Pod{newPod("a"), newPod("bare", unmanaged())},
			want: []row{
				{Pod: "a", Action: ActionBlocked, Cause: CauseRefusedPods},
				{Pod: "bare", Action: ActionRefuse, Cause: CauseUnmanaged},
			},
		},
		{
			// Its pods were refused before the budget became so strict;
			// they no longer ask it.
			name:  "a misconfigured budget no longer holds a pod out of retries",
			pdbs:  []*policyv1.PodDisruptionBudget{newPDB("strict", "web", 0, 2, 2, 2)},
			state: State{maxEvictRetries: 2, refusals: refused(map[string]int{"a": 2})},
			pods:  []*corev1.Pod{newPod("a"), newPod("b")},
			want: []row{
				{Pod: "a", Action: ActionForceDelete, Cause: CauseEvictRetries, Grace: 30 * time.Second},
				{Pod: "b", Action: ActionBlocked, Cause: CauseMisconfiguredPDB},
			},
			wantReason: "eviction refused 2 times by PodDisruptionBudgets (MaxEvictRetries)",
		},
		{
			name:  "the deletion takes a disruption the budget still allows",
			pdbs:  []*policyv1.PodDisruptionBudget{newPDB("web", "web", 1, 2, 3, 3)},
			state: State{maxEvictRetries: 2, refusals: refused(map[string]int{"a": 2})},
			pods:  []*corev1.Pod{newPod("a"), newPod("b")},
			want: []row{
				{Pod: "a", Action: ActionForceDelete, Cause: CauseEvictRetries, Grace: 30 * time.Second},
				{Pod: "b", Action: ActionBlocked, Cause: CauseDisruptionBudget},
			},
			wantReason: "eviction refused 2 times by PodDisruptionBudgets (MaxEvictRetries)",
		},
		{
			name:       "an unhealthy pod counts its own refusals",
			pdbs:       []*policyv1.PodDisruptionBudget{notAllowed},
			state:      State{maxEvictRetries: 2, refusals: refused(map[string]int{"sick": 2})},
			pods:       []*corev1.Pod{newPod("sick", notReady())},
			want:       []row{{Pod: "sick", Action: ActionForceDelete, Cause: CauseEvictRetries, Grace: 30 * time.Second}},
			wantReason: "eviction refused 2 times by PodDisruptionBudgets (MaxEvictRetries)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(Snapshot{Node: newNode(testNode), Pods: tt.pods, PDBs: tt.pdbs, Now: now, State: begun(tt.state, now)}, tt.opts)
			if diff := cmp.Diff(tt.want, rows(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("decisions (-want +got):\n%s\nmessage: %s", diff, got.Message)
			}
			if got.ForceReason != tt.wantReason {
				t.Errorf("ForceReason = %q, want %q", got.ForceReason, tt.wantReason)
			}
		})
	}
}

// TestDecideEvictRetriesVolumeSlots: a deletion for refusals takes a
// volume slot like the eviction it replaces, and waits for one.
func TestDecideEvictRetriesVolumeSlots(t *testing.T) {
	now := epoch
	pods := []*corev1.Pod{
		newPod("a", withClaim("c-pv-a")),
		newPod("b", withClaim("c-pv-b")),
		newPod("c", withClaim("c-pv-c")),
	}
	vas := []*storagev1.VolumeAttachment{newVA("pv-a", testNode), newVA("pv-b", testNode), newVA("pv-c", testNode)}
	state := State{start: now, maxEvictRetries: 1, refusals: refused(map[string]int{"a": 1, "b": 1})}
	snap := volumeSnap(now, pods, vas, state)
	snap.PDBs = []*policyv1.PodDisruptionBudget{newPDB("web", "web", 0, 3, 2, 3)}
	got := Decide(snap, Options{Volumes: VolumeOptions{Parallelism: 1}})
	want := []row{
		{Pod: "a", Action: ActionForceDelete, Cause: CauseEvictRetries, Grace: 30 * time.Second, Volumes: []string{"pv-a"}},
		{Pod: "b", Action: ActionWaitVolumeSlot, Volumes: []string{"pv-b"}},
		{Pod: "c", Action: ActionWaitVolumeSlot, Volumes: []string{"pv-c"}},
	}
	if diff := cmp.Diff(want, rows(got), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
}

func TestDecideKeepsRefusals(t *testing.T) {
	state := State{refusals: []podRefusals{
		{Pod: PodRef{Namespace: "default", Name: "gone", UID: "uid-gone"}, Count: 4},
		{Pod: PodRef{Namespace: "default", Name: "b", UID: "uid-b"}, Count: 2},
		{Pod: PodRef{Namespace: "default", Name: "a", UID: "uid-a-old"}, Count: 7}, // an earlier pod of that name
		{Pod: PodRef{Namespace: "default", Name: "a", UID: "uid-a"}, Count: 1},
	}}
	got := Decide(Snapshot{Node: newNode(testNode), Now: epoch, State: begun(state, epoch),
		Pods: []*corev1.Pod{newPod("a"), newPod("b"), newPod("c")}}, Options{MaxEvictRetries: 3})
	want := State{
		start:           epoch.Add(-time.Hour), // begun
		maxEvictRetries: 3,
		refusals: []podRefusals{
			{Pod: PodRef{Namespace: "default", Name: "a", UID: "uid-a"}, Count: 1},
			{Pod: PodRef{Namespace: "default", Name: "b", UID: "uid-b"}, Count: 2},
		},
	}
	if diff := cmp.Diff(want, got.State, cmpopts.EquateEmpty(), stateFields); diff != "" {
		t.Errorf("State (-want +got):\n%s", diff)
	}
}

// TestPassEvictRetries drains three pods behind a budget that never allows
// a disruption, with a bound of three refusals set by the caller in the
// state: one eviction per backoff asks for the budget's pods, each refusal
// counts for all three, and the attempt after the third refusal deletes
// them, 1+2+4 seconds after the first.
func TestPassEvictRetries(t *testing.T) {
	c := newCluster(t, newNode(testNode), newPDB("web", "web", 0, 3, 2, 3),
		newPod("a", grace(10)), newPod("b", grace(10)), newPod("c", grace(10)))
	var events []Event
	d := c.drainer(Options{OnEvent: func(e Event) { events = append(events, e) }})

	state := State{maxEvictRetries: 3}
	var res Result
	for i := 1; i <= 3; i++ {
		res = c.pass(d, state)
		state = persist(t, res.State)
		if calls := c.evictionCalls(); len(calls) != i || calls[i-1].Code != 429 {
			t.Fatalf("pass %d: eviction calls %+v, want %d refused", i, calls, i)
		}
		want := []podRefusals{
			{Pod: PodRef{Namespace: "default", Name: "a", UID: "uid-a"}, Count: i},
			{Pod: PodRef{Namespace: "default", Name: "b", UID: "uid-b"}, Count: i},
			{Pod: PodRef{Namespace: "default", Name: "c", UID: "uid-c"}, Count: i},
		}
		if diff := cmp.Diff(want, state.refusals); diff != "" {
			t.Fatalf("pass %d: refusals (-want +got):\n%s", i, diff)
		}
		if res.ForceDeletions != 0 || len(c.deletionCalls()) != 0 {
			t.Fatalf("pass %d deleted pods before the third refusal", i)
		}
		// A pass during the backoff asks nothing and counts nothing.
		again := c.pass(d, state)
		if n := len(c.evictionCalls()); n != i || !cmp.Equal(again.State.refusals, state.refusals) {
			t.Fatalf("pass %d repeated during the backoff: %d eviction calls, refusals %+v", i, n, again.State.refusals)
		}
		c.clock.SetTime(res.NextCheck)
	}

	res = c.pass(d, state)
	if got := c.clock.Now().Sub(epoch); got != 7*time.Second {
		t.Errorf("deleted %v after the first refusal, want 7s (backoffs of 1, 2 and 4s)", got)
	}
	if res.ForceDeletions != 3 || len(c.evictionCalls()) != 3 {
		t.Fatalf("ForceDeletions=%d after %d eviction calls, want 3 after 3", res.ForceDeletions, len(c.evictionCalls()))
	}
	for _, call := range c.deletionCalls() {
		if call.Grace != 10 {
			t.Errorf("%s deleted with grace %ds, want the pod's 10s", call.Pod, call.Grace)
		}
	}
	want := "eviction refused 3 times by PodDisruptionBudgets (MaxEvictRetries)"
	if res.ForceReason != want {
		t.Errorf("ForceReason = %q, want %q", res.ForceReason, want)
	}
	var exhausted []string
	for _, e := range events {
		switch e.Type {
		case EventEvictRetriesExhausted:
			exhausted = append(exhausted, e.Pod.Name)
			if !strings.Contains(e.Message, want) {
				t.Errorf("event message %q does not say why", e.Message)
			}
		case EventForceDeleted:
			t.Errorf("ForceDeleted event %v: the deadline did not force anything", e)
		}
	}
	// The deletions run concurrently: their events come in any order.
	slices.Sort(exhausted)
	if diff := cmp.Diff([]string{"a", "b", "c"}, exhausted); diff != "" {
		t.Errorf("EvictRetriesExhausted events (-want +got):\n%s", diff)
	}

	c.kubelet()
	res = c.pass(d, persist(t, res.State))
	if !res.Done || len(res.State.refusals) != 0 {
		t.Errorf("Done=%v Refusals=%+v after the pods are gone: %s", res.Done, res.State.refusals, res.Message)
	}
}

// TestPassCountsOnlyBudgetRefusals: a 429 without a budget's cause
// (throttling) and other errors are no refusals; a refusal counts once
// per pass for every pod its budget held back, and for no other.
func TestPassCountsOnlyBudgetRefusals(t *testing.T) {
	c := newCluster(t, newNode(testNode), newPDB("web", "web", 0, 3, 2, 3),
		newPod("a"), newPod("b"), newPod("throttled", app("other")), newPod("broken", app("other")))
	var fail bool
	c.evictErr = func(pod *corev1.Pod) error {
		switch {
		case pod.Name == "throttled":
			return apierrors.NewTooManyRequests("too many requests, please try again later", 1)
		case pod.Name == "broken" || fail:
			return apierrors.NewInternalError(errors.New("the server broke"))
		}
		return nil // the simulated budget answers
	}
	d := c.drainer(Options{})
	res, err := d.Pass(t.Context(), testNode, State{maxEvictRetries: 2})
	if err == nil {
		t.Fatal("the 500 was not reported")
	}
	want := []podRefusals{
		{Pod: PodRef{Namespace: "default", Name: "a", UID: "uid-a"}, Count: 1},
		{Pod: PodRef{Namespace: "default", Name: "b", UID: "uid-b"}, Count: 1},
	}
	if diff := cmp.Diff(want, res.State.refusals); diff != "" {
		t.Fatalf("refusals (-want +got):\n%s", diff)
	}

	// The budget's next probe fails with 500, the throttled pod is
	// throttled again: nothing more is counted, nothing deleted.
	fail = true
	c.clock.SetTime(res.State.backoffs[0].Until.Add(time.Hour))
	calls := len(c.evictionCalls())
	res, _ = d.Pass(t.Context(), testNode, res.State)
	if n := len(c.evictionCalls()) - calls; n != 3 {
		t.Errorf("%d eviction calls in the second pass, want 3 (the budget's probe, throttled, broken)", n)
	}
	if diff := cmp.Diff(want, res.State.refusals); diff != "" {
		t.Errorf("refusals after errors (-want +got):\n%s", diff)
	}
	if n := len(c.deletionCalls()); n != 0 {
		t.Errorf("%d deletions below the bound", n)
	}
}

func TestPassRejectsNegativeMaxEvictRetries(t *testing.T) {
	c := newCluster(t, newNode(testNode), newPod("a"))
	d := c.drainer(Options{})
	if _, err := d.Pass(t.Context(), testNode, State{maxEvictRetries: -1}); err == nil || !strings.Contains(err.Error(), "MaxEvictRetries") {
		t.Errorf("Pass with MaxEvictRetries -1: error %v, want one naming MaxEvictRetries", err)
	}
	if len(c.evictionCalls()) != 0 {
		t.Error("a pass with a negative bound evicted")
	}
	if _, err := New(c.client, Options{MaxEvictRetries: -1}); err == nil || !strings.Contains(err.Error(), "MaxEvictRetries") {
		t.Errorf("New with MaxEvictRetries -1: error %v, want one naming MaxEvictRetries", err)
	}
}

// TestStateWithoutBoundDecodes: a state stored before the bound existed
// decodes to no bound and no refusals, and the pass counts from there.
func TestStateWithoutBoundDecodes(t *testing.T) {
	stored := `{"start":"2025-01-01T11:59:00Z","deadline":"2025-01-01T14:00:00Z",` +
		`"backoffs":[{"key":"pdb/default/web","attempts":2,"until":"2025-01-01T11:59:58Z","cause":"DisruptionBudget"}],` +
		`"blockedBy":["default/web"]}`
	var state State
	if err := json.Unmarshal([]byte(stored), &state); err != nil {
		t.Fatal(err)
	}
	if state.maxEvictRetries != 0 || state.refusals != nil {
		t.Fatalf("decoded %+v, want no bound and no refusals", state)
	}
	c := newCluster(t, newNode(testNode), newPDB("web", "web", 0, 3, 2, 3), newPod("a"))
	res := c.pass(c.drainer(Options{}), state)
	want := []podRefusals{{Pod: PodRef{Namespace: "default", Name: "a", UID: "uid-a"}, Count: 1}}
	if diff := cmp.Diff(want, res.State.refusals); diff != "" {
		t.Errorf("refusals (-want +got):\n%s", diff)
	}
	if res.State.backoffs[0].Attempts != 3 {
		t.Errorf("backoff %+v, want the stored one continued", res.State.backoffs[0])
	}

	// The new fields survive JSON, and a state without them writes none.
	res.State.maxEvictRetries = 4
	if got := persist(t, res.State); !cmp.Equal(got, res.State, stateFields) {
		t.Errorf("round trip changed the state (-want +got):\n%s", cmp.Diff(res.State, got, stateFields))
	}
	data, err := json.Marshal(State{start: epoch})
	if err != nil {
		t.Fatal(err)
	}
	if s := string(data); strings.Contains(s, "maxEvictRetries") || strings.Contains(s, "refusals") {
		t.Errorf("a state without bound and refusals marshals to %s", s)
	}
}

// TestDrainEvictRetries is the blocking form: Options.MaxEvictRetries
// bounds the refusals of a budget that never allows, and Drain ends.
func TestDrainEvictRetries(t *testing.T) {
	c := newCluster(t, newNode(testNode), newPDB("web", "web", 0, 3, 2, 3), newPod("a"), newPod("b"))
	var exhausted int
	d := c.drainer(Options{MaxEvictRetries: 2, OnEvent: func(e Event) {
		if e.Type == EventEvictRetriesExhausted {
			exhausted++
		}
	}})
	res, err := drainAsync(t, c, d, time.Second, func() { c.kubelet() })
	if err != nil {
		t.Fatalf("Drain: %v (%s)", err, res.Message)
	}
	if exhausted != 2 || len(c.evictionCalls()) != 2 {
		t.Errorf("%d pods deleted after %d eviction calls, want 2 after 2", exhausted, len(c.evictionCalls()))
	}
}

// persist is what a controller does with a state between passes.
func persist(t *testing.T, st State) State {
	t.Helper()
	out, err := jsonRoundTrip(st)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPropertyEvictRetriesEndDrain runs the planner pass after pass, with
// no deadline, against budgets that refuse every eviction of their healthy
// pods. With a bound the drain must end, each pod deleted for its refusals
// only after the bound was reached, and counted at most once per pass.
func TestPropertyEvictRetriesEndDrain(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		snap, opts := genSnapshot(t)
		opts.RefuseUnmanaged, opts.RefuseLocalStorage = false, false
		opts.Unreachable.ForceAfter = -1 // no forcing: only the bound can end the wait
		opts = opts.withDefaults()
		bound := rapid.IntRange(1, 4).Draw(t, "bound")
		d := &Drainer{opts: opts}

		// One budget per namespace and app at most, none misconfigured and
		// none allowing a disruption: the API server refuses them all.
		var pdbs []*policyv1.PodDisruptionBudget
		for _, ns := range []string{"default", "team"} {
			for _, a := range []string{"a", "b", "c"} {
				if rapid.Bool().Draw(t, "budget") {
					pdb := newPDB("pdb-"+a, a, 0, 3, 2, 3)
					pdb.Namespace = ns
					pdbs = append(pdbs, pdb)
				}
			}
		}
		guarded := func(p *corev1.Pod) bool {
			for _, pdb := range pdbs {
				if pdb.Namespace == p.Namespace && pdb.Spec.Selector.MatchLabels["app"] == p.Labels["app"] {
					return podReady(p)
				}
			}
			return false
		}
		pods := map[types.UID]*corev1.Pod{}
		for _, p := range snap.Pods {
			pods[p.UID] = p.DeepCopy()
		}
		now := snap.Now
		st := State{maxEvictRetries: bound}
		for step := 0; ; step++ {
			if step > 400 {
				t.Fatalf("drain did not finish")
			}
			cur := make([]*corev1.Pod, 0, len(pods))
			for _, p := range pods {
				cur = append(cur, p)
			}
			before := map[types.UID]int{}
			for _, r := range st.refusals {
				before[r.Pod.UID] = r.Count
			}
			res := Result{Plan: Decide(Snapshot{Node: newNode(testNode), Pods: cur, PDBs: pdbs,
				VolumeAttachments: snap.VolumeAttachments, Claims: snap.Claims, Now: now, State: st}, opts)}
			if res.Done {
				break
			}
			bumped, refusedKeys := map[string]bool{}, map[string]bool{}
			for i := range res.Decisions {
				dec := &res.Decisions[i]
				switch {
				case dec.Action == ActionForceDelete && dec.Cause == CauseEvictRetries && before[dec.Pod.UID] < bound:
					t.Fatalf("step %d: %v deleted after %d refusals, bound %d", step, dec.Pod, before[dec.Pod.UID], bound)
				case dec.Action == ActionEvict && guarded(pods[dec.Pod.UID]):
					key := backoffKey(*dec)
					d.block(&res, dec, key, CauseDisruptionBudget, "refused", 0, now, bumped)
					refusedKeys[key] = true
					continue
				case dec.Action != ActionEvict && dec.Action != ActionForceDelete:
					continue
				}
				p := pods[dec.Pod.UID]
				if p.DeletionTimestamp == nil {
					p.DeletionTimestamp = &metav1.Time{Time: now.Add(podGrace(p))}
				}
				track(&res.State, dec)
			}
			countRefusals(&res, refusedKeys)
			for _, r := range res.State.refusals {
				if r.Count > before[r.Pod.UID]+1 {
					t.Fatalf("step %d: %v counted %d refusals in one pass", step, r.Pod, r.Count-before[r.Pod.UID])
				}
			}
			st = res.State
			for uid, p := range pods {
				if p.DeletionTimestamp != nil && rapid.IntRange(0, 2).Draw(t, "kubelet") > 0 {
					delete(pods, uid)
				}
			}
			for _, p := range pods {
				if p.Annotations[PolicyAnnotation] == "wait-completed" && rapid.IntRange(0, 3).Draw(t, "complete") == 0 {
					p.Status.Phase = corev1.PodSucceeded
				}
			}
			now = now.Add(time.Duration(rapid.IntRange(1, 30).Draw(t, "elapse")) * time.Second)
		}
	})
}
