package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// secondaryDelay is how long, in retry periods, a manager that sees the
// first group's lease held by another waits before it campaigns for the
// second group's lease. Another manager of this kind that has just won the
// first lease campaigns for the second at once, one API round trip later;
// the wait lets it win that one too, so that two managers do not split the
// groups between them. A holder that runs only the first group (MCM's
// machine-controller, or a manager restricted to that group) never takes
// the second lease, and after the wait this manager does.
const secondaryDelay = 2

// leaseName is the name of a group's lease.
func (c Config) leaseName(g Group) string {
	if g == MachineControllerGroup {
		return c.MachineLeaseName
	}
	return c.LeaseName
}

// identity names this instance in the leases: the same for every group,
// so that the holder of both is one name.
func (c Config) identity() (string, error) {
	if c.LeaderElectIdentity != "" {
		return c.LeaderElectIdentity, nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("leader election identity: %w", err)
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	return host + "_" + hex.EncodeToString(suffix), nil
}

// campaign is the election of one group.
type campaign struct {
	plan    groupPlan
	lock    *resourcelock.LeaseLock
	elector *leaderelection.LeaderElector
	// leading is closed when the elector first wins the lease; other
	// receives the holders it observes that are not this instance.
	leading     chan struct{}
	leadingOnce sync.Once
	other       chan string
}

// won is a campaign that has just won its lease, and the context the
// elector cancels when it stops holding it.
type won struct {
	campaign *campaign
	leCtx    context.Context
}

// termEnd is how a group's term ended.
type termEnd struct {
	group Group
	lease string
	err   error
	// lost: the lease was not renewed in time.
	lost bool
}

// runLeaderElection campaigns for the lease of every group of plan, with
// one identity, and runs a group's controllers while it holds the group's
// lease. The first group's lease is campaigned for at once, the second's
// once this instance leads the first, or secondaryDelay retry periods
// after it saw another holder of the first (see secondaryDelay).
//
// Any term's end ends them all: a lost lease (ErrLeadershipLost), a failed
// controller, or ctx. Leases are released only after every controller has
// stopped, so that no controller of a group ever runs in two managers at
// once — not even while a manager that lost one lease stops the rest.
func (m *Manager) runLeaderElection(ctx context.Context, cc ControllerContext, plan []groupPlan) error {
	log := m.log
	id, err := m.cfg.identity()
	if err != nil {
		return err
	}
	// The electors run on their own context, cancelled only once the
	// controllers have stopped; client-go logs to the manager's logger.
	electCtx, cancelElect := context.WithCancel(logr.NewContext(context.WithoutCancel(ctx), log))
	defer cancelElect()
	started := make(chan won)
	campaigns := make([]*campaign, len(plan))
	for i, p := range plan {
		c := &campaign{plan: p, leading: make(chan struct{}), other: make(chan string, 1)}
		c.lock = &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: m.cfg.leaseNamespace(), Name: p.lease},
			Client:     cc.ControlCore.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id, EventRecorder: cc.Recorder},
		}
		c.elector, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          c.lock,
			LeaseDuration: m.cfg.LeaseDuration,
			RenewDeadline: m.cfg.RenewDeadline,
			RetryPeriod:   m.cfg.RetryPeriod,
			// Released by release, after every controller has stopped:
			// client-go would release a lease whose renewal failed at
			// once, while the group's controllers are still stopping.
			ReleaseOnCancel: false,
			Name:            p.lease,
			WatchDog:        m.watchdogs[p.group],
			Callbacks: leaderelection.LeaderCallbacks{
				// The controllers run in Run's goroutines, not the
				// elector's: le.Run does not wait for this callback.
				OnStartedLeading: func(leCtx context.Context) {
					c.leadingOnce.Do(func() { close(c.leading) })
					select {
					case started <- won{c, leCtx}:
					case <-electCtx.Done():
					}
				},
				OnStoppedLeading: func() {},
				OnNewLeader: func(holder string) {
					m.state.setHolder(p.group, holder)
					if holder != id && holder != "" {
						log.Info("Another instance leads this group; standing by", "group", p.group, "lease", p.lease, "leader", holder)
						select {
						case c.other <- holder:
						default:
						}
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election of %s: %w", p.lease, err)
		}
		if w := m.watchdogs[p.group]; w != nil {
			w.SetLeaderElection(c.elector)
		}
		campaigns[i] = c
	}

	var electors sync.WaitGroup
	defer electors.Wait()
	defer cancelElect()
	campaignFor := func(c *campaign) {
		log.Info("Campaigning for leadership", "group", c.plan.group, "lease", m.cfg.leaseNamespace()+"/"+c.plan.lease,
			"controllers", c.plan.names, "identity", id)
		electors.Go(func() { c.elector.Run(electCtx) })
	}
	campaignFor(campaigns[0])
	for i, c := range campaigns[1:] {
		first := campaigns[i]
		electors.Go(func() {
			if m.afterFirst(electCtx, first) {
				campaignFor(c)
			}
		})
	}

	end := m.superviseTerms(ctx, cc, started, len(campaigns))
	cancelElect()
	electors.Wait()
	m.release(ctx, campaigns, id)
	switch {
	case end.lost:
		return fmt.Errorf("%w (lease %s/%s of the %s controllers)", ErrLeadershipLost, m.cfg.leaseNamespace(), end.lease, end.group)
	case end.err != nil:
		return end.err
	}
	log.Info("Controllers stopped; lease released")
	return nil
}

