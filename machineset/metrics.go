package machineset

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcmkit/mcm/internal/promreg"
)

// metrics of the controller, under MCM's names. The per-set gauges are
// computed from the cache at scrape time.
type metrics struct {
	staleMachines prometheus.Counter
}

var (
	setLabels        = []string{"name", "namespace"}
	itemsDesc        = prometheus.NewDesc("mcm_machine_set_items_total", "Number of machine sets.", nil, nil)
	infoDesc         = prometheus.NewDesc("mcm_machine_set_info", "Information of a machine set.", append(setLabels, "createdAt", "spec_machine_class_api_group", "spec_machine_class_kind", "spec_machine_class_name"), nil)
	specReplicasDesc = prometheus.NewDesc("mcm_machine_set_info_spec_replicas", "Desired replicas of a machine set.", setLabels, nil)
	replicasDesc     = prometheus.NewDesc("mcm_machine_set_status_replicas", "Machines of a machine set.", setLabels, nil)
	availableDesc    = prometheus.NewDesc("mcm_machine_set_status_available_replicas", "Available machines of a machine set.", setLabels, nil)
	labelledDesc     = prometheus.NewDesc("mcm_machine_set_status_fully_labelled_replicas", "Fully labelled machines of a machine set.", setLabels, nil)
	readyDesc        = prometheus.NewDesc("mcm_machine_set_status_ready_replicas", "Ready machines of a machine set.", setLabels, nil)
	conditionDesc    = prometheus.NewDesc("mcm_machine_set_status_condition", "Conditions of a machine set.", append(setLabels, "condition", "status"), nil)
	failedDesc       = prometheus.NewDesc("mcm_machine_set_failed_machines", "Machines of a machine set whose last operation failed.",
		append(setLabels, "failed_machine_name", "failed_machine_provider_id", "failed_machine_last_operation_state",
			"failed_machine_last_operation_machine_operation_type", "failed_machine_owner_ref"), nil)
)

func newMetrics(reg prometheus.Registerer, c *Controller) (*metrics, error) {
	m := &metrics{staleMachines: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mcm_machine_stale_machines_total", Help: "Failed machines deleted by their machine set to be replaced.",
	})}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.staleMachines, err = promreg.Register(reg, m.staleMachines); err != nil {
		return nil, fmt.Errorf("registering metric: %w", err)
	}
	if _, err := promreg.Register[prometheus.Collector](reg, &setCollector{c: c}); err != nil {
		return nil, fmt.Errorf("registering metric: %w", err)
	}
	return m, nil
}

type setCollector struct{ c *Controller }

func (s *setCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{itemsDesc, infoDesc, specReplicasDesc, replicasDesc, availableDesc, labelledDesc, readyDesc, conditionDesc, failedDesc} {
		ch <- d
	}
}

func (s *setCollector) Collect(ch chan<- prometheus.Metric) {
	sets, err := s.c.sets.List(everything)
	if err != nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(itemsDesc, float64(len(sets)))
	for _, set := range sets {
		id := []string{set.Name, set.Namespace}
		class := set.Spec.Template.Spec.Class
		gauge(infoDesc, 1, append(id, set.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z"), class.APIGroup, class.Kind, class.Name)...)
		gauge(specReplicasDesc, float64(set.Spec.Replicas), id...)
		gauge(replicasDesc, float64(set.Status.Replicas), id...)
		gauge(availableDesc, float64(set.Status.AvailableReplicas), id...)
		gauge(labelledDesc, float64(set.Status.FullyLabeledReplicas), id...)
		gauge(readyDesc, float64(set.Status.ReadyReplicas), id...)
		for _, cond := range set.Status.Conditions {
			gauge(conditionDesc, 1, append(id, string(cond.Type), string(cond.Status))...)
		}
		if set.Status.FailedMachines != nil {
			for _, f := range *set.Status.FailedMachines {
				gauge(failedDesc, 1, append(id, f.Name, f.ProviderID, string(f.LastOperation.State), string(f.LastOperation.Type), f.OwnerRef)...)
			}
		}
	}
}
