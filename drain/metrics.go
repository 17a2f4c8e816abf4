package drain

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcmkit/mcm/internal/promreg"
)

const (
	metricsNamespace = "mcm"
	metricsSubsystem = "drain"
)

// metrics are the drain's collectors. A nil *metrics records nothing.
type metrics struct {
	evictions      *prometheus.CounterVec
	forceDeletions prometheus.Counter
	duration       prometheus.Histogram
	remaining      *prometheus.GaugeVec
}

// newMetrics registers the drain metrics on reg, or picks up the ones a
// previous Drainer registered there. A nil reg gives nil metrics.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help}
	}
	m := &metrics{}
	var err error
	if m.evictions, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts(opts("eviction_requests_total",
		"Eviction requests by HTTP status code of the answer (\"error\" when there was none).")), []string{"code"})); err != nil {
		return nil, err
	}
	if m.forceDeletions, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts(opts("force_deletions_total",
		"Pods deleted without the eviction API because the drain deadline came.")))); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "duration_seconds",
		Help: "Time from the first pass of a drain to the pass that found it done.",
		// 1s to about 4.5h.
		Buckets: prometheus.ExponentialBuckets(1, 2, 15),
	})); err != nil {
		return nil, err
	}
	if m.remaining, err = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("pods_remaining",
		"Pods that keep the drain of a node from being done, as of its last pass.")), []string{"node"})); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c on reg and returns it, or returns the equal
// collector that is already registered.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	c, err := promreg.Register(reg, c)
	if err != nil {
		return c, fmt.Errorf("registering drain metrics: %w", err)
	}
	return c, nil
}

func (m *metrics) evictionRequest(code string) {
	if m == nil {
		return
	}
	m.evictions.WithLabelValues(code).Inc()
}

func (m *metrics) forceDeleted() {
	if m == nil {
		return
	}
	m.forceDeletions.Inc()
}

func (m *metrics) passDone(node string, remaining int) {
	if m == nil {
		return
	}
	m.remaining.WithLabelValues(node).Set(float64(remaining))
}

func (m *metrics) drained(seconds float64) {
	if m == nil {
		return
	}
	m.duration.Observe(seconds)
}

// forget drops the node's series, when it is drained or its drain is
// abandoned.
func (m *metrics) forget(node string) {
	if m == nil {
		return
	}
	m.remaining.DeleteLabelValues(node)
}