// afterFirst waits until this instance leads the first campaign, or
// secondaryDelay retry periods after it saw another holder of the first
// lease; it returns false if ctx ended first.
func (m *Manager) afterFirst(ctx context.Context, first *campaign) bool {
	var wait <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return false
		case <-first.leading:
			return true
		case <-first.other:
			if wait == nil {
				wait = time.After(secondaryDelay * m.cfg.RetryPeriod)
			}
		case <-wait:
			return true
		}
	}
}

// superviseTerms starts a group's term whenever its lease is won, and
// returns once every term has ended after the first one ended (or ctx
// did), with how that first one ended.
func (m *Manager) superviseTerms(ctx context.Context, cc ControllerContext, started <-chan won, groupCount int) termEnd {
	// stopAll ends every term; it is ctx's child, so a shutdown ends them
	// too.
	termsCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	ended := make(chan termEnd, groupCount)
	running := 0
	var first *termEnd
	done := termsCtx.Done()
	for first == nil || running > 0 {
		select {
		case <-done:
			done = nil
			if first == nil {
				first = &termEnd{}
			}
		case w := <-started:
			c, leCtx := w.campaign, w.leCtx
			if first != nil {
				continue // won while stopping: released once the electors stopped
			}
			running++
			m.setGroupRunning(c.plan.group, true)
			m.log.Info("Leading; starting controllers", "group", c.plan.group, "lease", c.plan.lease, "controllers", c.plan.names)
			go func() {
				runCtx, cancel := context.WithCancel(leCtx)
				stop := context.AfterFunc(termsCtx, cancel)
				err := m.runControllers(runCtx, cc, c.plan)
				stop()
				cancel()
				ended <- termEnd{group: c.plan.group, lease: c.plan.lease, err: err, lost: termsCtx.Err() == nil && leCtx.Err() != nil}
			}()
		case e := <-ended:
			running--
			m.setGroupRunning(e.group, false)
			if first == nil {
				first = &e
				if e.lost {
					m.log.Info("Lease lost; stopping every controller, then releasing the other leases", "group", e.group, "lease", e.lease)
				}
			}
			stopAll()
		}
	}
	return *first
}

// release gives up the leases this instance still holds, once nothing of
// it runs any more, so that a standby takes over at once instead of after
// the lease duration.
func (m *Manager) release(ctx context.Context, campaigns []*campaign, id string) {
	for _, c := range campaigns {
		if err := releaseLease(context.WithoutCancel(ctx), c.lock, id, m.cfg.RenewDeadline); err != nil {
			m.log.Error(err, "Releasing the lease failed; a standby takes over once it expires", "lease", c.plan.lease)
		}
	}
}

// releaseLease empties the lease's holder if it is id, as client-go's
// ReleaseOnCancel does, within timeout.
func releaseLease(ctx context.Context, lock *resourcelock.LeaseLock, id string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		record, _, err := lock.Get(ctx)
		if apierrors.IsNotFound(err) {
			return nil // never created: nothing of ours
		}
		if err != nil {
			return err
		}
		if record.HolderIdentity != id {
			return nil // held by another by now
		}
		now := metav1.NewTime(time.Now())
		err = lock.Update(ctx, resourcelock.LeaderElectionRecord{
			LeaderTransitions: record.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
		})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}
