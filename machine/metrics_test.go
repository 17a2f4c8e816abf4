package machine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/promreg"
)

func indexerOf(t *testing.T, objs ...any) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return idx
}

// TestPlacementOf: the duration metrics' labels are filled as MCM fills
// them, from the machine's deployment label, its class's nodeTemplate and
// its node template's zone label.
func TestPlacementOf(t *testing.T) {
	class := func(name string, tmpl *v1alpha1.NodeTemplate) *v1alpha1.MachineClass {
		return &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, NodeTemplate: tmpl}
	}
	classes := machinelisters.NewMachineClassLister(indexerOf(t,
		class("placed", &v1alpha1.NodeTemplate{InstanceType: "m5.large", Zone: "eu-1a"}),
		class("bare", nil),
	))
	machine := func(className string, labels map[string]string, zoneLabel string) *v1alpha1.Machine {
		m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Labels: labels},
			Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: className}}}
		if zoneLabel != "" {
			m.Spec.NodeTemplateSpec.Labels = map[string]string{corev1.LabelTopologyZone: zoneLabel}
		}
		return m
	}
	deployed := map[string]string{v1alpha1.MachineDeploymentNameLabelKey: "workers"}
	for _, tc := range []struct {
		name    string
		machine *v1alpha1.Machine
		want    []string
	}{
		{"class's instance type and zone", machine("placed", deployed, ""), []string{"ns", "workers", "m5.large", "eu-1a"}},
		{"the machine's zone label wins, as in MCM", machine("placed", deployed, "eu-1b"), []string{"ns", "workers", "m5.large", "eu-1b"}},
		{"class without nodeTemplate", machine("bare", deployed, "eu-1c"), []string{"ns", "workers", "", "eu-1c"}},
		{"class not in the cache", machine("missing", deployed, ""), []string{"ns", "workers", "", ""}},
		{"machine outside a deployment", machine("placed", nil, ""), []string{"ns", "", "m5.large", "eu-1a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, placementOf(tc.machine, classes)); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDurationMetricsGaugeAndHistogram: an observation sets MCM's gauge to
// the last value and adds to our histogram; the drain metrics take only
// namespace and deployment from the machine's labels.
func TestDurationMetricsGaugeAndHistogram(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	lvs := []string{"ns", "workers", "m5.large", "eu-1a"}
	m.create.WithLabelValues(lvs...).Observe(3)
	m.create.WithLabelValues(lvs...).Observe(5)
	m.drain.WithLabelValues(lvs...).Observe(7)
	m.failedJoins.WithLabelValues(lvs...).Inc()

	want := `
# HELP mcm_machine_create_duration_seconds Time the last machine whose VM was created took from its creation timestamp until CreateMachine succeeded, by deployment and placement (MCM's meaning).
# TYPE mcm_machine_create_duration_seconds gauge
mcm_machine_create_duration_seconds{instance_type="m5.large",machine_deployment="workers",namespace="ns",zone="eu-1a"} 5
# HELP mcm_machine_drain_duration_seconds Time the last drain took from its first pass until the node was drained, by deployment.
# TYPE mcm_machine_drain_duration_seconds gauge
mcm_machine_drain_duration_seconds{machine_deployment="workers",namespace="ns"} 7
# HELP mcm_machine_num_failed_join Machines that did not join within the creation timeout, by deployment and placement.
# TYPE mcm_machine_num_failed_join counter
mcm_machine_num_failed_join{instance_type="m5.large",machine_deployment="workers",namespace="ns",zone="eu-1a"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"mcm_machine_create_duration_seconds", "mcm_machine_drain_duration_seconds", "mcm_machine_num_failed_join"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.create.hist, "mcm_machine_create_seconds"); n != 1 {
		t.Errorf("create histogram has %d series, want 1", n)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			if h := s.GetHistogram(); h != nil {
				counts[f.GetName()] += h.GetSampleCount()
			}
		}
	}
	if diff := cmp.Diff(map[string]uint64{"mcm_machine_create_seconds": 2, "mcm_machine_drain_seconds": 1}, counts); diff != "" {
		t.Errorf("histogram sample counts (-want +got):\n%s", diff)
	}
	// The scrape failure series exists before any failure.
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcm_misc_scrape_failure_total Scrapes whose collector could not list its objects from the informer cache, by kind.
# TYPE mcm_misc_scrape_failure_total counter
mcm_misc_scrape_failure_total{binary="machine-controller-manager-provider",kind="Machine-count"} 0
`), "mcm_misc_scrape_failure_total"); err != nil {
		t.Error(err)
	}
}

// TestNewMetricsTwiceOnOneRegistry: a second controller on one registry
// continues the first one's series instead of failing.
func TestNewMetricsTwiceOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	second, err := newMetrics(reg)
	if err != nil {
		t.Fatalf("second registration: %v", err)
	}
	first.failedJoins.WithLabelValues("ns", "d", "t", "z").Inc()
	second.failedJoins.WithLabelValues("ns", "d", "t", "z").Inc()
	if v := testutil.ToFloat64(second.failedJoins.WithLabelValues("ns", "d", "t", "z")); v != 2 {
		t.Errorf("failed joins %v after one from each, want 2", v)
	}
}

