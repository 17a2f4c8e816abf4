package drain

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// storedByV1 is a State as the versions before State was opaque stored
// it (json.Marshal of its exported fields), with every field set.
const storedByV1 = `{"start":"2026-01-02T15:04:05Z","deadline":"2026-01-02T15:14:05Z","maxEvictRetries":5,` +
	`"tracked":[{"pod":{"namespace":"default","name":"web-0","uid":"uid-web-0"},"group":{"order":1,"tier":1},"volumes":["pv-a"],"goneAt":"2026-01-02T15:05:05Z","detachedAt":"2026-01-02T15:05:35Z"},` +
	`{"group":{"order":0,"tier":0},"volumes":["pv-orphan"],"gaveUp":true}],` +
	`"backoffs":[{"key":"pdb/default/web","attempts":3,"until":"2026-01-02T15:06:05Z","cause":"DisruptionBudget"},{"key":"pod/uid-x","attempts":1,"until":"2026-01-02T15:05:05Z"}],` +
	`"refusals":[{"pod":{"namespace":"default","name":"web-1","uid":"uid-web-1"},"count":3}],` +
	`"blockedBy":["default/web","kube-system/dns"],"forcedDetach":{"since":"2026-01-02T15:07:05Z","gaveUp":true}}`

// TestStateStoredFormat: a State stored by an earlier version decodes to
// what it recorded, and encodes back to the same bytes, so that drains
// stored before an upgrade continue after it and a rollback reads what the
// new version wrote.
func TestStateStoredFormat(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	want := State{
		start: t0, deadline: t0.Add(10 * time.Minute), maxEvictRetries: 5,
		tracked: []trackedPod{
			{Pod: PodRef{Namespace: "default", Name: "web-0", UID: "uid-web-0"}, Group: Group{Order: 1, Tier: TierCritical},
				Volumes: []string{"pv-a"}, GoneAt: t0.Add(time.Minute), DetachedAt: t0.Add(90 * time.Second)},
			{Volumes: []string{"pv-orphan"}, GaveUp: true},
		},
		backoffs: []backoffEntry{
			{Key: "pdb/default/web", Attempts: 3, Until: t0.Add(2 * time.Minute), Cause: CauseDisruptionBudget},
			{Key: "pod/uid-x", Attempts: 1, Until: t0.Add(time.Minute)},
		},
		refusals:     []podRefusals{{Pod: PodRef{Namespace: "default", Name: "web-1", UID: "uid-web-1"}, Count: 3}},
		blockedBy:    []string{"default/web", "kube-system/dns"},
		forcedDetach: forcedDetach{Since: t0.Add(3 * time.Minute), GaveUp: true},
	}
	var got State
	if err := json.Unmarshal([]byte(storedByV1), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, stateFields); diff != "" {
		t.Errorf("decoded state (-want +got):\n%s", diff)
	}
	if !got.Start().Equal(t0) || !got.Deadline().Equal(t0.Add(10*time.Minute)) || got.MaxEvictRetries() != 5 {
		t.Errorf("accessors: start %v, deadline %v, max evict retries %d", got.Start(), got.Deadline(), got.MaxEvictRetries())
	}
	if diff := cmp.Diff([]string{"default/web", "kube-system/dns"}, got.BlockingBudgets()); diff != "" {
		t.Errorf("blocking budgets (-want +got):\n%s", diff)
	}
	for _, v := range []any{got, &got, Plan{State: got}.State} {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if string(raw) != storedByV1 {
			t.Errorf("encoded %T:\n%s\nwant the stored bytes:\n%s", v, raw, storedByV1)
		}
	}
}

