package workqueue

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcmkit/mcm/internal/promreg"
	kworkqueue "k8s.io/client-go/util/workqueue"
)

const (
	metricsNamespace = "mcm"
	metricsSubsystem = "workqueue"
)

// Values of the result label of mcm_workqueue_reconcile_total.
const (
	resultSuccess = "success"
	resultRequeue = "requeue"
	resultError   = "error"
	resultPanic   = "panic"
	// resultConflict: the reconcile failed with 409 Conflicts only, which
	// the next one resolves (see onlyConflicts).
	resultConflict = "conflict"
)

var allResults = []string{resultSuccess, resultRequeue, resultError, resultPanic, resultConflict}

// durationBuckets spans 10ns to 1000s, like Kubernetes' own workqueue
// metrics, so dashboards built for those read ours the same way.
var durationBuckets = prometheus.ExponentialBuckets(10e-9, 10, 12)

// collectors are the metric vectors shared by every queue on one Registerer;
// queues are told apart by the name label.
//
// Using one vector per Registerer (instead of per-queue collectors with a
// constant name label) keeps each metric a single family and lets a queue be
// built again under a name that is already registered, e.g. when a
// controller is re-created after losing and regaining leadership: Register
// reports prometheus.AlreadyRegisteredError and we continue with the
// existing vector. The price is that two live queues with the same name on
// one Registerer share their series, so names should be unique per
// Registerer.
type collectors struct {
	depth          *prometheus.GaugeVec
	adds           *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	workDuration   *prometheus.HistogramVec
	unfinishedWork *prometheus.GaugeVec
	longestRunning *prometheus.GaugeVec
	retries        *prometheus.CounterVec
	reconciles     *prometheus.CounterVec
	giveUps        *prometheus.CounterVec
}

// registerCollectors registers the vectors on reg, or picks up the ones a
// previous queue registered there. It fails if reg holds an incompatible
// collector under one of our names.
func registerCollectors(reg prometheus.Registerer) (*collectors, error) {
	r := &registrar{reg: reg}
	nameLabel := []string{"name"}
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help}
	}
	histOpts := func(name, help string) prometheus.HistogramOpts {
		return prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help,
			Buckets: durationBuckets,
		}
	}
	c := &collectors{
		depth: register(r, prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("depth",
			"Current number of keys waiting in the workqueue.")), nameLabel)),
		adds: register(r, prometheus.NewCounterVec(prometheus.CounterOpts(opts("adds_total",
			"Total number of keys added to the workqueue.")), nameLabel)),
		latency: register(r, prometheus.NewHistogramVec(histOpts("queue_duration_seconds",
			"How long a key waits in the workqueue before a worker picks it up."), nameLabel)),
		workDuration: register(r, prometheus.NewHistogramVec(histOpts("work_duration_seconds",
			"How long processing a key takes."), nameLabel)),
		unfinishedWork: register(r, prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("unfinished_work_seconds",
			"Seconds of work in progress that has not been observed by work_duration_seconds yet. "+
				"Large values indicate stuck workers.")), nameLabel)),
		longestRunning: register(r, prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("longest_running_processor_seconds",
			"How many seconds the longest running worker of the workqueue has been processing its key.")), nameLabel)),
		retries: register(r, prometheus.NewCounterVec(prometheus.CounterOpts(opts("retries_total",
			"Total number of delayed re-adds (rate-limited or after a fixed delay) handled by the workqueue.")), nameLabel)),
		reconciles: register(r, prometheus.NewCounterVec(prometheus.CounterOpts(opts("reconcile_total",
			"Total number of reconciles by result: success, requeue, error, conflict (failed with 409 Conflicts only) or panic.")), []string{"name", "result"})),
		giveUps: register(r, prometheus.NewCounterVec(prometheus.CounterOpts(opts("give_ups_total",
			"Total number of keys dropped after failing more often than the retry limit.")), nameLabel)),
	}
	if r.err != nil {
		return nil, r.err
	}
	return c, nil
}

// registrar registers collectors on reg until the first failure, which it
// keeps (later registrations are skipped).
type registrar struct {
	reg prometheus.Registerer
	err error
}

// register registers c and returns it, or returns the equal collector that
// is already registered.
func register[C prometheus.Collector](r *registrar, c C) C {
	if r.err != nil {
		return c
	}
	c, err := promreg.Register(r.reg, c)
	if err != nil {
		r.err = fmt.Errorf("registering metrics: %w", err)
	}
	return c
}

// metricsProvider hands client-go's queue the children of our vectors for
// one queue name. It is given to the queue through its config, never through
// the global workqueue.SetProvider, so queues on different registries (or
// none) do not interfere.
type metricsProvider struct {
	c *collectors
}

var _ kworkqueue.MetricsProvider = metricsProvider{}

func (p metricsProvider) NewDepthMetric(name string) kworkqueue.GaugeMetric {
	return p.c.depth.WithLabelValues(name)
}

func (p metricsProvider) NewAddsMetric(name string) kworkqueue.CounterMetric {
	return p.c.adds.WithLabelValues(name)
}

func (p metricsProvider) NewLatencyMetric(name string) kworkqueue.HistogramMetric {
	return p.c.latency.WithLabelValues(name)
}

func (p metricsProvider) NewWorkDurationMetric(name string) kworkqueue.HistogramMetric {
	return p.c.workDuration.WithLabelValues(name)
}

func (p metricsProvider) NewUnfinishedWorkSecondsMetric(name string) kworkqueue.SettableGaugeMetric {
	return p.c.unfinishedWork.WithLabelValues(name)
}

func (p metricsProvider) NewLongestRunningProcessorSecondsMetric(name string) kworkqueue.SettableGaugeMetric {
	return p.c.longestRunning.WithLabelValues(name)
}

func (p metricsProvider) NewRetriesMetric(name string) kworkqueue.CounterMetric {
	return p.c.retries.WithLabelValues(name)
}

// exportQueueSeries creates the series of client-go's queue metrics for
// name, so that they are exported (as zeros) before the queue exists.
func exportQueueSeries(p kworkqueue.MetricsProvider, name string) {
	p.NewDepthMetric(name)
	p.NewAddsMetric(name)
	p.NewLatencyMetric(name)
	p.NewWorkDurationMetric(name)
	p.NewUnfinishedWorkSecondsMetric(name)
	p.NewLongestRunningProcessorSecondsMetric(name)
	p.NewRetriesMetric(name)
}

// workerMetrics are the metrics the worker loop itself records for one
// queue. A nil *workerMetrics records nothing, which is what a queue without
// a Registerer uses.
type workerMetrics struct {
	reconciles map[string]prometheus.Counter
	giveUps    prometheus.Counter
}

func newWorkerMetrics(c *collectors, name string) *workerMetrics {
	m := &workerMetrics{
		reconciles: make(map[string]prometheus.Counter, len(allResults)),
		giveUps:    c.giveUps.WithLabelValues(name),
	}
	// Creating every child up front exports zeros, so rate() and alerts on
	// errors work before the first error happens.
	for _, r := range allResults {
		m.reconciles[r] = c.reconciles.WithLabelValues(name, r)
	}
	return m
}

func (m *workerMetrics) reconciled(result string) {
	if m == nil {
		return
	}
	m.reconciles[result].Inc()
}

func (m *workerMetrics) gaveUp() {
	if m == nil {
		return
	}
	m.giveUps.Inc()
}
