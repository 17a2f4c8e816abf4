package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/reference/internal/leases"
)

const leaseNamespace = "shoot"

// leaseCluster is a fake control cluster that gives leases resource
// versions and refuses an update made from a stale one, as the API server
// does (the fake's tracker does neither): leader election is only
// exclusive with that check.
func leaseCluster() *k8sfake.Clientset {
	cs := k8sfake.NewSimpleClientset()
	leases := coordinationv1.SchemeGroupVersion.WithResource("leases")
	version := 0
	// The fake runs reactors one at a time: version needs no lock.
	store := func(lease *coordinationv1.Lease, write func(*coordinationv1.Lease) error) (bool, runtime.Object, error) {
		version++
		lease = lease.DeepCopy()
		lease.ResourceVersion = fmt.Sprint(version)
		if err := write(lease); err != nil {
			return true, nil, err
		}
		return true, lease, nil
	}
	cs.PrependReactor("create", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		lease := a.(clienttesting.CreateAction).GetObject().(*coordinationv1.Lease)
		return store(lease, func(l *coordinationv1.Lease) error { return cs.Tracker().Create(leases, l, l.Namespace) })
	})
	cs.PrependReactor("update", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		lease := a.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		stored, err := cs.Tracker().Get(leases, lease.Namespace, lease.Name)
		if err != nil {
			return true, nil, err
		}
		if rv := stored.(*coordinationv1.Lease).ResourceVersion; rv != lease.ResourceVersion {
			return true, nil, apierrors.NewConflict(leases.GroupResource(), lease.Name, fmt.Errorf("resourceVersion %s, stored %s", lease.ResourceVersion, rv))
		}
		return store(lease, func(l *coordinationv1.Lease) error { return cs.Tracker().Update(leases, l, l.Namespace) })
	})
	return cs
}

// probe records which controllers of probeTable run.
type probe struct {
	mu      sync.Mutex
	running map[string]int // manager identity → controllers running
	which   map[string]map[string]bool
}

func newProbe() *probe { return &probe{running: map[string]int{}, which: map[string]map[string]bool{}} }

func (p *probe) set(id, controller string, running bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.which[id] == nil {
		p.which[id] = map[string]bool{}
	}
	p.which[id][controller] = running
	if running {
		p.running[id]++
	} else {
		p.running[id]--
	}
}

// runs returns the controllers id runs, sorted.
func (p *probe) runs(id string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for c, r := range p.which[id] {
		if r {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

func (p *probe) anyRunning() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.running {
		if n > 0 {
			return true
		}
	}
	return false
}

// probeTable is a controller per group that runs until its context ends,
// recording it in p under the manager's identity.
func probeTable(p *probe) Controllers {
	ctrl := func(name string, g Group) Controller {
		return Controller{Group: g, Resources: []string{"machines"}, New: func(_ context.Context, cc ControllerContext) (Runnable, error) {
			return func(ctx context.Context) error {
				p.set(cc.Config.LeaderElectIdentity, name, true)
				<-ctx.Done()
				p.set(cc.Config.LeaderElectIdentity, name, false)
				return nil
			}, nil
		}}
	}
	return Controllers{"machine": ctrl("machine", MachineControllerGroup), "machineset": ctrl("machineset", MachineControllerManagerGroup)}
}

// leaseManager runs a manager of identity id with probeTable's
// controllers on the control cluster cs, with leases of 1s, until the test
// ends or stop is called; stop returns what Run returned. Run's result is
// sent on done too.
func leaseManager(t *testing.T, id string, cs *k8sfake.Clientset, p *probe) (m *Manager, stop func() error, done <-chan error) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ControlKubeconfig, cfg.TargetKubeconfig, cfg.Port, cfg.Namespace = kubeconfigFile(t), NoTarget, 0, leaseNamespace
	cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = time.Second, 600*time.Millisecond, 100*time.Millisecond
	cfg.LeaderElectIdentity = id
	opts := testLogger(t)
	opts.Controllers, opts.Registry = probeTable(p), prometheus.NewRegistry()
	m, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	cc := ControllerContext{Config: cfg, Machines: fake.NewSimpleClientset(), ControlCore: cs, Logger: m.log}
	m.state.setWaiting("") // as after Run's startup checks
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan error, 1)
	var result error
	returned := make(chan struct{})
	go func() {
		result = m.runGroups(ctx, cc, []string{"machine", "machineset"})
		close(returned)
		finished <- result
	}()
	stop = sync.OnceValue(func() error {
		cancel()
		select {
		case <-returned:
			return result
		case <-time.After(5 * time.Second):
			return errors.New("Run did not return within 5s")
		}
	})
	t.Cleanup(func() { _ = stop() })
	return m, stop, finished
}

