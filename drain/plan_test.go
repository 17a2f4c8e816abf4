package drain

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// row is the part of a Decision the table tests compare.
type row struct {
	Pod     string
	Action  Action
	Cause   Cause
	Group   Group
	RetryAt time.Time
	ForceAt time.Time
	Grace   time.Duration
	Volumes []string
}

func rows(p Plan) []row {
	out := make([]row, 0, len(p.Decisions))
	for _, d := range p.Decisions {
		out = append(out, row{
			Pod: d.Pod.Name, Action: d.Action, Cause: d.Cause, Group: d.Group,
			RetryAt: d.RetryAt, ForceAt: d.ForceAt, Grace: d.GracePeriod, Volumes: d.Volumes,
		})
	}
	return out
}

var (
	g0         = Group{}
	g0Critical = Group{Tier: TierCritical}
	g0DS       = Group{Tier: TierDaemonSet}
)

func TestDecideActions(t *testing.T) {
	now := epoch
	healthyButNotAllowed := newPDB("web", "web", 0, 3, 2, 3) // one pod down: not misconfigured
	tests := []struct {
		name  string
		node  *corev1.Node
		pods  []*corev1.Pod
		pdbs  []*policyv1.PodDisruptionBudget
		opts  Options
		state State
		want  []row
	}{
		{
			name: "skip rules",
			pods: []*corev1.Pod{
				newPod("a-mirror", mirror()),
				newPod("b-done", phase(corev1.PodSucceeded)),
				newPod("c-failed", phase(corev1.PodFailed)),
				newPod("d-ds", daemonSet()),
				newPod("e-annotated", annotated(PolicyAnnotation, "skip")),
				newPod("f-web"),
				newPod("g-elsewhere", onNode("node-2")),
			},
			want: []row{
				{Pod: "a-mirror", Action: ActionSkip, Cause: CauseMirrorPod},
				{Pod: "b-done", Action: ActionSkip, Cause: CauseTerminal},
				{Pod: "c-failed", Action: ActionSkip, Cause: CauseTerminal},
				{Pod: "d-ds", Action: ActionSkip, Cause: CauseDaemonSet},
				{Pod: "e-annotated", Action: ActionSkip, Cause: CauseAnnotation},
				{Pod: "f-web", Action: ActionEvict},
			},
		},
		{
			name: "daemonset pods drained last when asked",
			opts: Options{DrainDaemonSets: true},
			pods: []*corev1.Pod{newPod("ds", daemonSet()), newPod("web"), newPod("ds-critical", daemonSet(), critical())},
			want: []row{
				{Pod: "ds", Action: ActionWaitGroup, Group: g0DS},
				{Pod: "ds-critical", Action: ActionWaitGroup, Group: Group{Tier: TierCriticalDaemonSet}},
				{Pod: "web", Action: ActionEvict},
			},
		},
		{
			name: "a refused pod holds the whole drain",
			opts: Options{RefuseUnmanaged: true, Timeout: time.Second},
			pods: []*corev1.Pod{newPod("bare", unmanaged()), newPod("web", grace(1))},
			want: []row{
				{Pod: "bare", Action: ActionRefuse, Cause: CauseUnmanaged},
				{Pod: "web", Action: ActionBlocked, Cause: CauseRefusedPods, Group: g0},
			},
		},
		{
			name: "emptyDir refused when asked, evicted by default",
			opts: Options{RefuseLocalStorage: true},
			pods: []*corev1.Pod{newPod("scratch", emptyDir())},
			want: []row{{Pod: "scratch", Action: ActionRefuse, Cause: CauseLocalStorage}},
		},
		{
			name: "emptyDir and unmanaged pods are evicted by default",
			pods: []*corev1.Pod{newPod("bare", unmanaged()), newPod("scratch", emptyDir())},
			want: []row{{Pod: "bare", Action: ActionEvict}, {Pod: "scratch", Action: ActionEvict}},
		},
		{
			name: "annotation drain overrides the daemonset default",
			pods: []*corev1.Pod{newPod("ds", daemonSet(), annotated(PolicyAnnotation, "drain"))},
			want: []row{{Pod: "ds", Action: ActionEvict, Group: g0DS}},
		},
		{
			name: "filters decide after the annotation",
			opts: Options{Filters: []Filter{
				func(p *corev1.Pod) (Policy, string) {
					if p.Labels["app"] == "cache" {
						return PolicySkip, "caches stay"
					}
					return "", ""
				},
				func(p *corev1.Pod) (Policy, string) {
					if p.Labels["app"] == "db" {
						return PolicyRefuse, "databases are moved by hand"
					}
					return "", ""
				},
			}},
			pods: []*corev1.Pod{newPod("cache", app("cache")), newPod("cache-forced", app("cache"), annotated(PolicyAnnotation, "drain"))},
			want: []row{
				{Pod: "cache", Action: ActionSkip, Cause: CauseFilter},
				{Pod: "cache-forced", Action: ActionEvict, Cause: ""},
			},
		},
		{
			name: "order groups: lowest order first, then tiers",
			pods: []*corev1.Pod{
				newPod("a-first", order(-5)),
				newPod("b-plain"),
				newPod("c-critical", critical()),
				newPod("d-late", order(10)),
				newPod("e-bad-order", annotated(OrderAnnotation, "soon")),
			},
			want: []row{
				{Pod: "a-first", Action: ActionEvict, Group: Group{Order: -5}},
				{Pod: "b-plain", Action: ActionWaitGroup, Group: g0},
				{Pod: "c-critical", Action: ActionWaitGroup, Group: g0Critical},
				{Pod: "d-late", Action: ActionWaitGroup, Group: Group{Order: 10}},
				{Pod: "e-bad-order", Action: ActionWaitGroup, Group: g0},
			},
		},
		{
			name: "wait-completed pods are never evicted but hold their group",
			pods: []*corev1.Pod{
				newPod("job", annotated(PolicyAnnotation, "wait-completed")),
				newPod("late", order(1)),
			},
			want: []row{
				{Pod: "job", Action: ActionWaitCompletion, Cause: CauseAnnotation, Group: g0},
				{Pod: "late", Action: ActionWaitGroup, Group: Group{Order: 1}},
			},
		},
		{
			name: "terminating pods are waited for, not evicted again",
			pods: []*corev1.Pod{newPod("going", terminating(now.Add(10*time.Second))), newPod("late", order(1))},
			want: []row{
				{Pod: "going", Action: ActionWaitTermination, Group: g0},
				{Pod: "late", Action: ActionWaitGroup, Group: Group{Order: 1}},
			},
		},
		{
			name: "a budget hands out no more evictions than it allows",
			pdbs: []*policyv1.PodDisruptionBudget{newPDB("web", "web", 2, 3, 5, 5)},
			pods: []*corev1.Pod{newPod("a"), newPod("b"), newPod("c"), newPod("d"), newPod("e-sick", notReady())},
			want: []row{
				{Pod: "a", Action: ActionEvict},
				{Pod: "b", Action: ActionEvict},
				{Pod: "c", Action: ActionBlocked, Cause: CauseDisruptionBudget},
				{Pod: "d", Action: ActionBlocked, Cause: CauseDisruptionBudget},
				// Unhealthy pods are left to the API server's unhealthy-pod policy.
				{Pod: "e-sick", Action: ActionEvict},
			},
		},
		{
			name: "a budget that allows none is probed with one eviction",
			pdbs: []*policyv1.PodDisruptionBudget{healthyButNotAllowed},
			pods: []*corev1.Pod{newPod("a"), newPod("b")},
			want: []row{
				{Pod: "a", Action: ActionEvict},
				{Pod: "b", Action: ActionBlocked, Cause: CauseDisruptionBudget},
			},
		},
		{
			name: "a misconfigured budget is reported, never probed",
			pdbs: []*policyv1.PodDisruptionBudget{newPDB("strict", "web", 0, 2, 2, 2)},
			pods: []*corev1.Pod{newPod("a"), newPod("b")},
			want: []row{
				{Pod: "a", Action: ActionBlocked, Cause: CauseMisconfiguredPDB},
				{Pod: "b", Action: ActionBlocked, Cause: CauseMisconfiguredPDB},
			},
		},
		{
			name: "several budgets are reported, never tried",
			pdbs: []*policyv1.PodDisruptionBudget{newPDB("one", "web", 5, 1, 5, 5), newPDB("two", "web", 5, 1, 5, 5)},
			pods: []*corev1.Pod{newPod("a")},
			want: []row{{Pod: "a", Action: ActionBlocked, Cause: CauseMultiplePDBs}},
		},
		{
			name:  "a budget in backoff holds back all its healthy pods",
			pdbs:  []*policyv1.PodDisruptionBudget{healthyButNotAllowed},
			state: State{backoffs: []backoffEntry{{Key: "pdb/default/web", Attempts: 2, Until: now.Add(5 * time.Second), Cause: CauseDisruptionBudget}}},
			pods:  []*corev1.Pod{newPod("a"), newPod("b"), newPod("c-sick", notReady())},
			want: []row{
				{Pod: "a", Action: ActionBlocked, Cause: CauseDisruptionBudget, RetryAt: now.Add(5 * time.Second)},
				{Pod: "b", Action: ActionBlocked, Cause: CauseDisruptionBudget, RetryAt: now.Add(5 * time.Second)},
				{Pod: "c-sick", Action: ActionEvict},
			},
		},
		{
			// The budget has recovered since the 429: one pod goes now,
			// the timer stays for the rest.
			name:  "a budget in backoff that allows a disruption again lets as many pods go as it allows",
			pdbs:  []*policyv1.PodDisruptionBudget{newPDB("web", "web", 1, 2, 3, 3)},
			state: State{backoffs: []backoffEntry{{Key: "pdb/default/web", Attempts: 2, Until: now.Add(5 * time.Second), Cause: CauseDisruptionBudget}}},
			pods:  []*corev1.Pod{newPod("a"), newPod("b"), newPod("c-sick", notReady())},
			want: []row{
				{Pod: "a", Action: ActionEvict},
				{Pod: "b", Action: ActionBlocked, Cause: CauseDisruptionBudget, RetryAt: now.Add(5 * time.Second)},
				{Pod: "c-sick", Action: ActionEvict},
			},
		},
		{
			name: "a budget status of an older generation does not cut a backoff short",
			pdbs: []*policyv1.PodDisruptionBudget{func() *policyv1.PodDisruptionBudget {
				pdb := newPDB("web", "web", 1, 2, 3, 3)
				pdb.Generation = 2
				return pdb
			}()},
			state: State{backoffs: []backoffEntry{{Key: "pdb/default/web", Attempts: 2, Until: now.Add(5 * time.Second), Cause: CauseDisruptionBudget}}},
			pods:  []*corev1.Pod{newPod("a"), newPod("b")},
			want: []row{
				{Pod: "a", Action: ActionBlocked, Cause: CauseDisruptionBudget, RetryAt: now.Add(5 * time.Second)},
				{Pod: "b", Action: ActionBlocked, Cause: CauseDisruptionBudget, RetryAt: now.Add(5 * time.Second)},
			},
		},
		{
			name:  "an expired backoff lets the probe through",
			pdbs:  []*policyv1.PodDisruptionBudget{healthyButNotAllowed},
			state: State{backoffs: []backoffEntry{{Key: "pdb/default/web", Attempts: 2, Until: now}}},
			pods:  []*corev1.Pod{newPod("a"), newPod("b")},
			want: []row{
				{Pod: "a", Action: ActionEvict},
				{Pod: "b", Action: ActionBlocked, Cause: CauseDisruptionBudget},
			},
		},
		{
			name:  "a pod backoff after 429 without a known budget",
			state: State{backoffs: []backoffEntry{{Key: "pod/uid-a", Attempts: 1, Until: now.Add(time.Second)}}},
			pods:  []*corev1.Pod{newPod("a"), newPod("b")},
			want: []row{
				{Pod: "a", Action: ActionBlocked, Cause: CauseTooManyRequests, RetryAt: now.Add(time.Second)},
				{Pod: "b", Action: ActionEvict},
			},
		},
		{
			name: "eviction grace override",
			opts: Options{GracePeriod: 5 * time.Second},
			pods: []*corev1.Pod{newPod("a")},
			want: []row{{Pod: "a", Action: ActionEvict, Grace: 5 * time.Second}},
		},
		{
			name:  "force deletion at deadline minus grace, whatever the group",
			state: State{start: now.Add(-time.Minute), deadline: now.Add(20 * time.Second)},
			pdbs:  []*policyv1.PodDisruptionBudget{newPDB("strict", "web", 0, 4, 4, 4)},
			pods: []*corev1.Pod{
				newPod("a-long", grace(30)),
				newPod("b-short", grace(10)),
				newPod("c-zero", grace(0)),
				newPod("d-later-group", grace(60), order(5)),
				newPod("e-skipped", grace(60), daemonSet()),
			},
			want: []row{
				{Pod: "a-long", Action: ActionForceDelete, Cause: CauseDeadline, ForceAt: now.Add(-10 * time.Second), Grace: 20 * time.Second},
				{Pod: "b-short", Action: ActionBlocked, Cause: CauseMisconfiguredPDB, ForceAt: now.Add(10 * time.Second)},
				{Pod: "c-zero", Action: ActionBlocked, Cause: CauseMisconfiguredPDB, ForceAt: now.Add(19 * time.Second)},
				{Pod: "d-later-group", Action: ActionForceDelete, Cause: CauseDeadline, Group: Group{Order: 5},
					ForceAt: now.Add(-40 * time.Second), Grace: 20 * time.Second},
				{Pod: "e-skipped", Action: ActionSkip, Cause: CauseDaemonSet},
			},
		},
		{
			name:  "past the deadline the grace is one second",
			state: State{start: now.Add(-time.Minute), deadline: now.Add(-5 * time.Second)},
			pods:  []*corev1.Pod{newPod("a", grace(30))},
			want: []row{
				{Pod: "a", Action: ActionForceDelete, Cause: CauseDeadline, ForceAt: now.Add(-35 * time.Second), Grace: time.Second},
			},
		},
		{
			name:  "a terminating pod that would outlive the deadline is deleted again",
			state: State{start: now.Add(-time.Minute), deadline: now.Add(5 * time.Second)},
			pods: []*corev1.Pod{
				newPod("outlives", grace(30), terminating(now.Add(25*time.Second))),
				newPod("in-time", grace(30), terminating(now.Add(3*time.Second))),
			},
			want: []row{
				{Pod: "in-time", Action: ActionWaitTermination, ForceAt: now.Add(-25 * time.Second)},
				{Pod: "outlives", Action: ActionForceDelete, Cause: CauseDeadline, ForceAt: now.Add(-25 * time.Second), Grace: 5 * time.Second},
			},
		},
		{
			// ForceAt: NotReady since now-2m, forced after 5m, minus the
			// default grace of 30s.
			name: "unreachable node: short grace, stuck pods count as gone",
			node: newNode(testNode, notReadySinceAt(now.Add(-2*time.Minute))),
			pods: []*corev1.Pod{
				newPod("a"),
				newPod("b-stuck", terminating(now.Add(-30*time.Second))),
				newPod("c-recent", terminating(now.Add(-5*time.Second))),
			},
			want: []row{
				{Pod: "a", Action: ActionEvict, Grace: time.Second, ForceAt: now.Add(150 * time.Second)},
				{Pod: "b-stuck", Action: ActionSkip, Cause: CauseStuckTerminating},
				{Pod: "c-recent", Action: ActionWaitTermination, ForceAt: now.Add(150 * time.Second)},
			},
		},
		{
			name: "not ready for less than the threshold: normal drain",
			node: newNode(testNode, notReadySinceAt(now.Add(-30*time.Second))),
			pods: []*corev1.Pod{newPod("a"), newPod("b", terminating(now.Add(-5*time.Minute)))},
			want: []row{
				{Pod: "a", Action: ActionEvict, ForceAt: now.Add(4 * time.Minute)},
				{Pod: "b", Action: ActionWaitTermination, ForceAt: now.Add(4 * time.Minute)},
			},
		},
		{
			name: "fast path disabled, forced after the node was NotReady for ForceAfter",
			opts: Options{Unreachable: UnreachableOptions{After: -1}},
			node: newNode(testNode, notReadySinceAt(now.Add(-time.Hour))),
			pods: []*corev1.Pod{newPod("a")},
			want: []row{{Pod: "a", Action: ActionForceDelete, Cause: CauseNodeNotReady,
				ForceAt: now.Add(-time.Hour + DefaultUnreachableForceAfter - 30*time.Second), Grace: time.Second}},
		},
		{
			name: "fast path and force both disabled",
			opts: Options{Unreachable: UnreachableOptions{After: -1, ForceAfter: -1}},
			node: newNode(testNode, notReadySinceAt(now.Add(-time.Hour))),
			pods: []*corev1.Pod{newPod("a")},
			want: []row{{Pod: "a", Action: ActionEvict}},
		},
		{
			name: "NotReady for ForceAfter minus the grace: force-deleted like at the deadline, budgets or not",
			opts: Options{Unreachable: UnreachableOptions{ForceAfter: 3 * time.Minute}},
			node: newNode(testNode, notReadySinceAt(now.Add(-3*time.Minute+10*time.Second))),
			pdbs: []*policyv1.PodDisruptionBudget{newPDB("strict", "web", 0, 2, 2, 2)},
			pods: []*corev1.Pod{newPod("a-long", grace(30)), newPod("b-short", grace(5))},
			want: []row{
				{Pod: "a-long", Action: ActionForceDelete, Cause: CauseNodeNotReady, ForceAt: now.Add(-20 * time.Second), Grace: 10 * time.Second},
				{Pod: "b-short", Action: ActionBlocked, Cause: CauseMisconfiguredPDB, ForceAt: now.Add(5 * time.Second)},
			},
		},
		{
			name:  "the caller's deadline wins when it is earlier than ForceAfter",
			state: State{start: now.Add(-time.Minute), deadline: now.Add(10 * time.Second)},
			node:  newNode(testNode, notReadySinceAt(now.Add(-2*time.Minute))),
			pods:  []*corev1.Pod{newPod("a", grace(30))},
			want: []row{{Pod: "a", Action: ActionForceDelete, Cause: CauseDeadline,
				ForceAt: now.Add(-20 * time.Second), Grace: 10 * time.Second}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := tt.node
			if node == nil {
				node = newNode(testNode)
			}
			snap := Snapshot{Node: node, Pods: tt.pods, PDBs: tt.pdbs, Now: now, State: begun(tt.state, now)}
			got := Decide(snap, tt.opts)
			if diff := cmp.Diff(tt.want, rows(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("decisions (-want +got):\n%s\nmessage: %s", diff, got.Message)
			}
		})
	}
}

// volumeSnap builds a snapshot in which pod i uses claim "c-<pv>" bound to
// the persistent volume pv.
func volumeSnap(now time.Time, pods []*corev1.Pod, vas []*storagev1.VolumeAttachment, state State) Snapshot {
	claims := map[string]string{}
	for _, p := range pods {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				claims["default/"+v.PersistentVolumeClaim.ClaimName] = strings.TrimPrefix(v.PersistentVolumeClaim.ClaimName, "c-")
			}
		}
	}
	return Snapshot{Node: newNode(testNode), Pods: pods, VolumeAttachments: vas, Claims: claims, Now: now, State: begun(state, now)}
}

