package machine

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/promreg"
)

// metrics of the machine controller, under MCM's names where MCM has them.
//
// Each duration is recorded twice: in MCM's gauge, which holds the last
// value (what MCM's dashboards and alerts read), and in a histogram of our
// own, which keeps every value, so that percentiles and rates can be had.
type metrics struct {
	reg                                     prometheus.Registerer
	create, initialize, join, drain, delete *durationMetric
	failedJoins                             *prometheus.CounterVec
	scrapeFailures                          prometheus.Counter
	// inPlaceUpdates counts in-place updates by result (started,
	// successful, failed), inPlaceDuration times them from
	// InPlaceUpdating to the result; MCM has neither.
	inPlaceUpdates  *prometheus.CounterVec
	inPlaceDuration *prometheus.HistogramVec
}

// Label names of the duration metrics, in the order of metricLabels. The
// drain metrics take only the first two, as MCM's drain gauge does.
var (
	placementLabels = []string{"namespace", "machine_deployment", "instance_type", "zone"}
	drainLabels     = placementLabels[:2]
)

// durationMetric is one duration of a machine's life: MCM's gauge (the last
// value) and our histogram (every value) under one label set.
type durationMetric struct {
	gauge  *prometheus.GaugeVec
	hist   *prometheus.HistogramVec
	labels int // how many of metricLabels' values the metric takes
}

// WithLabelValues returns the observer of the series of the machine whose
// metricLabels are lvs: an observation sets the gauge and is added to the
// histogram. Values beyond the metric's labels (the placement of a drain)
// are dropped.
func (d *durationMetric) WithLabelValues(lvs ...string) prometheus.Observer {
	lvs = lvs[:min(len(lvs), d.labels)]
	gauge, hist := d.gauge.WithLabelValues(lvs...), d.hist.WithLabelValues(lvs...)
	return prometheus.ObserverFunc(func(seconds float64) {
		gauge.Set(seconds)
		hist.Observe(seconds)
	})
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	duration := func(name, gaugeHelp, histHelp string, labels []string) *durationMetric {
		return &durationMetric{
			gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Namespace: "mcm", Subsystem: "machine", Name: name + "_duration_seconds", Help: gaugeHelp,
			}, labels),
			hist: prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Namespace: "mcm", Subsystem: "machine", Name: name + "_seconds", Help: histHelp,
				Buckets: prometheus.ExponentialBuckets(0.5, 2, 16),
			}, labels),
			labels: len(labels),
		}
	}
	m := &metrics{
		reg: reg,
		create: duration("create",
			"Time the last machine whose VM was created took from its creation timestamp until CreateMachine succeeded, by deployment and placement (MCM's meaning).",
			"Times from a machine's creation timestamp until CreateMachine succeeded.", placementLabels),
		initialize: duration("initialize",
			"Duration of the last successful InitializeMachine call, by deployment and placement.",
			"Durations of successful InitializeMachine calls.", placementLabels),
		join: duration("join",
			"Time the last machine to join took from the start of its creation until its node was Ready, by deployment and placement.",
			"Times from the start of a machine's creation until its node was Ready.", placementLabels),
		drain: duration("drain",
			"Time the last drain took from its first pass until the node was drained, by deployment.",
			"Times from a drain's first pass until the node was drained.", drainLabels),
		delete: duration("delete",
			"Time the last machine whose VM was deleted took from its deletion timestamp until DeleteMachine succeeded, drain included, by deployment and placement (MCM's meaning).",
			"Times from a machine's deletion timestamp until DeleteMachine succeeded.", placementLabels),
		failedJoins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mcm", Subsystem: "machine", Name: "num_failed_join",
			Help: "Machines that did not join within the creation timeout, by deployment and placement.",
		}, placementLabels),
		inPlaceUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mcm", Subsystem: "machine", Name: "inplace_updates_total",
			Help: "In-place updates of machines: started (the node drained, the machine InPlaceUpdating), successful and failed (the node agent's result, or the in-place timeout).",
		}, []string{"namespace", "result"}),
		inPlaceDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "mcm", Subsystem: "machine", Name: "inplace_update_seconds",
			Help:    "Times from a machine's InPlaceUpdating until the node agent's result or the in-place timeout, by result.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 16),
		}, []string{"namespace", "result"}),
	}
	var err error
	if m.scrapeFailures, err = promreg.ScrapeFailures(reg, promreg.BinaryProvider, "Machine-count"); err != nil {
		return nil, err
	}
	if reg == nil {
		return m, nil
	}
	for _, d := range []*durationMetric{m.create, m.initialize, m.join, m.drain, m.delete} {
		if d.gauge, err = registerOrReuse(reg, d.gauge); err != nil {
			return nil, err
		}
		if d.hist, err = registerOrReuse(reg, d.hist); err != nil {
			return nil, err
		}
	}
	if m.failedJoins, err = registerOrReuse(reg, m.failedJoins); err != nil {
		return nil, err
	}
	if m.inPlaceUpdates, err = registerOrReuse(reg, m.inPlaceUpdates); err != nil {
		return nil, err
	}
	if m.inPlaceDuration, err = registerOrReuse(reg, m.inPlaceDuration); err != nil {
		return nil, err
	}
	return m, nil
}

