package drain

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

func TestMaxAttempts(t *testing.T) {
	for _, tc := range []struct {
		elapsed, initial, most time.Duration
		want                   int
	}{
		{0, time.Second, 30 * time.Second, 1},
		{999 * time.Millisecond, time.Second, 30 * time.Second, 1},
		{time.Second, time.Second, 30 * time.Second, 2},
		{3 * time.Second, time.Second, 30 * time.Second, 3},  // 0, 1, 3
		{30 * time.Second, time.Second, 30 * time.Second, 5}, // 0, 1, 3, 7, 15; the next at 31
		{31 * time.Second, time.Second, 30 * time.Second, 6},
		{61 * time.Second, time.Second, 30 * time.Second, 7},  // then every 30 s
		{10 * time.Minute, time.Second, 30 * time.Second, 24}, // 31 s + 18 × 30 s
		{time.Minute, 30 * time.Second, 30 * time.Second, 3},
		{time.Second, 0, 0, 2}, // defaults
	} {
		if got := maxAttempts(tc.elapsed, tc.initial, tc.most); got != tc.want {
			t.Errorf("maxAttempts(%v, %v, %v) = %d, want %d", tc.elapsed, tc.initial, tc.most, got, tc.want)
		}
	}
}

// TestDistrust pins which stored states a pass restarts from: anything
// that no drain could have recorded by now, whatever it would have
// shortened.
func TestDistrust(t *testing.T) {
	start := epoch.Add(-10 * time.Second)
	pod := PodRef{Namespace: "default", Name: "a", UID: "uid-a"}
	opts := Options{}.withDefaults()
	for _, tc := range []struct {
		name  string
		state State
		reset bool
	}{
		{name: "empty", state: State{}},
		{name: "progressing", state: State{
			start: start, refusals: []podRefusals{{Pod: pod, Count: 4}},
			backoffs: []backoffEntry{{Key: "pdb/default/web", Attempts: 4, Until: epoch.Add(8 * time.Second)}},
			tracked:  []trackedPod{{Pod: pod, GoneAt: start.Add(time.Second)}},
		}},
		{name: "refusals beyond the backoff", state: State{start: start, refusals: []podRefusals{{Pod: pod, Count: 5}}}, reset: true},
		{name: "negative refusals", state: State{start: start, refusals: []podRefusals{{Pod: pod, Count: -1}}}, reset: true},
		{name: "attempts beyond the backoff", state: State{start: start, backoffs: []backoffEntry{{Key: "pod/uid-a", Attempts: 50}}}, reset: true},
		{name: "start in the future", state: State{start: epoch.Add(time.Second)}, reset: true},
		{name: "progress without a start", state: State{refusals: []podRefusals{{Pod: pod, Count: 1}}}, reset: true},
		{name: "completed before the start", state: State{start: start, completed: start.Add(-time.Second)}, reset: true},
		{name: "pod gone in the future", state: State{start: start, tracked: []trackedPod{{Pod: pod, GoneAt: epoch.Add(time.Hour)}}}, reset: true},
		{name: "detached before gone", state: State{start: start, tracked: []trackedPod{{Pod: pod, GoneAt: start.Add(2 * time.Second), DetachedAt: start.Add(time.Second)}}}, reset: true},
		{name: "gave up on volumes early", state: State{start: start, tracked: []trackedPod{{Pod: pod, GoneAt: start, GaveUp: true}}}, reset: true},
		{name: "gave up on volumes at the deadline", state: State{start: start, deadline: epoch, tracked: []trackedPod{{Pod: pod, GoneAt: start, GaveUp: true}}}},
		{name: "gave up on attachments early", state: State{start: start, forcedDetach: forcedDetach{Since: start, GaveUp: true}}, reset: true},
		{name: "gave up on attachments after the timeout", state: State{
			start: epoch.Add(-time.Hour), forcedDetach: forcedDetach{Since: epoch.Add(-time.Hour), GaveUp: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.state.maxEvictRetries = 3
			if tc.state.deadline.IsZero() {
				tc.state.deadline = epoch.Add(time.Hour)
			}
			got, problem := distrust(tc.state, epoch, opts)
			want := tc.state
			if tc.reset {
				want = State{deadline: tc.state.deadline, maxEvictRetries: 3}
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), stateFields); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
			if (problem != "") != tc.reset {
				t.Errorf("problem = %q, want one: %v", problem, tc.reset)
			}
		})
	}
}

// TestDecideRestartsDistrustedState: a pass given a state that claims a
// budget refused the pod's eviction more often than it could have does
// not delete the pod; it starts the drain over and says so. The same
// count, when the drain has run long enough to have had it, deletes.
func TestDecideRestartsDistrustedState(t *testing.T) {
	pod := newPod("a")
	pdbs := []*policyv1.PodDisruptionBudget{newPDB("web", "web", 0, 1, 1, 1)}
	ref := PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	for _, tc := range []struct {
		name      string
		started   time.Duration // before now
		want      Action
		restarted bool
	}{
		{name: "forged", started: time.Second, want: ActionBlocked, restarted: true},
		{name: "earned", started: time.Hour, want: ActionForceDelete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := State{
				start: epoch.Add(-tc.started), deadline: epoch.Add(time.Hour), maxEvictRetries: 3,
				refusals: []podRefusals{{Pod: ref, Count: 3}},
			}
			p := Decide(Snapshot{Node: newNode(testNode), Now: epoch, State: st, Pods: []*corev1.Pod{pod}, PDBs: pdbs}, Options{})
			if got := actions(p)["a"]; got != tc.want {
				t.Errorf("action = %s, want %s", got, tc.want)
			}
			restarted := slices.ContainsFunc(p.Events, func(e Event) bool { return e.Type == EventStateReset })
			if restarted != tc.restarted {
				t.Errorf("events %v: restarted = %v, want %v", eventTypes(p.Events), restarted, tc.restarted)
			}
			if tc.restarted && !p.State.start.Equal(epoch) {
				t.Errorf("restarted drain starts at %v, want now", p.State.start)
			}
		})
	}
}
