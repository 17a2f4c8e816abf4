package drain_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/simcluster"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{})
}

// fixture is one test's simulated cluster and namespace.
type fixture struct {
	env     *testenv.Env
	client  kubernetes.Interface
	ns      string
	cluster *simcluster.Cluster
}

func newFixture(t *testing.T, kubelet sim.KubeletOptions) *fixture {
	t.Helper()
	env := testenv.Get(t)
	f := &fixture{env: env, client: env.Client(), ns: env.Namespace(t)}
	f.cluster = simcluster.Start(t, f.client, simcluster.Options{Kubelet: kubelet})
	return f
}

// node adds a simulated node named after the test namespace.
func (f *fixture) node(t *testing.T, suffix string) string {
	t.Helper()
	return f.cluster.AddNode(t, f.ns[len(f.ns)-6:]+"-"+suffix)
}

// onNodes pins a pod template to the given nodes by hostname.
func onNodes(nodes ...string) func(*corev1.PodTemplateSpec) {
	return func(tpl *corev1.PodTemplateSpec) {
		tpl.Spec.NodeSelector = nil
		tpl.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: nodes}},
			}}},
		}}
	}
}

func (f *fixture) deployment(t *testing.T, name, node string, replicas int32, mutate ...func(*corev1.PodTemplateSpec)) {
	t.Helper()
	ctx := context.Background()
	err := simcluster.CreateDeployment(ctx, f.client, f.ns, name, node, replicas, func(tpl *corev1.PodTemplateSpec) {
		for _, m := range mutate {
			m(tpl)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) waitRunning(t *testing.T, selector string, n int) {
	t.Helper()
	if err := simcluster.WaitPodsRunning(context.Background(), f.client, f.ns, selector, n); err != nil {
		t.Fatal(err)
	}
}

// pdb creates a budget over app=app and waits until the disruption
// controller has computed its status with all pods healthy.
func (f *fixture) pdb(t *testing.T, app string, spec policyv1.PodDisruptionBudgetSpec, healthy int32) {
	t.Helper()
	ctx := context.Background()
	spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: app}, Spec: spec}
	if _, err := f.client.PolicyV1().PodDisruptionBudgets(f.ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		got, err := f.client.PolicyV1().PodDisruptionBudgets(f.ns).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy == healthy,
			fmt.Sprintf("status %+v", got.Status)
	})
}

// eventLog collects the drain's pod events.
type eventLog struct {
	mu     sync.Mutex
	events []drain.Event
}

func (l *eventLog) add(e drain.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) of(typ drain.EventType) []drain.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []drain.Event
	for _, e := range l.events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// podTimeline watches the pods of a namespace and records, per pod name,
// when its termination began and when it was gone.
type podTimeline struct {
	mu          sync.Mutex
	terminating map[string]time.Time
	gone        map[string]time.Time
	onChange    func(map[types.UID]*corev1.Pod)
	pods        map[types.UID]*corev1.Pod
}

func watchPods(t *testing.T, client kubernetes.Interface, ns, selector string, onChange func(map[types.UID]*corev1.Pod)) *podTimeline {
	t.Helper()
	tl := &podTimeline{terminating: map[string]time.Time{}, gone: map[string]time.Time{}, onChange: onChange, pods: map[types.UID]*corev1.Pod{}}
	ctx, cancel := context.WithCancel(context.Background())
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	// The callback sees whole states only: the listed pods go in at once.
	callback := tl.onChange
	tl.onChange = nil
	for i := range list.Items {
		tl.observe(watch.Added, &list.Items[i])
	}
	tl.onChange = callback
	if callback != nil {
		callback(tl.pods)
	}
	w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok {
				tl.observe(ev.Type, pod)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return tl
}

func (tl *podTimeline) observe(typ watch.EventType, pod *corev1.Pod) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	now := time.Now()
	if pod.DeletionTimestamp != nil {
		if _, seen := tl.terminating[pod.Name]; !seen {
			tl.terminating[pod.Name] = now
		}
	}
	if typ == watch.Deleted {
		tl.gone[pod.Name] = now
		delete(tl.pods, pod.UID)
	} else {
		tl.pods[pod.UID] = pod
	}
	if tl.onChange != nil {
		tl.onChange(tl.pods)
	}
}

func (tl *podTimeline) times(name string) (terminating, gone time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.terminating[name], tl.gone[name]
}

