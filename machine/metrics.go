package machine

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/promreg"
)

// metrics of the machine controller, under MCM's names where MCM has them.
// The duration metrics are histograms here (MCM keeps the last value in a
// gauge), labelled by namespace and machine_deployment.
type metrics struct {
	reg                                     prometheus.Registerer
	create, initialize, join, drain, delete *prometheus.HistogramVec
	failedJoins                             *prometheus.CounterVec
}

var durationLabels = []string{"namespace", "machine_deployment"}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	hist := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "mcm", Subsystem: "machine", Name: name, Help: help,
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 16),
		}, durationLabels)
	}
	m := &metrics{
		reg:         reg,
		create:      hist("create_duration_seconds", "Duration of successful CreateMachine calls."),
		initialize:  hist("initialize_duration_seconds", "Duration of successful InitializeMachine calls."),
		join:        hist("join_duration_seconds", "Time from the start of creation until the node became Ready."),
		drain:       hist("drain_duration_seconds", "Time from the first drain pass until the node was drained."),
		delete:      hist("delete_duration_seconds", "Duration of successful DeleteMachine calls."),
		failedJoins: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mcm", Subsystem: "machine", Name: "num_failed_join", Help: "Machines that did not join within the creation timeout."}, durationLabels),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	for _, p := range []**prometheus.HistogramVec{&m.create, &m.initialize, &m.join, &m.drain, &m.delete} {
		if *p, err = registerOrReuse(reg, *p); err != nil {
			return nil, err
		}
	}
	if m.failedJoins, err = registerOrReuse(reg, m.failedJoins); err != nil {
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

// metricLabels returns the label values of the duration metrics.
func (c *Controller) metricLabels(m *v1alpha1.Machine) []string {
	return []string{m.Namespace, m.Labels[v1alpha1.MachineDeploymentNameLabelKey]}
}

// attachCollector registers the collector of per-phase gauges, computed
// from the cache at scrape time.
func (m *metrics) attachCollector(c *Controller) {
	if m.reg == nil {
		return
	}
	_ = m.reg.Register(&phaseCollector{c: c}) // a second Run on one registry keeps the first
}

var (
	itemsDesc  = prometheus.NewDesc("mcm_machine_items_total", "Number of machines.", nil, nil)
	phaseDesc  = prometheus.NewDesc("mcm_machine_phase_machines", "Number of machines by namespace and phase.", []string{"namespace", "phase"}, nil)
	frozenDesc = prometheus.NewDesc("mcm_machine_controller_frozen", "1 while the safety gate freezes the controller.", nil, nil)
)

type phaseCollector struct{ c *Controller }

func (p *phaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- itemsDesc
	ch <- phaseDesc
	ch <- frozenDesc
}

func (p *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	machines, err := p.c.machines.List(everything)
	if err != nil {
		return
	}
	type nsPhase struct{ ns, phase string }
	counts := map[nsPhase]int{}
	for _, m := range machines {
		phase := string(m.Status.CurrentStatus.Phase)
		if m.DeletionTimestamp != nil {
			phase = string(v1alpha1.MachineTerminating)
		}
		counts[nsPhase{m.Namespace, phase}]++
	}
	ch <- prometheus.MustNewConstMetric(itemsDesc, prometheus.GaugeValue, float64(len(machines)))
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(phaseDesc, prometheus.GaugeValue, float64(n), k.ns, k.phase)
	}
	frozen := 0.0
	// A scrape carries no context; the gate answers from memory.
	if p.c.opts.SafetyGate != nil && p.c.opts.SafetyGate.Frozen(context.Background()) {
		frozen = 1
	}
	ch <- prometheus.MustNewConstMetric(frozenDesc, prometheus.GaugeValue, frozen)
}