func TestDecideVolumeSlots(t *testing.T) {
	now := epoch
	pods := []*corev1.Pod{
		newPod("a", withClaim("c-pv-a")),
		newPod("b", withClaim("c-pv-b")),
		newPod("c", withClaim("c-pv-c")),
		newPod("d"),
	}
	vas := []*storagev1.VolumeAttachment{newVA("pv-a", testNode), newVA("pv-b", testNode), newVA("pv-c", testNode), newVA("pv-x", testNode)}
	// One pod with a volume is gone but its volume has not detached: it
	// takes one of the two slots.
	state := State{start: now.Add(-time.Minute), tracked: []trackedPod{{
		Pod: PodRef{Namespace: "default", Name: "x", UID: "uid-x"}, Volumes: []string{"pv-x"}, GoneAt: now.Add(-10 * time.Second),
	}}}
	got := Decide(volumeSnap(now, pods, vas, state), Options{Volumes: VolumeOptions{Parallelism: 2}})
	want := []row{
		{Pod: "a", Action: ActionEvict, Volumes: []string{"pv-a"}},
		{Pod: "b", Action: ActionWaitVolumeSlot, Volumes: []string{"pv-b"}},
		{Pod: "c", Action: ActionWaitVolumeSlot, Volumes: []string{"pv-c"}},
		{Pod: "d", Action: ActionEvict},
	}
	if diff := cmp.Diff(want, rows(got), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	wantWaits := []VolumeWait{{
		Pod: state.tracked[0].Pod, Phase: VolumeDetach, Volumes: []string{"pv-x"},
		Since: now.Add(-10 * time.Second), Until: now.Add(-10*time.Second + DefaultDetachTimeout),
	}}
	if diff := cmp.Diff(wantWaits, got.Volumes); diff != "" {
		t.Errorf("volume waits (-want +got):\n%s", diff)
	}
}

func TestDecideVolumeWaits(t *testing.T) {
	now := epoch
	gone := PodRef{Namespace: "default", Name: "gone", UID: "uid-gone"}
	tracked := func(mods ...func(*trackedPod)) State {
		tr := trackedPod{Pod: gone, Volumes: []string{"pv-a"}, GoneAt: now.Add(-10 * time.Second)}
		for _, m := range mods {
			m(&tr)
		}
		return State{start: now.Add(-time.Hour), tracked: []trackedPod{tr}}
	}
	type want struct {
		Actions   map[string]Action
		Waits     []VolumeWait
		Events    []string
		Tracked   int
		Done      bool
		GroupsLen int
	}
	tests := []struct {
		name  string
		opts  Options
		pods  []*corev1.Pod
		node  *corev1.Node
		vas   []*storagev1.VolumeAttachment
		ids   map[string][]string
		state State
		want  want
	}{
		{
			name:  "a group waits for the volumes of its gone pod",
			pods:  []*corev1.Pod{newPod("late", order(1))},
			vas:   []*storagev1.VolumeAttachment{newVA("pv-a", testNode)},
			state: tracked(),
			want: want{
				Actions:   map[string]Action{"late": ActionWaitGroup},
				Waits:     []VolumeWait{{Pod: gone, Phase: VolumeDetach, Volumes: []string{"pv-a"}, Since: now.Add(-10 * time.Second), Until: now.Add(-10*time.Second + DefaultDetachTimeout)}},
				Tracked:   1,
				GroupsLen: 2,
			},
		},
		{
			name:  "pod seen gone for the first time",
			pods:  []*corev1.Pod{},
			vas:   []*storagev1.VolumeAttachment{newVA("pv-a", testNode)},
			state: tracked(func(tr *trackedPod) { tr.GoneAt = time.Time{} }),
			want: want{
				Actions: map[string]Action{},
				Waits:   []VolumeWait{{Pod: gone, Phase: VolumeDetach, Volumes: []string{"pv-a"}, Since: now, Until: now.Add(DefaultDetachTimeout)}},
				Events:  []string{"PodGone gone"},
				Tracked: 1,
				// The gone pod's group (order 0/regular) is not finished
				// while its volume detaches.
				GroupsLen: 1,
			},
		},
		{
			name:  "detached: the next group starts",
			pods:  []*corev1.Pod{newPod("late", order(1))},
			state: tracked(),
			want: want{
				Actions:   map[string]Action{"late": ActionEvict},
				Events:    []string{"VolumesDetached gone"},
				GroupsLen: 1,
			},
		},
		{
			name:  "detach timeout",
			pods:  []*corev1.Pod{newPod("late", order(1))},
			vas:   []*storagev1.VolumeAttachment{newVA("pv-a", testNode)},
			state: tracked(func(tr *trackedPod) { tr.GoneAt = now.Add(-DefaultDetachTimeout) }),
			want: want{
				Actions:   map[string]Action{"late": ActionEvict},
				Events:    []string{"DetachTimedOut gone"},
				Tracked:   1, // kept (GaveUp) so the sweep does not wait again
				GroupsLen: 1,
			},
		},
		{
			name:  "the drain deadline ends volume waits",
			pods:  []*corev1.Pod{},
			vas:   []*storagev1.VolumeAttachment{newVA("pv-a", testNode)},
			state: func() State { s := tracked(); s.deadline = now; return s }(),
			want:  want{Actions: map[string]Action{}, Events: []string{"DetachTimedOut gone"}, Tracked: 1, Done: true},
		},
		{
			name:  "node status counts when volume IDs are known",
			pods:  []*corev1.Pod{},
			node:  newNode(testNode, attachedIDs("kubernetes.io/csi/disk.example.com^vol-a")),
			ids:   map[string][]string{"pv-a": {"vol-a"}},
			state: tracked(),
			want: want{
				Actions:   map[string]Action{},
				Waits:     []VolumeWait{{Pod: gone, Phase: VolumeDetach, Volumes: []string{"pv-a"}, Since: now.Add(-10 * time.Second), Until: now.Add(-10*time.Second + DefaultDetachTimeout)}},
				Tracked:   1,
				GroupsLen: 1,
			},
		},
		{
			name: "volumes without an ID are not waited for",
			pods: []*corev1.Pod{newPod("a", withClaim("c-pv-nfs"))},
			vas:  []*storagev1.VolumeAttachment{newVA("pv-nfs", testNode)},
			ids:  map[string][]string{},
			want: want{Actions: map[string]Action{"a": ActionEvict}, GroupsLen: 1},
		},
		{
			name: "the final sweep waits for attachments without a pod",
			pods: []*corev1.Pod{newPod("ds", daemonSet(), withClaim("c-pv-ds"))},
			vas:  []*storagev1.VolumeAttachment{newVA("pv-ds", testNode), newVA("pv-lost", testNode), newVA("pv-other", "node-2")},
			want: want{
				Actions: map[string]Action{"ds": ActionSkip},
				Waits:   []VolumeWait{{Phase: VolumeDetach, Volumes: []string{"pv-lost"}, Since: now, Until: now.Add(DefaultDetachTimeout)}},
				Tracked: 1,
			},
		},
		{
			name:  "a volume shared with a pod still on the node is that pod's wait",
			pods:  []*corev1.Pod{newPod("sharer", withClaim("c-pv-a"), order(1))},
			vas:   []*storagev1.VolumeAttachment{newVA("pv-a", testNode)},
			state: tracked(),
			want:  want{Actions: map[string]Action{"sharer": ActionEvict}, GroupsLen: 1},
		},
		{
			name:  "re-attach wait after detach",
			opts:  Options{Volumes: VolumeOptions{WaitForReattach: true}},
			pods:  []*corev1.Pod{},
			state: tracked(),
			want: want{
				Actions: map[string]Action{},
				Events:  []string{"VolumesDetached gone"},
				Waits:   []VolumeWait{{Pod: gone, Phase: VolumeReattach, Volumes: []string{"pv-a"}, Since: now, Until: now.Add(DefaultReattachTimeout)}},
				Tracked: 1,
			},
		},
		{
			name:  "re-attached elsewhere",
			opts:  Options{Volumes: VolumeOptions{WaitForReattach: true}},
			pods:  []*corev1.Pod{},
			vas:   []*storagev1.VolumeAttachment{newVA("pv-a", "node-2")},
			state: tracked(func(tr *trackedPod) { tr.DetachedAt = now.Add(-time.Second) }),
			want:  want{Actions: map[string]Action{}, Events: []string{"VolumesReattached gone"}, Done: true},
		},
		{
			name:  "unreachable node: no volume waits",
			opts:  Options{Unreachable: UnreachableOptions{ForceAfter: -1}},
			node:  newNode(testNode, notReadySinceAt(now.Add(-time.Hour))),
			pods:  []*corev1.Pod{newPod("late", order(1))},
			vas:   []*storagev1.VolumeAttachment{newVA("pv-a", testNode)},
			state: tracked(),
			want:  want{Actions: map[string]Action{"late": ActionEvict}, GroupsLen: 1},
		},
		{
			// NotReady for an hour: forced (ForceAfter), but a pod is
			// left, so the node's attachments are not touched yet.
			name:  "unreachable node, forced: no volume waits while pods are left",
			node:  newNode(testNode, notReadySinceAt(now.Add(-time.Hour))),
			pods:  []*corev1.Pod{newPod("late", order(1))},
			vas:   []*storagev1.VolumeAttachment{newVA("pv-a", testNode)},
			state: tracked(),
			want:  want{Actions: map[string]Action{"late": ActionForceDelete}, GroupsLen: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := volumeSnap(now, tt.pods, tt.vas, tt.state)
			if tt.node != nil {
				snap.Node = tt.node
			}
			snap.VolumeIDs = tt.ids
			got := Decide(snap, tt.opts)
			gotW := want{
				Actions: actions(got), Waits: got.Volumes, Events: eventTypes(got.Events),
				Tracked: len(got.State.tracked), Done: got.Done, GroupsLen: len(got.Groups),
			}
			if diff := cmp.Diff(tt.want, gotW, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s\nmessage: %s", diff, got.Message)
			}
		})
	}
}

func TestDecideSummary(t *testing.T) {
	now := epoch
	tests := []struct {
		name        string
		node        *corev1.Node
		pods        []*corev1.Pod
		pdbs        []*policyv1.PodDisruptionBudget
		opts        Options
		state       State
		vas         []*storagev1.VolumeAttachment
		wantMessage string
		wantNext    time.Time
		wantDone    bool
	}{
		{
			name:        "nothing to do",
			pods:        []*corev1.Pod{newPod("ds", daemonSet()), newPod("m", mirror())},
			wantMessage: "node node-1 is drained (2 pods left on it by policy)",
			wantDone:    true,
		},
		{
			name:        "empty node",
			wantMessage: "node node-1 is drained",
			wantDone:    true,
		},
		{
			name:        "evictions due now",
			pods:        []*corev1.Pod{newPod("a"), newPod("b", order(1))},
			wantMessage: "2 pods remaining: to evict: default/a; 1 pod in later groups, waiting for order 0/regular",
			wantNext:    now,
		},
		{
			name: "misconfigured budget named, polled",
			pdbs: []*policyv1.PodDisruptionBudget{newPDB("strict", "web", 0, 2, 2, 2)},
			pods: []*corev1.Pod{newPod("a"), newPod("b"), newPod("c"), newPod("d"), newPod("t", terminating(now))},
			wantMessage: "5 pods remaining: blocked by PDB default/strict (needs 2 healthy, has 2; misconfigured: " +
				"allows no disruption while all its pods are healthy): default/a, default/b, default/c and 1 more; terminating: default/t",
			wantNext: now.Add(DefaultPollInterval),
		},
		{
			name:        "backoff decides the next check",
			pdbs:        []*policyv1.PodDisruptionBudget{newPDB("web", "web", 0, 3, 2, 3)},
			state:       State{backoffs: []backoffEntry{{Key: "pdb/default/web", Attempts: 3, Until: now.Add(4 * time.Second)}}},
			pods:        []*corev1.Pod{newPod("a")},
			wantMessage: "1 pod remaining: blocked by PDB default/web (needs 3 healthy, has 2): default/a",
			wantNext:    now.Add(4 * time.Second),
		},
		{
			name:        "force deletion time decides the next check",
			opts:        Options{Timeout: time.Minute},
			pdbs:        []*policyv1.PodDisruptionBudget{newPDB("web", "web", 0, 3, 2, 3)},
			state:       State{start: now, backoffs: []backoffEntry{{Key: "pdb/default/web", Attempts: 1, Until: now.Add(time.Hour)}}},
			pods:        []*corev1.Pod{newPod("a", grace(30))},
			wantMessage: "1 pod remaining: blocked by PDB default/web (needs 3 healthy, has 2): default/a",
			wantNext:    now.Add(30 * time.Second),
		},
		{
			name:        "refused",
			opts:        Options{RefuseUnmanaged: true},
			pods:        []*corev1.Pod{newPod("bare", unmanaged()), newPod("a")},
			wantMessage: "2 pods remaining: refused: default/bare (no controller would recreate the pod); 1 pod held back by the refused pods",
			wantNext:    now.Add(DefaultPollInterval),
		},
		{
			// NotReady for 2 minutes: forced at 5 minutes, minus the
			// pod's one-second grace; the backoff would wake much later.
			name:        "the ForceAfter moment decides the next check",
			node:        newNode(testNode, notReadySinceAt(now.Add(-2*time.Minute))),
			pdbs:        []*policyv1.PodDisruptionBudget{newPDB("web", "web", 0, 3, 2, 3)},
			state:       State{start: now, backoffs: []backoffEntry{{Key: "pdb/default/web", Attempts: 1, Until: now.Add(time.Hour)}}},
			pods:        []*corev1.Pod{newPod("a", grace(1))},
			wantMessage: "1 pod remaining: blocked by PDB default/web (needs 3 healthy, has 2): default/a",
			wantNext:    now.Add(3*time.Minute - time.Second),
		},
		{
			// Nothing left but an attachment: it is waited for until the
			// drain is forced.
			name:        "the ForceAfter moment ends the attachment wait",
			node:        newNode(testNode, notReadySinceAt(now.Add(-4*time.Minute-59*time.Second))),
			vas:         []*storagev1.VolumeAttachment{newVA("pv-a", testNode)},
			opts:        Options{PollInterval: time.Minute},
			wantMessage: "0 pods remaining: volumes to detach: pv-a",
			wantNext:    now.Add(time.Second),
		},
		{
			name:        "the fast path threshold decides the next check",
			node:        newNode(testNode, notReadySinceAt(now.Add(-59*time.Second))),
			pods:        []*corev1.Pod{newPod("t", terminating(now.Add(-time.Hour)))},
			wantMessage: "1 pod remaining: terminating: default/t",
			wantNext:    now.Add(time.Second),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := tt.node
			if node == nil {
				node = newNode(testNode)
			}
			got := Decide(Snapshot{Node: node, Pods: tt.pods, PDBs: tt.pdbs, VolumeAttachments: tt.vas, Now: now, State: begun(tt.state, now)}, tt.opts)
			if got.Message != tt.wantMessage {
				t.Errorf("Message:\n got %q\nwant %q", got.Message, tt.wantMessage)
			}
			if !got.NextCheck.Equal(tt.wantNext) {
				t.Errorf("NextCheck = %v, want %v", got.NextCheck, tt.wantNext)
			}
			if got.Done != tt.wantDone {
				t.Errorf("Done = %v, want %v", got.Done, tt.wantDone)
			}
		})
	}
}

