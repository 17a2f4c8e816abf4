package machineset

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/promreg"
)

func setLister(t *testing.T, sets ...*v1alpha1.MachineSet) machinelisters.MachineSetLister {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range sets {
		if err := idx.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return machinelisters.NewMachineSetLister(idx)
}

type failingSetLister struct {
	machinelisters.MachineSetLister
}

func (failingSetLister) List(labels.Selector) ([]*v1alpha1.MachineSet, error) {
	return nil, errors.New("cache gone")
}

// TestSetCollector: MCM's machine set gauges with MCM's labels, computed
// from the cache; a cache that cannot list counts a scrape failure.
func TestSetCollector(t *testing.T) {
	set := &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "pool-abc", Namespace: "ns", CreationTimestamp: metav1.NewTime(time.Unix(1700000000, 0))},
		Spec: v1alpha1.MachineSetSpec{Replicas: 3, MinReadySeconds: 30, Template: v1alpha1.MachineTemplateSpec{
			Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{APIGroup: "machine.sapcloud.io", Kind: "MachineClass", Name: "c"}}}},
		Status: v1alpha1.MachineSetStatus{
			Replicas: 3, AvailableReplicas: 1, FullyLabeledReplicas: 3, ReadyReplicas: 2,
			Conditions: []v1alpha1.MachineSetCondition{
				{Type: v1alpha1.MachineSetReplicaFailure, Status: v1alpha1.ConditionTrue},
				{Type: "Frozen", Status: v1alpha1.ConditionUnknown},
			},
			FailedMachines: &[]v1alpha1.MachineSummary{{Name: "pool-abc-x", ProviderID: "sim://x", OwnerRef: "pool-abc",
				LastOperation: v1alpha1.LastOperation{State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationCreate}}},
		},
	}
	// An old MCM object names its class only in spec.machineClass.
	old := &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "ns", CreationTimestamp: metav1.NewTime(time.Unix(1600000000, 0))},
		Spec:       v1alpha1.MachineSetSpec{MachineClass: v1alpha1.ClassSpec{Kind: "AWSMachineClass", Name: "legacy"}},
	}
	failures, err := promreg.ScrapeFailures(nil, promreg.BinaryMCM, "Machineset-count")
	if err != nil {
		t.Fatal(err)
	}
	col := &setCollector{sets: setLister(t, set, old), scrapeFailures: failures}
	want := `
# HELP mcm_machine_set_failed_machines Machines of a machine set whose last operation failed, always 1.
# TYPE mcm_machine_set_failed_machines gauge
mcm_machine_set_failed_machines{failed_machine_last_operation_machine_operation_type="Create",failed_machine_last_operation_state="Failed",failed_machine_name="pool-abc-x",failed_machine_owner_ref="pool-abc",failed_machine_provider_id="sim://x",name="pool-abc",namespace="ns"} 1
# HELP mcm_machine_set_info Information on a machine set, always 1.
# TYPE mcm_machine_set_info gauge
mcm_machine_set_info{createdAt="1600000000",name="old",namespace="ns",spec_machine_class_api_group="",spec_machine_class_kind="AWSMachineClass",spec_machine_class_name="legacy"} 1
mcm_machine_set_info{createdAt="1700000000",name="pool-abc",namespace="ns",spec_machine_class_api_group="machine.sapcloud.io",spec_machine_class_kind="MachineClass",spec_machine_class_name="c"} 1
# HELP mcm_machine_set_info_spec_min_ready_seconds Seconds a new machine of a machine set must be Running to count as available.
# TYPE mcm_machine_set_info_spec_min_ready_seconds gauge
mcm_machine_set_info_spec_min_ready_seconds{name="old",namespace="ns"} 0
mcm_machine_set_info_spec_min_ready_seconds{name="pool-abc",namespace="ns"} 30
# HELP mcm_machine_set_info_spec_replicas Desired replicas of a machine set.
# TYPE mcm_machine_set_info_spec_replicas gauge
mcm_machine_set_info_spec_replicas{name="old",namespace="ns"} 0
mcm_machine_set_info_spec_replicas{name="pool-abc",namespace="ns"} 3
# HELP mcm_machine_set_items_total Number of machine sets.
# TYPE mcm_machine_set_items_total gauge
mcm_machine_set_items_total 2
# HELP mcm_machine_set_status_available_replicas Available machines of a machine set.
# TYPE mcm_machine_set_status_available_replicas gauge
mcm_machine_set_status_available_replicas{name="old",namespace="ns"} 0
mcm_machine_set_status_available_replicas{name="pool-abc",namespace="ns"} 1
# HELP mcm_machine_set_status_condition Conditions of a machine set as a number: True 1, False 0, Unknown 2.
# TYPE mcm_machine_set_status_condition gauge
mcm_machine_set_status_condition{condition="Frozen",name="pool-abc",namespace="ns"} 2
mcm_machine_set_status_condition{condition="ReplicaFailure",name="pool-abc",namespace="ns"} 1
# HELP mcm_machine_set_status_fully_labelled_replicas Fully labelled machines of a machine set.
# TYPE mcm_machine_set_status_fully_labelled_replicas gauge
mcm_machine_set_status_fully_labelled_replicas{name="old",namespace="ns"} 0
mcm_machine_set_status_fully_labelled_replicas{name="pool-abc",namespace="ns"} 3
# HELP mcm_machine_set_status_ready_replicas Ready machines of a machine set.
# TYPE mcm_machine_set_status_ready_replicas gauge
mcm_machine_set_status_ready_replicas{name="old",namespace="ns"} 0
mcm_machine_set_status_ready_replicas{name="pool-abc",namespace="ns"} 2
# HELP mcm_machine_set_status_replicas Machines of a machine set.
# TYPE mcm_machine_set_status_replicas gauge
mcm_machine_set_status_replicas{name="old",namespace="ns"} 0
mcm_machine_set_status_replicas{name="pool-abc",namespace="ns"} 3
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	col.sets = failingSetLister{}
	if n := testutil.CollectAndCount(col); n != 0 {
		t.Errorf("%d metrics from a cache that cannot list, want none", n)
	}
	if v := testutil.ToFloat64(failures); v != 1 {
		t.Errorf("%v scrape failures after a failed list, want 1", v)
	}
}

// TestIsStale: only a machine the health timeout marked Failed is stale,
// as in MCM; one whose creation timed out is not.
func TestIsStale(t *testing.T) {
	machine := func(phase v1alpha1.MachinePhase, op v1alpha1.MachineOperationType) *v1alpha1.Machine {
		m := &v1alpha1.Machine{}
		m.Status.CurrentStatus.Phase = phase
		m.Status.LastOperation.Type = op
		return m
	}
	for _, tc := range []struct {
		name    string
		machine *v1alpha1.Machine
		want    bool
	}{
		{"failed by the health timeout", machine(v1alpha1.MachineFailed, v1alpha1.MachineOperationHealthCheck), true},
		{"failed by the creation timeout", machine(v1alpha1.MachineFailed, v1alpha1.MachineOperationCreate), false},
		{"unknown, not failed yet", machine(v1alpha1.MachineUnknown, v1alpha1.MachineOperationHealthCheck), false},
		{"running", machine(v1alpha1.MachineRunning, v1alpha1.MachineOperationHealthCheck), false},
	} {
		if got := isStale(tc.machine); got != tc.want {
			t.Errorf("%s: isStale = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMetricsOfLatestController: a second controller on one registry keeps
// the stale counter's series and replaces the first one's collector, whose
// cache stopped with it.
func TestMetricsOfLatestController(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, err := newMetrics(reg, &Controller{sets: setLister(t)})
	if err != nil {
		t.Fatal(err)
	}
	first.staleMachines.Inc()
	second, err := newMetrics(reg, &Controller{sets: setLister(t, &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}})})
	if err != nil {
		t.Fatalf("second controller's metrics: %v", err)
	}
	second.staleMachines.Inc()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcm_machine_set_items_total Number of machine sets.
# TYPE mcm_machine_set_items_total gauge
mcm_machine_set_items_total 1
# HELP mcm_machine_stale_machines_total Machines their machine set deleted because the health timeout had marked them Failed.
# TYPE mcm_machine_stale_machines_total counter
mcm_machine_stale_machines_total 2
# HELP mcm_misc_scrape_failure_total Scrapes whose collector could not list its objects from the informer cache, by kind.
# TYPE mcm_misc_scrape_failure_total counter
mcm_misc_scrape_failure_total{binary="machine-controller-manager",kind="Machineset-count"} 0
`), "mcm_machine_set_items_total", "mcm_machine_stale_machines_total", "mcm_misc_scrape_failure_total"); err != nil {
		t.Error(err)
	}
}
