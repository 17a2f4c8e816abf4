package manager

import (
	"context"

	"github.com/go-logr/logr"

	"github.com/mcmkit/mcm/reference/internal/flags"
	"github.com/mcmkit/mcm/reference/internal/leases"
)

// runGroups runs the controllers names, each group under its lease (see
// runLeaderElection), or all at once without leader election.
func (m *Manager) runGroups(ctx context.Context, cc ControllerContext, names []string) error {
	plan := m.groupPlan(names)
	m.state.update(func(s *state) {
		s.groups = make([]*groupState, len(plan))
		for i, p := range plan {
			s.groups[i] = &groupState{group: p.group, lease: p.lease}
		}
	})
	for _, p := range plan {
		m.groupRunning.WithLabelValues(string(p.group)).Set(0) // a standby's groups are 0, not absent
	}
	if !m.cfg.LeaderElect {
		return m.runWithoutLeaderElection(ctx, cc, plan)
	}
	return m.runLeaderElection(ctx, cc, plan)
}

// runWithoutLeaderElection runs every group until ctx ends or one fails,
// which stops the others.
func (m *Manager) runWithoutLeaderElection(ctx context.Context, cc ControllerContext, plan []groupPlan) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	failed := make(chan error, len(plan))
	for _, p := range plan {
		go func() { failed <- m.runTerm(runCtx, cc, p) }()
	}
	var first error
	for range plan {
		if err := <-failed; err != nil && first == nil {
			first = err
			stop()
		}
	}
	return first
}

// runLeaderElection runs each group of plan under its lease (package
// leases): a group's controllers run while this manager holds its lease,
// and a lost lease stops them all (see Leader election in the package
// documentation).
func (m *Manager) runLeaderElection(ctx context.Context, cc ControllerContext, plan []groupPlan) error {
	id, err := leases.Identity(m.cfg.LeaderElectIdentity)
	if err != nil {
		return err
	}
	groups := make([]leases.Group, len(plan))
	for i, p := range plan {
		groups[i] = leases.Group{
			Name: string(p.group), Lease: p.lease, Controllers: p.names, Watchdog: m.watchdogs[p.group],
			Run:    func(ctx context.Context) error { return m.runTerm(ctx, cc, p) },
			Holder: func(holder string) { m.state.setHolder(p.group, holder) },
		}
	}
	// client-go's electors log to the manager's logger, through ctx.
	return leases.Run(logr.NewContext(ctx, m.log), leases.Config{
		Client: cc.ControlCore.CoordinationV1(), Namespace: flags.LeaseNamespace(m.cfg), Identity: id,
		LeaseDuration: m.cfg.LeaseDuration, RenewDeadline: m.cfg.RenewDeadline, RetryPeriod: m.cfg.RetryPeriod,
		Recorder: cc.Recorder,
	}, groups)
}

// runTerm runs the controllers of p until ctx ends or one fails, and says
// so in /readyz and the metrics meanwhile.
func (m *Manager) runTerm(ctx context.Context, cc ControllerContext, p groupPlan) error {
	m.setGroupRunning(p.group, true)
	defer m.setGroupRunning(p.group, false)
	return m.runControllers(ctx, cc, p)
}

// setGroupRunning records whether a group's controllers run, for /readyz
// and the metrics.
func (m *Manager) setGroupRunning(g Group, running bool) {
	anyRunning := false
	m.state.update(func(s *state) {
		for _, gs := range s.groups {
			if gs.group == g {
				gs.running = running
				if !running {
					gs.synced = false
				}
			}
			anyRunning = anyRunning || gs.running
		}
		s.syncGroups()
	})
	m.groupRunning.WithLabelValues(string(g)).Set(boolGauge(running))
	m.leader.Set(boolGauge(anyRunning))
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// groupPlan is one group of the controllers to run: its lease (with
// leader election) and its controllers.
type groupPlan struct {
	group Group
	lease string
	names []string
}

// groupPlan splits the controllers to run into their groups, in the order
// of groups; a group with none is left out.
func (m *Manager) groupPlan(names []string) []groupPlan {
	var plan []groupPlan
	for _, g := range groups {
		p := groupPlan{group: g, lease: leaseName(m.cfg, g)}
		for _, n := range names {
			if m.opts.Controllers[n].Group == g {
				p.names = append(p.names, n)
			}
		}
		if len(p.names) > 0 {
			plan = append(plan, p)
		}
	}
	return plan
}
