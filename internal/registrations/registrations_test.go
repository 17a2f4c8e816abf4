package registrations

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestRemoveAllStopsEvents: handlers added to a running informer see its
// initial list and later events until RemoveAll, and none after it; the
// informer goes on for others.
func TestRemoveAllStopsEvents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0"}})
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := factory.Core().V1().Nodes().Informer()
	var others atomic.Int32
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) { others.Add(1) }}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	var s Set
	var seen atomic.Int32
	if err := s.Add(nodes, cache.ResourceEventHandlerFuncs{AddFunc: func(any) { seen.Add(1) }}); err != nil {
		t.Fatal(err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), s.Synced()...) {
		t.Fatal("handler added after the informer synced never synced")
	}
	if got := seen.Load(); got != 1 {
		t.Fatalf("handler saw %d adds of the initial list, want 1", got)
	}
	create := func(name string) {
		t.Helper()
		if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("n1")
	waitFor(t, func() bool { return seen.Load() == 2 })

	s.RemoveAll(testr.New(t))
	if got := len(s.Synced()); got != 0 {
		t.Errorf("%d registrations kept after RemoveAll, want none", got)
	}
	create("n2")
	waitFor(t, func() bool { return others.Load() == 3 }) // the informer still delivers to others
	if got := seen.Load(); got != 2 {
		t.Errorf("removed handler saw %d adds, want still 2", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
