package workqueue

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestWaitForCaches(t *testing.T) {
	var ready atomic.Bool
	done := make(chan bool)
	go func() { done <- WaitForCaches(context.Background(), ready.Load, func() bool { return true }) }()
	select {
	case <-done:
		t.Fatal("returned before the cache synced")
	case <-time.After(200 * time.Millisecond):
	}
	ready.Store(true)
	if !<-done {
		t.Fatal("returned false for synced caches")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if WaitForCaches(ctx, func() bool { return false }) {
		t.Fatal("returned true for a cache that never synced")
	}
}

func TestControllerContextNamesTheLogger(t *testing.T) {
	var got string
	fallback := funcr.New(func(prefix, _ string) { got = prefix }, funcr.Options{})
	ctx := ControllerContext(context.Background(), fallback, "machineset")
	logr.FromContextOrDiscard(ctx).Info("x")
	if got != "machineset" {
		t.Errorf("logger name %q, want machineset", got)
	}
	ctx = ControllerContext(logr.NewContext(context.Background(), fallback.WithName("mine")), logr.Discard(), "machineset")
	logr.FromContextOrDiscard(ctx).Info("x")
	if got != "mine/machineset" {
		t.Errorf("logger name %q, want the context's, mine/machineset", got)
	}
}

func TestObjectOfAndKeyOf(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod}
	if ObjectOf(tomb) != pod || ObjectOf(pod) != pod {
		t.Error("ObjectOf does not give the object of an event or of a tombstone")
	}
	if KeyOf(pod) != "ns/p" || KeyOf(tomb) != "ns/p" || KeyOf("not an object") != "" {
		t.Errorf("KeyOf: %q, %q, %q", KeyOf(pod), KeyOf(tomb), KeyOf("not an object"))
	}
}

func TestRunAllJoinsErrors(t *testing.T) {
	boom := errors.New("boom")
	var ran atomic.Int32
	err := RunAll(context.Background(),
		func(context.Context) error { ran.Add(1); return nil },
		func(context.Context) error { ran.Add(1); return boom })
	if ran.Load() != 2 || !errors.Is(err, boom) {
		t.Errorf("ran %d, err %v; want both run and boom returned", ran.Load(), err)
	}
}
