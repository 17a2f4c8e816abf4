package drain

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"
)

// genPod draws a pod with any combination of the attributes the planner
// looks at.
func genPod(t *rapid.T, i int, now time.Time) *corev1.Pod {
	p := newPod(fmt.Sprintf("p%02d", i))
	p.Namespace = rapid.SampledFrom([]string{"default", "default", "team"}).Draw(t, "namespace")
	p.Labels["app"] = rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "app")
	if rapid.IntRange(0, 9).Draw(t, "elsewhere") == 0 {
		p.Spec.NodeName = "node-2"
	}
	switch rapid.IntRange(0, 5).Draw(t, "owner") {
	case 0:
		unmanaged()(p)
	case 1:
		daemonSet()(p)
	}
	if rapid.IntRange(0, 3).Draw(t, "critical") == 0 {
		critical()(p)
	}
	if rapid.IntRange(0, 14).Draw(t, "mirror") == 0 {
		mirror()(p)
	}
	p.Status.Phase = rapid.SampledFrom([]corev1.PodPhase{
		corev1.PodRunning, corev1.PodRunning, corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed,
	}).Draw(t, "phase")
	if !rapid.Bool().Draw(t, "ready") {
		notReady()(p)
	}
	if g := rapid.SampledFrom([]int64{-1, 0, 1, 10, 30, 600}).Draw(t, "grace"); g >= 0 {
		grace(g)(p)
	}
	if o := rapid.SampledFrom([]string{"", "", "-1", "0", "3", "10", "bad"}).Draw(t, "order"); o != "" {
		annotated(OrderAnnotation, o)(p)
	}
	if pol := rapid.SampledFrom([]string{"", "", "", "skip", "wait-completed", "drain", "junk"}).Draw(t, "policy"); pol != "" {
		annotated(PolicyAnnotation, pol)(p)
	}
	if rapid.IntRange(0, 4).Draw(t, "terminating") == 0 {
		terminating(now.Add(time.Duration(rapid.IntRange(-120, 120).Draw(t, "deletionIn")) * time.Second))(p)
	}
	if rapid.IntRange(0, 2).Draw(t, "claim") == 0 {
		withClaim(fmt.Sprintf("c-pv-%d", rapid.IntRange(0, 8).Draw(t, "pv")))(p)
	}
	if rapid.IntRange(0, 5).Draw(t, "emptyDir") == 0 {
		emptyDir()(p)
	}
	return p
}

func genPDB(t *rapid.T, i int) *policyv1.PodDisruptionBudget {
	expected := int32(rapid.IntRange(0, 5).Draw(t, "expected"))
	pdb := newPDB(fmt.Sprintf("pdb%d", i), rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "pdbApp"),
		int32(rapid.IntRange(-1, 3).Draw(t, "allowed")), int32(rapid.IntRange(0, 5).Draw(t, "desired")),
		int32(rapid.IntRange(0, 5).Draw(t, "current")), expected)
	pdb.Namespace = rapid.SampledFrom([]string{"default", "team"}).Draw(t, "pdbNamespace")
	if rapid.IntRange(0, 4).Draw(t, "pdbStale") == 0 {
		pdb.Generation = 2 // the disruption controller has not caught up
	}
	if rapid.Bool().Draw(t, "disrupted") {
		pdb.Status.DisruptedPods = map[string]metav1.Time{"x": metav1.NewTime(epoch)}
	}
	return pdb
}

