package drain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

func TestPassEvictsThenFinishes(t *testing.T) {
	c := newCluster(t, newNode(testNode),
		newPod("web-1"), newPod("web-2", grace(5)), newPod("ds", daemonSet()), newPod("static", mirror()),
		newPod("other", onNode("node-2")))
	var events []string
	d := c.drainer(Options{OnEvent: func(e Event) { events = append(events, string(e.Type)+" "+e.Pod.Name) }})

	res := c.pass(d, State{})
	node, err := c.client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !node.Spec.Unschedulable {
		t.Error("node not cordoned")
	}
	wantCalls := []evictionCall{
		{Pod: "default/web-1", UID: "uid-web-1", Code: 201},
		{Pod: "default/web-2", UID: "uid-web-2", Code: 201},
	}
	if diff := cmp.Diff(wantCalls, c.evictionCalls(), cmpopts.SortSlices(func(a, b evictionCall) bool { return a.Pod < b.Pod })); diff != "" {
		t.Errorf("evictions (-want +got):\n%s", diff)
	}
	wantActions := map[string]Action{"ds": ActionSkip, "static": ActionSkip, "web-1": ActionWaitTermination, "web-2": ActionWaitTermination}
	if diff := cmp.Diff(wantActions, actions(res.Plan)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if res.Done || res.Evictions != 2 || !res.NextCheck.Equal(epoch.Add(DefaultPollInterval)) {
		t.Errorf("Done=%v Evictions=%d NextCheck=%v, want false, 2, now+poll", res.Done, res.Evictions, res.NextCheck)
	}
	if diff := cmp.Diff(map[Action]int{ActionWaitTermination: 2}, res.Remaining); diff != "" {
		t.Errorf("Remaining (-want +got):\n%s", diff)
	}

	// A second pass before the kubelet is done evicts nothing again.
	c.resetCalls()
	res = c.pass(d, res.State)
	if n := len(c.evictionCalls()); n != 0 {
		t.Errorf("second pass sent %d evictions, want 0", n)
	}

	c.kubelet()
	c.clock.Step(DefaultPollInterval)
	res = c.pass(d, res.State)
	if !res.Done || res.Message != "node node-1 is drained (2 pods left on it by policy)" {
		t.Errorf("Done=%v Message=%q", res.Done, res.Message)
	}
	if !res.State.completed.Equal(c.clock.Now()) {
		t.Errorf("State.Completed = %v, want now", res.State.completed)
	}
	wantEvents := []string{"EvictionStarted web-1", "EvictionStarted web-2", "PodGone web-1", "PodGone web-2"}
	if diff := cmp.Diff(wantEvents, events, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestPassEvictionOutcomes(t *testing.T) {
	tooMany := apierrors.NewTooManyRequests("slow down", 7)
	tests := []struct {
		name       string
		err        error
		wantAction Action
		wantCause  Cause
		wantRetry  time.Duration // from now; 0 means none
		wantErr    bool
		wantEvent  EventType
		wantCode   string
	}{
		{name: "not found", err: apierrors.NewNotFound(podsGVR.GroupResource(), "a"), wantAction: ActionGone, wantEvent: EventPodGone, wantCode: "404"},
		{name: "conflict", err: apierrors.NewConflict(podsGVR.GroupResource(), "a", errors.New("uid")), wantAction: ActionGone, wantEvent: EventPodGone, wantCode: "409"},
		{name: "429 with retry-after", err: tooMany, wantAction: ActionBlocked, wantCause: CauseTooManyRequests,
			wantRetry: 7 * time.Second, wantEvent: EventEvictionBlocked, wantCode: "429"},
		{name: "namespace terminating", err: &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden, Message: "namespace is terminating",
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}},
		}}, wantAction: ActionBlocked, wantCause: CauseNamespaceTerminating, wantRetry: time.Second, wantEvent: EventEvictionBlocked, wantCode: "403"},
		{name: "forbidden", err: apierrors.NewForbidden(podsGVR.GroupResource(), "a", errors.New("rbac")),
			wantAction: ActionEvict, wantErr: true, wantEvent: EventEvictionFailed, wantCode: "403"},
		{name: "no answer", err: errors.New("connection refused"), wantAction: ActionEvict, wantErr: true, wantEvent: EventEvictionFailed, wantCode: "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, newNode(testNode), newPod("a"))
			c.evictErr = func(*corev1.Pod) error { return tt.err }
			var got []Event
			d := c.drainer(Options{OnEvent: func(e Event) { got = append(got, e) }})
			res, err := d.Pass(context.Background(), testNode, State{})
			if (err != nil) != tt.wantErr {
				t.Fatalf("Pass error = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, tt.err) {
				t.Errorf("Pass error %v does not wrap %v", err, tt.err)
			}
			dec := res.Decisions[0]
			if dec.Action != tt.wantAction || dec.Cause != tt.wantCause {
				t.Errorf("decision = %s/%s, want %s/%s", dec.Action, dec.Cause, tt.wantAction, tt.wantCause)
			}
			var wantRetry time.Time
			if tt.wantRetry > 0 {
				wantRetry = epoch.Add(tt.wantRetry)
			}
			if !dec.RetryAt.Equal(wantRetry) {
				t.Errorf("RetryAt = %v, want %v", dec.RetryAt, wantRetry)
			}
			if len(got) != 1 || got[0].Type != tt.wantEvent {
				t.Errorf("events = %v, want one %s", got, tt.wantEvent)
			}
			if calls := c.evictionCalls(); len(calls) != 1 || calls[0].UID != "uid-a" {
				t.Errorf("eviction calls = %+v, want one with UID precondition uid-a", calls)
			}
			if code := statusCode(tt.err); code != tt.wantCode {
				t.Errorf("status code label = %q, want %q", code, tt.wantCode)
			}
		})
	}
}

