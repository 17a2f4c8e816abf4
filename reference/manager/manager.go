package manager

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/mcmkit/mcm/reference/internal/listwatch"
	"github.com/mcmkit/mcm/tolerant"
)

// eventSource is the component name on the events the manager records:
// MCM's.
const eventSource = "machine-controller-manager"

// Options are the parts of a Manager that are code, not flags.
type Options struct {
	// Controllers is the controller table; nil means DefaultControllers().
	Controllers Controllers
	// Drivers is the driver registry; nil means BuiltinDrivers().
	Drivers Drivers
	// Logger; the zero value means NewLogger(os.Stderr, Config.Verbosity).
	Logger logr.Logger
	// Registry for /metrics; nil means a new one with the Go and process
	// collectors. Every metric of the manager, its controllers and its
	// driver goes here; nothing uses the global registry.
	Registry *prometheus.Registry
}

// Manager runs the selected controllers with one driver against a control
// and a target cluster, with leader election and an HTTP server for
// metrics and health. Build it with New and call Run once.
type Manager struct {
	cfg   Config
	opts  Options
	log   logr.Logger
	reg   *prometheus.Registry
	state *state
	// leader is 1 while any group runs; groupRunning tells which.
	leader       prometheus.Gauge
	groupRunning *prometheus.GaugeVec
	// watchdogs, one per group with leader election, make /healthz fail
	// when a leader has not renewed its lease for too long.
	watchdogs map[Group]*leaderelection.HealthzAdaptor
	ran       atomic.Bool
	// listWatch observes the controllers' clients for /readyz.
	listWatch *listwatch.Health
	// safety are the outage gate and the replacement budget every
	// controller is given.
	safety safetyParts
	// informers are shared by the groups that run at a time.
	informers sharedInformers
}

// New validates cfg against the tables of opts and returns a Manager.
// Nothing is started and no cluster is contacted.
func New(cfg Config, opts Options) (*Manager, error) {
	if opts.Controllers == nil {
		opts.Controllers = DefaultControllers()
	}
	if opts.Drivers == nil {
		opts.Drivers = BuiltinDrivers()
	}
	if err := validate(cfg, opts.Controllers, opts.Drivers); err != nil {
		return nil, err
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = NewLogger(os.Stderr, cfg.Verbosity)
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	leader := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "mcm", Subsystem: "manager", Name: "leader",
		Help: "1 while this instance holds a group's lease and runs its controllers (always 1 without leader election).",
	})
	groupRunning := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "mcm", Subsystem: "manager", Name: "group_running",
		Help: "1 while this instance runs the controllers of the group (named after the MCM process that runs them): " +
			"while it holds the group's lease, or always without leader election.",
	}, []string{"group"})
	for _, c := range []prometheus.Collector{leader, groupRunning} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
	}
	health := listwatch.NewHealth()
	m := &Manager{
		cfg: cfg, opts: opts, log: opts.Logger, reg: reg, leader: leader, groupRunning: groupRunning, listWatch: health,
		state: &state{waiting: "not started", leaderElect: cfg.LeaderElect, listWatch: health},
	}
	if cfg.LeaderElect {
		m.watchdogs = map[Group]*leaderelection.HealthzAdaptor{}
		for _, g := range groups {
			m.watchdogs[g] = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
		}
	}
	return m, nil
}

// handler is the HTTP handler of /metrics, /healthz, /readyz and, with
// --profiling, /debug/pprof/.
func (m *Manager) handler() http.Handler {
	watchdogs := make([]*leaderelection.HealthzAdaptor, 0, len(m.watchdogs))
	for _, g := range groups {
		if w := m.watchdogs[g]; w != nil {
			watchdogs = append(watchdogs, w)
		}
	}
	return newMux(m.reg, m.state, watchdogs, m.cfg.Profiling)
}

