package machineset

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/promreg"
)

// metrics of the controller, under MCM's names, types and labels. The
// per-set gauges are computed from the cache at scrape time.
type metrics struct {
	staleMachines prometheus.Counter
}

var (
	setLabels        = []string{"name", "namespace"}
	itemsDesc        = prometheus.NewDesc("mcm_machine_set_items_total", "Number of machine sets.", nil, nil)
	infoDesc         = prometheus.NewDesc("mcm_machine_set_info", "Information on a machine set, always 1.", []string{"name", "namespace", "createdAt", "spec_machine_class_api_group", "spec_machine_class_kind", "spec_machine_class_name"}, nil)
	specReplicasDesc = prometheus.NewDesc("mcm_machine_set_info_spec_replicas", "Desired replicas of a machine set.", setLabels, nil)
	minReadyDesc     = prometheus.NewDesc("mcm_machine_set_info_spec_min_ready_seconds", "Seconds a new machine of a machine set must be Running to count as available.", setLabels, nil)
	replicasDesc     = prometheus.NewDesc("mcm_machine_set_status_replicas", "Machines of a machine set.", setLabels, nil)
	availableDesc    = prometheus.NewDesc("mcm_machine_set_status_available_replicas", "Available machines of a machine set.", setLabels, nil)
	labelledDesc     = prometheus.NewDesc("mcm_machine_set_status_fully_labelled_replicas", "Fully labelled machines of a machine set.", setLabels, nil)
	readyDesc        = prometheus.NewDesc("mcm_machine_set_status_ready_replicas", "Ready machines of a machine set.", setLabels, nil)
	conditionDesc    = prometheus.NewDesc("mcm_machine_set_status_condition", "Conditions of a machine set as a number: True 1, False 0, Unknown 2.", []string{"name", "namespace", "condition"}, nil)
	failedDesc       = prometheus.NewDesc("mcm_machine_set_failed_machines", "Machines of a machine set whose last operation failed, always 1.",
		[]string{"name", "namespace", "failed_machine_name", "failed_machine_provider_id", "failed_machine_owner_ref",
			"failed_machine_last_operation_state", "failed_machine_last_operation_machine_operation_type"}, nil)
)

func newMetrics(reg prometheus.Registerer, c *Controller) (*metrics, error) {
	m := &metrics{staleMachines: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mcm_machine_stale_machines_total",
		Help: "Machines their machine set deleted because the health timeout had marked them Failed.",
	})}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.staleMachines, err = promreg.Register(reg, m.staleMachines); err != nil {
		return nil, fmt.Errorf("registering metric: %w", err)
	}
	failures, err := promreg.ScrapeFailures(reg, promreg.BinaryMCM, "Machineset-count")
	if err != nil {
		return nil, err
	}
	// The collector of an earlier controller on reg, whose caches stopped
	// with it, is replaced: the latest controller's follow the cluster.
	if err := promreg.Replace(reg, &setCollector{sets: c.sets, scrapeFailures: failures}); err != nil {
		return nil, err
	}
	return m, nil
}

// isStale reports whether the deletion of m counts in
// mcm_machine_stale_machines_total: as in MCM, a Failed machine whose last
// operation is the health check, i.e. one the health timeout marked Failed,
// not one whose creation timed out.
func isStale(m *v1alpha1.Machine) bool {
	return m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed &&
		m.Status.LastOperation.Type == v1alpha1.MachineOperationHealthCheck
}

// setCollector computes the per-set gauges from the set cache.
type setCollector struct {
	sets           machinelisters.MachineSetLister
	scrapeFailures prometheus.Counter
}

func (s *setCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{itemsDesc, infoDesc, specReplicasDesc, minReadyDesc, replicasDesc, availableDesc, labelledDesc, readyDesc, conditionDesc, failedDesc} {
		ch <- d
	}
}

func (s *setCollector) Collect(ch chan<- prometheus.Metric) {
	sets, err := s.sets.List(everything)
	if err != nil {
		s.scrapeFailures.Inc()
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(itemsDesc, float64(len(sets)))
	for _, set := range sets {
		id := []string{set.Name, set.Namespace}
		class := classOf(set)
		gauge(infoDesc, 1, set.Name, set.Namespace, strconv.FormatInt(set.CreationTimestamp.Unix(), 10), class.APIGroup, class.Kind, class.Name)
		gauge(specReplicasDesc, float64(set.Spec.Replicas), id...)
		gauge(minReadyDesc, float64(set.Spec.MinReadySeconds), id...)
		gauge(replicasDesc, float64(set.Status.Replicas), id...)
		gauge(availableDesc, float64(set.Status.AvailableReplicas), id...)
		gauge(labelledDesc, float64(set.Status.FullyLabeledReplicas), id...)
		gauge(readyDesc, float64(set.Status.ReadyReplicas), id...)
		for _, cond := range set.Status.Conditions {
			gauge(conditionDesc, promreg.ConditionValue(cond.Status), set.Name, set.Namespace, string(cond.Type))
		}
		if set.Status.FailedMachines != nil {
			for _, f := range *set.Status.FailedMachines {
				gauge(failedDesc, 1, set.Name, set.Namespace, f.Name, f.ProviderID, f.OwnerRef,
					string(f.LastOperation.State), string(f.LastOperation.Type))
			}
		}
	}
}

// classOf is the class a set's machines are made with: its template's, or
// for an old MCM object that names it only there, spec.machineClass.
func classOf(set *v1alpha1.MachineSet) v1alpha1.ClassSpec {
	if set.Spec.Template.Spec.Class.Name != "" {
		return set.Spec.Template.Spec.Class
	}
	return set.Spec.MachineClass
}