// TestDrainRespectsDisruptionBudget drains 60 pods of three Deployments,
// one of them under a budget with maxUnavailable 1: the budget's pods are
// evicted one at a time as their replacements become ready on a second
// node, and the 429s in between are retried with backoff.
func TestDrainRespectsDisruptionBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t, sim.KubeletOptions{})
	ctx := context.Background()
	source, spare := f.node(t, "source"), f.node(t, "spare")

	drainer, err := drain.New(f.client, drain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := drainer.Cordon(ctx, spare); err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{"free-a", "free-b", "guarded"} {
		f.deployment(t, app, source, 20, onNodes(source, spare))
	}
	for _, app := range []string{"free-a", "free-b", "guarded"} {
		f.waitRunning(t, "app="+app, 20)
	}
	f.pdb(t, "guarded", policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}, 20)
	if err := drainer.Uncordon(ctx, spare); err != nil {
		t.Fatal(err)
	}

	// Unavailable = replicas - pods that are Ready and not terminating.
	var mu sync.Mutex
	worst := 0
	watchPods(t, f.client, f.ns, "app=guarded", func(pods map[types.UID]*corev1.Pod) {
		available := 0
		for _, p := range pods {
			if p.DeletionTimestamp == nil && simcluster.PodReady(p) {
				available++
			}
		}
		mu.Lock()
		worst = max(worst, 20-available)
		mu.Unlock()
	})

	reg := prometheus.NewRegistry()
	var log eventLog
	const backoff = 300 * time.Millisecond
	drainer, err = drain.New(f.client, drain.Options{
		Registerer:     reg,
		OnEvent:        log.add,
		BackoffInitial: backoff,
		BackoffMax:     2 * time.Second,
		PollInterval:   500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	drainCtx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := drainer.Drain(drainCtx, source)
	if err != nil {
		t.Fatalf("drain: %v (%s)", err, res.Message)
	}
	took := time.Since(start)
	t.Logf("drained 60 pods in %v: %d evictions", took, len(log.of(drain.EventEvictionStarted)))

	mu.Lock()
	defer mu.Unlock()
	if worst > 1 {
		t.Errorf("at one moment %d pods of the budget's set were unavailable; the budget allows 1", worst)
	}
	if got := len(log.of(drain.EventEvictionStarted)); got != 60 {
		t.Errorf("%d evictions started, want 60", got)
	}
	blocked := log.of(drain.EventEvictionBlocked)
	if len(blocked) == 0 {
		t.Fatal("no eviction was refused by the budget; the test proves nothing")
	}
	// Backoff, not a hot loop: refusals come in rounds (one pass may ask for
	// several pods of the budget at once), and rounds are at least the
	// initial backoff apart.
	var rounds []time.Time
	for _, e := range blocked {
		if len(rounds) == 0 || e.Time.Sub(rounds[len(rounds)-1]) > 100*time.Millisecond {
			rounds = append(rounds, e.Time)
		}
	}
	for i := 1; i < len(rounds); i++ {
		if gap := rounds[i].Sub(rounds[i-1]); gap < backoff-50*time.Millisecond {
			t.Errorf("refused evictions retried after %v, less than the backoff %v", gap, backoff)
		}
	}
	if n := testutil.CollectAndCount(reg); n == 0 {
		t.Error("no drain metrics registered")
	}
	t.Logf("%d refusals in %d rounds", len(blocked), len(rounds))
}

// TestDrainOrderGroups drains pods of order groups 0, 10 and 20 and a
// system-critical pod group by group, and leaves the DaemonSet pod alone.
func TestDrainOrderGroups(t *testing.T) {
	t.Parallel()
	f := newFixture(t, sim.KubeletOptions{})
	ctx := context.Background()
	node := f.node(t, "order")

	order := func(n string) func(*corev1.PodTemplateSpec) {
		return func(tpl *corev1.PodTemplateSpec) {
			tpl.Annotations = map[string]string{drain.OrderAnnotation: n}
		}
	}
	f.deployment(t, "g0", node, 3, order("0"))
	f.deployment(t, "g10", node, 3, order("10"))
	f.deployment(t, "g20", node, 3, order("20"))
	f.deployment(t, "critical", node, 1, func(tpl *corev1.PodTemplateSpec) {
		tpl.Spec.PriorityClassName = "system-cluster-critical"
	})
	ds := simcluster.DaemonSetOn(f.ns, "agent", node)
	if _, err := f.client.AppsV1().DaemonSets(f.ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{"g0", "g10", "g20", "critical", "agent"} {
		want := 3
		if app == "critical" || app == "agent" {
			want = 1
		}
		f.waitRunning(t, "app="+app, want)
	}

	drainer, err := drain.New(f.client, drain.Options{PollInterval: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := drainer.Plan(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	groupOf := map[string]drain.Group{}
	var daemonPod string
	for _, d := range plan.Decisions {
		if d.Action == drain.ActionSkip {
			if d.Cause == drain.CauseDaemonSet {
				daemonPod = d.Pod.Name
			}
			continue
		}
		groupOf[d.Pod.Name] = d.Group
	}
	wantGroups := []drain.Group{
		{Order: 0, Tier: drain.TierRegular}, {Order: 0, Tier: drain.TierCritical},
		{Order: 10, Tier: drain.TierRegular}, {Order: 20, Tier: drain.TierRegular},
	}
	if !slices.Equal(plan.Groups, wantGroups) {
		t.Fatalf("planned groups %v, want %v", plan.Groups, wantGroups)
	}
	if daemonPod == "" {
		t.Fatalf("the DaemonSet pod is not planned to be skipped: %+v", plan.Decisions)
	}

	tl := watchPods(t, f.client, f.ns, "app in (g0,g10,g20,critical)", nil)
	drainCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if res, err := drainer.Drain(drainCtx, node); err != nil {
		t.Fatalf("drain: %v (%s)", err, res.Message)
	}

	// Every pod of a group is gone before any pod of the next group starts
	// terminating.
	for i := 1; i < len(wantGroups); i++ {
		var lastGone, firstStart time.Time
		for name, g := range groupOf {
			term, gone := tl.times(name)
			switch g {
			case wantGroups[i-1]:
				if gone.IsZero() {
					t.Fatalf("pod %s of group %v never went", name, g)
				}
				if gone.After(lastGone) {
					lastGone = gone
				}
			case wantGroups[i]:
				if firstStart.IsZero() || term.Before(firstStart) {
					firstStart = term
				}
			}
		}
		if firstStart.Before(lastGone) {
			t.Errorf("group %v started terminating at %v, before group %v was gone at %v",
				wantGroups[i], firstStart.Format(time.StampMilli), wantGroups[i-1], lastGone.Format(time.StampMilli))
		}
	}
	pod, err := f.client.CoreV1().Pods(f.ns).Get(ctx, daemonPod, metav1.GetOptions{})
	if err != nil || pod.DeletionTimestamp != nil {
		t.Errorf("DaemonSet pod %s was touched: err=%v", daemonPod, err)
	}
}

// TestDrainMisconfiguredBudget names a budget that can never allow a
// disruption at once, and under a 30 s deadline force-deletes its pods no
// earlier than the deadline minus their grace period.
func TestDrainMisconfiguredBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t, sim.KubeletOptions{})
	ctx := context.Background()
	node := f.node(t, "strict")
	const grace = 5 * time.Second
	f.deployment(t, "strict", node, 3, func(tpl *corev1.PodTemplateSpec) {
		tpl.Spec.TerminationGracePeriodSeconds = ptr.To(int64(grace / time.Second))
	})
	f.waitRunning(t, "app=strict", 3)
	f.pdb(t, "strict", policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(3))}, 3)
	pdbName := f.ns + "/strict"

	var log eventLog
	drainer, err := drain.New(f.client, drain.Options{Timeout: 30 * time.Second, OnEvent: log.add, PollInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := drainer.Plan(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	assertMisconfigured(t, "Plan", plan, pdbName)
	res, err := drainer.Pass(ctx, node, drain.State{})
	if err != nil {
		t.Fatal(err)
	}
	assertMisconfigured(t, "Pass", res.Plan, pdbName)
	if res.Evictions != 0 {
		t.Errorf("first pass evicted %d pods through a budget that allows none", res.Evictions)
	}

	// Go on from the first pass's state: its deadline stands.
	deadline := res.State.Deadline()
	if got := deadline.Sub(res.State.Start()); got != 30*time.Second {
		t.Fatalf("deadline %v after start, want 30s", got)
	}
	state := res.State
	drainCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for !res.Done {
		if wait := time.Until(res.NextCheck); wait > 0 {
			select {
			case <-drainCtx.Done():
				t.Fatalf("drain not done by the test's limit: %s", res.Message)
			case <-time.After(wait):
			}
		}
		res, err = drainer.Pass(drainCtx, node, state)
		if err != nil {
			t.Fatalf("pass: %v", err)
		}
		state = res.State
	}
	forced := log.of(drain.EventForceDeleted)
	if len(forced) != 3 {
		t.Fatalf("%d pods force-deleted, want 3; events: %v", len(forced), log.events)
	}
	for _, e := range forced {
		if e.Time.Before(deadline.Add(-grace)) {
			t.Errorf("pod %s force-deleted at %v, before deadline - grace = %v", e.Pod, e.Time.Format(time.StampMilli), deadline.Add(-grace).Format(time.StampMilli))
		}
	}
}

func assertMisconfigured(t *testing.T, what string, plan drain.Plan, pdb string) {
	t.Helper()
	blocked := 0
	for _, d := range plan.Decisions {
		if d.Action == drain.ActionBlocked && d.Cause == drain.CauseMisconfiguredPDB {
			blocked++
		}
	}
	if blocked != 3 {
		t.Errorf("%s: %d pods blocked by a misconfigured budget, want 3: %+v", what, blocked, plan.Decisions)
	}
	if !strings.Contains(plan.Message, pdb) {
		t.Errorf("%s: message %q does not name the budget %s", what, plan.Message, pdb)
	}
}

// TestDrainNeverEvictsAReplacement gives the drain a stale view in which a
// pod still has its old UID; the pod has meanwhile been replaced by a new
// one of the same name, which the eviction must not touch.
func TestDrainNeverEvictsAReplacement(t *testing.T) {
	t.Parallel()
	f := newFixture(t, sim.KubeletOptions{})
	ctx := context.Background()
	node := f.node(t, "uid")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stateful-0", Namespace: f.ns, Labels: map[string]string{"app": "uid"}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
		},
	}
	old, err := f.client.CoreV1().Pods(f.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.client.CoreV1().Pods(f.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		_, err := f.client.CoreV1().Pods(f.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "old pod still there"
	})
	replacement, err := f.client.CoreV1().Pods(f.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.waitRunning(t, "app=uid", 1)

	stale := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := stale.Add(old); err != nil {
		t.Fatal(err)
	}
	var log eventLog
	drainer, err := drain.New(f.client, drain.Options{Listers: drain.Listers{Pods: stale}, OnEvent: log.add})
	if err != nil {
		t.Fatal(err)
	}
	res, err := drainer.Pass(ctx, node, drain.State{})
	if err != nil {
		t.Fatalf("pass: %v", err)
	}
	if res.Evictions != 0 {
		t.Errorf("pass reports %d evictions of a pod that no longer exists", res.Evictions)
	}
	got, err := f.client.CoreV1().Pods(f.ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("replacement pod: %v", err)
	}
	if got.UID != replacement.UID || got.DeletionTimestamp != nil {
		t.Errorf("the replacement pod was evicted (uid %s, deleting %v)", got.UID, got.DeletionTimestamp != nil)
	}
	for _, d := range res.Decisions {
		if d.Pod.UID == old.UID && d.Action != drain.ActionGone {
			t.Errorf("stale pod's decision %s, want %s", d.Action, drain.ActionGone)
		}
	}
}

// TestDrainWaitsForVolumeDetach drains six pods with simulated attachable
// volumes, three at a time, each waiting until kube-controller-manager's
// attach-detach controller has removed its VolumeAttachment.
func TestDrainWaitsForVolumeDetach(t *testing.T) {
	t.Parallel()
	f := newFixture(t, sim.KubeletOptions{DetachDelay: 2 * time.Second})
	ctx := context.Background()
	node := f.node(t, "volumes")
	const pods = 6
	pvOf := map[string]string{}
	for i := range pods {
		name := fmt.Sprintf("db-%d", i)
		pvOf[name] = simcluster.CreateBoundClaim(t, f.client, f.ns, name)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "db"}},
			Spec: corev1.PodSpec{
				NodeName:                      node,
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers:                    []corev1.Container{{Name: "db", Image: "registry.invalid/db:1"}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name},
				}}},
			},
		}
		if _, err := f.client.CoreV1().Pods(f.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.waitRunning(t, "app=db", pods)
	attached := func(ctx context.Context) (map[string]bool, error) {
		list, err := f.client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := map[string]bool{}
		for _, va := range list.Items {
			if va.Spec.NodeName == node && va.Spec.Source.PersistentVolumeName != nil {
				out[*va.Spec.Source.PersistentVolumeName] = va.Status.Attached
			}
		}
		return out, nil
	}
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		got, err := attached(ctx)
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, ok := range got {
			if ok {
				n++
			}
		}
		return n == pods, fmt.Sprintf("%d of %d volumes attached", n, pods)
	})

	var log eventLog
	drainer, err := drain.New(f.client, drain.Options{
		OnEvent:      log.add,
		PollInterval: 300 * time.Millisecond,
		Volumes:      drain.VolumeOptions{Parallelism: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	drainCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if res, err := drainer.Drain(drainCtx, node); err != nil {
		t.Fatalf("drain: %v (%s)", err, res.Message)
	}

	started := map[string]time.Time{}
	for _, e := range log.of(drain.EventEvictionStarted) {
		started[e.Pod.Name] = e.Time
	}
	detached := map[string]time.Time{}
	for _, e := range log.of(drain.EventVolumesDetached) {
		detached[e.Pod.Name] = e.Time
		if !slices.Equal(e.Volumes, []string{pvOf[e.Pod.Name]}) {
			t.Errorf("pod %s: detached volumes %v, want [%s]", e.Pod.Name, e.Volumes, pvOf[e.Pod.Name])
		}
	}
	if len(started) != pods || len(detached) != pods {
		t.Fatalf("%d evictions and %d detaches, want %d each", len(started), len(detached), pods)
	}
	// Concurrency: at no moment more than three pods between eviction and
	// detach, and more than one at some moment.
	most := 0
	for _, from := range started {
		inFlight := 0
		for other, s := range started {
			if !s.After(from) && detached[other].After(from) {
				inFlight++
			}
		}
		most = max(most, inFlight)
	}
	if most > 3 || most < 2 {
		t.Errorf("at most %d volume pods in flight at once, want between 2 and 3 (parallelism 3)", most)
	}
	left, err := attached(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("volume attachments left on the node after the drain: %v", left)
	}
}

// TestDrainHonoursContextDeadline drains a node blocked by a budget with a
// 20 s context: Drain returns when the context ends, with a Result naming
// the budget.
func TestDrainHonoursContextDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, sim.KubeletOptions{})
	ctx := context.Background()
	node := f.node(t, "blocked")
	f.deployment(t, "blocked", node, 2)
	f.waitRunning(t, "app=blocked", 2)
	f.pdb(t, "blocked", policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2))}, 2)

	drainer, err := drain.New(f.client, drain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const limit = 20 * time.Second
	drainCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := time.Now()
	res, err := drainer.Drain(drainCtx, node)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain returned %v, want an error wrapping context.DeadlineExceeded", err)
	}
	if took < limit-time.Second || took > limit+time.Second {
		t.Errorf("Drain returned after %v, want %v ± 1s", took, limit)
	}
	if !strings.Contains(res.Message, f.ns+"/blocked") || !strings.Contains(err.Error(), f.ns+"/blocked") {
		t.Errorf("result message %q / error %q do not name the budget", res.Message, err)
	}
}

