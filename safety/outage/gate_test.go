package outage

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
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
)

func TestOutageObserve(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const timeout = 30 * time.Second
	var o state
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
// read, the gate becomes Frozen after the timeout; when it answers
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
	rec := record.NewFakeRecorder(10)
	g, err := New(client, nil, Options{StatusCheckPeriod: 10 * time.Millisecond, StatusCheckTimeout: 100 * time.Millisecond, Recorder: rec, ProbeNamespace: "shoot"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logr.Discard()))
	var wg sync.WaitGroup
	wg.Go(func() { _ = g.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

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
	until("frozen", func() bool { return g.Frozen(ctx) })
	if elapsed := time.Since(start); elapsed < 100*time.Millisecond {
		t.Fatalf("frozen after %v, before the timeout", elapsed)
	}
	if !g.LastOutageEnd().IsZero() {
		t.Fatal("an outage ended before any did")
	}
	down.Store(false)
	until("thawed", func() bool { return !g.Frozen(ctx) })
	if g.LastOutageEnd().IsZero() {
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

// TestGateIsNotFrozenWithoutItsCheck: a gate whose check does not run
// freezes nobody, before Run and after it returned, even when the check
// had found an outage: nothing would thaw it. Nor does it export metrics
// before its check runs (a standby's gate exports none), and it may run
// again.
func TestGateIsNotFrozenWithoutItsCheck(t *testing.T) {
	client := fake.NewSimpleClientset()
	client.PrependReactor("get", "machines", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("dial tcp: connection refused")
	})
	reg := prometheus.NewRegistry()
	g, err := New(client, nil, Options{StatusCheckPeriod: 10 * time.Millisecond, StatusCheckTimeout: 50 * time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if families, err := reg.Gather(); err != nil || len(families) != 0 {
		t.Errorf("before its check ran, the gate exports %d metric families (%v), want none", len(families), err)
	}
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logr.Discard()))
	defer cancel()
	if g.Frozen(ctx) {
		t.Fatal("frozen before its check ran")
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	for deadline := time.Now().Add(5 * time.Second); !g.Frozen(ctx); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("never frozen with the API server out of reach")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if g.Frozen(context.Background()) {
		t.Error("still frozen after its check stopped")
	}
	if families, err := reg.Gather(); err != nil || len(families) == 0 {
		t.Errorf("after its check ran, the gate exports no metrics (%v)", err)
	}
	again, stop := context.WithCancel(context.Background())
	go func() { done <- g.Run(again) }()
	for deadline := time.Now().Add(5 * time.Second); !g.Frozen(again); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a gate run again never froze with the API server out of reach")
		}
	}
	if err := g.Run(again); err == nil {
		t.Error("a second check ran next to the first")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run again: %v", err)
	}
	if _, err := New(nil, nil, Options{}); err == nil {
		t.Error("a gate without a control client accepted")
	}
	if _, err := New(client, nil, Options{StatusCheckTimeout: -time.Second}); err == nil {
		t.Error("a negative timeout accepted")
	}
}
