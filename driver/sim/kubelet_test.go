package sim

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestDesiredNodeStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	earlier := metav1.NewTime(now.Add(-time.Hour))
	vm := VM{
		Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
	}
	type cond struct {
		Type       corev1.NodeConditionType
		Status     corev1.ConditionStatus
		Transition time.Time
	}
	summarize := func(s corev1.NodeStatus) []cond {
		var out []cond
		for _, c := range s.Conditions {
			out = append(out, cond{c.Type, c.Status, c.LastTransitionTime.Time})
		}
		return out
	}
	tests := []struct {
		name      string
		overrides map[corev1.NodeConditionType]corev1.NodeCondition
		reported  map[corev1.NodeConditionType]bool
		current   []corev1.NodeCondition
		want      []cond
	}{
		{
			name: "healthy defaults on a new node",
			want: []cond{
				{corev1.NodeReady, corev1.ConditionTrue, now},
				{corev1.NodeMemoryPressure, corev1.ConditionFalse, now},
				{corev1.NodeDiskPressure, corev1.ConditionFalse, now},
				{corev1.NodePIDPressure, corev1.ConditionFalse, now},
			},
		},
		{
			name:    "unchanged status keeps its transition time",
			current: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: earlier}},
			want: []cond{
				{corev1.NodeReady, corev1.ConditionTrue, earlier.Time},
				{corev1.NodeMemoryPressure, corev1.ConditionFalse, now},
				{corev1.NodeDiskPressure, corev1.ConditionFalse, now},
				{corev1.NodePIDPressure, corev1.ConditionFalse, now},
			},
		},
		{
			name: "overrides replace defaults and add conditions",
			overrides: map[corev1.NodeConditionType]corev1.NodeCondition{
				corev1.NodeReady: {Type: corev1.NodeReady, Status: corev1.ConditionFalse},
				"KernelDeadlock": {Type: "KernelDeadlock", Status: corev1.ConditionTrue},
			},
			current: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: earlier}},
			want: []cond{
				{corev1.NodeReady, corev1.ConditionFalse, now},
				{corev1.NodeMemoryPressure, corev1.ConditionFalse, now},
				{corev1.NodeDiskPressure, corev1.ConditionFalse, now},
				{corev1.NodePIDPressure, corev1.ConditionFalse, now},
				{"KernelDeadlock", corev1.ConditionTrue, now},
			},
		},
		{
			name: "someone else's condition stays as it is",
			current: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: earlier},
				{Type: v1alpha1.NodePreserved, Status: corev1.ConditionTrue, LastTransitionTime: earlier},
			},
			want: []cond{
				{corev1.NodeReady, corev1.ConditionTrue, earlier.Time},
				{corev1.NodeMemoryPressure, corev1.ConditionFalse, now},
				{corev1.NodeDiskPressure, corev1.ConditionFalse, now},
				{corev1.NodePIDPressure, corev1.ConditionFalse, now},
				{v1alpha1.NodePreserved, corev1.ConditionTrue, earlier.Time},
			},
		},
		{
			name:     "a condition this kubelet reported goes with its override",
			reported: map[corev1.NodeConditionType]bool{"KernelDeadlock": true},
			current:  []corev1.NodeCondition{{Type: "KernelDeadlock", Status: corev1.ConditionTrue, LastTransitionTime: earlier}},
			want: []cond{
				{corev1.NodeReady, corev1.ConditionTrue, now},
				{corev1.NodeMemoryPressure, corev1.ConditionFalse, now},
				{corev1.NodeDiskPressure, corev1.ConditionFalse, now},
				{corev1.NodePIDPressure, corev1.ConditionFalse, now},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := desiredNodeStatus(vm, tc.overrides, tc.reported, tc.current, now)
			if diff := cmp.Diff(tc.want, summarize(got)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if got.Capacity.Pods().String() != "110" {
				t.Errorf("pods capacity %s, want the kubelet's default 110", got.Capacity.Pods())
			}
		})
	}
}

