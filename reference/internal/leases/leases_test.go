package leases

import (
	"context"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func TestIdentity(t *testing.T) {
	if id, err := Identity("given"); err != nil || id != "given" {
		t.Errorf("Identity(given) = %q, %v; want it as given", id, err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	a, errA := Identity("")
	b, errB := Identity("")
	re := regexp.MustCompile("^" + regexp.QuoteMeta(host) + "_[0-9a-f]{8}$")
	if errA != nil || errB != nil || !re.MatchString(a) || !re.MatchString(b) || a == b {
		t.Errorf("Identity(\"\") = %q (%v) and %q (%v); want the hostname with a random suffix, two instances apart", a, errA, b, errB)
	}
}

// Run holds both leases and runs both groups; once its context ends, the
// groups stop, and only then are the leases released.
func TestRunReleasesOnlyAfterEveryGroupStopped(t *testing.T) {
	cs := k8sfake.NewClientset()
	var running atomic.Int32
	var mu sync.Mutex
	var releasedWhileRunning []string
	cs.PrependReactor("update", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		lease := a.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if ptr.Deref(lease.Spec.HolderIdentity, "") == "" && running.Load() > 0 {
			mu.Lock()
			releasedWhileRunning = append(releasedWhileRunning, lease.Name)
			mu.Unlock()
		}
		return false, nil, nil
	})
	bothRun := make(chan struct{})
	group := func(name string) Group {
		return Group{Name: name, Lease: name, Run: func(ctx context.Context) error {
			if running.Add(1) == 2 {
				close(bothRun)
			}
			<-ctx.Done()
			time.Sleep(50 * time.Millisecond) // stopping takes a while
			running.Add(-1)
			return nil
		}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			Client: cs.CoordinationV1(), Namespace: "ns", Identity: "me",
			LeaseDuration: time.Second, RenewDeadline: 600 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
		}, []Group{group("first"), group("second")})
	}()
	select {
	case <-bothRun:
	case err := <-done:
		t.Fatalf("Run = %v before both groups ran", err)
	case <-time.After(10 * time.Second):
		t.Fatal("both groups did not run within 10s")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil after its context ended", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context's end")
	}
	if n := running.Load(); n != 0 {
		t.Errorf("%d groups still run after Run returned", n)
	}
	for _, name := range []string{"first", "second"} {
		l, err := cs.CoordinationV1().Leases("ns").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "" {
			t.Errorf("lease %s held by %q after Run returned, want released", name, h)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(releasedWhileRunning) > 0 {
		t.Errorf("leases %v released while a group still ran", releasedWhileRunning)
	}
}