// TestStateEncoding: the zero State stores as {}, a stored null leaves a
// State alone, a field the State does not know is ignored, and what is not
// a State is an error.
func TestStateEncoding(t *testing.T) {
	raw, err := json.Marshal(State{})
	if err != nil || string(raw) != "{}" {
		t.Errorf("zero State encodes to %s, %v; want {}", raw, err)
	}
	st := State{start: epoch}
	if err := json.Unmarshal([]byte("null"), &st); err != nil || !st.Start().Equal(epoch) {
		t.Errorf("null: start %v, %v; want the state untouched", st.Start(), err)
	}
	if err := json.Unmarshal([]byte(`{"start":"2025-01-01T12:00:00Z","later":1}`), &st); err != nil || !st.Start().Equal(epoch) {
		t.Errorf("unknown field: start %v, %v", st.Start(), err)
	}
	for _, bad := range []string{`[]`, `{"start":3}`, `{"tracked":{}}`} {
		if err := json.Unmarshal([]byte(bad), &st); err == nil {
			t.Errorf("%s decoded without an error", bad)
		}
	}
	st.SetDeadline(epoch.Add(time.Hour))
	st.SetMaxEvictRetries(2)
	if !st.Deadline().Equal(epoch.Add(time.Hour)) || st.MaxEvictRetries() != 2 {
		t.Errorf("setters: deadline %v, max evict retries %d", st.Deadline(), st.MaxEvictRetries())
	}
}

// TestDecideContinuesStoredState: a drain stored mid-way by an earlier
// version (a budget's backoff, a refusal count, a pod whose volume still
// detaches) goes on where it stopped: nothing restarts, nothing is retried
// early.
func TestDecideContinuesStoredState(t *testing.T) {
	now := epoch
	stored := `{"start":"2025-01-01T11:59:00Z","deadline":"2025-01-01T13:00:00Z","maxEvictRetries":5,` +
		`"tracked":[{"pod":{"namespace":"default","name":"x","uid":"uid-x"},"group":{"order":0,"tier":0},"volumes":["pv-x"],"goneAt":"2025-01-01T11:59:50Z"}],` +
		`"backoffs":[{"key":"pdb/default/web","attempts":2,"until":"2025-01-01T12:00:05Z","cause":"DisruptionBudget"}],` +
		`"refusals":[{"pod":{"namespace":"default","name":"a","uid":"uid-a"},"count":2}],"blockedBy":["default/web"]}`
	var st State
	if err := json.Unmarshal([]byte(stored), &st); err != nil {
		t.Fatal(err)
	}
	got := Decide(Snapshot{
		Node: newNode(testNode), Now: now, State: st,
		Pods:              []*corev1.Pod{newPod("a"), newPod("b")},
		PDBs:              []*policyv1.PodDisruptionBudget{newPDB("web", "web", 0, 3, 3, 4)},
		VolumeAttachments: []*storagev1.VolumeAttachment{newVA("pv-x", testNode)},
	}, Options{})
	for _, e := range got.Events {
		if e.Type == EventStateReset {
			t.Fatalf("stored state distrusted: %s", e.Message)
		}
	}
	wantRows := []row{
		{Pod: "a", Action: ActionBlocked, Cause: CauseDisruptionBudget, RetryAt: now.Add(5 * time.Second)},
		{Pod: "b", Action: ActionBlocked, Cause: CauseDisruptionBudget, RetryAt: now.Add(5 * time.Second)},
	}
	if diff := cmp.Diff(wantRows, rows(got), cmpopts.EquateEmpty(), cmpopts.IgnoreFields(row{}, "ForceAt", "Grace")); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	wantWaits := []VolumeWait{{Pod: PodRef{Namespace: "default", Name: "x", UID: "uid-x"}, Phase: VolumeDetach, Volumes: []string{"pv-x"},
		Since: now.Add(-10 * time.Second), Until: now.Add(-10*time.Second + DefaultDetachTimeout)}}
	if diff := cmp.Diff(wantWaits, got.Volumes); diff != "" {
		t.Errorf("volume waits (-want +got):\n%s", diff)
	}
	next := got.State
	if !next.Start().Equal(now.Add(-time.Minute)) || !next.Deadline().Equal(now.Add(time.Hour)) || next.MaxEvictRetries() != 5 {
		t.Errorf("next state: start %v, deadline %v, max evict retries %d; want the stored ones",
			next.Start(), next.Deadline(), next.MaxEvictRetries())
	}
	wantRefusals := []podRefusals{{Pod: PodRef{Namespace: "default", Name: "a", UID: "uid-a"}, Count: 2}}
	if diff := cmp.Diff(wantRefusals, next.refusals); diff != "" {
		t.Errorf("refusals (-want +got):\n%s", diff)
	}
}