// TestPassUIDPrecondition: the cache still shows the old pod, but the API
// server already has a replacement with the same name. The eviction must
// not hit the replacement.
func TestPassUIDPrecondition(t *testing.T) {
	old := newPod("db-0", withUID("uid-old"))
	c := newCluster(t, newNode(testNode), newPod("db-0", withUID("uid-new")))
	factory := informers.NewSharedInformerFactory(c.client, 0)
	podIndexer := factory.Core().V1().Pods().Informer().GetIndexer()
	if err := podIndexer.Add(old); err != nil {
		t.Fatal(err)
	}
	d := c.drainer(Options{Listers: Listers{Pods: podIndexer}})
	res := c.pass(d, State{})

	if calls := c.evictionCalls(); len(calls) != 1 || calls[0].UID != "uid-old" || calls[0].Code != 409 {
		t.Fatalf("eviction calls = %+v, want one for uid-old answered 409", calls)
	}
	if res.Decisions[0].Action != ActionGone {
		t.Errorf("decision = %s, want Gone", res.Decisions[0].Action)
	}
	if p := c.pod("default", "db-0"); p == nil || p.DeletionTimestamp != nil {
		t.Errorf("replacement pod was touched: %+v", p)
	}
}

// TestPassBudgetBackoff checks that a blocking budget costs one eviction
// request per backoff period, however often passes run.
func TestPassBudgetBackoff(t *testing.T) {
	c := newCluster(t, newNode(testNode),
		newPDB("web", "web", 1, 2, 3, 3), newPod("a"), newPod("b"), newPod("c"))
	d := c.drainer(Options{})

	// Budget allows 1: one eviction, the others wait without a request.
	res := c.pass(d, State{})
	if diff := cmp.Diff(map[Action]int{ActionWaitTermination: 1, ActionBlocked: 2}, res.Remaining); diff != "" {
		t.Fatalf("Remaining (-want +got):\n%s", diff)
	}
	if n := len(c.evictionCalls()); n != 1 {
		t.Fatalf("%d eviction requests, want 1", n)
	}

	// The status now allows none (the API server decremented it): one
	// probe, answered 429, starts the budget's backoff.
	c.resetCalls()
	res = c.pass(d, res.State)
	if calls := c.evictionCalls(); len(calls) != 1 || calls[0].Code != 429 {
		t.Fatalf("eviction calls = %+v, want one 429", calls)
	}
	wantBackoff := []backoffEntry{{Key: "pdb/default/web", Attempts: 1, Until: epoch.Add(time.Second), Cause: CauseDisruptionBudget}}
	if diff := cmp.Diff(wantBackoff, res.State.backoffs); diff != "" {
		t.Errorf("backoffs (-want +got):\n%s", diff)
	}
	if !res.NextCheck.Equal(epoch.Add(time.Second)) {
		t.Errorf("NextCheck = %v, want now+1s", res.NextCheck)
	}
	if !strings.Contains(res.Message, "blocked by PDB default/web (needs 2 healthy, has 3)") {
		t.Errorf("Message %q does not name the budget", res.Message)
	}

	// Passes during the backoff send nothing: no hot loop.
	c.resetCalls()
	for range 5 {
		res = c.pass(d, res.State)
	}
	if n := len(c.evictionCalls()); n != 0 {
		t.Fatalf("%d eviction requests during backoff, want 0", n)
	}

	// After it, one more probe; the backoff doubles, then caps.
	var waits []time.Duration
	for range 7 {
		c.clock.SetTime(res.State.backoffs[0].Until)
		c.resetCalls()
		res = c.pass(d, res.State)
		if n := len(c.evictionCalls()); n != 1 {
			t.Fatalf("%d eviction requests after the backoff, want 1", n)
		}
		waits = append(waits, res.State.backoffs[0].Until.Sub(c.clock.Now()))
	}
	wantWaits := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	if diff := cmp.Diff(wantWaits, waits); diff != "" {
		t.Errorf("backoff waits (-want +got):\n%s", diff)
	}

	// The first pod is gone and the budget recovers: the next eviction
	// succeeds and resets the backoff.
	c.kubelet()
	pdb := newPDB("web", "web", 1, 2, 3, 3)
	if err := c.client.Tracker().Update(pdbsGVR, pdb, "default"); err != nil {
		t.Fatal(err)
	}
	c.clock.SetTime(res.State.backoffs[0].Until)
	res = c.pass(d, res.State)
	if res.Evictions != 1 || len(res.State.backoffs) != 0 {
		t.Errorf("Evictions=%d Backoffs=%v, want 1 eviction and no backoff", res.Evictions, res.State.backoffs)
	}
}

func TestPassMisconfiguredBudget(t *testing.T) {
	c := newCluster(t, newNode(testNode), newPDB("strict", "web", 0, 2, 2, 2), newPod("a"), newPod("b"))
	d := c.drainer(Options{})
	plan, err := d.Plan(context.Background(), testNode)
	if err != nil {
		t.Fatal(err)
	}
	res := c.pass(d, State{})
	for _, p := range []Plan{plan, res.Plan} {
		if !strings.Contains(p.Message, "blocked by PDB default/strict (needs 2 healthy, has 2; misconfigured") {
			t.Errorf("Message %q does not name the misconfigured budget", p.Message)
		}
		for _, dec := range p.Decisions {
			if dec.Cause != CauseMisconfiguredPDB || len(dec.PDBs) != 1 || !dec.PDBs[0].Misconfigured {
				t.Errorf("decision %+v, want blocked by a misconfigured budget", dec)
			}
		}
	}
	if n := len(c.evictionCalls()); n != 0 {
		t.Errorf("%d eviction requests, want 0", n)
	}
}

