package leases

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrLeadershipLost is returned (wrapped, naming the lease) by Run when a
// lease could not be renewed in time. Every group has stopped by then and
// the other leases are released.
var ErrLeadershipLost = errors.New("leadership lost: the lease was not renewed within --leader-elect-renew-deadline")

// SecondaryDelay is how long, in retry periods, an instance that sees the
// first group's lease held by another waits before it campaigns for the
// later groups' leases. Another instance of this kind that has just won
// the first lease campaigns for the second at once, one API round trip
// later; the wait lets it win that one too, so that two instances do not
// split the groups between them. A holder that runs only the first group
// (MCM's machine-controller, or a manager restricted to that group) never
// takes the second lease, and after the wait this instance does.
const SecondaryDelay = 2

// Config is what every group's election shares.
type Config struct {
	// Client reaches the leases, in Namespace.
	Client    coordinationv1client.LeasesGetter
	Namespace string
	// Identity names this instance in every lease (see Identity).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's
	// leaderelection.LeaderElectionConfig's.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Recorder, if not nil, records the leases' events.
	Recorder resourcelock.EventRecorder
}

// Group is one group of controllers and its lease.
type Group struct {
	// Name of the group, for the log and the error of a lost lease.
	Name string
	// Lease is the name of the group's Lease.
	Lease string
	// Controllers names the group's controllers, for the log.
	Controllers []string
	// Watchdog, if not nil, watches the group's elector (for /healthz).
	Watchdog *leaderelection.HealthzAdaptor
	// Run runs the group's controllers while this instance holds the
	// lease: until ctx ends (the lease is lost, another group's term ended,
	// or Run's context ended), and returns once they have stopped. An
	// error ends every term.
	Run func(ctx context.Context) error
	// Holder, if not nil, is told the holder of the lease whenever an
	// elector observes a new one.
	Holder func(holder string)
}

// Identity returns given, or, when it is empty, the hostname with a random
// suffix: the same for every group, so that the holder of both is one name.
func Identity(given string) (string, error) {
	if given != "" {
		return given, nil
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
	group   Group
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
	err   error
	// lost: the lease was not renewed in time.
	lost bool
}

// Run campaigns for the lease of every group, with one identity, and runs
// a group while it holds the group's lease, until ctx ends or a term ends
// (see the package documentation). It logs to ctx's logger, and so does
// client-go's elector. It returns nil once ctx ended and every lease it
// held is released, ErrLeadershipLost (wrapped, naming the lease) if a
// lease was lost, or the error of the group that failed.
func Run(ctx context.Context, cfg Config, groups []Group) error {
	if len(groups) == 0 {
		return nil
	}
	log := logr.FromContextOrDiscard(ctx)
	// The electors run on their own context, cancelled only once the
	// groups have stopped.
	electCtx, cancelElect := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelElect()
	started := make(chan won)
	campaigns := make([]*campaign, len(groups))
	for i, g := range groups {
		c, err := newCampaign(electCtx, cfg, g, started)
		if err != nil {
			return err
		}
		campaigns[i] = c
	}

	var electors sync.WaitGroup
	defer electors.Wait()
	defer cancelElect()
	campaignFor := func(c *campaign) {
		log.Info("Campaigning for leadership", "group", c.group.Name, "lease", cfg.Namespace+"/"+c.group.Lease,
			"controllers", c.group.Controllers, "identity", cfg.Identity)
		electors.Go(func() { c.elector.Run(electCtx) })
	}
	campaignFor(campaigns[0])
	for i, c := range campaigns[1:] {
		first := campaigns[i]
		electors.Go(func() {
			if afterFirst(electCtx, first, cfg.RetryPeriod) {
				campaignFor(c)
			}
		})
	}

	end := superviseTerms(ctx, started, len(campaigns))
	cancelElect()
	electors.Wait()
	release(ctx, cfg, campaigns)
	switch {
	case end.lost:
		return fmt.Errorf("%w (lease %s/%s of the %s controllers)", ErrLeadershipLost, cfg.Namespace, end.group.Lease, end.group.Name)
	case end.err != nil:
		return end.err
	}
	log.Info("Controllers stopped; lease released")
	return nil
}

// newCampaign builds the elector of group g, which sends on started each
// time it wins the lease.
func newCampaign(electCtx context.Context, cfg Config, g Group, started chan<- won) (*campaign, error) {
	log := logr.FromContextOrDiscard(electCtx)
	c := &campaign{group: g, leading: make(chan struct{}), other: make(chan string, 1)}
	c.lock = &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: g.Lease},
		Client:     cfg.Client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity, EventRecorder: cfg.Recorder},
	}
	var err error
	c.elector, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          c.lock,
		LeaseDuration: cfg.LeaseDuration,
		RenewDeadline: cfg.RenewDeadline,
		RetryPeriod:   cfg.RetryPeriod,
		// Released by release, after every group has stopped: client-go
		// would release a lease whose renewal failed at once, while the
		// group's controllers are still stopping.
		ReleaseOnCancel: false,
		Name:            g.Lease,
		WatchDog:        g.Watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			// The groups run in Run's goroutines, not the elector's:
			// le.Run does not wait for this callback.
			OnStartedLeading: func(leCtx context.Context) {
				c.leadingOnce.Do(func() { close(c.leading) })
				select {
				case started <- won{c, leCtx}:
				case <-electCtx.Done():
				}
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(holder string) {
				if g.Holder != nil {
					g.Holder(holder)
				}
				if holder != cfg.Identity && holder != "" {
					log.Info("Another instance leads this group; standing by", "group", g.Name, "lease", g.Lease, "leader", holder)
					select {
					case c.other <- holder:
					default:
					}
				}
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("leader election of %s: %w", g.Lease, err)
	}
	if g.Watchdog != nil {
		g.Watchdog.SetLeaderElection(c.elector)
	}
	return c, nil
}