// genSnapshot draws a snapshot and options.
func genSnapshot(t *rapid.T) (Snapshot, Options) {
	now := epoch
	node := newNode(testNode)
	if rapid.IntRange(0, 3).Draw(t, "notReady") == 0 {
		node = newNode(testNode, notReadySinceAt(now.Add(-time.Duration(rapid.IntRange(0, 600).Draw(t, "notReadyFor"))*time.Second)))
	}
	var pods []*corev1.Pod
	for i := range rapid.IntRange(0, 25).Draw(t, "pods") {
		pods = append(pods, genPod(t, i, now))
	}
	var pdbs []*policyv1.PodDisruptionBudget
	for i := range rapid.IntRange(0, 4).Draw(t, "pdbs") {
		pdbs = append(pdbs, genPDB(t, i))
	}
	claims := map[string]string{}
	var vas []*storagev1.VolumeAttachment
	for i := range 9 {
		pv := fmt.Sprintf("pv-%d", i)
		for _, ns := range []string{"default", "team"} {
			claims[ns+"/c-"+pv] = pv
		}
		if rapid.Bool().Draw(t, "attached") {
			va := newVA(pv, testNode)
			if rapid.IntRange(0, 3).Draw(t, "vaDeleting") == 0 {
				va.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Second)}
			}
			vas = append(vas, va)
		}
	}
	var st State
	st.start = now.Add(-time.Duration(rapid.IntRange(0, 600).Draw(t, "startedAgo")) * time.Second)
	if rapid.Bool().Draw(t, "deadline") {
		st.deadline = st.start.Add(time.Duration(rapid.IntRange(1, 900).Draw(t, "timeout")) * time.Second)
	}
	for i := range rapid.IntRange(0, 3).Draw(t, "tracked") {
		st.tracked = append(st.tracked, trackedPod{
			Pod:     PodRef{Namespace: "default", Name: fmt.Sprintf("gone%d", i), UID: types.UID(fmt.Sprintf("uid-gone%d", i))},
			Group:   Group{Order: rapid.IntRange(-1, 3).Draw(t, "trackedOrder")},
			Volumes: []string{fmt.Sprintf("pv-%d", rapid.IntRange(0, 8).Draw(t, "trackedPV"))},
			GoneAt:  st.start.Add(time.Duration(rapid.IntRange(0, int(now.Sub(st.start)/time.Second)).Draw(t, "goneAfterStart")) * time.Second),
		})
	}
	st.maxEvictRetries = rapid.SampledFrom([]int{0, 0, 1, 3}).Draw(t, "maxEvictRetries")
	for _, p := range pods {
		// As many as the backoff lets a drain of that age record: Decide
		// distrusts more (TestDistrust).
		most := maxAttempts(now.Sub(st.start), DefaultBackoffInitial, DefaultBackoffMax)
		if n := rapid.IntRange(0, min(4, most)).Draw(t, "refusals"); n > 0 {
			st.refusals = append(st.refusals, podRefusals{Pod: PodRef{Namespace: p.Namespace, Name: p.Name, UID: p.UID}, Count: n})
		}
	}
	for _, pdb := range pdbs {
		if rapid.Bool().Draw(t, "backoff") {
			st.backoffs = append(st.backoffs, backoffEntry{Key: "pdb/" + pdb.Namespace + "/" + pdb.Name, Attempts: 1,
				Until: now.Add(time.Duration(rapid.IntRange(-5, 5).Draw(t, "backoffLeft")) * time.Second)})
		}
	}
	opts := Options{
		DrainDaemonSets:    rapid.Bool().Draw(t, "drainDaemonSets"),
		RefuseUnmanaged:    rapid.IntRange(0, 5).Draw(t, "refuseUnmanaged") == 0,
		RefuseLocalStorage: rapid.IntRange(0, 5).Draw(t, "refuseLocalStorage") == 0,
		Volumes: VolumeOptions{
			Parallelism:     rapid.IntRange(1, 4).Draw(t, "parallelism"),
			KeepAttachments: rapid.IntRange(0, 4).Draw(t, "keepAttachments") == 0,
		},
		Unreachable: UnreachableOptions{ForceAfter: rapid.SampledFrom([]time.Duration{0, -1, 2 * time.Minute}).Draw(t, "forceAfter")},
	}
	return Snapshot{Node: node, Pods: pods, PDBs: pdbs, VolumeAttachments: vas, Claims: claims, Now: now, State: st}, opts
}