func TestPassSeveralBudgetsRefusedByServer(t *testing.T) {
	// The planner cannot see the second budget (it lists from a cache that
	// lags); the API server refuses, and the pod backs off.
	c := newCluster(t, newNode(testNode), newPod("a"), newPDB("one", "web", 1, 0, 1, 1), newPDB("two", "web", 1, 0, 1, 1))
	factory := informers.NewSharedInformerFactory(c.client, 0)
	d := c.drainer(Options{Listers: Listers{PodDisruptionBudgets: factory.Policy().V1().PodDisruptionBudgets().Lister()}})
	res := c.pass(d, State{})
	dec := res.Decisions[0]
	if dec.Action != ActionBlocked || dec.Cause != CauseMultiplePDBs || dec.RetryAt.IsZero() {
		t.Errorf("decision = %+v, want blocked by several budgets with a retry time", dec)
	}
}

func TestPassForceDeleteTiming(t *testing.T) {
	c := newCluster(t, newNode(testNode), newPDB("strict", "web", 0, 3, 3, 3),
		newPod("long", grace(30)), newPod("short", grace(10)), newPod("zero", grace(0)))
	d := c.drainer(Options{Timeout: time.Minute})
	deadline := epoch.Add(time.Minute)

	st := State{}
	var forced []deletionCall
	// Run a pass every second up to past the deadline.
	for i := 0; i <= 65; i++ {
		res := c.pass(d, st)
		st = res.State
		if i == 0 && !st.deadline.Equal(deadline) {
			t.Fatalf("Deadline = %v, want %v", st.deadline, deadline)
		}
		forced = append(forced, c.deletionCalls()...)
		c.resetCalls()
		c.clock.Step(time.Second)
	}
	want := []deletionCall{
		{Pod: "default/long", UID: "uid-long", Grace: 30, At: deadline.Add(-30 * time.Second)},
		{Pod: "default/short", UID: "uid-short", Grace: 10, At: deadline.Add(-10 * time.Second)},
		{Pod: "default/zero", UID: "uid-zero", Grace: 1, At: deadline.Add(-1 * time.Second)},
	}
	if diff := cmp.Diff(want, forced); diff != "" {
		t.Errorf("force deletions (-want +got):\n%s", diff)
	}
	if n := len(c.evictionCalls()); n != 0 {
		t.Errorf("%d evictions, want 0 (misconfigured budget)", n)
	}
}

func TestPassForceDeleteWhenLate(t *testing.T) {
	// The controller was down: the first pass after the deadline deletes
	// with the minimum grace period.
	c := newCluster(t, newNode(testNode), newPod("a", grace(300)))
	d := c.drainer(Options{})
	res := c.pass(d, State{start: epoch.Add(-time.Hour), deadline: epoch.Add(-time.Minute)})
	want := []deletionCall{{Pod: "default/a", UID: "uid-a", Grace: 1, At: epoch}}
	if diff := cmp.Diff(want, c.deletionCalls()); diff != "" {
		t.Errorf("force deletions (-want +got):\n%s", diff)
	}
	if res.ForceDeletions != 1 || res.Decisions[0].Action != ActionWaitTermination {
		t.Errorf("ForceDeletions=%d action=%s", res.ForceDeletions, res.Decisions[0].Action)
	}
}

func TestPassGroupsInOrder(t *testing.T) {
	c := newCluster(t, newNode(testNode),
		newPod("a-first", order(-1)), newPod("b-plain"), newPod("c-critical", critical()), newPod("d-last", order(10)),
		newPod("e-ds", daemonSet()))
	d := c.drainer(Options{})
	var waves [][]string
	st := State{}
	for i := 0; i < 10; i++ {
		res := c.pass(d, st)
		st = res.State
		var wave []string
		for _, call := range c.evictionCalls() {
			wave = append(wave, call.Pod)
		}
		c.resetCalls()
		if len(wave) > 0 {
			waves = append(waves, wave)
		}
		if res.Done {
			break
		}
		c.kubelet()
		c.clock.Step(DefaultPollInterval)
	}
	want := [][]string{{"default/a-first"}, {"default/b-plain"}, {"default/c-critical"}, {"default/d-last"}}
	if diff := cmp.Diff(want, waves); diff != "" {
		t.Errorf("eviction waves (-want +got):\n%s", diff)
	}
	if c.pod("default", "e-ds") == nil {
		t.Error("DaemonSet pod was removed")
	}
}

