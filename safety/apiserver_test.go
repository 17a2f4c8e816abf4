package safety

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
)

func TestOutageObserve(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const timeout = 30 * time.Second
	var o outage
	steps := []struct {
		at             time.Duration
		up             bool
		frozen, thawed bool
	}{
		{0, true, false, false},
		{time.Second, false, false, false},      // down: the clock starts
		{20 * time.Second, false, false, false}, // not long enough
		{32 * time.Second, false, true, false},  // over the timeout: freeze
		{40 * time.Second, false, false, false}, // stays frozen
		{50 * time.Second, true, false, true},   // back: thaw
		{60 * time.Second, false, false, false}, // down again: a new clock
		{80 * time.Second, true, false, false},  // back before the timeout: no freeze was made
	}
	for i, s := range steps {
		frozen, thawed := o.observe(s.up, t0.Add(s.at), timeout)
		if frozen != s.frozen || thawed != s.thawed {
			t.Fatalf("step %d: frozen %v thawed %v, want %v %v", i, frozen, thawed, s.frozen, s.thawed)
		}
	}
	if !o.lastEnd.Equal(t0.Add(50 * time.Second)) {
		t.Errorf("last outage ended %v, want at 50s", o.lastEnd)
	}
}

func TestAnswered(t *testing.T) {
	gr := schema.GroupResource{Resource: "machines"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, true},
		{apierrors.NewNotFound(gr, "x"), true},
		{apierrors.NewForbidden(gr, "x", errors.New("rbac")), true},
		{apierrors.NewServiceUnavailable("etcd"), false},
		{apierrors.NewInternalError(errors.New("boom")), false},
		{errors.New("dial tcp: connection refused"), false},
		{context.DeadlineExceeded, false},
	} {
		if got := answered(tc.err); got != tc.want {
			t.Errorf("answered(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestGateFreezesDuringOutage: with the control API server failing every
// read, the controller becomes Frozen after the timeout; when it answers
// again, it thaws and reports when the outage ended.
func TestGateFreezesDuringOutage(t *testing.T) {
	client := fake.NewSimpleClientset()
	var down atomic.Bool
	client.PrependReactor("get", "machines", func(k8stesting.Action) (bool, runtime.Object, error) {
		if down.Load() {
			return true, nil, errors.New("dial tcp: connection refused")
		}
		return false, nil, nil
	})
	f := externalversions.NewSharedInformerFactory(client, 0)
	rec := record.NewFakeRecorder(10)
	c, err := NewController(client, nil, Informers{
		MachineSets: f.Machine().V1alpha1().MachineSets(),
		Deployments: f.Machine().V1alpha1().MachineDeployments(),
		Machines:    f.Machine().V1alpha1().Machines(),
	}, nil, Options{StatusCheckPeriod: 10 * time.Millisecond, StatusCheckTimeout: 100 * time.Millisecond, Recorder: rec, ProbeNamespace: "shoot"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logr.Discard()))
	f.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx, 1) })
	t.Cleanup(func() { cancel(); wg.Wait(); f.Shutdown() })

	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if cond() {
				return
			}
		}
		t.Fatalf("timed out waiting until %s", what)
	}
	down.Store(true)
	start := time.Now()
	until("frozen", func() bool { return c.Frozen(ctx) })
	if elapsed := time.Since(start); elapsed < 100*time.Millisecond {
		t.Fatalf("frozen after %v, before the timeout", elapsed)
	}
	if !c.LastOutageEnd().IsZero() {
		t.Fatal("an outage ended before any did")
	}
	down.Store(false)
	until("thawed", func() bool { return !c.Frozen(ctx) })
	if c.LastOutageEnd().IsZero() {
		t.Error("thawed without recording when the outage ended")
	}
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, strings.Fields(<-rec.Events)[1])
	}
	if diff := cmp.Diff([]string{ReasonOutageFrozen, ReasonOutageThawed}, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
