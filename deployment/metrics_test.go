package deployment

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/promreg"
)

func deploymentLister(t *testing.T, ds ...*v1alpha1.MachineDeployment) machinelisters.MachineDeploymentLister {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, d := range ds {
		if err := idx.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	return machinelisters.NewMachineDeploymentLister(idx)
}

type failingDeploymentLister struct {
	machinelisters.MachineDeploymentLister
}

func (failingDeploymentLister) List(labels.Selector) ([]*v1alpha1.MachineDeployment, error) {
	return nil, errors.New("cache gone")
}

// TestDeploymentCollector: MCM's machine deployment gauges with MCM's
// labels, computed from the cache; a cache that cannot list counts a
// scrape failure.
func TestDeploymentCollector(t *testing.T) {
	created := metav1.NewTime(time.Unix(1700000000, 0))
	rolling := &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "ns", CreationTimestamp: created},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: 4, MinReadySeconds: 10, Paused: true,
			RevisionHistoryLimit: ptr.To[int32](5), ProgressDeadlineSeconds: ptr.To[int32](600),
			RollbackTo: &v1alpha1.RollbackConfig{Revision: 2},
			Strategy: v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{
					UpdateConfiguration: v1alpha1.UpdateConfiguration{
						MaxSurge: ptr.To(intstr.FromString("50%")), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}},
		},
		Status: v1alpha1.MachineDeploymentStatus{
			Replicas: 5, UpdatedReplicas: 1, ReadyReplicas: 4, AvailableReplicas: 3, UnavailableReplicas: 1, CollisionCount: ptr.To[int32](1),
			Conditions: []v1alpha1.MachineDeploymentCondition{
				{Type: v1alpha1.MachineDeploymentAvailable, Status: v1alpha1.ConditionFalse},
				{Type: v1alpha1.MachineDeploymentProgressing, Status: v1alpha1.ConditionTrue},
			},
			FailedMachines: []*v1alpha1.MachineSummary{{Name: "workers-x", ProviderID: "sim://x", OwnerRef: "workers-abc",
				LastOperation: v1alpha1.LastOperation{State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationCreate}}},
		},
	}
	recreate := &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "batch", Namespace: "ns", CreationTimestamp: created},
		Spec:       v1alpha1.MachineDeploymentSpec{Replicas: 1, Strategy: v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RecreateMachineDeploymentStrategyType}},
	}
	failures, err := promreg.ScrapeFailures(nil, promreg.BinaryMCM, "Machinedeployment-count")
	if err != nil {
		t.Fatal(err)
	}
	col := &deploymentCollector{deployments: deploymentLister(t, rolling, recreate), scrapeFailures: failures}
	want := `
# HELP mcm_machine_deployment_failed_machines Machines of a machine deployment whose last operation failed, always 1.
# TYPE mcm_machine_deployment_failed_machines gauge
mcm_machine_deployment_failed_machines{failed_machine_last_operation_machine_operation_type="Create",failed_machine_last_operation_state="Failed",failed_machine_name="workers-x",failed_machine_owner_ref="workers-abc",failed_machine_provider_id="sim://x",name="workers",namespace="ns"} 1
# HELP mcm_machine_deployment_info Information on a machine deployment, always 1.
# TYPE mcm_machine_deployment_info gauge
mcm_machine_deployment_info{createdAt="1700000000",name="batch",namespace="ns",spec_strategy_type="Recreate"} 1
mcm_machine_deployment_info{createdAt="1700000000",name="workers",namespace="ns",spec_strategy_type="RollingUpdate"} 1
# HELP mcm_machine_deployment_info_spec_paused Spec field paused of a machine deployment.
# TYPE mcm_machine_deployment_info_spec_paused gauge
mcm_machine_deployment_info_spec_paused{name="batch",namespace="ns"} 0
mcm_machine_deployment_info_spec_paused{name="workers",namespace="ns"} 1
# HELP mcm_machine_deployment_info_spec_progress_deadline_seconds Spec field progress_deadline_seconds of a machine deployment.
# TYPE mcm_machine_deployment_info_spec_progress_deadline_seconds gauge
mcm_machine_deployment_info_spec_progress_deadline_seconds{name="workers",namespace="ns"} 600
# HELP mcm_machine_deployment_info_spec_revision_history_limit Spec field revision_history_limit of a machine deployment.
# TYPE mcm_machine_deployment_info_spec_revision_history_limit gauge
mcm_machine_deployment_info_spec_revision_history_limit{name="workers",namespace="ns"} 5
# HELP mcm_machine_deployment_info_spec_rollback_to_revision Spec field rollback_to_revision of a machine deployment.
# TYPE mcm_machine_deployment_info_spec_rollback_to_revision gauge
mcm_machine_deployment_info_spec_rollback_to_revision{name="workers",namespace="ns"} 2
# HELP mcm_machine_deployment_info_spec_rolling_update_max_surge Spec field rolling_update_max_surge of a machine deployment.
# TYPE mcm_machine_deployment_info_spec_rolling_update_max_surge gauge
mcm_machine_deployment_info_spec_rolling_update_max_surge{name="workers",namespace="ns"} 2
# HELP mcm_machine_deployment_info_spec_rolling_update_max_unavailable Spec field rolling_update_max_unavailable of a machine deployment.
# TYPE mcm_machine_deployment_info_spec_rolling_update_max_unavailable gauge
mcm_machine_deployment_info_spec_rolling_update_max_unavailable{name="workers",namespace="ns"} 0
# HELP mcm_machine_deployment_items_total Number of machine deployments.
# TYPE mcm_machine_deployment_items_total gauge
mcm_machine_deployment_items_total 2
# HELP mcm_machine_deployment_status_condition Conditions of a machine deployment as a number: True 1, False 0, Unknown 2.
# TYPE mcm_machine_deployment_status_condition gauge
mcm_machine_deployment_status_condition{condition="Available",name="workers",namespace="ns"} 0
mcm_machine_deployment_status_condition{condition="Progressing",name="workers",namespace="ns"} 1
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want),
		"mcm_machine_deployment_failed_machines", "mcm_machine_deployment_info", "mcm_machine_deployment_info_spec_paused",
		"mcm_machine_deployment_info_spec_progress_deadline_seconds", "mcm_machine_deployment_info_spec_revision_history_limit",
		"mcm_machine_deployment_info_spec_rollback_to_revision", "mcm_machine_deployment_info_spec_rolling_update_max_surge",
		"mcm_machine_deployment_info_spec_rolling_update_max_unavailable", "mcm_machine_deployment_items_total",
		"mcm_machine_deployment_status_condition"); err != nil {
		t.Error(err)
	}
	wantStatus := `
