package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/tolerant"
)

// ErrLeadershipLost is returned (wrapped, naming the lease) by Run when a
// lease could not be renewed in time. Every controller has stopped by
// then and the other leases are released; exit and let the restart
// campaign afresh (controllers and their caches are built per term).
var ErrLeadershipLost = errors.New("leadership lost: the lease was not renewed within --leader-elect-renew-deadline")

// EventSource is the component name on the events the manager records.
const EventSource = "machine-controller-manager"

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
	listWatch *listWatchHealth
	// gates are shared by the groups' controllers.
	gates *Gates
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
	if err := cfg.Validate(opts.Controllers, opts.Drivers); err != nil {
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
	health := newListWatchHealth()
	gates := &Gates{}
	m := &Manager{
		cfg: cfg, opts: opts, log: opts.Logger, reg: reg, leader: leader, groupRunning: groupRunning, listWatch: health, gates: gates,
		state: &state{waiting: "not started", leaderElect: cfg.LeaderElect, listWatch: health, gates: gates},
	}
	if cfg.LeaderElect {
		m.watchdogs = map[Group]*leaderelection.HealthzAdaptor{}
		for _, g := range groups {
			m.watchdogs[g] = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
		}
	}
	return m, nil
}

// Registry is the registry /metrics serves.
func (m *Manager) Registry() *prometheus.Registry { return m.reg }

// Ready reports what /readyz reports: whether the manager is ready, and
// why, in one line. See the package documentation for what ready means.
func (m *Manager) Ready() (bool, string) { return m.state.readiness() }

// Handler is the HTTP handler of /metrics, /healthz, /readyz and, with
// --profiling, /debug/pprof/, for callers that serve it themselves (with
// --port=0).
func (m *Manager) Handler() http.Handler {
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
// ended, the HTTP server closed. It returns ErrLeadershipLost if a lease
// was lost, and other errors for configuration that does not work (a
// kubeconfig that does not load, the port in use).
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

	if len(m.cfg.IgnoredFlags) > 0 {
		names := make([]string, len(m.cfg.IgnoredFlags))
		for i, f := range m.cfg.IgnoredFlags {
			names[i] = "--" + f
		}
		log.Info("Flags accepted for compatibility with machine-controller-manager and ignored: " + strings.Join(names, ", "))
	}
	if m.cfg.Profiling && m.cfg.ContentionProfiling {
		// As MCM: every blocking event, for /debug/pprof/block.
		goruntime.SetBlockProfileRate(1)
		defer goruntime.SetBlockProfileRate(0)
	}

	if m.cfg.Port != 0 {
		stop, err := m.serve(log)
		if err != nil {
			return err
		}
		defer stop()
	}

	m.state.setWaiting("loading kubeconfigs")
	controlCfg, err := m.cfg.restConfig("control-kubeconfig", m.cfg.ControlKubeconfig)
	if err != nil {
		return err
	}
	var targetCfg *rest.Config
	switch m.cfg.TargetKubeconfig {
	case NoTarget:
	case m.cfg.ControlKubeconfig:
		targetCfg = rest.CopyConfig(controlCfg)
	default:
		if targetCfg, err = m.cfg.restConfig("target-kubeconfig", m.cfg.TargetKubeconfig); err != nil {
			return err
		}
	}

	if err := waitForAPIServer(ctx, log, "control", controlCfg, m.state.setWaiting); err != nil {
		return err
	}
	if targetCfg != nil && m.cfg.TargetKubeconfig != m.cfg.ControlKubeconfig {
		if err := waitForAPIServer(ctx, log, "target", targetCfg, m.state.setWaiting); err != nil {
			return err
		}
	}
	served, err := servedMachineResources(ctx, log, controlCfg, m.state.setWaiting)
	if err != nil {
		return err
	}
	runnable, skipped := m.runnableControllers(served)
	for name, missing := range skipped {
		log.Info("Skipping controller: the CRDs it needs are not served; install them and restart to run it",
			"controller", name, "missing", missing)
	}
	if len(runnable) == 0 {
		return fmt.Errorf("none of the selected controllers can run: their CRDs are not served (%v)", skipped)
	}

	cc, cleanup, err := m.clients(ctx, controlCfg, targetCfg)
	if err != nil {
		return err
	}
	defer cleanup()

	if m.cfg.Driver != "" {
		var background Runnable
		// The driver's own clients (the sim's kubelet) recover from an
		// outage as fast as the controllers' do, but /readyz is about the
		// controllers' informers only.
		driverTarget := targetCfg
		if driverTarget != nil {
			driverTarget = retryRefusedListWatch(driverTarget)
		}
		cc.Driver, background, err = m.opts.Drivers[m.cfg.Driver](ctx, DriverEnv{
			Config: m.cfg, Target: cc.TargetCore, TargetConfig: driverTarget, Logger: log.WithName("driver"), Registerer: m.reg,
		})
		if err != nil {
			return fmt.Errorf("--driver=%s: %w", m.cfg.Driver, err)
		}
		// One set of deadlines for every controller that calls the
		// driver, so that no machine gets a call while another
		// controller's call for it is stuck, and /readyz sees them all.
		deadlines, err := driver.WithDeadlines(cc.Driver, m.cfg.DriverTimeouts)
		if err != nil {
			return fmt.Errorf("--driver=%s: %w", m.cfg.Driver, err)
		}
		cc.Driver = deadlines
		m.state.update(func(s *state) { s.driverCalls = deadlines })
		if background != nil {
			// The background work outlives the controllers: it stops last.
			bgCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			done := make(chan error, 1)
			go func() { done <- background(bgCtx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					log.Error(err, "Driver background work failed")
				}
			}()
		}
	}

	m.state.update(func(s *state) {
		s.waiting = ""
		s.skipped = sortedKeys(skipped)
	})
	log.Info("Startup checks passed", "controllers", runnable, "driver", m.cfg.Driver,
		"namespace", m.cfg.Namespace, "targetCluster", targetCfg != nil)
	return m.runGroups(ctx, cc, runnable)
}

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
		m.setGroupRunning(p.group, true)
		go func() {
			err := m.runControllers(runCtx, cc, p)
			m.setGroupRunning(p.group, false)
			failed <- err
		}()
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