func TestStatusEquivalentIgnoresHeartbeats(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	vm := VM{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	first := desiredNodeStatus(vm, nil, nil, nil, now)
	later := desiredNodeStatus(vm, nil, nil, first.Conditions, now.Add(time.Minute))
	if !statusEquivalent(first, later) {
		t.Error("a status that differs only in heartbeat times needs no write")
	}
	notReady := desiredNodeStatus(vm, map[corev1.NodeConditionType]corev1.NodeCondition{
		corev1.NodeReady: {Type: corev1.NodeReady, Status: corev1.ConditionFalse},
	}, nil, first.Conditions, now)
	if statusEquivalent(first, notReady) {
		t.Error("a changed Ready condition must be written")
	}
}

// The lease is renewed from the copy last written, as the kubelet does: it
// is read only when there is no such copy or it went stale.
func TestRenewLeaseReadsOnlyWithoutAWrittenCopy(t *testing.T) {
	client := fake.NewClientset()
	k := NewKubelet(nil, client, KubeletOptions{LeaseDuration: 40 * time.Second})
	k.leases.jitter = func(period time.Duration) time.Duration { return period }
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1"}}
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	renew := func(at time.Time) []string {
		t.Helper()
		client.ClearActions()
		if err := k.leases.renew(t.Context(), node, at); err != nil {
			t.Fatalf("renewing the lease at %v: %v", at, err)
		}
		var verbs []string
		for _, a := range client.Actions() {
			verbs = append(verbs, a.GetVerb())
		}
		return verbs
	}
	leases := client.CoordinationV1().Leases(corev1.NamespaceNodeLease)

	steps := []struct {
		what  string
		at    time.Time
		setup func()
		want  []string
	}{
		{what: "first renewal", at: start, want: []string{"get", "create"}},
		{what: "within a quarter of the lease duration", at: start.Add(9 * time.Second), want: nil},
		{what: "a quarter later", at: start.Add(10 * time.Second), want: []string{"update"}},
		{what: "again", at: start.Add(20 * time.Second), want: []string{"update"}},
		{
			what: "after the lease was deleted", at: start.Add(30 * time.Second),
			setup: func() {
				if err := leases.Delete(t.Context(), node.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"update"},
		},
		{what: "at the next sync", at: start.Add(30*time.Second + DefaultSyncPeriod), want: []string{"get", "create"}},
	}
	for _, s := range steps {
		if s.setup != nil {
			s.setup()
		}
		if diff := cmp.Diff(s.want, renew(s.at)); diff != "" {
			t.Errorf("%s: API calls (-want +got):\n%s", s.what, diff)
		}
	}
	lease, err := leases.Get(t.Context(), node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := lease.Spec.RenewTime.Time, start.Add(30*time.Second+DefaultSyncPeriod); !got.Equal(want) {
		t.Errorf("lease renewed at %v, want %v", got, want)
	}
	if len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].UID != node.UID {
		t.Errorf("lease owners %+v, want the node", lease.OwnerReferences)
	}
}

// fakeSource is a VMSource that counts its reads and notifies changes.
type fakeSource struct {
	vms     []VM
	reads   int
	changed chan struct{}
}

func (s *fakeSource) VMs() []VM {
	s.reads++
	return slices.Clone(s.vms)
}

func (s *fakeSource) Changed() <-chan struct{} { return s.changed }

func (s *fakeSource) change(vms ...VM) {
	s.vms = vms
	close(s.changed)
	s.changed = make(chan struct{})
}

// A sync reads the VMs again only when they may have changed: a change was
// notified, a VM's state ended by itself, or vmRereadPeriod passed.
func TestVMViewRereadsOnlyWhenTheVMsMayHaveChanged(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	running := VM{NodeName: "a", State: VMRunning, Initialized: true}
	booting := VM{NodeName: "b", State: VMProvisioning, StateUntil: start.Add(3 * time.Second)}
	src := &fakeSource{vms: []VM{running, booting}, changed: make(chan struct{})}
	var view vmView

	steps := []struct {
		what      string
		at        time.Duration
		change    []VM
		wantReads int
		wantAlive []string
	}{
		{what: "first sync", at: 0, wantReads: 1, wantAlive: []string{"a"}},
		{what: "nothing changed", at: time.Second, wantReads: 1, wantAlive: []string{"a"}},
		{what: "a boot completes", at: 3 * time.Second, wantReads: 2, wantAlive: []string{"a"}},
		{what: "a change is notified", at: 4 * time.Second, change: []VM{running, {NodeName: "b", State: VMRunning, Initialized: true}}, wantReads: 3, wantAlive: []string{"a", "b"}},
		{what: "nothing changed again", at: 8 * time.Second, wantReads: 3, wantAlive: []string{"a", "b"}},
		{what: "the reread period passed", at: 9 * time.Second, wantReads: 4, wantAlive: []string{"a", "b"}},
	}
	for _, s := range steps {
		if s.change != nil {
			src.change(s.change...)
		}
		v := view.get(src, start.Add(s.at))
		var alive []string
		for _, vm := range v.runningSorted {
			alive = append(alive, vm.NodeName)
		}
		if src.reads != s.wantReads || !slices.Equal(alive, s.wantAlive) {
			t.Errorf("%s: %d reads, running %v; want %d reads, running %v", s.what, src.reads, alive, s.wantReads, s.wantAlive)
		}
	}
}

// A source without change notification is read at every sync.
func TestVMViewReadsASourceWithoutNotificationEverySync(t *testing.T) {
	src := &fakeSource{changed: make(chan struct{})}
	plain := struct{ VMSource }{src} // hides Changed
	var view vmView
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for i := range 3 {
		view.get(plain, now.Add(time.Duration(i)*time.Millisecond))
	}
	if src.reads != 3 {
		t.Errorf("%d reads in 3 syncs, want 3", src.reads)
	}
}

func TestKubeletOptionsDefaults(t *testing.T) {
	tests := []struct {
		name string
		opts KubeletOptions
		want KubeletOptions
	}{
		{
			name: "zero",
			want: KubeletOptions{
				SyncPeriod: DefaultSyncPeriod, LeaseDuration: DefaultLeaseDuration, LeaseRenewPeriod: DefaultLeaseDuration / 4,
				StatusReportPeriod: DefaultStatusReportPeriod, Parallelism: DefaultParallelism,
			},
		},
		{
			name: "renew period follows the lease duration",
			opts: KubeletOptions{LeaseDuration: 2 * time.Minute},
			want: KubeletOptions{
				SyncPeriod: DefaultSyncPeriod, LeaseDuration: 2 * time.Minute, LeaseRenewPeriod: 30 * time.Second,
				StatusReportPeriod: DefaultStatusReportPeriod, Parallelism: DefaultParallelism,
			},
		},
		{
			name: "explicit",
			opts: KubeletOptions{LeaseDuration: time.Minute, LeaseRenewPeriod: 20 * time.Second, StatusReportPeriod: 10 * time.Minute, Parallelism: 4},
			want: KubeletOptions{
				SyncPeriod: DefaultSyncPeriod, LeaseDuration: time.Minute, LeaseRenewPeriod: 20 * time.Second,
				StatusReportPeriod: 10 * time.Minute, Parallelism: 4,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := NewKubelet(nil, fake.NewClientset(), tc.opts)
			got := k.opts
			got.TerminationFraction, got.AttachDelay, got.DetachDelay, got.CSIDriver, got.Identity, got.Clock = 0, 0, 0, "", "", nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
			if k.leases.period != tc.want.LeaseRenewPeriod || k.leases.duration != tc.want.LeaseDuration || k.nodes.reportPeriod != tc.want.StatusReportPeriod {
				t.Errorf("parts got renew period %v, lease duration %v, report period %v", k.leases.period, k.leases.duration, k.nodes.reportPeriod)
			}
		})
	}
}

// Renewals and reports come up to a tenth of their period early, never
// late: the grace period is measured against the period.
func TestJitterIsAtMostATenthEarly(t *testing.T) {
	k := NewKubelet(nil, fake.NewClientset(), KubeletOptions{})
	const period = 20 * time.Second
	seen := map[bool]bool{} // early or not
	for range 1000 {
		for _, d := range []time.Duration{k.leases.jitter(period), k.nodes.jitter(period)} {
			if d > period || d < period-period/10 {
				t.Fatalf("next renewal or report after %v, want within [%v, %v]", d, period-period/10, period)
			}
			seen[d < period-period/20] = true
		}
	}
	if !seen[true] || !seen[false] {
		t.Errorf("jitter does not spread over the tenth: %v", seen)
	}
}

// cachedWorld runs a Kubelet's syncs against a fake clientset, with
// listers that show what the clientset holds as of the last refresh, as
// informers would once caught up.
type cachedWorld struct {
	t       *testing.T
	client  *fake.Clientset
	kubelet *Kubelet
	src     *fakeSource
	nodes   cache.Indexer
	l       listers
}

func newCachedWorld(t *testing.T, opts KubeletOptions, vms ...VM) *cachedWorld {
	client := fake.NewClientset()
	src := &fakeSource{vms: vms, changed: make(chan struct{})}
	k := NewKubelet(src, client, opts)
	k.leases.jitter = func(p time.Duration) time.Duration { return p }
	k.nodes.jitter = func(p time.Duration) time.Duration { return p }
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	empty := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	return &cachedWorld{
		t: t, client: client, kubelet: k, src: src, nodes: nodes,
		l: listers{
			nodes:       corelisters.NewNodeLister(nodes),
			pods:        corelisters.NewPodLister(empty),
			attachments: storagelisters.NewVolumeAttachmentLister(empty),
		},
	}
}

// refresh copies the clientset's nodes into the cache.
func (w *cachedWorld) refresh() {
	w.t.Helper()
	list, err := w.client.CoreV1().Nodes().List(w.t.Context(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	objs := make([]any, 0, len(list.Items))
	for i := range list.Items {
		objs = append(objs, &list.Items[i])
	}
	if err := w.nodes.Replace(objs, ""); err != nil {
		w.t.Fatal(err)
	}
}

// sync runs one sync at now and returns its API calls as "verb resource".
func (w *cachedWorld) sync(now time.Time) []string {
	w.t.Helper()
	w.client.ClearActions()
	w.kubelet.opts.Clock = clocktesting.NewFakeClock(now)
	if err := w.kubelet.sync(w.t.Context(), w.l); err != nil {
		w.t.Fatalf("sync at %v: %v", now, err)
	}
	var calls []string
	for _, a := range w.client.Actions() {
		call := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			call += "/" + a.GetSubresource()
		}
		calls = append(calls, call)
	}
	slices.Sort(calls)
	return calls
}

// A node is registered with its status, as the kubelet registers it:
// Ready in its first version, with no status write after the creation that
// could collide with the node's other writers.
func TestRegisteredNodeIsReadyAtOnce(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	vm := VM{Name: "n1", NodeName: "n1", State: VMRunning, Initialized: true, ProviderID: "sim:///zone-a/n1"}
	w := newCachedWorld(t, KubeletOptions{}, vm)
	if calls := w.sync(start); slices.Contains(calls, "patch nodes/status") {
		t.Errorf("registration wrote the status after the creation: %v", calls)
	}
	n, err := w.client.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := slices.IndexFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady })
	if ready < 0 || n.Status.Conditions[ready].Status != corev1.ConditionTrue {
		t.Errorf("registered node's conditions = %+v, want Ready True", n.Status.Conditions)
	}
	if got := n.Status.Capacity[corev1.ResourcePods]; got.String() != "110" {
		t.Errorf("registered node's pod capacity = %s, want 110", got.String())
	}
	w.refresh()
	if calls := w.sync(start.Add(DefaultSyncPeriod)); len(calls) != 0 {
		t.Errorf("the sync after registration made calls %v, want none", calls)
	}
}

// TestRegistrationWaitsForTheCache: syncs before the cache shows a node
// this kubelet registered do not post it again (each would get
// AlreadyExists); a node the cache has still not shown after
// cacheLagBound is registered again, in case it was deleted unseen.
func TestRegistrationWaitsForTheCache(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	vm := VM{Name: "n1", NodeName: "n1", State: VMRunning, Initialized: true, ProviderID: "sim:///zone-a/n1"}
	w := newCachedWorld(t, KubeletOptions{}, vm)
	if calls := w.sync(start); !slices.Contains(calls, "create nodes") {
		t.Fatalf("the first sync did not register the node: %v", calls)
	}
	if calls := w.sync(start.Add(DefaultSyncPeriod)); slices.Contains(calls, "create nodes") {
		t.Errorf("a sync before the cache showed the node registered it again: %v", calls)
	}
	if err := w.client.CoreV1().Nodes().Delete(t.Context(), "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if calls := w.sync(start.Add(cacheLagBound + time.Second)); !slices.Contains(calls, "create nodes") {
		t.Errorf("a node never cached was not registered again after %v: %v", cacheLagBound, calls)
	}
}

// At steady state a sync makes no API calls: a lease renewal every renew
// period and an unchanged status every report period are all it writes, and
// a node changed by somebody else costs a status write only if its status
// is no longer the desired one.
func TestSyncWritesOnlyWhatIsDue(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	vm := VM{Name: "n1", NodeName: "n1", State: VMRunning, Initialized: true, ProviderID: "sim:///zone-a/n1"}
	w := newCachedWorld(t, KubeletOptions{LeaseDuration: 40 * time.Second, LeaseRenewPeriod: 20 * time.Second, StatusReportPeriod: time.Minute}, vm)
	nodes := w.client.CoreV1().Nodes()

	steps := []struct {
		what   string
		at     time.Duration
		before func()
		want   []string
	}{
		{what: "registration, the status with it", at: 0, want: []string{"create leases", "create nodes", "get leases"}},
		{what: "next sync", at: DefaultSyncPeriod, want: nil},
		{what: "within the renew period", at: 19 * time.Second, want: nil},
		{what: "renew period", at: 20 * time.Second, want: []string{"update leases"}},
		{
			what: "somebody labels the node", at: 21 * time.Second,
			before: func() {
				n, err := nodes.Get(t.Context(), "n1", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				n.Labels["team"] = "a"
				n.ResourceVersion = "labelled"
				if _, err := nodes.Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			want: nil,
		},
		{
			what: "the node lifecycle controller marks it Unknown", at: 22 * time.Second,
			before: func() {
				n, err := nodes.Get(t.Context(), "n1", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for i := range n.Status.Conditions {
					if n.Status.Conditions[i].Type == corev1.NodeReady {
						n.Status.Conditions[i].Status = corev1.ConditionUnknown
					}
				}
				n.ResourceVersion = "unknown"
				if _, err := nodes.UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"patch nodes/status"},
		},
		{what: "renew period again", at: 40 * time.Second, want: []string{"update leases"}},
		{what: "report period after the last write", at: 82 * time.Second, want: []string{"patch nodes/status", "update leases"}},
		{
			what: "a condition is set", at: 83 * time.Second,
			before: func() {
				w.kubelet.SetCondition("n1", corev1.NodeCondition{Type: "KernelDeadlock", Status: corev1.ConditionTrue})
			},
			want: []string{"patch nodes/status"},
		},
		{
			what: "heartbeats stopped", at: 200 * time.Second,
			before: func() { w.kubelet.StopHeartbeats("n1") },
			want:   nil,
		},
		{
			what: "heartbeats resumed", at: 201 * time.Second,
			before: func() { w.kubelet.ResumeHeartbeats("n1") },
			want:   []string{"patch nodes/status", "update leases"},
		},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		w.refresh()
		if diff := cmp.Diff(s.want, w.sync(start.Add(s.at))); diff != "" {
			t.Errorf("%s: API calls (-want +got):\n%s", s.what, diff)
		}
	}
}

// The node of a gone VM is deleted once: when a finalizer holds it, the
// next syncs leave it to the finalizer's holder instead of deleting it
// again.
func TestNodeOfAGoneVMIsDeletedOnce(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	vm := VM{Name: "n1", NodeName: "n1", State: VMRunning, Initialized: true, ProviderID: "sim:///zone-a/n1"}
	w := newCachedWorld(t, KubeletOptions{}, vm)
	w.refresh()
	w.sync(start)
	w.src.change()
	w.refresh()
	if diff := cmp.Diff([]string{"delete nodes"}, w.sync(start.Add(DefaultSyncPeriod))); diff != "" {
		t.Errorf("the first sync after the VM went: API calls (-want +got):\n%s", diff)
	}
	// The fake deletes at once; a node held by a finalizer stays, with
	// its deletion timestamp.
	n := w.kubelet.nodes.nodeFor(vm)
	n.Finalizers = []string{"example.com/hold"}
	n.DeletionTimestamp = &metav1.Time{Time: start}
	if _, err := w.client.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.refresh()
	if got := w.sync(start.Add(2 * DefaultSyncPeriod)); len(got) != 0 {
		t.Errorf("a node being deleted was deleted again: %v", got)
	}
}

// A restarted kubelet spreads the first renewals and reports of the nodes
// it registered before over one period, instead of making them all at its
// first sync.
func TestRestartedKubeletSpreadsFirstRenewals(t *testing.T) {
	const nodes = 200
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var vms []VM
	for i := range nodes {
		name := fmt.Sprintf("n%03d", i)
		vms = append(vms, VM{Name: name, NodeName: name, State: VMRunning, Initialized: true})
	}
	opts := KubeletOptions{Identity: "cloud-1", LeaseRenewPeriod: 10 * time.Second, StatusReportPeriod: time.Minute}
	before := newCachedWorld(t, opts, vms...)
	before.sync(start) // registers every node
	before.refresh()

	after := newCachedWorld(t, opts, vms...)
	after.client = before.client
	after.kubelet = NewKubelet(after.src, before.client, opts)
	after.l = before.l
	restart := start.Add(time.Minute)
	if err := after.kubelet.spreadExisting(after.l, restart); err != nil {
		t.Fatal(err)
	}
	renewals := func(at time.Time) (n int) {
		for _, vm := range vms {
			if after.kubelet.leases.due(vm.NodeName, at) {
				n++
			}
		}
		return n
	}
	if n := renewals(restart); n > nodes/20 {
		t.Errorf("%d of %d leases due at the restart, want them spread over the renew period", n, nodes)
	}
	if n := renewals(restart.Add(5 * time.Second)); n < nodes/4 || n > 3*nodes/4 {
		t.Errorf("%d of %d leases due half a period after the restart, want about half", n, nodes)
	}
	if n := renewals(restart.Add(10 * time.Second)); n != nodes {
		t.Errorf("%d of %d leases due a period after the restart, want all", n, nodes)
	}
	count := func(calls []string, call string) (n int) {
		for _, c := range calls {
			if c == call {
				n++
			}
		}
		return n
	}
	// Statuses were reported a minute before the restart, and are due
	// again at a random time within a minute of it.
	if n := count(after.sync(restart), "patch nodes/status"); n > nodes/20 {
		t.Errorf("%d status reports at the restart, want them spread over the report period", n)
	}
	if n := count(after.sync(restart.Add(30*time.Second)), "patch nodes/status"); n < nodes/4 || n > 3*nodes/4 {
		t.Errorf("%d status reports half a period after the restart, want about half of %d", n, nodes)
	}
}

// A report that read a node's state before a condition was set must not
// record what it found over the change: the condition is written at the
// next sync.
func TestReportDoesNotOverwriteAConditionSetMeanwhile(t *testing.T) {
	r := newNodeReporter(fake.NewClientset(), "me", time.Minute, func(p time.Duration) time.Duration { return p })
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "5"}}
	r.spread("n1", now)
	state, known := r.reports["n1"]

	r.setCondition("n1", corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse})
	r.record("n1", known, state, reportState{next: state.next, checked: "5", epoch: state.epoch})
	if !r.due(node, now) {
		t.Error("the condition set during the report is not due")
	}

	// Without a change meanwhile, the report's finding is recorded.
	state, known = r.reports["n1"]
	r.record("n1", known, state, reportState{next: now.Add(time.Minute), checked: "5", epoch: state.epoch})
	if r.due(node, now) {
		t.Error("the report's finding was not recorded")
	}
}

// BenchmarkSyncSteadyState is one sync of a kubelet with 5000 Ready nodes
// at a moment when nothing is due: what every sync period costs at that
// scale between renewals.
func BenchmarkSyncSteadyState(b *testing.B) {
	const nodes = 5000
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	src := &fakeSource{changed: make(chan struct{})}
	k := NewKubelet(src, fake.NewClientset(), KubeletOptions{Identity: "me", LeaseRenewPeriod: time.Hour, StatusReportPeriod: time.Hour})
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	empty := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i := range nodes {
		vm := VM{
			Name: fmt.Sprintf("n%04d", i), NodeName: fmt.Sprintf("n%04d", i), State: VMRunning, Initialized: true,
			Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
		}
		src.vms = append(src.vms, vm)
		node := k.nodes.nodeFor(vm)
		node.ResourceVersion = "1"
		node.Status = desiredNodeStatus(vm, nil, nil, nil, start)
		if err := indexer.Add(node); err != nil {
			b.Fatal(err)
		}
		k.leases.next[vm.NodeName] = start.Add(time.Hour)
		k.nodes.reports[vm.NodeName] = reportState{next: start.Add(time.Hour), checked: "1"}
	}
	l := listers{
		nodes:       corelisters.NewNodeLister(indexer),
		pods:        corelisters.NewPodLister(empty),
		attachments: storagelisters.NewVolumeAttachmentLister(empty),
	}
	k.opts.Clock = clocktesting.NewFakeClock(start)
	b.ReportAllocs()
	for b.Loop() {
		if err := k.sync(b.Context(), l); err != nil {
			b.Fatal(err)
		}
	}
}

// Late renewals are reported once they have been late for a renew period,
// and then at most once a period, never for a single slow sync.
func TestLateRenewalsAreLoggedOncePerPeriod(t *testing.T) {
	k := NewKubelet(nil, fake.NewClientset(), KubeletOptions{LeaseRenewPeriod: 20 * time.Second})
	var logged []string
	ctx := logr.NewContext(t.Context(), funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{}))
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	steps := []struct {
		at, late time.Duration
		wantLog  bool
	}{
		{at: 0, late: 10 * time.Second},                              // late, for the first time
		{at: time.Second, late: 0},                                   // on time again
		{at: 2 * time.Second, late: 6 * time.Second},                 // late again: a new row
		{at: 12 * time.Second, late: 6 * time.Second},                // late for 10 s
		{at: 22 * time.Second, late: 6 * time.Second, wantLog: true}, // late for a renew period
		{at: 30 * time.Second, late: 8 * time.Second},                // logged 8 s ago
		{at: 42 * time.Second, late: 8 * time.Second, wantLog: true},
		{at: 43 * time.Second, late: 4 * time.Second}, // within a quarter period: on time
		{at: 64 * time.Second, late: 6 * time.Second},
	}
	for _, s := range steps {
		logged = nil
		k.leases.late = s.late
		k.checkLate(ctx, start.Add(s.at), 5000)
		if got := len(logged) > 0; got != s.wantLog {
			t.Errorf("at %v, %v late: logged %q, want a log line: %v", s.at, s.late, logged, s.wantLog)
		}
	}
}