// Run serves HTTP, waits for the API servers and the machine CRDs (logging
// why and retrying, never giving up), builds the driver, and then runs the
// controllers of each group — while holding the group's lease, with leader
// election. It returns nil once ctx ends and everything has stopped: the
// controllers' workqueues drained (in-flight reconciles finished),
// informers stopped, the leases released, the driver's background work
// ended, the HTTP server closed. It returns an error naming the lease if a
// lease was lost (exit, and let the restart campaign afresh: controllers
// and their caches are built per term), and other errors for configuration
// that does not work (a kubeconfig that does not load, the port in use).
// It sets no process-wide state: Main does (see Main).
func (m *Manager) Run(ctx context.Context) (err error) {
	if !m.ran.CompareAndSwap(false, true) {
		return errors.New("manager: Run called twice")
	}
	log := m.log
	ctx = logr.NewContext(ctx, log)
	defer context.AfterFunc(ctx, func() {
		m.state.update(func(s *state) { s.stopping = true })
		log.Info("Shutting down")
	})()
	defer func() {
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Cause(ctx)) {
			err = nil // stopped while waiting: a clean shutdown
		}
	}()
	m.logIgnoredFlags()
	if m.cfg.Port != 0 {
		stop, err := m.serve(log)
		if err != nil {
			return err
		}
		defer stop()
	}
	controlCfg, targetCfg, err := m.loadKubeconfigs()
	if err != nil {
		return err
	}
	runnable, skipped, err := m.waitForClusters(ctx, controlCfg, targetCfg)
	if err != nil {
		return err
	}
	cc, cleanup, err := m.clients(ctx, controlCfg, targetCfg)
	if err != nil {
		return err
	}
	defer cleanup()
	if cc, err = m.buildSafety(cc, runnable); err != nil {
		return err
	}
	if m.cfg.Driver != "" {
		stopDriver, err := m.startDriver(ctx, &cc, targetCfg)
		if err != nil {
			return err
		}
		defer stopDriver()
	}
	m.state.update(func(s *state) {
		s.waiting = ""
		s.skipped = slices.Sorted(maps.Keys(skipped))
	})
	log.Info("Startup checks passed", "controllers", runnable, "driver", m.cfg.Driver,
		"namespace", m.cfg.Namespace, "targetCluster", targetCfg != nil)
	return m.runGroups(ctx, cc, runnable)
}

// logIgnoredFlags names, in one warning line, the flags of MCM that were
// given and mean nothing here.
func (m *Manager) logIgnoredFlags() {
	if len(m.cfg.IgnoredFlags) == 0 {
		return
	}
	names := make([]string, len(m.cfg.IgnoredFlags))
	for i, f := range m.cfg.IgnoredFlags {
		names[i] = "--" + f
	}
	m.log.Info("Flags accepted for compatibility with machine-controller-manager and ignored: " + strings.Join(names, ", "))
}

// runControllers builds the controllers of one group on the informers
// the running groups share (sharedInformers), starts them and waits until
// ctx ends or a controller fails; then it stops all of them and returns
// once they have stopped. A group starts and stops with its lease,
// whatever the other does: the informers stop with the last group.
func (m *Manager) runControllers(ctx context.Context, cc ControllerContext, p groupPlan) error {
	names := p.names
	// Each group has clients, and so client rate limits, of its own, as
	// each of MCM's two processes has: the machine controller's writes do
	// not queue behind the MachineSet controller's creations, nor the
	// other way round.
	cc, err := cc.withOwnClients()
	if err != nil {
		return err
	}
	set, err := m.informers.acquire(cc, tolerant.Options{
		Recorder: cc.Recorder, Registerer: m.reg, Logger: m.log.WithName("informers"),
	})
	if err != nil {
		return err
	}
	defer m.informers.release()
	cc.MachineInformers, cc.ControlInformers, cc.TargetInformers = set.machines, set.control, set.target

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	runs, err := m.buildControllers(ctx, cc, set, names)
	if err != nil {
		// Built controllers remove their handlers when their Run returns:
		// run them with an ended context, which returns at once.
		cancel(nil)
		for _, run := range runs {
			_ = run(runCtx)
		}
		return err
	}

	var wg sync.WaitGroup
	wg.Go(func() {
		if set.waitForCacheSync(runCtx.Done()) && runCtx.Err() == nil {
			m.state.setSynced(p.group, true)
			m.log.Info("Informer caches synced; ready", "group", p.group)
		}
	})
	for i, run := range runs {
		wg.Go(func() {
			if err := run(logr.NewContext(runCtx, m.log)); err != nil && runCtx.Err() == nil {
				cancel(fmt.Errorf("the %s controller failed: %w", names[i], err))
			}
		})
	}
	wg.Wait() // every controller has drained its queues and removed its handlers
	failed := context.Cause(runCtx)
	parentDone := ctx.Err() != nil
	m.state.setSynced(p.group, false)
	if parentDone {
		return nil
	}
	return failed
}

// buildControllers builds the controllers names on set and starts the
// informers they asked for, one group at a time. It returns the
// controllers built, also with the error of the one that failed.
func (m *Manager) buildControllers(ctx context.Context, cc ControllerContext, set *informerSet, names []string) ([]Runnable, error) {
	m.informers.build.Lock()
	defer m.informers.build.Unlock()
	replacement, err := m.safety.replacementBudget(set)
	if err != nil {
		return nil, err
	}
	cc.Replacement = replacement
	var runs []Runnable
	for _, name := range names {
		c := cc
		c.Logger = m.log.WithName(name)
		r, err := m.opts.Controllers[name].New(ctx, c)
		if err != nil {
			return runs, fmt.Errorf("building the %s controller: %w", name, err)
		}
		runs = append(runs, r)
	}
	set.start()
	return runs, nil
}