func holderOf(t *testing.T, cs *k8sfake.Clientset, lease string) string {
	t.Helper()
	l, err := cs.CoordinationV1().Leases(leaseNamespace).Get(context.Background(), lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// holdLease makes holder the holder of lease for an hour, as a live
// process of MCM is.
func holdLease(t *testing.T, cs *k8sfake.Clientset, lease, holder string) {
	t.Helper()
	ctx := context.Background()
	now := metav1.NewMicroTime(time.Now())
	spec := coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](3600), AcquireTime: &now, RenewTime: &now}
	l, err := cs.CoordinationV1().Leases(leaseNamespace).Get(ctx, lease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cs.CoordinationV1().Leases(leaseNamespace).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: leaseNamespace, Name: lease}, Spec: spec}, metav1.CreateOptions{})
	} else if err == nil {
		l.Spec = spec
		_, err = cs.CoordinationV1().Leases(leaseNamespace).Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func waitRuns(t *testing.T, p *probe, id string, want ...string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func(context.Context) (bool, string) {
		got := p.runs(id)
		return cmp.Equal(want, got), fmt.Sprintf("%s runs %v, want %v", id, got, want)
	})
}

// Against MCM's machine-controller-manager process, which holds its lease,
// the manager runs the machine controller's group only, and never the
// other; once that process is gone (its lease released), it runs both.
// Against MCM's machine-controller process, the other way round.
func TestGroupsRunUnderTheirLeases(t *testing.T) {
	for _, tt := range []struct {
		mcmProcess      string // the lease MCM's process holds
		first, takeOver string // the controller that runs at once, and the one after MCM's process is gone
	}{
		{DefaultLeaseName, "machine", "machineset"},
		{DefaultMachineLeaseName, "machineset", "machine"},
	} {
		t.Run("MCM holds "+tt.mcmProcess, func(t *testing.T) {
			cs, p := leaseCluster(), newProbe()
			holdLease(t, cs, tt.mcmProcess, "mcm-process")
			m, stop, _ := leaseManager(t, "ours", cs, p)
			waitRuns(t, p, "ours", tt.first)
			// Long enough for any second campaign to have won, had it
			// been allowed: the delay plus a few retries.
			time.Sleep((leases.SecondaryDelay + 5) * m.cfg.RetryPeriod)
			if got := p.runs("ours"); !cmp.Equal(got, []string{tt.first}) {
				t.Fatalf("runs %v while MCM's process holds %s, want only %s", got, tt.mcmProcess, tt.first)
			}
			for g, want := range map[Group]float64{MachineControllerGroup: 0, MachineControllerManagerGroup: 0} {
				if tt.first == "machine" && g == MachineControllerGroup || tt.first == "machineset" && g == MachineControllerManagerGroup {
					want = 1
				}
				if got := testutil.ToFloat64(m.groupRunning.WithLabelValues(string(g))); got != want {
					t.Errorf("mcm_manager_group_running{group=%q} = %v, want %v", g, got, want)
				}
			}
			if ready, why := m.state.readiness(); !ready || !strings.Contains(why, "lease held by mcm-process") {
				t.Errorf("Ready() = %v, %q; want ready, naming MCM's process as the holder of the other lease", ready, why)
			}

			holdLease(t, cs, tt.mcmProcess, "") // MCM's process released its lease
			waitRuns(t, p, "ours", "machine", "machineset")
			if err := stop(); err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
			if p.anyRunning() {
				t.Error("controllers still run after Run returned")
			}
			for _, lease := range []string{DefaultLeaseName, DefaultMachineLeaseName} {
				if h := holderOf(t, cs, lease); h != "" {
					t.Errorf("lease %s held by %q after a shutdown, want released", lease, h)
				}
			}
		})
	}
}