func TestPassVolumes(t *testing.T) {
	objs := []runtime.Object{newNode(testNode)}
	for i := range 6 {
		pv := fmt.Sprintf("pv-%d", i)
		objs = append(objs, newPod(fmt.Sprintf("db-%d", i), withClaim("c-"+pv)), newPVC("c-"+pv, pv), newPV(pv, "vol-"+pv), newVA(pv, testNode))
	}
	c := newCluster(t, objs...)
	var events []string
	d := c.drainer(Options{
		Volumes: VolumeOptions{Parallelism: 3},
		OnEvent: func(e Event) { events = append(events, string(e.Type)+" "+e.Pod.Name) },
	})

	res := c.pass(d, State{})
	if res.Evictions != 3 || res.Remaining[ActionWaitVolumeSlot] != 3 {
		t.Fatalf("Evictions=%d Remaining=%v, want 3 evictions and 3 waiting for a slot", res.Evictions, res.Remaining)
	}
	// The pods go, their volumes stay attached: no slot frees up.
	c.kubelet()
	c.clock.Step(DefaultPollInterval)
	res = c.pass(d, res.State)
	if res.Evictions != 0 || len(res.Volumes) != 3 {
		t.Fatalf("Evictions=%d Volumes=%v, want 0 evictions and 3 detach waits", res.Evictions, res.Volumes)
	}
	// One volume detaches: one more eviction.
	c.deleteVA("pv-0", testNode)
	c.clock.Step(DefaultPollInterval)
	res = c.pass(d, res.State)
	if res.Evictions != 1 {
		t.Fatalf("Evictions=%d, want 1", res.Evictions)
	}
	for i := 1; i < 6; i++ {
		c.deleteVA(fmt.Sprintf("pv-%d", i), testNode)
	}
	for i := 0; i < 5 && !res.Done; i++ {
		c.kubelet()
		c.clock.Step(DefaultPollInterval)
		res = c.pass(d, res.State)
	}
	if !res.Done {
		t.Fatalf("not done: %s", res.Message)
	}
	detached := 0
	for _, e := range events {
		if strings.HasPrefix(e, string(EventVolumesDetached)) {
			detached++
		}
	}
	if detached != 6 {
		t.Errorf("%d VolumesDetached events, want 6: %v", detached, events)
	}
}

func TestPassVolumeIDs(t *testing.T) {
	node := newNode(testNode, attachedIDs("kubernetes.io/csi/disk.example.com^vol-a"))
	c := newCluster(t, node,
		newPod("a", withClaim("c-pv-a")), newPVC("c-pv-a", "pv-a"), newPV("pv-a", "vol-a"),
		newPod("nfs", withClaim("c-pv-nfs")), newPVC("c-pv-nfs", "pv-nfs"), newPV("pv-nfs", ""))
	asked := map[string]bool{}
	ids := VolumeIDFunc(func(_ context.Context, specs []*corev1.PersistentVolumeSpec) ([]string, error) {
		asked[specs[0].CSI.VolumeHandle] = true
		if specs[0].CSI.VolumeHandle == "" {
			return nil, nil // not ours
		}
		return []string{specs[0].CSI.VolumeHandle}, nil
	})
	d := c.drainer(Options{Volumes: VolumeOptions{IDs: ids}})
	res := c.pass(d, State{})
	c.kubelet()
	res = c.pass(d, res.State)
	// No VolumeAttachment, but the node status still lists vol-a.
	if len(res.Volumes) != 1 || res.Volumes[0].Volumes[0] != "pv-a" {
		t.Fatalf("Volumes = %+v, want a wait for pv-a only", res.Volumes)
	}
	if diff := cmp.Diff(map[string]bool{"": true, "vol-a": true}, asked); diff != "" {
		t.Errorf("asked (-want +got):\n%s", diff)
	}

	// A getter that cannot tell means: wait for everything, no error.
	d = c.drainer(Options{Volumes: VolumeOptions{IDs: VolumeIDFunc(func(context.Context, []*corev1.PersistentVolumeSpec) ([]string, error) {
		return nil, fmt.Errorf("driver: %w", errors.ErrUnsupported)
	})}})
	if _, err := d.Plan(context.Background(), testNode); err != nil {
		t.Errorf("Plan with an unsupported getter: %v", err)
	}
	// Any other error fails the pass.
	boom := errors.New("cloud down")
	d = c.drainer(Options{Volumes: VolumeOptions{IDs: VolumeIDFunc(func(context.Context, []*corev1.PersistentVolumeSpec) ([]string, error) {
		return nil, boom
	})}})
	c.add(newPod("b", withClaim("c-pv-a")))
	if _, err := d.Pass(context.Background(), testNode, State{}); !errors.Is(err, boom) {
		t.Errorf("Pass error = %v, want it to wrap %v", err, boom)
	}
}

// TestPassUnreachableNode is the fast path alone: the node has been
// NotReady for 10 minutes, but forcing after ForceAfter is disabled.
func TestPassUnreachableNode(t *testing.T) {
	node := newNode(testNode, notReadySinceAt(epoch.Add(-10*time.Minute)))
	c := newCluster(t, node,
		newPod("a", withClaim("c-pv-a")), newPVC("c-pv-a", "pv-a"), newVA("pv-a", testNode),
		newPod("stuck", terminating(epoch.Add(-time.Minute))))
	d := c.drainer(Options{Unreachable: UnreachableOptions{ForceAfter: -1}})
	res := c.pass(d, State{})
	calls := c.evictionCalls()
	if len(calls) != 1 || calls[0].Grace == nil || *calls[0].Grace != 1 {
		t.Fatalf("eviction calls = %+v, want one with grace 1", calls)
	}
	// The kubelet is gone: "a" stays terminating. Once past the skip-wait
	// time it counts as gone, and the volume is not waited for.
	c.clock.Step(DefaultSkipWaitAfter + 2*time.Second)
	res = c.pass(d, res.State)
	if !res.Done {
		t.Errorf("not done: %s", res.Message)
	}
}