// serve starts the HTTP server and returns the function that stops it.
func (m *Manager) serve(log logr.Logger) (func(), error) {
	handler, tlsConfig, secure, err := m.secureServing(m.Handler())
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(m.cfg.Address, strconv.Itoa(m.cfg.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--address/--port: %w", err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	// ReadHeaderTimeout also bounds a TLS handshake.
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("Serving /metrics, /healthz and /readyz", append([]any{"address", ln.Addr().String(), "profiling", m.cfg.Profiling}, secure...)...)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "HTTP server failed")
		}
	}, nil
}

// runnableControllers splits the selected controllers into those whose
// resources are served and those (with the missing resources) that are not.
func (m *Manager) runnableControllers(served []string) (runnable []string, skipped map[string][]string) {
	selected, _ := m.cfg.selectedControllers(m.opts.Controllers) // validated in New
	skipped = map[string][]string{}
	for _, name := range selected {
		var missing []string
		for _, r := range m.opts.Controllers[name].Resources {
			if !slices.Contains(served, r) {
				missing = append(missing, r)
			}
		}
		if len(missing) > 0 {
			skipped[name] = missing
		} else {
			runnable = append(runnable, name)
		}
	}
	return runnable, skipped
}

// clients builds the clients and the event recorder; cleanup stops the
// event broadcaster.
func (m *Manager) clients(ctx context.Context, controlCfg, targetCfg *rest.Config) (ControllerContext, func(), error) {
	cc := ControllerContext{Config: m.cfg, Registerer: m.reg, Logger: m.log, Gates: m.gates}
	restMetrics, err := newRESTClientMetrics(m.reg)
	if err != nil {
		return cc, nil, fmt.Errorf("REST client metrics: %w", err)
	}
	// Measured inside the list-watch retries, so that each attempt counts.
	controlCfg = listWatchTransport(instrumentREST(controlCfg, restMetrics), m.listWatch, "control")
	if targetCfg != nil {
		targetCfg = listWatchTransport(instrumentREST(targetCfg, restMetrics), m.listWatch, "target")
	}
	cc.controlCfg, cc.targetCfg = controlCfg, targetCfg
	if cc, err = cc.withOwnClients(); err != nil {
		return cc, nil, err
	}
	scheme := runtime.NewScheme()
	if err := kscheme.AddToScheme(scheme); err != nil {
		return cc, nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return cc, nil, err
	}
	// The broadcaster outlives ctx: the lease release at shutdown records an
	// event. cleanup stops it.
	broadcaster := record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cc.ControlCore.CoreV1().Events("")})
	cc.Recorder = broadcaster.NewRecorder(scheme, corev1.EventSource{Component: EventSource})
	return cc, broadcaster.Shutdown, nil
}

