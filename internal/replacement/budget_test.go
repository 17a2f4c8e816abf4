package replacement

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	machineinformers "github.com/mcmkit/mcm/client/informers/externalversions/machine/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type machineState int

const (
	unknown machineState = iota
	running
	failed
	deleting
	pending
	crashLoop
	creating
	// preservedFailed and preservedUnknown are preserved until an hour
	// after t0; expiredFailed's preservation ended at t0.
	preservedFailed
	preservedUnknown
	expiredFailed
)

// machineIn is machine i of deployment, in state st: controlled by the
// deployment's set (setOf), labelled with the deployment's name as MCM
// labels them.
func machineIn(deployment string, i int, st machineState) *v1alpha1.Machine {
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: fmt.Sprintf("%s-%d", deployment, i),
		Labels:          map[string]string{v1alpha1.MachineDeploymentNameLabelKey: deployment},
		OwnerReferences: []metav1.OwnerReference{controlledBy(setOf(deployment), machineSetGVK)},
	}}
	switch st {
	case unknown:
		m.Status.CurrentStatus.Phase = v1alpha1.MachineUnknown
	case running:
		m.Status.CurrentStatus.Phase = v1alpha1.MachineRunning
	case failed:
		m.Status.CurrentStatus.Phase = v1alpha1.MachineFailed
	case pending:
		m.Status.CurrentStatus.Phase = v1alpha1.MachinePending
	case crashLoop:
		m.Status.CurrentStatus.Phase = v1alpha1.MachineCrashLoopBackOff
	case creating: // no phase yet
	case preservedFailed, preservedUnknown, expiredFailed:
		m.Status.CurrentStatus.Phase = v1alpha1.MachineFailed
		if st == preservedUnknown {
			m.Status.CurrentStatus.Phase = v1alpha1.MachineUnknown
		}
		until := metav1.NewTime(t0.Add(time.Hour))
		if st == expiredFailed {
			until = metav1.NewTime(t0)
		}
		m.Status.CurrentStatus.PreserveExpiryTime = &until
	case deleting:
		m.Status.CurrentStatus.Phase = v1alpha1.MachineRunning
		now := metav1.NewTime(t0)
		m.DeletionTimestamp = &now
	}
	return m
}

// setOf is the MachineSet of deployment, controlled by it.
func setOf(deployment string) *v1alpha1.MachineSet {
	d := &v1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: deployment, UID: types.UID(deployment + "-uid")}}
	return &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: deployment + "-set", UID: types.UID(deployment + "-set-uid"),
		OwnerReferences: []metav1.OwnerReference{controlledBy(d, machineDeploymentGVK)},
	}}
}

func controlledBy(owner metav1.Object, gvk schema.GroupVersionKind) metav1.OwnerReference {
	return *metav1.NewControllerRef(owner, gvk)
}

// caches are the informers a budget reads.
type caches struct {
	machines machineinformers.MachineInformer
	sets     machineinformers.MachineSetInformer
}

// fataler is *testing.T or *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

