package kubectldrain

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/drain"

	mcmdrain "github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/internal/testsupport/simcluster"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// BenchmarkMixedNode drains simcluster's mixed node (six pods behind a
// budget with maxUnavailable 1, ten without, a DaemonSet, a bare pod with
// an emptyDir, a system-cluster-critical pod) with mcm's Drain and with
// kubectl drain --ignore-daemonsets --delete-emptydir-data --force, one
// after the other in the same run, each on fresh nodes, and reports the
// seconds per drain of each. It fails if either lets more than one of the
// budget's pods be unavailable at once, leaves a pod other than the
// DaemonSet's, or, for mcm, does not evict the critical pod last.
//
// Both wait for pods to be gone the same way, polling once a second
// (kubectl's interval; mcm's PollInterval). kubectl retries a refused
// eviction after 5 s, as the kubectl command does.
func BenchmarkMixedNode(b *testing.B) {
	env := testenv.Get(b)
	cluster := simcluster.Start(b, env.Client(), simcluster.Options{})
	perDrain := map[string]time.Duration{}
	for _, impl := range []struct {
		name  string
		drain func(b *testing.B, env *testenv.Env, w simcluster.MixedWorkload)
	}{{"mcm", drainWithMCM}, {"kubectl", drainWithKubectl}} {
		b.Run(impl.name, func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ns := env.Namespace(b)
				w := cluster.MixedNode(b, ns, fmt.Sprintf("%s%d", impl.name, i))
				guarded := simcluster.WatchAvailability(b, env.Client(), ns, "app="+w.Guarded, int(w.GuardedReplicas))
				b.StartTimer()
				start := time.Now()
				impl.drain(b, env, w)
				total += time.Since(start)
				b.StopTimer()
				if worst := guarded.WorstUnavailable(); worst > 1 {
					b.Errorf("%s: at one moment %d pods of %s were unavailable; its budget allows 1", impl.name, worst, w.Guarded)
				}
				if left, err := simcluster.PodsOnNode(context.Background(), env.Client(), w.Node); err != nil || left != 1 {
					b.Errorf("%s: %d pods left on %s, want only the DaemonSet's (%v)", impl.name, left, w.Node, err)
				}
			}
			perDrain[impl.name] = total / time.Duration(b.N)
			b.ReportMetric(perDrain[impl.name].Seconds(), "s/drain")
		})
	}
	if m, k := perDrain["mcm"], perDrain["kubectl"]; m > 0 && k > 0 {
		b.Logf("per drain: mcm %v, kubectl %v; mcm takes %.0f%% of kubectl's time", m.Round(10*time.Millisecond),
			k.Round(10*time.Millisecond), 100*m.Seconds()/k.Seconds())
	}
}

// drainWithMCM drains the node with mcm's Drain and checks that the
// critical pod was evicted after every other drained pod was gone.
func drainWithMCM(b *testing.B, env *testenv.Env, w simcluster.MixedWorkload) {
	var (
		mu     sync.Mutex
		events []mcmdrain.Event
	)
	d, err := mcmdrain.New(env.Client(), mcmdrain.Options{
		PollInterval: time.Second,
		OnEvent: func(e mcmdrain.Event) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, e)
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if res, err := d.Drain(ctx, w.Node); err != nil {
		b.Fatalf("mcm drain: %v (%s)", err, res.Message)
	}
	mu.Lock()
	defer mu.Unlock()
	var critical, lastOther time.Time
	for _, e := range events {
		isCritical := strings.HasPrefix(e.Pod.Name, w.Critical+"-")
		switch {
		case isCritical && e.Type == mcmdrain.EventEvictionStarted:
			critical = e.Time
		case !isCritical && (e.Type == mcmdrain.EventEvictionStarted || e.Type == mcmdrain.EventPodGone) && e.Time.After(lastOther):
			lastOther = e.Time
		}
	}
	if critical.IsZero() || critical.Before(lastOther) {
		b.Errorf("mcm: critical pod evicted at %v, before the last other pod went (%v)",
			critical.Format(time.StampMilli), lastOther.Format(time.StampMilli))
	}
}

// drainWithKubectl cordons and drains the node as `kubectl drain
// --ignore-daemonsets --delete-emptydir-data --force` does.
func drainWithKubectl(b *testing.B, env *testenv.Env, w simcluster.MixedWorkload) {
	ctx := context.Background()
	client := env.Client()
	var out, errOut bytes.Buffer
	helper := &drain.Helper{
		Ctx:                  ctx,
		Client:               client,
		Force:                true,
		GracePeriodSeconds:   -1, // the pods' own
		IgnoreAllDaemonSets:  true,
		DeleteEmptyDirData:   true,
		EvictErrorRetryDelay: 5 * time.Second, // the kubectl command's
		Timeout:              5 * time.Minute,
		Out:                  &out,
		ErrOut:               &errOut,
	}
	node, err := client.CoreV1().Nodes().Get(ctx, w.Node, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if err := drain.RunCordonOrUncordon(helper, node, true); err != nil {
		b.Fatalf("cordon: %v", err)
	}
	if err := drain.RunNodeDrain(helper, w.Node); err != nil {
		b.Fatalf("kubectl drain: %v\n%s", err, errOut.String())
	}
	b.Logf("kubectl: %d evictions refused and retried after %v", strings.Count(errOut.String(), "will retry after"), helper.EvictErrorRetryDelay)
}
