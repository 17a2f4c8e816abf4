package sim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
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
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := desiredNodeStatus(vm, tc.overrides, tc.current, now)
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
	first := desiredNodeStatus(vm, nil, nil, now)
	later := desiredNodeStatus(vm, nil, first.Conditions, now.Add(time.Minute))
	if !statusEquivalent(first, later) {
		t.Error("a status that differs only in heartbeat times needs no write")
	}
	notReady := desiredNodeStatus(vm, map[corev1.NodeConditionType]corev1.NodeCondition{
		corev1.NodeReady: {Type: corev1.NodeReady, Status: corev1.ConditionFalse},
	}, first.Conditions, now)
	if statusEquivalent(first, notReady) {
		t.Error("a changed Ready condition must be written")
	}
}

// The lease is renewed from the copy last written, as the kubelet does: it
// is read only when there is no such copy or it went stale.
func TestRenewLeaseReadsOnlyWithoutAWrittenCopy(t *testing.T) {
	client := fake.NewClientset()
	k := NewKubelet(nil, client, KubeletOptions{LeaseDuration: 40 * time.Second})
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