func TestPropertyDecide(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		snap, opts := genSnapshot(t)
		before := deepCopySnapshot(snap)
		p := Decide(snap, opts)

		// The inputs are untouched.
		if diff := cmp.Diff(before, snap, cmpopts.EquateEmpty(), stateFields); diff != "" {
			t.Fatalf("Decide changed its input (-before +after):\n%s", diff)
		}

		// Every pod on the node gets exactly one decision.
		onNode := map[types.UID]*corev1.Pod{}
		for _, pod := range snap.Pods {
			if pod.Spec.NodeName == testNode {
				onNode[pod.UID] = pod
			}
		}
		seen := map[types.UID]bool{}
		for _, d := range p.Decisions {
			if onNode[d.Pod.UID] == nil {
				t.Fatalf("decision for a pod not on the node: %v", d.Pod)
			}
			if seen[d.Pod.UID] {
				t.Fatalf("two decisions for %v", d.Pod)
			}
			seen[d.Pod.UID] = true
		}
		if len(seen) != len(onNode) {
			t.Fatalf("%d decisions for %d pods", len(seen), len(onNode))
		}

		// Groups are strictly ordered, and order groups never overlap:
		// evictions and the waits of eviction candidates only happen in
		// the first group; later ones wait.
		for i := 1; i < len(p.Groups); i++ {
			if !p.Groups[i-1].Less(p.Groups[i]) {
				t.Fatalf("groups out of order: %v", p.Groups)
			}
		}
		for _, d := range p.Decisions {
			switch {
			case d.Action == ActionEvict || d.Action == ActionWaitCompletion || d.Action == ActionWaitVolumeSlot ||
				(d.Action == ActionBlocked && d.Cause != CauseRefusedPods):
				if len(p.Groups) == 0 || d.Group != p.Groups[0] {
					t.Fatalf("%s %v in %v, but the current group is %v", d.Action, d.Pod, d.Group, p.Groups)
				}
			case d.Action == ActionWaitGroup:
				if !p.Groups[0].Less(d.Group) {
					t.Fatalf("%v waits although its group %v is current (%v)", d.Pod, d.Group, p.Groups)
				}
			}
		}

		// Force deletions never precede the deadline minus the pod's grace.
		for _, d := range p.Decisions {
			pod := onNode[d.Pod.UID]
			g := podGrace(pod)
			pol, _, _, _ := podPolicy(pod, opts)
			if d.Action == ActionSkip || pol == PolicyRefuse || p.Deadline.IsZero() {
				if !d.ForceAt.IsZero() {
					t.Fatalf("%v (%s) has ForceAt %v without being forceable", d.Pod, d.Action, d.ForceAt)
				}
				continue
			}
			if d.Cause != CauseRefusedPods && !d.ForceAt.Equal(p.Deadline.Add(-g)) {
				t.Fatalf("%v: ForceAt %v, want deadline %v - grace %v", d.Pod, d.ForceAt, p.Deadline, g)
			}
			switch {
			case d.Action == ActionForceDelete && d.Cause == CauseEvictRetries:
				// Checked below, with the bound; the deadline would have
				// come first.
				if !p.Now.Before(d.ForceAt) {
					t.Fatalf("%v deleted for its refusals, but its force time %v has come", d.Pod, d.ForceAt)
				}
			case d.Action == ActionForceDelete:
				if p.Now.Before(p.Deadline.Add(-g)) {
					t.Fatalf("%v force-deleted at %v, before deadline - grace = %v", d.Pod, p.Now, p.Deadline.Add(-g))
				}
				if want := forceGrace(g, p.Deadline, p.Now); d.GracePeriod != want || d.GracePeriod < time.Second || d.GracePeriod > g {
					t.Fatalf("%v force-deleted with grace %v, want %v (pod grace %v)", d.Pod, d.GracePeriod, want, g)
				}
			case d.Cause != CauseRefusedPods && !p.Now.Before(d.ForceAt) && d.Action != ActionWaitTermination:
				t.Fatalf("%v is past its force time %v but %s", d.Pod, d.ForceAt, d.Action)
			}
		}

		// The bound on refused evictions: a pod is deleted for its
		// refusals only once budgets have refused it MaxEvictRetries
		// times, with the grace a deletion at the deadline would have.
		// Such a pod is never evicted again, and stays only while
		// something other than its budgets holds it: its policy or group,
		// the refused pods, its termination, a volume slot, or the backoff
		// that paces its next attempt.
		refusals := map[types.UID]int{}
		for _, r := range snap.State.refusals {
			refusals[r.Pod.UID] += r.Count
		}
		bound := snap.State.maxEvictRetries
		for _, d := range p.Decisions {
			exhausted := bound > 0 && refusals[d.Pod.UID] >= bound
			if d.Cause == CauseEvictRetries {
				if !exhausted || d.Action != ActionForceDelete {
					t.Fatalf("%v: %s %s after %d refusals, bound %d", d.Pod, d.Action, d.Cause, refusals[d.Pod.UID], bound)
				}
				if want := forceGrace(podGrace(onNode[d.Pod.UID]), p.Deadline, p.Now); d.GracePeriod != want {
					t.Fatalf("%v deleted for its refusals with grace %v, want %v", d.Pod, d.GracePeriod, want)
				}
			}
			if !exhausted {
				continue
			}
			switch d.Action {
			case ActionForceDelete, ActionSkip, ActionRefuse, ActionWaitGroup, ActionWaitCompletion,
				ActionWaitTermination, ActionWaitVolumeSlot:
			case ActionBlocked:
				if d.Cause == CauseRefusedPods {
					break
				}
				b, ok := findBackoff(snap.State, backoffKey(d))
				if !ok || !d.RetryAt.Equal(b.Until) || !p.Now.Before(b.Until) {
					t.Fatalf("%v refused %d times (bound %d) is %s %s (%s) without a backoff to wait for",
						d.Pod, refusals[d.Pod.UID], bound, d.Action, d.Cause, d.Reason)
				}
			default:
				t.Fatalf("%v refused %d times (bound %d) is %s", d.Pod, refusals[d.Pod.UID], bound, d.Action)
			}
		}
		// The counts are kept for the pods still on the node, and only
		// for them.
		for _, r := range p.State.refusals {
			if onNode[r.Pod.UID] == nil || r.Count != refusals[r.Pod.UID] {
				t.Fatalf("refusals %+v kept; pod on the node: %v, count before %d", r, onNode[r.Pod.UID] != nil, refusals[r.Pod.UID])
			}
		}

		// A budget hands out at most its allowed disruptions to healthy
		// pods, or one probe when it allows none.
		evicted := map[string]int32{}
		for _, d := range p.Decisions {
			if d.Action == ActionEvict && d.Healthy && len(d.PDBs) == 1 {
				evicted[d.PDBs[0].Name]++
			}
		}
		for _, pdb := range snap.PDBs {
			name := pdb.Namespace + "/" + pdb.Name
			if limit := max(pdb.Status.DisruptionsAllowed, 1); evicted[name] > limit {
				t.Fatalf("budget %s allows %d, got %d evictions", name, pdb.Status.DisruptionsAllowed, evicted[name])
			}
		}

		// The deadline is the caller's or the node's NotReady time plus
		// ForceAfter, whichever is earlier.
		want := drainDeadline(snap.State, opts.withDefaults(), p.Now)
		if fa := opts.withDefaults().Unreachable.ForceAfter; fa >= 0 && !p.NotReadySince.IsZero() {
			if t := p.NotReadySince.Add(fa); want.IsZero() || t.Before(want) {
				want = t
			}
		}
		if !p.Deadline.Equal(want) {
			t.Fatalf("Deadline %v, want %v", p.Deadline, want)
		}

		// VolumeAttachments are deleted only on a NotReady node whose drain
		// is forced, once no pod is left to drain, never with
		// KeepAttachments, and only those of the node not yet deleted.
		if len(p.DeleteAttachments) > 0 {
			if p.NotReadySince.IsZero() || opts.Volumes.KeepAttachments || p.Now.Before(p.Deadline) || p.Deadline.IsZero() {
				t.Fatalf("attachments deleted: NotReadySince=%v keep=%v deadline=%v", p.NotReadySince, opts.Volumes.KeepAttachments, p.Deadline)
			}
			for _, d := range p.Decisions {
				if d.Action != ActionSkip {
					t.Fatalf("attachments deleted while %v is %s", d.Pod, d.Action)
				}
			}
			vas := map[string]*storagev1.VolumeAttachment{}
			for _, va := range snap.VolumeAttachments {
				vas[va.Name] = va
			}
			for _, a := range p.DeleteAttachments {
				va := vas[a.Name]
				if va == nil || va.Spec.NodeName != testNode || va.DeletionTimestamp != nil || va.UID != a.UID {
					t.Fatalf("deleting %+v, which is not a live attachment of the node", a)
				}
			}
		}

		// ForceReason says why, exactly when something is deleted by force.
		forced := len(p.DeleteAttachments) > 0
		for _, d := range p.Decisions {
			forced = forced || d.Action == ActionForceDelete
		}
		if forced != (p.ForceReason != "") {
			t.Fatalf("ForceReason %q with forced deletions %v", p.ForceReason, forced)
		}

		// A budget in backoff lets its healthy pods go only while its
		// current status allows disruptions, and never more than that.
		// Every other blocking budget is reported.
		for _, pdb := range snap.PDBs {
			name := pdb.Namespace + "/" + pdb.Name
			held := false
			for _, b := range snap.State.backoffs {
				held = held || (b.Key == "pdb/"+name && p.Now.Before(b.Until))
			}
			if !held {
				continue
			}
			limit := pdb.Status.DisruptionsAllowed
			if pdb.Status.ObservedGeneration < pdb.Generation {
				limit = 0
			}
			if evicted[name] > max(limit, 0) {
				t.Fatalf("budget %s in backoff (allows %d, current %v): %d evictions", name, pdb.Status.DisruptionsAllowed,
					pdb.Status.ObservedGeneration >= pdb.Generation, evicted[name])
			}
		}
		blocking := map[string]bool{}
		for _, b := range p.State.BlockingBudgets() {
			blocking[b] = true
		}
		for _, d := range p.Decisions {
			if d.Action == ActionBlocked && (d.Cause == CauseDisruptionBudget || d.Cause == CauseMisconfiguredPDB) &&
				len(d.PDBs) == 1 && !blocking[d.PDBs[0].Name] {
				t.Fatalf("%v is blocked by %s, which BlockingBudgets %v leaves out", d.Pod, d.PDBs[0].Name, p.State.BlockingBudgets())
			}
		}

		// Volume pods in flight stay within the parallelism, deletions
		// for refusals included.
		withVolumes := 0
		for _, d := range p.Decisions {
			if (d.Action == ActionEvict || d.Cause == CauseEvictRetries) && len(d.Volumes) > 0 {
				withVolumes++
			}
		}
		if withVolumes > opts.Volumes.Parallelism {
			t.Fatalf("%d evictions of pods with volumes, parallelism %d", withVolumes, opts.Volumes.Parallelism)
		}

		// The summary agrees with the decisions.
		if p.Done != (p.RemainingPods() == 0 && len(p.Volumes) == 0) {
			t.Fatalf("Done=%v with %d pods and %d volume waits remaining", p.Done, p.RemainingPods(), len(p.Volumes))
		}
		if p.Done != p.NextCheck.IsZero() || (!p.Done && p.NextCheck.Before(p.Now)) {
			t.Fatalf("Done=%v NextCheck=%v Now=%v", p.Done, p.NextCheck, p.Now)
		}

		// The order of the pods in the snapshot does not matter.
		shuffled := snap
		shuffled.Pods = rapid.Permutation(snap.Pods).Draw(t, "shuffled")
		if diff := cmp.Diff(p, Decide(shuffled, opts), cmpopts.EquateEmpty(), stateFields); diff != "" {
			t.Fatalf("plan depends on the pod order (-want +got):\n%s", diff)
		}
	})
}

