package deployment

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/promreg"
)

var (
	deploymentLabels = []string{"name", "namespace"}
	itemsDesc        = prometheus.NewDesc("mcm_machine_deployment_items_total", "Number of machine deployments.", nil, nil)
	infoDesc         = prometheus.NewDesc("mcm_machine_deployment_info", "Information on a machine deployment, always 1.",
		[]string{"name", "namespace", "createdAt", "spec_strategy_type"}, nil)
	specNames = []string{"paused", "replicas", "min_ready_seconds", "rolling_update_max_surge", "rolling_update_max_unavailable",
		"revision_history_limit", "progress_deadline_seconds", "rollback_to_revision"}
	specDescs     = descs("mcm_machine_deployment_info_spec_", "Spec field %s of a machine deployment.", specNames)
	statusNames   = []string{"available_replicas", "unavailable_replicas", "ready_replicas", "updated_replicas", "collision_count", "replicas"}
	statusDescs   = descs("mcm_machine_deployment_status_", "Status field %s of a machine deployment.", statusNames)
	conditionDesc = prometheus.NewDesc("mcm_machine_deployment_status_condition",
		"Conditions of a machine deployment as a number: True 1, False 0, Unknown 2.",
		[]string{"name", "namespace", "condition"}, nil)
	failedDesc = prometheus.NewDesc("mcm_machine_deployment_failed_machines", "Machines of a machine deployment whose last operation failed, always 1.",
		[]string{"name", "namespace", "failed_machine_name", "failed_machine_provider_id", "failed_machine_owner_ref",
			"failed_machine_last_operation_state", "failed_machine_last_operation_machine_operation_type"}, nil)
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
// is counted on the sync path. The collector of an earlier controller on
// reg is replaced: its cache stopped with it, the latest controller's
// follows the cluster.
func registerMetrics(reg prometheus.Registerer, c *Controller) error {
	if reg == nil {
		return nil
	}
	failures, err := promreg.ScrapeFailures(reg, promreg.BinaryMCM, "Machinedeployment-count")
	if err != nil {
		return err
	}
	return promreg.Replace(reg, &deploymentCollector{deployments: c.deployments, scrapeFailures: failures})
}

// deploymentCollector computes the per-deployment gauges from the cache.
type deploymentCollector struct {
	deployments    machinelisters.MachineDeploymentLister
	scrapeFailures prometheus.Counter
}

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
	ds, err := dc.deployments.List(everything)
	if err != nil {
		dc.scrapeFailures.Inc()
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(itemsDesc, float64(len(ds)))
	for _, d := range ds {
		id := []string{d.Name, d.Namespace}
		gauge(infoDesc, 1, d.Name, d.Namespace, strconv.FormatInt(d.CreationTimestamp.Unix(), 10), string(strategyType(d)))
		spec := map[string]float64{
			"paused":            promreg.BoolValue(d.Spec.Paused),
			"replicas":          float64(d.Spec.Replicas),
			"min_ready_seconds": float64(d.Spec.MinReadySeconds),
		}
		// The bounds as the rollout applies them, percentages resolved
		// against the replicas; a Recreate deployment has none, and one
		// whose bounds do not resolve (reported on its conditions) neither.
		if surge, unavailable, err := rolloutBounds(d); err == nil && strategyType(d) != v1alpha1.RecreateMachineDeploymentStrategyType {
			spec["rolling_update_max_surge"] = float64(surge)
			spec["rolling_update_max_unavailable"] = float64(unavailable)
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
			gauge(conditionDesc, promreg.ConditionValue(cond.Status), d.Name, d.Namespace, string(cond.Type))
		}
		for _, f := range st.FailedMachines {
			if f != nil {
				gauge(failedDesc, 1, d.Name, d.Namespace, f.Name, f.ProviderID, f.OwnerRef, string(f.LastOperation.State), string(f.LastOperation.Type))
			}
		}
	}
}