// afterFirst waits until this instance leads the first campaign, or
// SecondaryDelay retry periods after it saw another holder of the first
// lease; it returns false if ctx ended first.
func afterFirst(ctx context.Context, first *campaign, retryPeriod time.Duration) bool {
	var wait <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return false
		case <-first.leading:
			return true
		case <-first.other:
			if wait == nil {
				wait = time.After(SecondaryDelay * retryPeriod)
			}
		case <-wait:
			return true
		}
	}
}

// superviseTerms starts a group's term whenever its lease is won, and
// returns once every term has ended after the first one ended (or ctx
// did), with how that first one ended.
func superviseTerms(ctx context.Context, started <-chan won, groupCount int) termEnd {
	log := logr.FromContextOrDiscard(ctx)
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
			if first != nil {
				continue // won while stopping: released once the electors stopped
			}
			running++
			log.Info("Leading; starting controllers", "group", w.campaign.group.Name, "lease", w.campaign.group.Lease,
				"controllers", w.campaign.group.Controllers)
			go func() { ended <- term(termsCtx, w) }()
		case e := <-ended:
			running--
			if first == nil {
				first = &e
				if e.lost {
					log.Info("Lease lost; stopping every controller, then releasing the other leases", "group", e.group.Name, "lease", e.group.Lease)
				}
			}
			stopAll()
		}
	}
	return *first
}

// term runs the group of w until its lease is lost or termsCtx ends.
func term(termsCtx context.Context, w won) termEnd {
	runCtx, cancel := context.WithCancel(w.leCtx)
	stop := context.AfterFunc(termsCtx, cancel)
	err := w.campaign.group.Run(runCtx)
	stop()
	cancel()
	return termEnd{group: w.campaign.group, err: err, lost: termsCtx.Err() == nil && w.leCtx.Err() != nil}
}

// release gives up the leases this instance still holds, once nothing of
// it runs any more, so that a standby takes over at once instead of after
// the lease duration.
func release(ctx context.Context, cfg Config, campaigns []*campaign) {
	for _, c := range campaigns {
		if err := releaseLease(context.WithoutCancel(ctx), c.lock, cfg.Identity, cfg.RenewDeadline); err != nil {
			logr.FromContextOrDiscard(ctx).Error(err, "Releasing the lease failed; a standby takes over once it expires", "lease", c.group.Lease)
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