func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	c, err := promreg.Register(reg, c)
	if err != nil {
		return c, fmt.Errorf("registering metric: %w", err)
	}
	return c, nil
}

// metricLabels returns the label values of the machine's duration metrics
// (placementLabels), as MCM fills them: the namespace, the deployment from
// the machine's "name" label (empty for a machine outside a deployment),
// the instance type from its class's nodeTemplate and the zone from the
// topology.kubernetes.io/zone label of the machine's node template, or
// from the class's nodeTemplate when the machine's template has none. A
// class missing from the cache, or without a nodeTemplate, leaves instance
// type and zone empty: a metric is recorded either way.
func (c *Controller) metricLabels(m *v1alpha1.Machine) []string {
	return placementOf(m, c.classes)
}

func placementOf(m *v1alpha1.Machine, classes machinelisters.MachineClassLister) []string {
	var instanceType, zone string
	if classes != nil { // nil in controllers built by hand for a single step
		if class, err := classes.MachineClasses(m.Namespace).Get(m.Spec.Class.Name); err == nil && class.NodeTemplate != nil {
			instanceType, zone = class.NodeTemplate.InstanceType, class.NodeTemplate.Zone
		}
	}
	if z := m.Spec.NodeTemplateSpec.Labels[corev1.LabelTopologyZone]; z != "" {
		zone = z
	}
	return []string{m.Namespace, m.Labels[v1alpha1.MachineDeploymentNameLabelKey], instanceType, zone}
}

// attachCollector registers the collector of the gauges computed from the
// cache at scrape time, in place of an earlier controller's
// (promreg.Replace). Run calls it once the caches synced: a controller
// built but never run takes nothing over. A collector that cannot be
// registered (another one on the registry uses its names otherwise) costs
// the gauges, not the controller: it is logged.
func (m *metrics) attachCollector(ctx context.Context, c *Controller) {
	if m.reg == nil {
		return
	}
	now := time.Now // controllers built by hand for a single step have no clock
	if c.opts.Clock != nil {
		now = c.opts.Clock.Now
	}
	col := &machineCollector{machines: c.machines, scrapeFailures: m.scrapeFailures, now: now, frozen: func() bool {
		// A scrape carries no context; the gate answers from memory.
		return c.opts.SafetyGate != nil && c.opts.SafetyGate.Frozen(context.Background())
	}}
	if err := promreg.Replace(m.reg, col); err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "Machine gauges left out of the metrics")
	}
}