// TestPassForcedUnreachableNode: a node NotReady for 10 minutes (past the
// default ForceAfter). Its pods are force-deleted; once none is left its
// VolumeAttachments are deleted (each with its UID, one Event each), and
// the drain is done once they are gone, or DetachTimeout after the
// deletion.
func TestPassForcedUnreachableNode(t *testing.T) {
	node := newNode(testNode, notReadySinceAt(epoch.Add(-10*time.Minute)))
	c := newCluster(t, node,
		newPod("a", withClaim("c-pv-a")), newPVC("c-pv-a", "pv-a"), newVA("pv-a", testNode),
		newVA("pv-orphan", testNode), newVA("pv-other", "node-2"),
		newPod("stuck", terminating(epoch.Add(-time.Minute))))
	// The external attacher's finalizer keeps a deleted attachment until
	// the volume is detached.
	var vaDeletes []string
	c.client.PrependReactor("delete", "volumeattachments", func(action k8stesting.Action) (bool, runtime.Object, error) {
		del := action.(k8stesting.DeleteActionImpl)
		uid := ""
		if p := del.DeleteOptions.Preconditions; p != nil && p.UID != nil {
			uid = string(*p.UID)
		}
		vaDeletes = append(vaDeletes, del.Name+" "+uid)
		obj, err := c.client.Tracker().Get(vasGVR, "", del.Name)
		if err != nil {
			return true, nil, err
		}
		va := obj.(*storagev1.VolumeAttachment).DeepCopy()
		va.DeletionTimestamp = &metav1.Time{Time: c.clock.Now()}
		return true, nil, c.client.Tracker().Update(vasGVR, va, "")
	})
	var events []string
	d := c.drainer(Options{OnEvent: func(e Event) { events = append(events, string(e.Type)+" "+strings.Join(e.Volumes, ",")) }})

	res := c.pass(d, State{})
	want := []deletionCall{{Pod: "default/a", UID: "uid-a", Grace: 1, At: epoch}}
	if diff := cmp.Diff(want, c.deletionCalls()); diff != "" {
		t.Errorf("force deletions (-want +got):\n%s", diff)
	}
	if n := len(c.evictionCalls()); n != 0 {
		t.Errorf("%d evictions on a forced drain, want 0", n)
	}
	if res.ForceReason != "node not Ready for more than 5m0s" || res.Decisions[0].Cause != CauseNodeNotReady {
		t.Errorf("ForceReason %q, cause %s", res.ForceReason, res.Decisions[0].Cause)
	}
	if len(vaDeletes) != 0 || res.Done {
		t.Fatalf("attachments deleted (%v) or done (%v) while a pod terminates", vaDeletes, res.Done)
	}

	// The kubelet is gone: "a" stays terminating and counts as gone after
	// SkipWaitAfter. Then the node's attachments go, the other node's stay.
	c.clock.Step(DefaultSkipWaitAfter + 2*time.Second)
	res = c.pass(d, res.State)
	wantDeletes := []string{"va-pv-a-node-1 uid-va-pv-a-node-1", "va-pv-orphan-node-1 uid-va-pv-orphan-node-1"}
	if diff := cmp.Diff(wantDeletes, vaDeletes); diff != "" {
		t.Errorf("VolumeAttachment deletions (-want +got):\n%s", diff)
	}
	if res.Done || res.AttachmentDeletions != 2 || res.ForceReason == "" {
		t.Errorf("Done=%v AttachmentDeletions=%d ForceReason=%q, want not done, 2, a reason", res.Done, res.AttachmentDeletions, res.ForceReason)
	}
	wantEvents := []string{"ForceDeleted ", "AttachmentDeleted pv-a", "AttachmentDeleted pv-orphan"}
	if diff := cmp.Diff(wantEvents, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// Still there, being deleted: waited for, not deleted again.
	c.clock.Step(DefaultPollInterval)
	res = c.pass(d, res.State)
	if len(vaDeletes) != 2 || res.Done || len(res.Volumes) != 1 || res.Volumes[0].Phase != VolumeForceDetach {
		t.Fatalf("deletes %v, Done=%v, Volumes=%+v: want the deleted attachments waited for", vaDeletes, res.Done, res.Volumes)
	}
	if !strings.Contains(res.Message, "va-pv-a-node-1") {
		t.Errorf("message %q does not name the attachments", res.Message)
	}

	// One is detached; the other outlives DetachTimeout.
	c.deleteVA("pv-a", testNode)
	c.clock.Step(DefaultDetachTimeout)
	res = c.pass(d, res.State)
	if !res.Done {
		t.Fatalf("not done after DetachTimeout: %s", res.Message)
	}
	if got := events[len(events)-1]; got != "DetachTimedOut pv-orphan" {
		t.Errorf("last event %q, want the detach timeout of pv-orphan", got)
	}
	c.clock.Step(time.Second)
	n := len(events)
	if res = c.pass(d, res.State); !res.Done || len(events) != n {
		t.Errorf("a pass after giving up: Done=%v, new events %v", res.Done, events[n:])
	}
}

func TestPassRefusedAndDrainRefuses(t *testing.T) {
	c := newCluster(t, newNode(testNode), newPod("bare", unmanaged()), newPod("web"))
	d := c.drainer(Options{RefuseUnmanaged: true})
	res, err := d.Drain(context.Background(), testNode)
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("Drain error = %v, want ErrRefused", err)
	}
	if n := len(c.evictionCalls()); n != 0 {
		t.Errorf("%d evictions, want 0", n)
	}
	if !strings.Contains(res.Message, "refused: default/bare") || !strings.Contains(err.Error(), "default/bare") {
		t.Errorf("message %q / error %q do not name the refused pod", res.Message, err)
	}
}