func TestDecideStartsState(t *testing.T) {
	got := Decide(Snapshot{Node: newNode(testNode), Now: epoch}, Options{Timeout: time.Hour})
	want := State{start: epoch, deadline: epoch.Add(time.Hour)}
	if diff := cmp.Diff(want, got.State, cmpopts.EquateEmpty(), stateFields); diff != "" {
		t.Errorf("State (-want +got):\n%s", diff)
	}
	// A deadline set by the caller wins over Options.Timeout.
	mine := State{start: epoch.Add(-time.Hour), deadline: epoch.Add(time.Minute)}
	got = Decide(Snapshot{Node: newNode(testNode), Now: epoch, State: mine}, Options{Timeout: time.Hour})
	if diff := cmp.Diff(mine, got.State, cmpopts.EquateEmpty(), stateFields); diff != "" {
		t.Errorf("State (-want +got):\n%s", diff)
	}
}

func TestDecidePrunesBackoffs(t *testing.T) {
	state := State{backoffs: []backoffEntry{
		{Key: "pdb/default/web", Attempts: 1, Until: epoch},
		{Key: "pdb/default/deleted", Attempts: 1, Until: epoch},
		{Key: "pod/uid-a", Attempts: 1, Until: epoch},
		{Key: "pod/uid-gone", Attempts: 1, Until: epoch},
	}}
	got := Decide(Snapshot{
		Node: newNode(testNode), Now: epoch, State: begun(state, epoch),
		Pods: []*corev1.Pod{newPod("a")}, PDBs: []*policyv1.PodDisruptionBudget{newPDB("web", "other", 1, 1, 1, 1)},
	}, Options{})
	var keys []string
	for _, b := range got.State.backoffs {
		keys = append(keys, b.Key)
	}
	if diff := cmp.Diff([]string{"pdb/default/web", "pod/uid-a"}, keys); diff != "" {
		t.Errorf("kept backoffs (-want +got):\n%s", diff)
	}
}