var (
	itemsDesc  = prometheus.NewDesc("mcm_machine_items_total", "Number of machines.", nil, nil)
	phaseDesc  = prometheus.NewDesc("mcm_machine_phase_machines", "Number of machines by namespace and phase.", []string{"namespace", "phase"}, nil)
	frozenDesc = prometheus.NewDesc("mcm_machine_controller_frozen", "1 while the safety gate freezes the controller.", nil, nil)

	currentPhaseDesc = prometheus.NewDesc("mcm_machine_current_status_phase",
		"Phase of a machine as a number: Terminating -4, Failed -3, CrashLoopBackOff -2, Unknown -1, Running 1, any other 0.",
		[]string{"name", "namespace"}, nil)
	machineInfoDesc = prometheus.NewDesc("mcm_machine_info", "Information on a machine, always 1.",
		[]string{"name", "namespace", "createdAt", "spec_provider_id", "spec_class_api_group", "spec_class_kind", "spec_class_name", "node_name"}, nil)
	machinePreservedDesc = prometheus.NewDesc("mcm_machine_preserved",
		"1 while a machine is preserved (status.currentStatus.preserveExpiryTime is in the future), else 0.",
		[]string{"name", "namespace"}, nil)
	machineConditionDesc = prometheus.NewDesc("mcm_machine_status_condition",
		"Conditions of a machine's node as a number: True 1, False 0, Unknown 2.",
		[]string{"name", "namespace", "condition"}, nil)
)

// machineCollector computes the per-machine gauges from the machine cache.
type machineCollector struct {
	machines       machinelisters.MachineLister
	scrapeFailures prometheus.Counter
	frozen         func() bool
	now            func() time.Time
}

func (p *machineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{itemsDesc, phaseDesc, frozenDesc, currentPhaseDesc, machineInfoDesc, machinePreservedDesc, machineConditionDesc} {
		ch <- d
	}
}

func (p *machineCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(frozenDesc, promreg.BoolValue(p.frozen()))
	machines, err := p.machines.List(everything)
	if err != nil {
		p.scrapeFailures.Inc()
		return
	}
	now := p.now()
	type nsPhase struct{ ns, phase string }
	counts := map[nsPhase]int{}
	for _, m := range machines {
		phase := m.Status.CurrentStatus.Phase
		if m.DeletionTimestamp != nil {
			phase = v1alpha1.MachineTerminating
		}
		counts[nsPhase{m.Namespace, string(phase)}]++
		gauge(currentPhaseDesc, phaseValue(phase), m.Name, m.Namespace)
		gauge(machinePreservedDesc, promreg.BoolValue(machinestate.Preserved(m, now)), m.Name, m.Namespace)
		class := m.Spec.Class
		gauge(machineInfoDesc, 1, m.Name, m.Namespace, strconv.FormatInt(m.CreationTimestamp.Unix(), 10),
			m.Spec.ProviderID, class.APIGroup, class.Kind, class.Name, m.Labels[v1alpha1.NodeLabelKey])
		for _, cond := range m.Status.Conditions {
			if ownCondition(cond) {
				continue // the node's conditions only, as in MCM
			}
			gauge(machineConditionDesc, promreg.ConditionValue(cond.Status), m.Name, m.Namespace, string(cond.Type))
		}
	}
	gauge(itemsDesc, float64(len(machines)))
	for k, n := range counts {
		gauge(phaseDesc, float64(n), k.ns, k.phase)
	}
}

// phaseValue is MCM's number for a phase. A machine being deleted counts
// as Terminating from its deletion timestamp on, before the controller
// writes the phase.
func phaseValue(p v1alpha1.MachinePhase) float64 {
	switch p {
	case v1alpha1.MachineTerminating:
		return -4
	case v1alpha1.MachineFailed:
		return -3
	case v1alpha1.MachineCrashLoopBackOff:
		return -2
	case v1alpha1.MachineUnknown:
		return -1
	case v1alpha1.MachineRunning:
		return 1
	default: // Pending, Available, none yet
		return 0
	}
}