# HELP mcm_machine_deployment_status_available_replicas Status field available_replicas of a machine deployment.
# TYPE mcm_machine_deployment_status_available_replicas gauge
mcm_machine_deployment_status_available_replicas{name="batch",namespace="ns"} 0
mcm_machine_deployment_status_available_replicas{name="workers",namespace="ns"} 3
# HELP mcm_machine_deployment_status_collision_count Status field collision_count of a machine deployment.
# TYPE mcm_machine_deployment_status_collision_count gauge
mcm_machine_deployment_status_collision_count{name="batch",namespace="ns"} 0
mcm_machine_deployment_status_collision_count{name="workers",namespace="ns"} 1
# HELP mcm_machine_deployment_status_unavailable_replicas Status field unavailable_replicas of a machine deployment.
# TYPE mcm_machine_deployment_status_unavailable_replicas gauge
mcm_machine_deployment_status_unavailable_replicas{name="batch",namespace="ns"} 0
mcm_machine_deployment_status_unavailable_replicas{name="workers",namespace="ns"} 1
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(wantStatus), "mcm_machine_deployment_status_available_replicas",
		"mcm_machine_deployment_status_collision_count", "mcm_machine_deployment_status_unavailable_replicas"); err != nil {
		t.Error(err)
	}

	col.deployments = failingDeploymentLister{}
	if n := testutil.CollectAndCount(col); n != 0 {
		t.Errorf("%d metrics from a cache that cannot list, want none", n)
	}
	if v := testutil.ToFloat64(failures); v != 1 {
		t.Errorf("%v scrape failures after a failed list, want 1", v)
	}
}

// TestRegisterMetricsReplacesEarlier: the collector of the latest
// controller on a registry is the one scraped; the scrape failure counter
// is shared with the machine set controller's (same binary label).
func TestRegisterMetricsReplacesEarlier(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := registerMetrics(reg, &Controller{deployments: deploymentLister(t)}); err != nil {
		t.Fatal(err)
	}
	if err := registerMetrics(reg, &Controller{deployments: deploymentLister(t, testDeployment(1))}); err != nil {
		t.Fatalf("second controller: %v", err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcm_machine_deployment_items_total Number of machine deployments.
# TYPE mcm_machine_deployment_items_total gauge
mcm_machine_deployment_items_total 1
# HELP mcm_misc_scrape_failure_total Scrapes whose collector could not list its objects from the informer cache, by kind.
# TYPE mcm_misc_scrape_failure_total counter
mcm_misc_scrape_failure_total{binary="machine-controller-manager",kind="Machinedeployment-count"} 0
`), "mcm_machine_deployment_items_total", "mcm_misc_scrape_failure_total"); err != nil {
		t.Error(err)
	}
}