func TestDecideWarnings(t *testing.T) {
	got := Decide(Snapshot{Node: newNode(testNode), Now: epoch, Pods: []*corev1.Pod{
		newPod("a", annotated(PolicyAnnotation, "maybe"), annotated(OrderAnnotation, "x")),
	}}, Options{})
	d := got.Decisions[0]
	if d.Action != ActionEvict {
		t.Errorf("Action = %v, want Evict", d.Action)
	}
	for _, want := range []string{`mcmkit.io/drain="maybe"`, `mcmkit.io/drain-order="x"`} {
		if !strings.Contains(d.Warning, want) {
			t.Errorf("Warning %q does not mention %s", d.Warning, want)
		}
	}
}

func TestPodVolumes(t *testing.T) {
	p := newPod("db-0", withClaim("data"), withClaim("unbound"), withClaim("data"), emptyDir())
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch-eph",
		VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}})
	claims := map[string]string{
		"default/data":             "pv-data",
		"default/unbound":          "",
		"default/db-0-scratch-eph": "pv-eph",
		"other/data":               "pv-other",
	}
	if diff := cmp.Diff([]string{"pv-data", "pv-eph"}, podVolumes(p, claims)); diff != "" {
		t.Errorf("podVolumes (-want +got):\n%s", diff)
	}
	want := []string{"default/data", "default/unbound", "default/data", "default/db-0-scratch-eph"}
	if diff := cmp.Diff(want, claimNames(p)); diff != "" {
		t.Errorf("claimNames (-want +got):\n%s", diff)
	}
}