func TestKeepExtendedResources(t *testing.T) {
	q := resource.MustParse
	want := corev1.NodeStatus{
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourcePods: q("110")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourcePods: q("110")},
	}
	// Someone added an extended resource; the kubelet's own cpu changed.
	current := corev1.ResourceList{corev1.ResourceCPU: q("1"), "example.com/gpu": q("1"), corev1.ResourceMemory: q("1Gi")}
	keepExtendedResources(want, current)
	wantCapacity := corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourcePods: q("110"), "example.com/gpu": q("1")}
	if !apiequality.Semantic.DeepEqual(want.Capacity, wantCapacity) || !apiequality.Semantic.DeepEqual(want.Allocatable, wantCapacity) {
		t.Errorf("capacity %v, allocatable %v; want both %v", want.Capacity, want.Allocatable, wantCapacity)
	}
}

// A status report merges conditions by type, as the kubelet's does: a
// condition another writer added after the report's copy of the node was
// read survives the report.
func TestReportStatusKeepsAConditionAddedMeanwhile(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	vm := VM{NodeName: "n1", Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	r := newNodeReporter(nil, "sim", time.Minute, func(d time.Duration) time.Duration { return d })
	stale := r.nodeFor(vm)
	stale.Status = desiredNodeStatus(vm, nil, nil, nil, now)
	meanwhile := stale.DeepCopy()
	meanwhile.Status.Conditions = append(meanwhile.Status.Conditions, corev1.NodeCondition{
		Type: v1alpha1.NodePreserved, Status: corev1.ConditionTrue, Reason: v1alpha1.PreservedByUser,
	})
	client := fake.NewClientset(meanwhile)
	r.client = client
	r.setCondition("n1", corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"})

	if err := r.reportStatus(t.Context(), vm, stale, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := map[corev1.NodeConditionType]corev1.ConditionStatus{}
	for _, c := range got.Status.Conditions {
		status[c.Type] = c.Status
	}
	if status[corev1.NodeReady] != corev1.ConditionFalse {
		t.Errorf("Ready is %q after the report, want False", status[corev1.NodeReady])
	}
	if status[v1alpha1.NodePreserved] != corev1.ConditionTrue {
		t.Errorf("the Preserved condition added meanwhile is %q after the report, want it kept (True); conditions: %v", status[v1alpha1.NodePreserved], got.Status.Conditions)
	}
}
