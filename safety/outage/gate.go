package outage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/workqueue"
)

// Defaults of the Options fields.
const (
	// DefaultStatusCheckPeriod and DefaultStatusCheckTimeout are MCM's
	// --machine-safety-apiserver-statuscheck-period and -timeout.
	DefaultStatusCheckPeriod  = time.Minute
	DefaultStatusCheckTimeout = 30 * time.Second
	// DefaultProbeNamespace is where the check asks for a machine that
	// does not exist.
	DefaultProbeNamespace = "default"
)

// Reasons of the events on the freeze for an API-server outage.
const (
	ReasonOutageFrozen = "FrozenForAPIServerOutage"
	ReasonOutageThawed = "UnfrozenAfterAPIServerOutage"
)

// queueName names the check's queue in logs and metrics.
const queueName = "safety-apiserver"

// checkKey is the one key of the check's queue: one check covers both
// API servers.
const checkKey = "apiservers"

// Options configures a Gate. The zero value works: MCM's period and
// timeout, no events, no metrics, the real clock.
type Options struct {
	// StatusCheckPeriod is how often the API servers' reachability is
	// checked (every fifth of StatusCheckTimeout while one is down); after
	// StatusCheckTimeout out of reach the gate is frozen. A probe, too,
	// gives up after StatusCheckTimeout. Zero means the defaults.
	StatusCheckPeriod, StatusCheckTimeout time.Duration
	// ProbeNamespace is the control-cluster namespace the check reads a
	// (missing) machine from, and where the freeze's events go; use one
	// the caller may read. Empty means DefaultProbeNamespace.
	ProbeNamespace string
	// Logger is used where no context carries one.
	Logger logr.Logger
	// Recorder receives the freeze's and the thaw's events. Nil means none.
	Recorder record.EventRecorder
	// Registerer receives the check's queue metrics, from the first Run
	// on: a gate whose check never runs (in a standby) exports none. Nil
	// means none.
	Registerer prometheus.Registerer
	// Clock is the time source. Nil means the real clock.
	Clock clock.WithTicker
}

func (o Options) complete() (Options, error) {
	if o.StatusCheckPeriod < 0 || o.StatusCheckTimeout < 0 {
		return o, fmt.Errorf("StatusCheckPeriod and StatusCheckTimeout must not be negative, got %v and %v", o.StatusCheckPeriod, o.StatusCheckTimeout)
	}
	if o.StatusCheckPeriod == 0 {
		o.StatusCheckPeriod = DefaultStatusCheckPeriod
	}
	if o.StatusCheckTimeout == 0 {
		o.StatusCheckTimeout = DefaultStatusCheckTimeout
	}
	if o.ProbeNamespace == "" {
		o.ProbeNamespace = DefaultProbeNamespace
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o, nil
}

// Gate is the API-server outage gate: a safety.Gate, and a
// machine.OutageReporter. Its check runs in Run; while Run does not run,
// the gate is not frozen: a stopped check freezes nobody.
type Gate struct {
	control versioned.Interface
	target  kubernetes.Interface // nil without a target cluster
	opts    Options

	mu      sync.Mutex
	running bool
	state   state
}

// New returns the gate of the API servers of control (the control
// cluster's clientset) and target (the target cluster's; nil without
// one). It starts nothing and registers nothing.
func New(control versioned.Interface, target kubernetes.Interface, opts Options) (*Gate, error) {
	if control == nil {
		return nil, errors.New("outage gate: the control cluster's client must not be nil")
	}
	o, err := opts.complete()
	if err != nil {
		return nil, fmt.Errorf("outage gate: invalid options: %w", err)
	}
	return &Gate{control: control, target: target, opts: o}, nil
}

// Frozen tells whether the controllers must not create machines nor let
// the health timeout mark machines Failed: the check runs, and an API
// server has been out of reach for longer than StatusCheckTimeout. It
// implements safety.Gate.
func (g *Gate) Frozen(context.Context) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running && g.state.frozen
}

// LastOutageEnd is when the last freeze for an outage ended; zero if none
// did. It implements machine.OutageReporter: machines Unknown since before
// then get a new health timeout.
func (g *Gate) LastOutageEnd() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state.lastEnd
}

// Run checks the API servers at once and then every StatusCheckPeriod
// (every fifth of StatusCheckTimeout while one is down) until ctx ends; it
// needs no cache, so an outage while the other controllers' caches sync
// is seen too. It returns nil after ctx ended, and an error when the
// check runs already or its queue's metrics cannot be registered. A gate
// may run again after Run returned.
func (g *Gate) Run(ctx context.Context) error {
	ctx = workqueue.ControllerContext(ctx, g.opts.Logger, "outage")
	// The check returns no error of its own (a server out of reach is its
	// finding), so the queue's backoff only paces a panic.
	q, err := workqueue.New(queueName, workqueue.ReconcilerFunc[string](g.check),
		workqueue.Options{Registerer: g.opts.Registerer, Clock: g.opts.Clock, Logger: g.opts.Logger})
	if err != nil {
		return fmt.Errorf("outage gate: %w", err)
	}
	if !g.start() {
		return errors.New("outage gate: the check runs already")
	}
	defer g.stop()
	q.Add(checkKey)
	return q.Run(ctx, 1)
}

// start records that the check runs; false when it runs already.
func (g *Gate) start() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running {
		return false
	}
	g.running = true
	return true
}

// stop records that the check stopped, and forgets its outage, so that
// the gate does not stay frozen without a check that could thaw it.
func (g *Gate) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running = false
	g.state.downSince, g.state.frozen = time.Time{}, false
}

// check is one check: probe (reads only), decide (observe), report.
func (g *Gate) check(ctx context.Context, _ string) (workqueue.Result, error) {
	up := g.reachable(ctx)
	if ctx.Err() != nil {
		return workqueue.Result{}, nil // stopping: the probe's failure says nothing
	}
	g.mu.Lock()
	frozen, thawed := g.state.observe(up, g.opts.Clock.Now(), g.opts.StatusCheckTimeout)
	g.mu.Unlock()
	// The machine controller exports the state as
	// mcm_machine_controller_frozen, reading it from this gate.
	logger := logr.FromContextOrDiscard(ctx)
	switch {
	case frozen:
		logger.Info("API server out of reach for longer than the timeout; freezing machine creation and health timeouts",
			"timeout", g.opts.StatusCheckTimeout)
		g.event(corev1.EventTypeWarning, ReasonOutageFrozen, fmt.Sprintf(
			"An API server has been out of reach for more than %v: no machine is created and none is marked Failed by its health timeout until it is back; deletions go on",
			g.opts.StatusCheckTimeout))
	case thawed:
		logger.Info("API servers reachable again; unfreezing, and restarting the health timeout of unhealthy machines")
		g.event(corev1.EventTypeNormal, ReasonOutageThawed,
			"The API servers are reachable again: machines are created again, and unhealthy machines' health timeouts start anew")
	}
	next := g.opts.StatusCheckPeriod
	if !up {
		next = max(g.opts.StatusCheckTimeout/5, time.Millisecond)
	}
	return workqueue.Result{RequeueAfter: next}, nil
}

// event records an event about the freeze on the probe namespace, the
// namespace whose machines it holds back. The recorder delivers it once
// the server is back, if it is not yet.
func (g *Gate) event(eventType, reason, message string) {
	if g.opts.Recorder == nil {
		return
	}
	ns := &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: g.opts.ProbeNamespace, Namespace: g.opts.ProbeNamespace}
	g.opts.Recorder.Eventf(ns, eventType, reason, "%s", message)
}