func TestNotReadySince(t *testing.T) {
	taint := func(at time.Time) func(*corev1.Node) {
		return func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute,
				TimeAdded: &metav1.Time{Time: at}})
		}
	}
	tests := []struct {
		name string
		node *corev1.Node
		want time.Time
	}{
		{"ready", newNode(testNode), time.Time{}},
		{"not ready", newNode(testNode, notReadySinceAt(epoch)), epoch},
		{"unreachable taint only", newNode(testNode, taint(epoch)), epoch},
		{"earliest wins", newNode(testNode, notReadySinceAt(epoch), taint(epoch.Add(-time.Minute))), epoch.Add(-time.Minute)},
	}
	for _, tt := range tests {
		if got := notReadySince(tt.node); !got.Equal(tt.want) {
			t.Errorf("%s: notReadySince = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestDecideForcedDetach covers the VolumeAttachments of a node whose
// kubelet is gone: waited for until the drain is forced, then deleted and
// waited for until gone, at most DetachTimeout; never on a Ready node.
func TestDecideForcedDetach(t *testing.T) {
	now := epoch
	deleting := func(va *storagev1.VolumeAttachment) *storagev1.VolumeAttachment {
		va = va.DeepCopy()
		va.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Second)}
		return va
	}
	inline := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va-inline", UID: "uid-va-inline"},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "disk.example.com", NodeName: testNode}}
	vas := []*storagev1.VolumeAttachment{newVA("pv-b", testNode), newVA("pv-a", testNode), newVA("pv-c", "node-2"), inline}
	down := newNode(testNode, notReadySinceAt(now.Add(-10*time.Minute))) // forced since now-5m
	forced := forcedDetach{Since: now}
	type want struct {
		Delete      []string
		Waits       []VolumeWait
		Events      []string
		Done        bool
		ForceReason string
		State       forcedDetach
	}
	waitAll := VolumeWait{Phase: VolumeForceDetach, Volumes: []string{"pv-a", "pv-b"},
		Attachments: []string{"va-inline", "va-pv-a-node-1", "va-pv-b-node-1"}, Since: now, Until: now.Add(DefaultDetachTimeout)}
	tests := []struct {
		name  string
		node  *corev1.Node
		pods  []*corev1.Pod
		vas   []*storagev1.VolumeAttachment
		opts  Options
		state State
		want  want
	}{
		{
			name: "forced by ForceAfter, no pod left: all of the node's attachments are deleted",
			node: down,
			pods: []*corev1.Pod{newPod("ds", daemonSet()), newPod("stuck", terminating(now.Add(-time.Minute)))},
			vas:  vas,
			want: want{
				Delete:      []string{"va-inline", "va-pv-a-node-1", "va-pv-b-node-1"},
				Waits:       []VolumeWait{waitAll},
				ForceReason: "node not Ready for more than 5m0s",
				State:       forced,
			},
		},
		{
			name:  "forced by the deadline on an unreachable node",
			node:  newNode(testNode, notReadySinceAt(now.Add(-2*time.Minute))),
			vas:   vas,
			state: State{start: now.Add(-time.Hour), deadline: now.Add(-time.Second)},
			want: want{
				Delete:      []string{"va-inline", "va-pv-a-node-1", "va-pv-b-node-1"},
				Waits:       []VolumeWait{waitAll},
				ForceReason: "drain deadline 2025-01-01T11:59:59Z passed",
				State:       forced,
			},
		},
		{
			name:  "attachments being deleted are waited for, not deleted again",
			node:  down,
			vas:   []*storagev1.VolumeAttachment{deleting(newVA("pv-a", testNode)), newVA("pv-b", testNode)},
			state: State{forcedDetach: forcedDetach{Since: now.Add(-time.Minute)}},
			want: want{
				Delete: []string{"va-pv-b-node-1"},
				Waits: []VolumeWait{{Phase: VolumeForceDetach, Volumes: []string{"pv-a", "pv-b"},
					Attachments: []string{"va-pv-a-node-1", "va-pv-b-node-1"},
					Since:       now.Add(-time.Minute), Until: now.Add(-time.Minute + DefaultDetachTimeout)}},
				ForceReason: "node not Ready for more than 5m0s",
				State:       forcedDetach{Since: now.Add(-time.Minute)},
			},
		},
		{
			name:  "given up after DetachTimeout",
			node:  down,
			vas:   []*storagev1.VolumeAttachment{deleting(newVA("pv-a", testNode))},
			state: State{forcedDetach: forcedDetach{Since: now.Add(-DefaultDetachTimeout)}},
			want: want{
				Events: []string{"DetachTimedOut "},
				Done:   true,
				State:  forcedDetach{Since: now.Add(-DefaultDetachTimeout), GaveUp: true},
			},
		},
		{
			name:  "once given up, nothing more",
			node:  down,
			vas:   []*storagev1.VolumeAttachment{deleting(newVA("pv-a", testNode))},
			state: State{forcedDetach: forcedDetach{Since: now.Add(-time.Hour), GaveUp: true}},
			want:  want{Done: true, State: forcedDetach{Since: now.Add(-time.Hour), GaveUp: true}},
		},
		{
			name:  "all gone: done",
			node:  down,
			vas:   []*storagev1.VolumeAttachment{newVA("pv-c", "node-2")},
			state: State{forcedDetach: forced},
			want:  want{Done: true, State: forced},
		},
		{
			name: "unreachable but not forced yet: waited for until then",
			node: newNode(testNode, notReadySinceAt(now.Add(-2*time.Minute))),
			vas:  []*storagev1.VolumeAttachment{newVA("pv-a", testNode)},
			want: want{Waits: []VolumeWait{{Phase: VolumeDetach, Volumes: []string{"pv-a"}, Attachments: []string{"va-pv-a-node-1"},
				Since: now.Add(-2 * time.Minute), Until: now.Add(3 * time.Minute)}}},
		},
		{
			name: "unreachable, nothing will force: not waited for",
			opts: Options{Unreachable: UnreachableOptions{ForceAfter: -1}},
			node: down,
			vas:  []*storagev1.VolumeAttachment{newVA("pv-a", testNode)},
			want: want{Done: true},
		},
		{
			name: "pods left to drain: attachments untouched",
			node: down,
			pods: []*corev1.Pod{newPod("recent", terminating(now.Add(-time.Second)))},
			vas:  []*storagev1.VolumeAttachment{newVA("pv-a", testNode)},
		},
		{
			name: "KeepAttachments",
			opts: Options{Volumes: VolumeOptions{KeepAttachments: true}},
			node: down,
			vas:  []*storagev1.VolumeAttachment{newVA("pv-a", testNode)},
			want: want{Done: true},
		},
		{
			name: "Volumes.Skip",
			opts: Options{Volumes: VolumeOptions{Skip: true}},
			node: down,
			vas:  []*storagev1.VolumeAttachment{newVA("pv-a", testNode)},
			want: want{Done: true},
		},
		{
			name:  "a Ready node past its deadline: nothing is deleted",
			node:  newNode(testNode),
			vas:   []*storagev1.VolumeAttachment{newVA("pv-a", testNode)},
			state: State{start: now.Add(-time.Hour), deadline: now.Add(-time.Second)},
			want:  want{Done: true},
		},
		{
			// NotReady for 30 s only: not unreachable, the kubelet may
			// be back any moment; the deadline ends the ordinary waits.
			name:  "a node NotReady for less than Unreachable.After past its deadline: nothing is deleted",
			node:  newNode(testNode, notReadySinceAt(now.Add(-30*time.Second))),
			vas:   []*storagev1.VolumeAttachment{newVA("pv-a", testNode)},
			state: State{start: now.Add(-time.Hour), deadline: now.Add(-time.Second)},
			want:  want{Done: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(Snapshot{Node: tt.node, Pods: tt.pods, VolumeAttachments: tt.vas, Now: now, State: begun(tt.state, now)}, tt.opts)
			var del []string
			for _, a := range got.DeleteAttachments {
				del = append(del, a.Name)
				if a.UID == "" {
					t.Errorf("attachment %s to delete without a UID", a.Name)
				}
			}
			gotW := want{Delete: del, Waits: got.Volumes, Events: eventTypes(got.Events), Done: got.Done,
				ForceReason: got.ForceReason, State: got.State.forcedDetach}
			if diff := cmp.Diff(tt.want, gotW, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s\nmessage: %s", diff, got.Message)
			}
		})
	}
}

func TestDecideForceReason(t *testing.T) {
	now := epoch
	tests := []struct {
		name  string
		node  *corev1.Node
		pods  []*corev1.Pod
		state State
		want  string
	}{
		{name: "no deadline", pods: []*corev1.Pod{newPod("a")}},
		{name: "deadline ahead", state: State{deadline: now.Add(time.Hour)}, pods: []*corev1.Pod{newPod("a")}},
		{
			name:  "deadline near: a long grace period is deleted early",
			state: State{deadline: now.Add(10 * time.Second)}, pods: []*corev1.Pod{newPod("a", grace(30))},
			want: "drain deadline 2025-01-01T12:00:10Z is near",
		},
		{
			name:  "deadline passed",
			state: State{deadline: now}, pods: []*corev1.Pod{newPod("a")},
			want: "drain deadline 2025-01-01T12:00:00Z passed",
		},
		{
			name: "node NotReady for nearly ForceAfter",
			node: newNode(testNode, notReadySinceAt(now.Add(-4*time.Minute-50*time.Second))), pods: []*corev1.Pod{newPod("a", grace(30))},
			want: "node not Ready for nearly 5m0s",
		},
		{
			name: "node NotReady for more than ForceAfter",
			node: newNode(testNode, notReadySinceAt(now.Add(-6*time.Minute))), pods: []*corev1.Pod{newPod("a")},
			want: "node not Ready for more than 5m0s",
		},
		{
			name:  "terminating within the deadline: nothing is force-deleted",
			state: State{deadline: now}, pods: []*corev1.Pod{newPod("a", terminating(now.Add(-time.Second)))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := tt.node
			if node == nil {
				node = newNode(testNode)
			}
			got := Decide(Snapshot{Node: node, Pods: tt.pods, Now: now, State: begun(tt.state, now)}, Options{})
			if got.ForceReason != tt.want {
				t.Errorf("ForceReason = %q, want %q", got.ForceReason, tt.want)
			}
		})
	}
}

func TestBlockingBudgets(t *testing.T) {
	now := epoch
	other := func(p *policyv1.PodDisruptionBudget) *policyv1.PodDisruptionBudget {
		p = p.DeepCopy()
		p.Namespace = "team"
		return p
	}
	tests := []struct {
		name  string
		pdbs  []*policyv1.PodDisruptionBudget
		pods  []*corev1.Pod
		state State
		want  []string
	}{
		{name: "none", pods: []*corev1.Pod{newPod("a")}},
		{
			name: "out of disruptions, in backoff, misconfigured; not several budgets",
			pdbs: []*policyv1.PodDisruptionBudget{
				newPDB("web", "web", 1, 1, 2, 2), newPDB("db", "db", 0, 3, 2, 3), newPDB("strict", "strict", 0, 2, 2, 2),
				other(newPDB("x", "x", 1, 0, 1, 1)), other(newPDB("y", "x", 1, 0, 1, 1)),
			},
			state: State{backoffs: []backoffEntry{{Key: "pdb/default/db", Attempts: 1, Until: now.Add(time.Minute)}}},
			pods: []*corev1.Pod{
				newPod("w1"), newPod("w2"), newPod("d1", app("db")), newPod("s1", app("strict")),
				newPod("x1", inNamespace("team"), app("x")),
			},
			want: []string{"default/db", "default/strict", "default/web"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(Snapshot{Node: newNode(testNode), Pods: tt.pods, PDBs: tt.pdbs, Now: now, State: begun(tt.state, now)}, Options{})
			if diff := cmp.Diff(tt.want, got.State.BlockingBudgets(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("BlockingBudgets (-want +got):\n%s\nmessage: %s", diff, got.Message)
			}
		})
	}
}