// Two managers started together do not split the groups: the one that
// wins the first lease wins the second too, and the other stands by for
// both. When the leader stops, the standby takes both.
func TestTwoManagersDoNotSplitGroups(t *testing.T) {
	for i := range 5 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			cs, p := leaseCluster(), newProbe()
			_, stopA, _ := leaseManager(t, "a", cs, p)
			_, stopB, _ := leaseManager(t, "b", cs, p)
			var leader, standby string
			var stopLeader func() error
			testenv.Eventually(t, 10*time.Second, func(context.Context) (bool, string) {
				a, b := p.runs("a"), p.runs("b")
				switch both := []string{"machine", "machineset"}; {
				case cmp.Equal(a, both) && len(b) == 0:
					leader, standby, stopLeader = "a", "b", stopA
				case cmp.Equal(b, both) && len(a) == 0:
					leader, standby, stopLeader = "b", "a", stopB
				default:
					return false, fmt.Sprintf("a runs %v, b runs %v; want one to run both and the other none", a, b)
				}
				return true, ""
			})
			time.Sleep((leases.SecondaryDelay + 5) * 100 * time.Millisecond)
			if got := p.runs(standby); len(got) != 0 {
				t.Fatalf("standby %s runs %v", standby, got)
			}
			if err := stopLeader(); err != nil {
				t.Fatal(err)
			}
			waitRuns(t, p, standby, "machine", "machineset")
			t.Logf("leader %s, then %s", leader, standby)
		})
	}
}

// A lost lease stops every controller of the manager, not only its group's;
// only then are the other leases released, and Run says which was lost.
func TestLostLeaseStopsEveryGroupBeforeReleasing(t *testing.T) {
	cs, p := leaseCluster(), newProbe()
	var releasedWhileRunning []string
	var mu sync.Mutex
	cs.PrependReactor("update", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		lease := a.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if ptr.Deref(lease.Spec.HolderIdentity, "") == "" && p.anyRunning() {
			mu.Lock()
			releasedWhileRunning = append(releasedWhileRunning, lease.Name)
			mu.Unlock()
		}
		return false, nil, nil
	})
	_, _, done := leaseManager(t, "ours", cs, p)
	waitRuns(t, p, "ours", "machine", "machineset")

	holdLease(t, cs, DefaultMachineLeaseName, "thief")
	stolen := time.Now()
	var err error
	select {
	case err = <-done:
		t.Logf("Run returned %v after the lease was taken", time.Since(stolen))
	case <-time.After(10 * time.Second):
		t.Fatal("Run still runs 10s after its lease was taken")
	}
	if !errors.Is(err, leases.ErrLeadershipLost) || !strings.Contains(err.Error(), "lease shoot/machine-controller of the machine-controller controllers") {
		t.Fatalf("Run = %v, want ErrLeadershipLost naming the machine-controller lease", err)
	}
	if p.anyRunning() {
		t.Error("controllers still run after Run returned")
	}
	if h := holderOf(t, cs, DefaultLeaseName); h != "" {
		t.Errorf("lease %s held by %q, want it released", DefaultLeaseName, h)
	}
	if h := holderOf(t, cs, DefaultMachineLeaseName); h != "thief" {
		t.Errorf("lease %s held by %q, want the thief to keep it", DefaultMachineLeaseName, h)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(releasedWhileRunning) > 0 {
		t.Errorf("leases %v released while controllers still ran", releasedWhileRunning)
	}
}