func (c caches) add(t fataler, objs ...any) {
	t.Helper()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1alpha1.Machine:
			err = c.machines.Informer().GetIndexer().Add(o)
		case *v1alpha1.MachineSet:
			err = c.sets.Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func newCaches() caches {
	f := externalversions.NewSharedInformerFactory(fake.NewSimpleClientset(), 0).Machine().V1alpha1()
	return caches{machines: f.Machines(), sets: f.MachineSets()}
}

// fleet puts machines of deployment "pool" in the given states, and their
// set, into fresh informer caches.
func fleet(t *testing.T, states ...machineState) (caches, []*v1alpha1.Machine) {
	t.Helper()
	c := newCaches()
	c.add(t, setOf("pool"))
	var ms []*v1alpha1.Machine
	for i, st := range states {
		m := machineIn("pool", i, st)
		ms = append(ms, m)
		c.add(t, m)
	}
	return c, ms
}

func budget(t *testing.T, c caches, max *intstr.IntOrString, clk *clocktesting.FakePassiveClock) *Budget {
	t.Helper()
	b, err := New(c.machines, Options{Max: max, MachineSets: c.sets, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ptr[T any](v T) *T { return &v }

func TestMayReplace(t *testing.T) {
	tests := []struct {
		name   string
		max    *intstr.IntOrString
		states []machineState
		// asks are the indexes of machines asked for in order; want their answers.
		asks []int
		want []bool
	}{
		{name: "default 1: a free slot", states: []machineState{unknown, unknown, running}, asks: []int{0}, want: []bool{true}},
		{name: "default 1: a Failed machine holds it", states: []machineState{unknown, failed, running}, asks: []int{0}, want: []bool{false}},
		{name: "default 1: a deleting machine holds it", states: []machineState{unknown, deleting, running}, asks: []int{0}, want: []bool{false}},
		{name: "default 1: a Pending replacement holds it", states: []machineState{unknown, pending, running}, asks: []int{0}, want: []bool{false}},
		{name: "default 1: a CrashLoopBackOff replacement holds it", states: []machineState{unknown, crashLoop, running}, asks: []int{0}, want: []bool{false}},
		{name: "default 1: a machine being created holds it", states: []machineState{unknown, creating, running}, asks: []int{0}, want: []bool{false}},
		{name: "default 1: a preserved Failed machine is kept, not replaced: no slot held", states: []machineState{unknown, preservedFailed, running}, asks: []int{0}, want: []bool{true}},
		{name: "default 1: a Failed machine whose preservation ran out holds it", states: []machineState{unknown, expiredFailed, running}, asks: []int{0}, want: []bool{false}},
		{name: "default 1: the first yes holds the slot for the next", states: []machineState{unknown, unknown}, asks: []int{0, 1}, want: []bool{true, false}},
		{name: "asking twice for one machine counts once", states: []machineState{unknown, unknown}, asks: []int{0, 0}, want: []bool{true, true}},
		{name: "limit 3 with two in flight", max: ptr(intstr.FromInt32(3)), states: []machineState{unknown, unknown, failed, deleting, running},
			asks: []int{0, 1}, want: []bool{true, false}},
		{name: "limit 3 with none in flight", max: ptr(intstr.FromInt32(3)), states: []machineState{unknown, unknown, unknown, unknown},
			asks: []int{0, 1, 2, 3}, want: []bool{true, true, true, false}},
		{name: "50% of 6 is 3", max: ptr(intstr.FromString("50%")), states: []machineState{unknown, unknown, unknown, failed, running, running},
			asks: []int{0, 1, 2}, want: []bool{true, true, false}},
		{name: "10% of 4 rounds down but is at least 1", max: ptr(intstr.FromString("10%")), states: []machineState{unknown, unknown, running, running},
			asks: []int{0, 1}, want: []bool{true, false}},
		{name: "0 never replaces", max: ptr(intstr.FromInt32(0)), states: []machineState{unknown}, asks: []int{0}, want: []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inf, ms := fleet(t, tt.states...)
			b := budget(t, inf, tt.max, clocktesting.NewFakePassiveClock(t0))
			var got []bool
			for _, i := range tt.asks {
				ok, reason := b.MayReplace(context.Background(), ms[i])
				if ok != (reason == "") {
					t.Errorf("MayReplace(%s) = %v with reason %q", ms[i].Name, ok, reason)
				}
				got = append(got, ok)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReplacedAndHolds(t *testing.T) {
	ctx := context.Background()
	t.Run("a failed write frees the slot", func(t *testing.T) {
		inf, ms := fleet(t, unknown, unknown)
		b := budget(t, inf, nil, clocktesting.NewFakePassiveClock(t0))
		if ok, _ := b.MayReplace(ctx, ms[0]); !ok {
			t.Fatal("first ask refused")
		}
		b.Replaced(ctx, ms[0], false)
		if ok, reason := b.MayReplace(ctx, ms[1]); !ok {
			t.Fatalf("slot not freed: %s", reason)
		}
	})
	t.Run("a marked machine holds until the cache shows it, and counts once then", func(t *testing.T) {
		inf, ms := fleet(t, unknown, unknown, unknown)
		b := budget(t, inf, ptr(intstr.FromInt32(2)), clocktesting.NewFakePassiveClock(t0))
		if ok, _ := b.MayReplace(ctx, ms[0]); !ok {
			t.Fatal("first ask refused")
		}
		b.Replaced(ctx, ms[0], true)
		// The cache now shows machine 0 Failed: held and cached count once.
		marked := ms[0].DeepCopy()
		marked.Status.CurrentStatus.Phase = v1alpha1.MachineFailed
		if err := inf.machines.Informer().GetIndexer().Update(marked); err != nil {
			t.Fatal(err)
		}
		if ok, reason := b.MayReplace(ctx, ms[1]); !ok {
			t.Fatalf("second slot refused: %s", reason)
		}
		ok, reason := b.MayReplace(ctx, ms[2])
		if ok {
			t.Fatal("third machine allowed with a limit of 2")
		}
		if want := `2 of at most 2 machines of deployment "pool" are being replaced`; reason != want {
			t.Errorf("reason %q, want %q", reason, want)
		}
	})
	t.Run("a hold expires when the write never came", func(t *testing.T) {
		inf, ms := fleet(t, unknown, unknown)
		clk := clocktesting.NewFakePassiveClock(t0)
		b := budget(t, inf, nil, clk)
		if ok, _ := b.MayReplace(ctx, ms[0]); !ok {
			t.Fatal("first ask refused")
		}
		clk.SetTime(t0.Add(DefaultHoldTTL))
		if ok, _ := b.MayReplace(ctx, ms[1]); ok {
			t.Fatal("hold released before its TTL")
		}
		clk.SetTime(t0.Add(DefaultHoldTTL + 2*time.Millisecond))
		if ok, reason := b.MayReplace(ctx, ms[1]); !ok {
			t.Fatalf("hold not released after its TTL: %s", reason)
		}
	})
	t.Run("machines without a deployment are never held back", func(t *testing.T) {
		inf, _ := fleet(t, failed)
		b := budget(t, inf, nil, clocktesting.NewFakePassiveClock(t0))
		loner := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "loner"}}
		for range 3 {
			if ok, _ := b.MayReplace(ctx, loner); !ok {
				t.Fatal("machine without deployment refused")
			}
		}
	})
}

// TestConcurrentAsksNeverExceed: many workers asking at once get exactly
// the budget's number of yeses.
func TestConcurrentAsksNeverExceed(t *testing.T) {
	states := make([]machineState, 40)
	inf, ms := fleet(t, states...)
	b := budget(t, inf, ptr(intstr.FromString("10%")), clocktesting.NewFakePassiveClock(t0))
	var yes atomic.Int32
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() {
			if ok, _ := b.MayReplace(context.Background(), m); ok {
				yes.Add(1)
				b.Replaced(context.Background(), m, true)
			}
		})
	}
	wg.Wait()
	if got := yes.Load(); got != 4 {
		t.Errorf("%d machines allowed, want 4 (10%% of 40)", got)
	}
}

func TestNewBudgetRejectsBadOptions(t *testing.T) {
	inf, _ := fleet(t)
	for _, o := range []Options{
		{Max: ptr(intstr.FromString("abc"))},
		{Max: ptr(intstr.FromInt32(-1))},
		{HoldTTL: -time.Second},
	} {
		if _, err := New(inf.machines, o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New without informer accepted")
	}
}

func TestResolveMax(t *testing.T) {
	tests := []struct {
		v       intstr.IntOrString
		total   int
		want    int
		wantErr bool
	}{
		{intstr.FromInt32(1), 10, 1, false},
		{intstr.FromInt32(5), 3, 5, false},
		{intstr.FromString("20%"), 10, 2, false},
		{intstr.FromString("20%"), 4, 1, false}, // 0.8 rounds down, but at least 1
		{intstr.FromString("0%"), 4, 1, false},
		{intstr.FromString("x"), 4, 0, true},
		{intstr.FromInt32(-1), 4, 0, true},
	}
	for _, tc := range tests {
		got, err := resolveMax(tc.v, tc.total)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("resolveMax(%v, %d) = %d, %v; want %d, err %v", tc.v.String(), tc.total, got, err, tc.want, tc.wantErr)
		}
	}
}