// withOwnClients returns cc with clients of its own: each client of
// client-go has its own rate limiter, so the controllers given these
// clients get a budget of --kube-api-qps and --kube-api-burst per cluster
// and API of their own (see runControllers).
func (cc ControllerContext) withOwnClients() (ControllerContext, error) {
	if cc.controlCfg == nil {
		return cc, nil // clients given as they are (tests with fakes)
	}
	var err error
	if cc.Machines, err = versioned.NewForConfig(withContentType(cc.controlCfg, runtime.ContentTypeJSON)); err != nil {
		return cc, fmt.Errorf("control cluster client: %w", err)
	}
	if cc.ControlCore, err = kubernetes.NewForConfig(withContentType(cc.controlCfg, cc.Config.KubeAPIContentType)); err != nil {
		return cc, fmt.Errorf("control cluster client: %w", err)
	}
	if cc.targetCfg != nil {
		if cc.TargetCore, err = kubernetes.NewForConfig(withContentType(cc.targetCfg, cc.Config.KubeAPIContentType)); err != nil {
			return cc, fmt.Errorf("target cluster client: %w", err)
		}
	}
	return cc, nil
}

// withContentType returns a copy of cfg whose requests carry contentType
// and which accepts it, and JSON, in answers: the API server answers in
// JSON what it has no protobuf for (custom resources, some errors).
func withContentType(cfg *rest.Config, contentType string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = contentType
	cfg.AcceptContentTypes = contentType
	if contentType != runtime.ContentTypeJSON {
		cfg.AcceptContentTypes += "," + runtime.ContentTypeJSON
	}
	return cfg
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
		p := groupPlan{group: g, lease: m.cfg.leaseName(g)}
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

	// Gate providers first: the others take their gates when built.
	names = slices.Clone(names)
	slices.SortStableFunc(names, func(a, b string) int {
		switch pa, pb := m.opts.Controllers[a].ProvidesSafetyGate, m.opts.Controllers[b].ProvidesSafetyGate; {
		case pa && !pb:
			return -1
		case pb && !pa:
			return 1
		}
		return 0
	})
	if cc.Gates == nil {
		cc.Gates = &Gates{}
	}
	if slices.ContainsFunc(names, func(n string) bool { return m.opts.Controllers[n].ProvidesSafetyGate }) {
		// Cleared once the group's controllers have stopped (or failed to
		// be built): a stopped safety controller freezes nobody.
		defer cc.Gates.SetSafety(nil, nil)
	}
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

// NewLogger returns a logr.Logger writing one text line per entry to w, at
// verbosity v and below.
func NewLogger(w io.Writer, v int) logr.Logger {
	var mu sync.Mutex
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		if prefix != "" {
			fmt.Fprintf(w, "%s: %s\n", prefix, args)
		} else {
			fmt.Fprintln(w, args)
		}
	}, funcr.Options{LogTimestamp: true, TimestampFormat: time.RFC3339Nano, Verbosity: v})
}

// Main is the whole program of a manager binary: it parses args, runs
// until SIGINT or SIGTERM (a second signal kills at once), and returns the
// exit code: 0 after a clean shutdown, 2 for bad flags, 1 for any other
// failure. Errors are one line on stderr. Unless the environment sets
// GOGC, it sets the garbage collector's target to 40 (defaultGCPercent).
func Main(name string, args []string, controllers Controllers, drivers Drivers) int {
	cfg, err := ParseFlags(name, args, controllers, drivers, os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s (see %s -h)\n", name, oneLine(err.Error()), name)
		return 2
	}
	setGCPercent()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop) // after the first signal, the next one kills
	m, err := New(cfg, Options{Controllers: controllers, Drivers: drivers})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, oneLine(err.Error()))
		return 2
	}
	if err := m.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, oneLine(err.Error()))
		return 1
	}
	return 0
}