func TestUnknownNode(t *testing.T) {
	c := newCluster(t)
	d := c.drainer(Options{})
	ctx := context.Background()
	_, err := d.Plan(ctx, "nope")
	if !errors.Is(err, ErrNodeNotFound) {
		t.Errorf("Plan: %v, want ErrNodeNotFound", err)
	}
	if _, err = d.Pass(ctx, "nope", State{}); !errors.Is(err, ErrNodeNotFound) {
		t.Errorf("Pass: %v, want ErrNodeNotFound", err)
	}
	if _, err = d.Drain(ctx, "nope"); !errors.Is(err, ErrNodeNotFound) {
		t.Errorf("Drain: %v, want ErrNodeNotFound", err)
	}
	if err = d.Cordon(ctx, "nope"); !errors.Is(err, ErrNodeNotFound) {
		t.Errorf("Cordon: %v, want ErrNodeNotFound", err)
	}
	if err = d.Uncordon(ctx, "nope"); !errors.Is(err, ErrNodeNotFound) {
		t.Errorf("Uncordon: %v, want ErrNodeNotFound", err)
	}
	if !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("error %q does not name the node", err)
	}
}

func TestPassReturnsAPIErrors(t *testing.T) {
	boom := errors.New("etcd is on fire")
	for _, resource := range []string{"pods", "poddisruptionbudgets", "persistentvolumeclaims", "volumeattachments"} {
		t.Run(resource, func(t *testing.T) {
			// The claim is bound: the pass needs its attachments.
			c := newCluster(t, newNode(testNode), newPod("a", withClaim("c-pv-a")), newPVC("c-pv-a", "pv-a"))
			fail := func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, boom }
			c.client.PrependReactor("list", resource, fail)
			c.client.PrependReactor("get", resource, fail)
			res, err := c.drainer(Options{}).Pass(context.Background(), testNode, State{start: epoch})
			if !errors.Is(err, boom) {
				t.Fatalf("Pass error = %v, want it to wrap %v", err, boom)
			}
			if !res.State.start.Equal(epoch) {
				t.Errorf("State not handed back on error: %+v", res.State)
			}
		})
	}
}

func TestCordonUncordon(t *testing.T) {
	c := newCluster(t, newNode(testNode))
	d := c.drainer(Options{SkipCordon: true})
	ctx := context.Background()
	get := func() *corev1.Node {
		n, err := c.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	c.pass(d, State{})
	if get().Spec.Unschedulable {
		t.Error("SkipCordon: node was cordoned")
	}
	if err := d.Cordon(ctx, testNode); err != nil {
		t.Fatal(err)
	}
	if !get().Spec.Unschedulable {
		t.Error("Cordon did not cordon")
	}
	if err := d.Uncordon(ctx, testNode); err != nil {
		t.Fatal(err)
	}
	if get().Spec.Unschedulable {
		t.Error("Uncordon did not uncordon")
	}
	var patches []string
	for _, a := range c.client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			patches = append(patches, string(p.GetPatchType())+" "+string(p.GetPatch()))
		}
	}
	want := []string{
		`application/merge-patch+json {"spec":{"unschedulable":true}}`,
		`application/merge-patch+json {"spec":{"unschedulable":null}}`,
	}
	if diff := cmp.Diff(want, patches); diff != "" {
		t.Errorf("patches (-want +got):\n%s", diff)
	}
}