// TestPropertyDrainSimulation runs the planner pass after pass against a
// simulated node: evictions are accepted, the "kubelet" removes
// terminating pods and the attach-detach controller volume attachments at
// random. Order groups must drain one after the other: every eviction
// happens in a group no earlier than the previous one. With a deadline the
// drain must end.
func TestPropertyDrainSimulation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		snap, opts := genSnapshot(t)
		opts.RefuseUnmanaged, opts.RefuseLocalStorage = false, false
		snap.State = State{}
		pods := map[types.UID]*corev1.Pod{}
		for _, p := range snap.Pods {
			pods[p.UID] = p.DeepCopy()
		}
		vas := snap.VolumeAttachments
		now := snap.Now
		// Budgets in the simulation never change, so only a deadline
		// guarantees an end.
		st := State{start: now, deadline: now.Add(time.Duration(rapid.IntRange(1, 900).Draw(t, "timeout")) * time.Second)}
		lastGroup := (*Group)(nil)
		for step := 0; ; step++ {
			if step > 400 {
				t.Fatalf("drain did not finish")
			}
			cur := make([]*corev1.Pod, 0, len(pods))
			for _, p := range pods {
				cur = append(cur, p)
			}
			plan := Decide(Snapshot{Node: snap.Node, Pods: cur, PDBs: snap.PDBs, VolumeAttachments: vas,
				Claims: snap.Claims, Now: now, State: st}, opts)
			st = plan.State
			if plan.Done {
				break
			}
			for i := range plan.Decisions {
				d := &plan.Decisions[i]
				if d.Action != ActionEvict && d.Action != ActionForceDelete {
					continue
				}
				if d.Action == ActionEvict {
					if lastGroup != nil && d.Group.Less(*lastGroup) {
						t.Fatalf("step %d: eviction in %v after one in %v", step, d.Group, *lastGroup)
					}
					g := d.Group
					lastGroup = &g
				}
				p := pods[d.Pod.UID]
				if p.DeletionTimestamp == nil {
					p.DeletionTimestamp = &metav1.Time{Time: now.Add(podGrace(p))}
				}
				track(&st, d)
			}
			// The kubelet removes some terminating pods (all of them when
			// nothing else is drawn, so that the drain progresses).
			for uid, p := range pods {
				if p.DeletionTimestamp != nil && rapid.IntRange(0, 2).Draw(t, "kubelet") > 0 {
					delete(pods, uid)
				}
			}
			// Wait-completed pods finish eventually.
			for _, p := range pods {
				if p.Annotations[PolicyAnnotation] == "wait-completed" && rapid.IntRange(0, 3).Draw(t, "complete") == 0 {
					p.Status.Phase = corev1.PodSucceeded
				}
			}
			// The attach-detach controller removes attachments of volumes
			// no pod uses any more.
			var keep []*storagev1.VolumeAttachment
			for _, va := range vas {
				if rapid.IntRange(0, 2).Draw(t, "detach") > 0 {
					continue
				}
				keep = append(keep, va)
			}
			vas = keep
			now = now.Add(time.Duration(rapid.IntRange(1, 30).Draw(t, "elapse")) * time.Second)
		}
	})
}

func deepCopySnapshot(s Snapshot) Snapshot {
	out := s
	out.Node = s.Node.DeepCopy()
	out.Pods = make([]*corev1.Pod, len(s.Pods))
	for i, p := range s.Pods {
		out.Pods[i] = p.DeepCopy()
	}
	out.PDBs = make([]*policyv1.PodDisruptionBudget, len(s.PDBs))
	for i, p := range s.PDBs {
		out.PDBs[i] = p.DeepCopy()
	}
	out.VolumeAttachments = make([]*storagev1.VolumeAttachment, len(s.VolumeAttachments))
	for i, v := range s.VolumeAttachments {
		out.VolumeAttachments[i] = v.DeepCopy()
	}
	out.Claims = make(map[string]string, len(s.Claims))
	for k, v := range s.Claims {
		out.Claims[k] = v
	}
	st, err := jsonRoundTrip(s.State)
	if err != nil {
		panic(err)
	}
	out.State = st
	return out
}