// TestDrainBoundsBudgetRefusals drains three pods behind a budget of
// minAvailable 2 on a node whose replacements cannot schedule: the first
// pod is evicted, the API server then refuses the budget's evictions
// (429, with the budget as cause), and after the third refusal
// (MaxEvictRetries 3) the two pods left are deleted without the eviction
// API, with no deadline at all.
func TestDrainBoundsBudgetRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, sim.KubeletOptions{})
	node := f.node(t, "retries")
	f.deployment(t, "held", node, 3)
	f.waitRunning(t, "app=held", 3)
	f.pdb(t, "held", policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2))}, 3)

	var log eventLog
	drainer, err := drain.New(f.client, drain.Options{
		MaxEvictRetries: 3,
		BackoffInitial:  200 * time.Millisecond,
		BackoffMax:      time.Second,
		PollInterval:    500 * time.Millisecond,
		OnEvent:         log.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := drainer.Drain(ctx, node)
	if err != nil {
		t.Fatalf("drain: %v (%s)", err, res.Message)
	}
	if n := len(log.of(drain.EventEvictionStarted)); n != 1 {
		t.Errorf("%d evictions accepted, want the one the budget allowed", n)
	}
	blocked := log.of(drain.EventEvictionBlocked)
	exhausted := log.of(drain.EventEvictRetriesExhausted)
	if len(blocked) < 3 || len(exhausted) != 2 {
		t.Fatalf("%d refusals and %d deletions after them, want at least 3 and 2; events: %v", len(blocked), len(exhausted), log.events)
	}
	third := blocked[2].Time
	for _, e := range exhausted {
		if e.Time.Before(third) {
			t.Errorf("%s deleted at %v, before the third refusal at %v", e.Pod, e.Time.Format(time.StampMilli), third.Format(time.StampMilli))
		}
	}
	if len(log.of(drain.EventForceDeleted)) != 0 {
		t.Error("pods force-deleted without a deadline")
	}
	t.Logf("%d refusals, the pods left deleted %v after the first", len(blocked), exhausted[0].Time.Sub(blocked[0].Time))
}

// TestDrainMixedNode drains simcluster's mixed node: a Deployment of six
// pods behind a budget with maxUnavailable 1, one of ten pods without, a
// DaemonSet, a bare pod with an emptyDir and a system-cluster-critical
// pod. The budget is never violated, the DaemonSet pod stays, and the
// critical pod is evicted last, after every other drained pod is gone.
// The benchmark module times the same workload against kubectl drain.
func TestDrainMixedNode(t *testing.T) {
	t.Parallel()
	f := newFixture(t, sim.KubeletOptions{})
	w := f.cluster.MixedNode(t, f.ns, "mixed")
	guarded := simcluster.WatchAvailability(t, f.client, f.ns, "app="+w.Guarded, int(w.GuardedReplicas))

	var log eventLog
	drainer, err := drain.New(f.client, drain.Options{OnEvent: log.add, PollInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := drainer.Drain(ctx, w.Node)
	if err != nil {
		t.Fatalf("drain: %v (%s)", err, res.Message)
	}
	took := time.Since(start)

	if worst := guarded.WorstUnavailable(); worst > 1 {
		t.Errorf("at one moment %d pods of %s were unavailable; its budget allows 1", worst, w.Guarded)
	}
	if left, err := simcluster.PodsOnNode(ctx, f.client, w.Node); err != nil || left != 1 {
		t.Errorf("%d pods left on the node, want only the DaemonSet's (%v)", left, err)
	}
	isCritical := func(e drain.Event) bool { return strings.HasPrefix(e.Pod.Name, w.Critical+"-") }
	evicted := log.of(drain.EventEvictionStarted)
	if want := int(w.GuardedReplicas + w.FreeReplicas + 2); len(evicted) != want {
		t.Fatalf("%d evictions, want %d", len(evicted), want)
	}
	var critical drain.Event
	var lastOther time.Time
	for _, e := range append(evicted, log.of(drain.EventPodGone)...) {
		switch {
		case isCritical(e) && e.Type == drain.EventEvictionStarted:
			critical = e
		case !isCritical(e) && e.Time.After(lastOther):
			lastOther = e.Time
		}
	}
	if critical.Pod.Name == "" || critical.Time.Before(lastOther) {
		t.Errorf("critical pod evicted at %v, before the last other pod went (%v)",
			critical.Time.Format(time.StampMilli), lastOther.Format(time.StampMilli))
	}
	if len(log.of(drain.EventForceDeleted)) != 0 {
		t.Error("pods force-deleted without a deadline")
	}
	t.Logf("drained %d pods in %v; %d evictions refused on the way", len(evicted), took, len(log.of(drain.EventEvictionBlocked)))
}

// BenchmarkDrain200Pods drains a node running 200 pods of a Deployment, no
// PodDisruptionBudgets, and reports pods drained per second. The benchmark
// module under bench/ runs the same workload through kubectl's drain.
func BenchmarkDrain200Pods(b *testing.B) {
	const pods = 200
	env := testenv.Get(b)
	client := env.Client()
	cluster := simcluster.Start(b, client, simcluster.Options{})
	ctx := context.Background()
	drainer, err := drain.New(client, drain.Options{PollInterval: 100 * time.Millisecond, EvictionConcurrency: 50})
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		node := cluster.NodeWithDeployment(b, env.Namespace(b), fmt.Sprintf("load%d", i), pods)
		b.StartTimer()
		start := time.Now()
		if res, err := drainer.Drain(ctx, node); err != nil {
			b.Fatalf("drain: %v (%s)", err, res.Message)
		}
		total += time.Since(start)
		b.StopTimer()
		if left, err := simcluster.PodsOnNode(ctx, client, node); err != nil || left != 0 {
			b.Fatalf("%d pods left on %s after the drain (%v)", left, node, err)
		}
	}
	b.ReportMetric(float64(pods*b.N)/total.Seconds(), "pods/s")
}
