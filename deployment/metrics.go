package deployment

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcmkit/mcm/internal/promreg"
)

var (
	deploymentLabels = []string{"name", "namespace"}
	itemsDesc        = prometheus.NewDesc("mcm_machine_deployment_items_total", "Number of machine deployments.", nil, nil)
	infoDesc         = prometheus.NewDesc("mcm_machine_deployment_info", "Information of a machine deployment.",
		append(deploymentLabels, "createdAt", "spec_strategy_type"), nil)
	specNames = []string{"paused", "replicas", "min_ready_seconds", "rolling_update_max_surge", "rolling_update_max_unavailable",
		"revision_history_limit", "progress_deadline_seconds", "rollback_to_revision"}
	specDescs     = descs("mcm_machine_deployment_info_spec_", "Spec field %s of a machine deployment.", specNames)
	statusNames   = []string{"available_replicas", "unavailable_replicas", "ready_replicas", "updated_replicas", "collision_count", "replicas"}
	statusDescs   = descs("mcm_machine_deployment_status_", "Status field %s of a machine deployment.", statusNames)
	conditionDesc = prometheus.NewDesc("mcm_machine_deployment_status_condition", "Conditions of a machine deployment.",
		append(deploymentLabels, "condition", "status"), nil)
	failedDesc = prometheus.NewDesc("mcm_machine_deployment_failed_machines", "Machines of a machine deployment whose last operation failed.",
		append(deploymentLabels, "failed_machine_name", "failed_machine_provider_id", "failed_machine_last_operation_state",
			"failed_machine_last_operation_machine_operation_type", "failed_machine_owner_ref"), nil)
)

// descs are the gauges prefix+name for names, by name.
func descs(prefix, help string, names []string) map[string]*prometheus.Desc {
	out := make(map[string]*prometheus.Desc, len(names))
	for _, n := range names {
		out[n] = prometheus.NewDesc(prefix+n, fmt.Sprintf(help, n), deploymentLabels, nil)
	}
	return out
}

// registerMetrics registers the controller's metrics, under MCM's names, on
// reg (nil: none). They are computed from the cache at scrape time: nothing
// is counted on the sync path.
func registerMetrics(reg prometheus.Registerer, c *Controller) error {
	if reg == nil {
		return nil
	}
	if _, err := promreg.Register[prometheus.Collector](reg, &deploymentCollector{c: c}); err != nil {
		return fmt.Errorf("registering metric: %w", err)
	}
	return nil
}

type deploymentCollector struct{ c *Controller }

func (dc *deploymentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- itemsDesc
	ch <- infoDesc
	ch <- conditionDesc
	ch <- failedDesc
	for _, n := range specNames {
		ch <- specDescs[n]
	}
	for _, n := range statusNames {
		ch <- statusDescs[n]
	}
}

func (dc *deploymentCollector) Collect(ch chan<- prometheus.Metric) {
	ds, err := dc.c.deployments.List(everything)
	if err != nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(itemsDesc, float64(len(ds)))
	for _, d := range ds {
		id := []string{d.Name, d.Namespace}
		gauge(infoDesc, 1, append(id, d.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z"), string(strategyType(d)))...)
		surge, unavailable, _ := rolloutBounds(d)
		spec := map[string]float64{
			"paused":                         boolValue(d.Spec.Paused),
			"replicas":                       float64(d.Spec.Replicas),
			"min_ready_seconds":              float64(d.Spec.MinReadySeconds),
			"rolling_update_max_surge":       float64(surge),
			"rolling_update_max_unavailable": float64(unavailable),
		}
		if d.Spec.RevisionHistoryLimit != nil {
			spec["revision_history_limit"] = float64(*d.Spec.RevisionHistoryLimit)
		}
		if d.Spec.ProgressDeadlineSeconds != nil {
			spec["progress_deadline_seconds"] = float64(*d.Spec.ProgressDeadlineSeconds)
		}
		if rev, asked := rollbackRequest(d); asked {
			spec["rollback_to_revision"] = float64(rev)
		}
		for _, n := range specNames {
			if v, ok := spec[n]; ok {
				gauge(specDescs[n], v, id...)
			}
		}
		st := d.Status
		collisions := int32(0)
		if st.CollisionCount != nil {
			collisions = *st.CollisionCount
		}
		status := map[string]int32{"available_replicas": st.AvailableReplicas, "unavailable_replicas": st.UnavailableReplicas,
			"ready_replicas": st.ReadyReplicas, "updated_replicas": st.UpdatedReplicas, "collision_count": collisions, "replicas": st.Replicas}
		for _, n := range statusNames {
			gauge(statusDescs[n], float64(status[n]), id...)
		}
		for _, cond := range st.Conditions {
			gauge(conditionDesc, 1, append(id, string(cond.Type), string(cond.Status))...)
		}
		for _, f := range st.FailedMachines {
			if f != nil {
				gauge(failedDesc, 1, append(id, f.Name, f.ProviderID, string(f.LastOperation.State), string(f.LastOperation.Type), f.OwnerRef)...)
			}
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