// TestListersNotModified runs passes entirely from informer caches and
// checks that the cached objects are unchanged.
func TestListersNotModified(t *testing.T) {
	objs := []runtime.Object{
		newNode(testNode), newPDB("web", "web", 1, 1, 2, 2),
		newPod("a", withClaim("c-pv-a")), newPod("b", order(1)), newPVC("c-pv-a", "pv-a"), newPV("pv-a", "vol-a"), newVA("pv-a", testNode),
	}
	c := newCluster(t, objs...)
	factory := informers.NewSharedInformerFactory(c.client, 0)
	pods := factory.Core().V1().Pods()
	if err := AddNodeNameIndex(pods.Informer()); err != nil {
		t.Fatal(err)
	}
	listers := Listers{
		Pods:                   pods.Informer().GetIndexer(),
		Nodes:                  factory.Core().V1().Nodes().Lister(),
		PodDisruptionBudgets:   factory.Policy().V1().PodDisruptionBudgets().Lister(),
		PersistentVolumeClaims: factory.Core().V1().PersistentVolumeClaims().Lister(),
		PersistentVolumes:      factory.Core().V1().PersistentVolumes().Lister(),
		VolumeAttachments:      factory.Storage().V1().VolumeAttachments().Informer().GetIndexer(),
	}
	startFactory(t, factory)
	var cached []runtime.Object
	for _, inf := range []interface{ List() []any }{
		pods.Informer().GetStore(), factory.Core().V1().Nodes().Informer().GetStore(),
		factory.Policy().V1().PodDisruptionBudgets().Informer().GetStore(),
		factory.Core().V1().PersistentVolumeClaims().Informer().GetStore(),
		factory.Core().V1().PersistentVolumes().Informer().GetStore(),
		factory.Storage().V1().VolumeAttachments().Informer().GetStore(),
	} {
		for _, o := range inf.List() {
			cached = append(cached, o.(runtime.Object))
		}
	}
	before := make([]runtime.Object, len(cached))
	for i, o := range cached {
		before[i] = o.DeepCopyObject()
	}

	ids := VolumeIDFunc(func(_ context.Context, specs []*corev1.PersistentVolumeSpec) ([]string, error) {
		specs[0].CSI.VolumeHandle = "scribbled" // a careless driver
		return []string{"vol-a"}, nil
	})
	d := c.drainer(Options{Listers: listers, Volumes: VolumeOptions{IDs: ids}})
	c.client.ClearActions()
	st := State{}
	for range 3 {
		res := c.pass(d, st)
		st = res.State
	}
	if diff := cmp.Diff(before, cached); diff != "" {
		t.Errorf("cached objects changed (-before +after):\n%s", diff)
	}
	for _, a := range c.client.Actions() {
		if a.GetVerb() == "list" || a.GetVerb() == "get" {
			t.Errorf("API read despite listers: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// TestPassAPIRequests counts the API requests of one pass. With every
// lister set (ListersFromFactory) the pass reads nothing from the API
// server: it only cordons and evicts. Without listers it reads what the
// plan needs, and no VolumeAttachments when nothing needs them.
func TestPassAPIRequests(t *testing.T) {
	withVolume := []runtime.Object{
		newNode(testNode), newPDB("web", "web", 1, 1, 2, 2),
		newPod("a", withClaim("c-pv-a")), newPod("b"), newPod("c", inNamespace("team"), app("other")),
		newPVC("c-pv-a", "pv-a"), newPV("pv-a", "vol-a"), newVA("pv-a", testNode), newVA("pv-x", "node-2"),
	}
	withoutVolume := []runtime.Object{
		newNode(testNode), newPod("a", withClaim("c-unbound")), newPod("b"), newVA("pv-x", "node-2"),
	}
	ids := VolumeIDFunc(func(_ context.Context, specs []*corev1.PersistentVolumeSpec) ([]string, error) {
		return []string{specs[0].CSI.VolumeHandle}, nil
	})
	tests := []struct {
		name    string
		objs    []runtime.Object
		listers bool
		want    []string
	}{
		{
			name:    "listers",
			objs:    withVolume,
			listers: true,
			want:    []string{"create pods/eviction default/a", "create pods/eviction team/c", "patch nodes node-1"},
		},
		{
			name: "client",
			objs: withVolume,
			want: []string{
				"create pods/eviction default/a", "create pods/eviction team/c",
				"get nodes node-1", "get persistentvolumeclaims default/c-pv-a", "get persistentvolumes pv-a",
				"list poddisruptionbudgets default", "list poddisruptionbudgets team", "list pods",
				"list volumeattachments", "patch nodes node-1",
			},
		},
		{
			name: "client, no bound claim: no VolumeAttachments listed",
			objs: withoutVolume,
			want: []string{
				"create pods/eviction default/a", "create pods/eviction default/b",
				"get nodes node-1", "get persistentvolumeclaims default/c-unbound",
				"list poddisruptionbudgets default", "list pods", "patch nodes node-1",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, tt.objs...)
			opts := Options{Volumes: VolumeOptions{IDs: ids}}
			if tt.listers {
				factory := informers.NewSharedInformerFactory(c.client, 0)
				listers, err := ListersFromFactory(factory)
				if err != nil {
					t.Fatal(err)
				}
				opts.Listers = listers
				startFactory(t, factory)
			}
			d := c.drainer(opts)
			c.client.ClearActions()
			res := c.pass(d, State{})
			if res.Evictions != 2 {
				t.Fatalf("%d evictions, want 2: %s", res.Evictions, res.Message)
			}
			var got []string
			for _, a := range c.client.Actions() {
				// A pass never watches: a watch is an informer's, which
				// may start just after its cache synced.
				if a.GetVerb() != "watch" {
					got = append(got, describeAction(a))
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("API requests of one pass (-want +got):\n%s", diff)
			}
			t.Logf("%s: %d API requests, %d of them reads", tt.name, len(got), countReads(c.client.Actions()))
		})
	}
}

// describeAction renders an action as "verb resource[/subresource]
// [namespace/]name"; lists name no object.
func describeAction(a k8stesting.Action) string {
	what := a.GetResource().Resource
	if sub := a.GetSubresource(); sub != "" {
		what += "/" + sub
	}
	name := ""
	switch a := a.(type) {
	case k8stesting.GetAction:
		name = a.GetName()
	case k8stesting.PatchAction:
		name = a.GetName()
	case k8stesting.DeleteAction:
		name = a.GetName()
	case k8stesting.CreateAction:
		if m, err := meta.Accessor(a.GetObject()); err == nil {
			name = m.GetName()
		}
	}
	if ns := a.GetNamespace(); ns != "" {
		name = strings.TrimSuffix(ns+"/"+name, "/")
	}
	return strings.TrimSpace(a.GetVerb() + " " + what + " " + name)
}

func countReads(actions []k8stesting.Action) int {
	n := 0
	for _, a := range actions {
		switch a.GetVerb() {
		case "get", "list", "watch":
			n++
		}
	}
	return n
}

// TestListVolumeAttachments: the node's attachments from an indexer with
// the node index, from one without (a scan), and from the client, plus
// those elsewhere of the volumes asked for.
func TestListVolumeAttachments(t *testing.T) {
	objs := []runtime.Object{newNode(testNode), newVA("pv-a", testNode), newVA("pv-b", testNode), newVA("pv-a", "node-2"), newVA("pv-c", "node-2")}
	indexer := func(withIndex bool) cache.Indexer {
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		if withIndex {
			inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &storagev1.VolumeAttachment{}, 0, cache.Indexers{})
			if err := AddVolumeAttachmentNodeIndex(inf); err != nil {
				t.Fatal(err)
			}
			if err := AddVolumeAttachmentNodeIndex(inf); err != nil { // twice is fine
				t.Fatal(err)
			}
			idx = inf.GetIndexer()
		}
		for _, o := range objs {
			if va, ok := o.(*storagev1.VolumeAttachment); ok {
				if err := idx.Add(va); err != nil {
					t.Fatal(err)
				}
			}
		}
		return idx
	}
	tests := []struct {
		name      string
		listers   Listers
		elsewhere map[string]bool
		want      []string
	}{
		{name: "node index", listers: Listers{VolumeAttachments: indexer(true)}, want: []string{"va-pv-a-node-1", "va-pv-b-node-1"}},
		{name: "scan", listers: Listers{VolumeAttachments: indexer(false)}, want: []string{"va-pv-a-node-1", "va-pv-b-node-1"}},
		{name: "client", want: []string{"va-pv-a-node-1", "va-pv-b-node-1"}},
		{name: "node index and elsewhere", listers: Listers{VolumeAttachments: indexer(true)}, elsewhere: map[string]bool{"pv-a": true},
			want: []string{"va-pv-a-node-1", "va-pv-a-node-2", "va-pv-b-node-1"}},
		{name: "client and elsewhere", elsewhere: map[string]bool{"pv-a": true},
			want: []string{"va-pv-a-node-1", "va-pv-a-node-2", "va-pv-b-node-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, objs...)
			d := c.drainer(Options{Listers: tt.listers})
			vas, err := d.listVolumeAttachments(context.Background(), testNode, tt.elsewhere)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, va := range vas {
				got = append(got, va.Name)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("attachments (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	c := newCluster(t)
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New(nil) succeeded")
	}
	_, err := New(c.client, Options{Timeout: -time.Second, EvictionConcurrency: -1, Filters: []Filter{nil}})
	for _, want := range []string{"Timeout", "EvictionConcurrency", "Filters[0]"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New error %v does not mention %s", err, want)
		}
	}
	if _, err := New(c.client, Options{BackoffInitial: time.Minute, BackoffMax: time.Second}); err == nil {
		t.Error("BackoffMax below BackoffInitial accepted")
	}
}

func TestStateJSONRoundTrip(t *testing.T) {
	c := newCluster(t, newNode(testNode), newPDB("web", "web", 0, 1, 1, 2), newPod("a"), newPod("b", withClaim("c-pv-b")),
		newPVC("c-pv-b", "pv-b"), newVA("pv-b", testNode))
	res := c.pass(c.drainer(Options{Timeout: time.Hour}), State{})
	data, err := jsonRoundTrip(res.State)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(res.State, data, stateFields); diff != "" {
		t.Errorf("state after a JSON round trip (-want +got):\n%s", diff)
	}
}

func TestListPodsPaginates(t *testing.T) {
	c := newCluster(t, newNode(testNode))
	page := func(cont string, names ...string) *corev1.PodList {
		l := &corev1.PodList{ListMeta: metav1.ListMeta{Continue: cont}}
		for _, n := range names {
			l.Items = append(l.Items, *newPod(n))
		}
		return l
	}
	var seen []string
	expired := false
	c.client.PrependReactor("list", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		opts := action.(k8stesting.ListActionImpl).ListOptions
		seen = append(seen, fmt.Sprintf("limit=%d continue=%q fields=%s", opts.Limit, opts.Continue, opts.FieldSelector))
		switch opts.Continue {
		case "":
			return true, page("t1", "a", "b"), nil
		case "t1":
			if !expired {
				expired = true
				return true, nil, apierrors.NewResourceExpired("continue token too old")
			}
			return true, page("", "c", "elsewhere"), nil
		}
		return true, nil, fmt.Errorf("unexpected continue %q", opts.Continue)
	})
	d := c.drainer(Options{PageSize: 2})
	pods, err := d.listPods(context.Background(), testNode)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{"a", "b", "c", "elsewhere"}, names); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
	want := []string{
		`limit=2 continue="" fields=spec.nodeName=node-1`,
		`limit=2 continue="t1" fields=spec.nodeName=node-1`,
		`limit=2 continue="" fields=spec.nodeName=node-1`, // restarted after the token expired
		`limit=2 continue="t1" fields=spec.nodeName=node-1`,
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("LIST requests (-want +got):\n%s", diff)
	}
}

func TestPassPicksUpNewPods(t *testing.T) {
	c := newCluster(t, newNode(testNode), newPod("a"))
	d := c.drainer(Options{})
	res := c.pass(d, State{})
	c.kubelet()
	// A pod that was scheduled just before the cordon shows up late.
	c.add(newPod("late-arrival"))
	c.clock.Step(DefaultPollInterval)
	res = c.pass(d, res.State)
	if res.Done || res.Evictions != 1 || res.Decisions[0].Pod.Name != "late-arrival" {
		t.Fatalf("Done=%v Evictions=%d decisions=%+v", res.Done, res.Evictions, res.Decisions)
	}
	c.kubelet()
	c.clock.Step(DefaultPollInterval)
	if res = c.pass(d, res.State); !res.Done {
		t.Errorf("not done: %s", res.Message)
	}
}

// startFactory starts the informers of factory until the test ends and
// waits for their caches.
func startFactory(t *testing.T, factory informers.SharedInformerFactory) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("cache of %v did not sync", typ)
		}
	}
}

// TestFactoryInformersAreTheListersOnes: FactoryInformers names exactly
// the informers ListersFromFactory reads from, so a caller that waits for
// them waits for every cache a pass reads.
func TestFactoryInformersAreTheListersOnes(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	if _, err := ListersFromFactory(factory); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	started := factory.WaitForCacheSync(ctx.Done())
	named := FactoryInformers(factory)
	// Starting again starts any informer FactoryInformers added: there
	// must be none, and as many as ListersFromFactory uses.
	factory.Start(ctx.Done())
	if got := len(factory.WaitForCacheSync(ctx.Done())); got != len(started) || len(named) != len(started) {
		t.Errorf("ListersFromFactory uses %d informers, FactoryInformers names %d (factory now has %d)", len(started), len(named), got)
	}
}