type failingMachineLister struct{ machinelisters.MachineLister }

func (failingMachineLister) List(labels.Selector) ([]*v1alpha1.Machine, error) {
	return nil, errors.New("cache gone")
}

// TestMachineCollector: MCM's per-machine gauges, computed from the cache.
func TestMachineCollector(t *testing.T) {
	created := metav1.NewTime(time.Unix(1700000000, 0))
	running := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", CreationTimestamp: created,
			Labels: map[string]string{v1alpha1.NodeLabelKey: "node-a"}},
		Spec: v1alpha1.MachineSpec{ProviderID: "sim://a", Class: v1alpha1.ClassSpec{APIGroup: "machine.sapcloud.io", Kind: "MachineClass", Name: "c"}},
		Status: v1alpha1.MachineStatus{
			CurrentStatus: v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning, PreserveExpiryTime: &metav1.Time{Time: created.Add(2 * time.Hour)}},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionUnknown},
			},
		},
	}
	deleting := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", CreationTimestamp: created, DeletionTimestamp: &created,
			Finalizers: []string{v1alpha1.MachineFinalizer}},
		Spec:   v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "c"}},
		Status: v1alpha1.MachineStatus{CurrentStatus: v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning}},
	}
	failures, err := promreg.ScrapeFailures(nil, promreg.BinaryProvider, "Machine-count")
	if err != nil {
		t.Fatal(err)
	}
	col := &machineCollector{machines: machinelisters.NewMachineLister(indexerOf(t, running, deleting)),
		scrapeFailures: failures, frozen: func() bool { return true }, now: func() time.Time { return created.Add(time.Hour) }}
	want := `
# HELP mcm_machine_controller_frozen 1 while the safety gate freezes the controller.
# TYPE mcm_machine_controller_frozen gauge
mcm_machine_controller_frozen 1
# HELP mcm_machine_current_status_phase Phase of a machine as a number: Terminating -4, Failed -3, CrashLoopBackOff -2, Unknown -1, Running 1, any other 0.
# TYPE mcm_machine_current_status_phase gauge
mcm_machine_current_status_phase{name="a",namespace="ns"} 1
mcm_machine_current_status_phase{name="b",namespace="ns"} -4
# HELP mcm_machine_info Information on a machine, always 1.
# TYPE mcm_machine_info gauge
mcm_machine_info{createdAt="1700000000",name="a",namespace="ns",node_name="node-a",spec_class_api_group="machine.sapcloud.io",spec_class_kind="MachineClass",spec_class_name="c",spec_provider_id="sim://a"} 1
mcm_machine_info{createdAt="1700000000",name="b",namespace="ns",node_name="",spec_class_api_group="",spec_class_kind="MachineClass",spec_class_name="c",spec_provider_id=""} 1
# HELP mcm_machine_items_total Number of machines.
# TYPE mcm_machine_items_total gauge
mcm_machine_items_total 2
# HELP mcm_machine_phase_machines Number of machines by namespace and phase.
# TYPE mcm_machine_phase_machines gauge
mcm_machine_phase_machines{namespace="ns",phase="Running"} 1
mcm_machine_phase_machines{namespace="ns",phase="Terminating"} 1
# HELP mcm_machine_preserved 1 while a machine is preserved (status.currentStatus.preserveExpiryTime is in the future), else 0.
# TYPE mcm_machine_preserved gauge
mcm_machine_preserved{name="a",namespace="ns"} 1
mcm_machine_preserved{name="b",namespace="ns"} 0
# HELP mcm_machine_status_condition Conditions of a machine's node as a number: True 1, False 0, Unknown 2.
# TYPE mcm_machine_status_condition gauge
mcm_machine_status_condition{condition="DiskPressure",name="a",namespace="ns"} 0
mcm_machine_status_condition{condition="MemoryPressure",name="a",namespace="ns"} 2
mcm_machine_status_condition{condition="Ready",name="a",namespace="ns"} 1
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if v := testutil.ToFloat64(failures); v != 0 {
		t.Errorf("%v scrape failures after a good scrape", v)
	}

	// A cache that cannot list: the failure is counted and no machine
	// metric is made up; the frozen gauge does not need the cache.
	col.machines = failingMachineLister{}
	if n := testutil.CollectAndCount(col); n != 1 {
		t.Errorf("%d metrics from a failing cache, want only the frozen gauge", n)
	}
	if v := testutil.ToFloat64(failures); v != 1 {
		t.Errorf("%v scrape failures after a failed list, want 1", v)
	}
}

// TestPhaseValues: MCM's numbers for every phase.
func TestPhaseValues(t *testing.T) {
	got := map[v1alpha1.MachinePhase]float64{}
	for _, p := range []v1alpha1.MachinePhase{v1alpha1.MachineTerminating, v1alpha1.MachineFailed, v1alpha1.MachineCrashLoopBackOff,
		v1alpha1.MachineUnknown, v1alpha1.MachinePending, v1alpha1.MachineRunning, v1alpha1.MachineAvailable, ""} {
		got[p] = phaseValue(p)
	}
	want := map[v1alpha1.MachinePhase]float64{v1alpha1.MachineTerminating: -4, v1alpha1.MachineFailed: -3, v1alpha1.MachineCrashLoopBackOff: -2,
		v1alpha1.MachineUnknown: -1, v1alpha1.MachinePending: 0, v1alpha1.MachineRunning: 1, v1alpha1.MachineAvailable: 0, "": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("phase values (-want +got):\n%s", diff)
	}
}

// TestAttachCollectorReplacesEarlier: the collector of the latest
// controller on a registry is the one scraped, not one whose caches
// stopped with its controller.
func TestAttachCollectorReplacesEarlier(t *testing.T) {
	reg := prometheus.NewRegistry()
	build := func(machines ...any) *Controller {
		m, err := newMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		c := &Controller{machines: machinelisters.NewMachineLister(indexerOf(t, machines...)), metrics: m}
		m.attachCollector(t.Context(), c)
		return c
	}
	build()
	build(&v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}})
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcm_machine_items_total Number of machines.
# TYPE mcm_machine_items_total gauge
mcm_machine_items_total 1
`), "mcm_machine_items_total"); err != nil {
		t.Error(err)
	}
}

// BenchmarkMachineCollector measures one scrape of the per-machine gauges
// at 5000 machines, the scale the sim driver is documented for.
func BenchmarkMachineCollector(b *testing.B) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i := range 5000 {
		m := &v1alpha1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m-%05d", i), Namespace: "ns", Labels: map[string]string{v1alpha1.NodeLabelKey: fmt.Sprintf("n-%05d", i)}},
			Spec:       v1alpha1.MachineSpec{ProviderID: fmt.Sprintf("sim://%d", i), Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "c"}},
			Status: v1alpha1.MachineStatus{CurrentStatus: v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
					{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}}},
		}
		if err := idx.Add(m); err != nil {
			b.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	failures, err := promreg.ScrapeFailures(nil, promreg.BinaryProvider, "Machine-count")
	if err != nil {
		b.Fatal(err)
	}
	reg.MustRegister(&machineCollector{machines: machinelisters.NewMachineLister(idx),
		scrapeFailures: failures, frozen: func() bool { return false }, now: time.Now})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
