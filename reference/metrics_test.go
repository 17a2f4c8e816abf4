package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// mcmMetrics are the metrics MCM exports (its provider binary and its own),
// with their types and label names, which dashboards, alerts and
// dependency-watchdog read. The reference binary must export each under
// the same name, type and labels. Not listed: MCM's mcm_reflector_*, which
// client-go no longer lets anyone emit.
var mcmMetrics = []struct {
	name, typ string
	labels    []string
}{
	// The machine controller (MCM's provider binary).
	{"mcm_machine_controller_frozen", "gauge", nil},
	{"mcm_machine_items_total", "gauge", nil},
	{"mcm_machine_current_status_phase", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_info", "gauge", []string{"name", "namespace", "createdAt", "spec_provider_id", "spec_class_api_group", "spec_class_kind", "spec_class_name", "node_name"}},
	{"mcm_machine_status_condition", "gauge", []string{"name", "namespace", "condition"}},
	{"mcm_machine_create_duration_seconds", "gauge", []string{"namespace", "machine_deployment", "instance_type", "zone"}},
	{"mcm_machine_initialize_duration_seconds", "gauge", []string{"namespace", "machine_deployment", "instance_type", "zone"}},
	{"mcm_machine_join_duration_seconds", "gauge", []string{"namespace", "machine_deployment", "instance_type", "zone"}},
	{"mcm_machine_drain_duration_seconds", "gauge", []string{"namespace", "machine_deployment"}},
	{"mcm_machine_delete_duration_seconds", "gauge", []string{"namespace", "machine_deployment", "instance_type", "zone"}},
	{"mcm_machine_num_failed_join", "counter", []string{"namespace", "machine_deployment", "instance_type", "zone"}},
	{"mcm_cloud_api_requests_total", "counter", []string{"provider", "service"}},
	{"mcm_cloud_api_requests_failed_total", "counter", []string{"provider", "service"}},
	{"mcm_cloud_api_api_request_duration_seconds", "histogram", []string{"provider", "service"}},
	{"mcm_cloud_api_driver_request_duration_seconds", "histogram", []string{"provider", "operation"}},
	{"mcm_cloud_api_driver_requests_failed_total", "counter", []string{"provider", "operation", "error_code"}},
	{"mcm_misc_scrape_failure_total", "counter", []string{"binary", "kind"}},
	// The set and deployment controllers (MCM's own binary).
	{"mcm_machine_stale_machines_total", "counter", nil},
	{"mcm_machine_set_items_total", "gauge", nil},
	{"mcm_machine_set_info", "gauge", []string{"name", "namespace", "createdAt", "spec_machine_class_api_group", "spec_machine_class_kind", "spec_machine_class_name"}},
	{"mcm_machine_set_info_spec_replicas", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_set_info_spec_min_ready_seconds", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_set_status_condition", "gauge", []string{"name", "namespace", "condition"}},
	{"mcm_machine_set_failed_machines", "gauge", []string{"name", "namespace", "failed_machine_name", "failed_machine_provider_id", "failed_machine_owner_ref", "failed_machine_last_operation_state", "failed_machine_last_operation_machine_operation_type"}},
	{"mcm_machine_set_status_available_replicas", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_set_status_fully_labelled_replicas", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_set_status_ready_replicas", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_set_status_replicas", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_deployment_items_total", "gauge", nil},
	{"mcm_machine_deployment_info", "gauge", []string{"name", "namespace", "createdAt", "spec_strategy_type"}},
	{"mcm_machine_deployment_info_spec_paused", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_deployment_info_spec_replicas", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_deployment_info_spec_min_ready_seconds", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_deployment_info_spec_rolling_update_max_surge", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_deployment_info_spec_rolling_update_max_unavailable", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_deployment_info_spec_revision_history_limit", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_deployment_info_spec_progress_deadline_seconds", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_deployment_info_spec_rollback_to_revision", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_deployment_status_condition", "gauge", []string{"name", "namespace", "condition"}},
	{"mcm_machine_deployment_status_available_replicas", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_deployment_status_unavailable_replicas", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_deployment_status_ready_replicas", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_deployment_status_updated_replicas", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_deployment_status_collision_count", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_deployment_status_replicas", "gauge", []string{"name", "namespace"}},
	{"mcm_machine_deployment_failed_machines", "gauge", []string{"name", "namespace", "failed_machine_name", "failed_machine_provider_id", "failed_machine_owner_ref", "failed_machine_last_operation_state", "failed_machine_last_operation_machine_operation_type"}},
	// Infrastructure.
	{"mcm_workqueue_depth", "gauge", []string{"name"}},
	{"mcm_workqueue_adds_total", "counter", []string{"name"}},
	{"mcm_workqueue_queue_duration_seconds", "histogram", []string{"name"}},
	{"mcm_workqueue_work_duration_seconds", "histogram", []string{"name"}},
	{"mcm_workqueue_unfinished_work_seconds", "gauge", []string{"name"}},
	{"mcm_workqueue_longest_running_processor_seconds", "gauge", []string{"name"}},
	{"mcm_workqueue_retries_total", "counter", []string{"name"}},
	{"rest_client_requests_total", "counter", []string{"code", "method", "host"}},
	{"rest_client_request_latency_seconds", "histogram", []string{"verb", "url"}},
}

// transientMetrics exist only for a moment: a deployment's
// rollback_to_revision, while the rollback it asks for waits for its next
// sync (the collector test of package deployment covers it). They are
// checked when a scrape happens to see them.
var transientMetrics = map[string]bool{"mcm_machine_deployment_info_spec_rollback_to_revision": true}

// TestMetricsAsMCMExportsThem runs the binary with the sim driver through
// what makes every MCM metric exist — a deployment's machines Running, one
// of them drained and deleted by a scale-down, a deployment whose machines
// fail to be created, a set whose class is missing, a machine that does
// not join in time — and checks that /metrics has each of MCM's metrics
// with MCM's type and exactly MCM's label names, and that the duration
// metrics carry the deployment and the placement of the machine's class.
func TestMetricsAsMCMExportsThem(t *testing.T) {
	t.Parallel()
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	mc := versioned.NewForConfigOrDie(env.Config())
	createMetricsObjects(t, env, mc, ns)
	const deployment = "metrics"
	createMetricsDeployment(t, mc, ns, deployment, "placed", 2, true)
	createMetricsDeployment(t, mc, ns, "broken", "broken", 1, false)
	classless := &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "classless", Namespace: ns},
		Spec: v1alpha1.MachineSetSpec{Replicas: 1,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"set": "classless"}},
			Template: v1alpha1.MachineTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"set": "classless"}},
				Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "missing"}}}},
	}
	if _, err := mc.MachineV1alpha1().MachineSets(ns).Create(ctx, classless, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	joinless := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "joinless-" + randomSuffix(t), Namespace: ns,
			Labels: map[string]string{v1alpha1.MachineDeploymentNameLabelKey: "joinless"}},
		Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "slow"},
			MachineConfiguration: &v1alpha1.MachineConfiguration{MachineCreationTimeout: &metav1.Duration{Duration: 5 * time.Second}}},
	}
	if _, err := mc.MachineV1alpha1().Machines(ns).Create(ctx, joinless, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	in := start(t, binary(t), "manager", "--control-kubeconfig", env.Kubeconfig(), "--target-kubeconfig", env.Kubeconfig(),
		"--namespace", ns, "--driver", "sim", "--leader-elect=false")

	selector := labels.SelectorFromSet(labels.Set{v1alpha1.MachineDeploymentNameLabelKey: deployment}).String()
	machinesOf := func(ctx context.Context) ([]v1alpha1.Machine, error) {
		list, err := mc.MachineV1alpha1().Machines(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return nil, err
		}
		return list.Items, nil
	}
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		ms, err := machinesOf(ctx)
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, m := range ms {
			if m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
				running++
			}
		}
		return running == 2, fmt.Sprintf("%d of deployment %s's %d machines Running, want 2", running, deployment, len(ms))
	})
	waitPhase(t, mc, ns, joinless.Name, v1alpha1.MachineFailed, time.Minute)

	// A scale-down drains and deletes a machine.
	if _, err := mc.MachineV1alpha1().MachineDeployments(ns).Patch(ctx, deployment, types.MergePatchType,
		[]byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		ms, err := machinesOf(ctx)
		if err != nil {
			return false, err.Error()
		}
		return len(ms) == 1, fmt.Sprintf("deployment %s has %d machines, want 1 after the scale-down", deployment, len(ms))
	})

	// The set and deployment status the collectors read is written
	// asynchronously: wait until every metric is there, then check.
	var families map[string]*metricFamily
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		code, body := in.get("/metrics")
		if code != 200 {
			return false, fmt.Sprintf("/metrics: %d %s", code, body)
		}
		var err error
		if families, err = parseExposition(body); err != nil {
			return false, err.Error()
		}
		var missing []string
		for _, want := range mcmMetrics {
			if f := families[want.name]; !transientMetrics[want.name] && (f == nil || len(f.samples) == 0) {
				missing = append(missing, want.name)
			}
		}
		return len(missing) == 0, fmt.Sprintf("/metrics lacks %s", strings.Join(missing, ", "))
	})
	for _, want := range mcmMetrics {
		f := families[want.name]
		if f == nil {
			continue // transient
		}
		if f.typ != want.typ {
			t.Errorf("%s is a %s, want a %s as in MCM", want.name, f.typ, want.typ)
		}
		wantLabels := slices.Sorted(slices.Values(want.labels))
		for _, s := range f.samples {
			if got := s.labelNames(); !slices.Equal(got, wantLabels) {
				t.Errorf("%s has labels %v, want exactly MCM's %v", s.name, got, wantLabels)
				break
			}
		}
	}

	// The duration metrics carry the deployment and the class's placement.
	placed := map[string]string{"namespace": ns, "machine_deployment": deployment, "instance_type": "small", "zone": "zone-a"}
	for _, name := range []string{"mcm_machine_create_duration_seconds", "mcm_machine_initialize_duration_seconds",
		"mcm_machine_join_duration_seconds", "mcm_machine_delete_duration_seconds"} {
		if s := families[name].find(placed); s == nil {
			t.Errorf("%s has no series %v: %v", name, placed, families[name].samples)
		}
	}
	if s := families["mcm_machine_drain_duration_seconds"].find(map[string]string{"namespace": ns, "machine_deployment": deployment}); s == nil {
		t.Errorf("mcm_machine_drain_duration_seconds has no series of deployment %s: %v", deployment, families["mcm_machine_drain_duration_seconds"].samples)
	}
	failedJoin := map[string]string{"namespace": ns, "machine_deployment": "joinless", "instance_type": "tiny", "zone": "zone-b"}
	if s := families["mcm_machine_num_failed_join"].find(failedJoin); s == nil || s.value != "1" {
		t.Errorf("mcm_machine_num_failed_join has no series %v at 1: %v", failedJoin, families["mcm_machine_num_failed_join"].samples)
	}
	if s := families["mcm_machine_current_status_phase"].find(map[string]string{"name": joinless.Name, "namespace": ns}); s == nil || s.value != "-3" {
		t.Errorf("mcm_machine_current_status_phase of the Failed machine %s: %v, want -3", joinless.Name, s)
	}
	if s := families["mcm_cloud_api_requests_total"].find(map[string]string{"provider": sim.ProviderName, "service": sim.APIService}); s == nil || s.value == "0" {
		t.Errorf("mcm_cloud_api_requests_total counts no request to the sim's compute API: %v", s)
	}
	ms, err := machinesOf(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := families["mcm_machine_current_status_phase"].find(map[string]string{"name": ms[0].Name, "namespace": ns}); s == nil || s.value != "1" {
		t.Errorf("mcm_machine_current_status_phase of the Running machine %s: %v, want 1", ms[0].Name, s)
	}
}

// createMetricsObjects creates the classes of TestMetricsAsMCMExportsThem:
// "placed" with a nodeTemplate, "broken" whose secret lacks the sim's API
// token (every create fails), "slow" whose VMs take an hour to boot.
func createMetricsObjects(t *testing.T, env *testenv.Env, mc versioned.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	for name, data := range map[string]map[string][]byte{
		"cloud":    {v1alpha1.UserDataKey: []byte("#cloud-config"), sim.CredentialsKey: []byte("token")},
		"no-token": {v1alpha1.UserDataKey: []byte("#cloud-config")},
	} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}
		if _, err := env.Client().CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	class := func(name, secret string, spec sim.ProviderSpec) *v1alpha1.MachineClass {
		return &v1alpha1.MachineClass{
			ObjectMeta:   metav1.ObjectMeta{Name: name, Namespace: ns},
			Provider:     sim.ProviderName,
			ProviderSpec: spec.RawExtension(),
			SecretRef:    &corev1.SecretReference{Name: secret, Namespace: ns},
			NodeTemplate: &v1alpha1.NodeTemplate{Capacity: capacity, InstanceType: spec.InstanceType, Region: "region-1", Zone: spec.Zone},
		}
	}
	for _, c := range []*v1alpha1.MachineClass{
		class("placed", "cloud", sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}),
		class("broken", "no-token", sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}),
		class("slow", "cloud", sim.ProviderSpec{Zone: "zone-b", InstanceType: "tiny", BootDelay: &metav1.Duration{Duration: time.Hour}}),
	} {
		if _, err := mc.MachineV1alpha1().MachineClasses(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// createMetricsDeployment creates a rolling-update deployment whose
// machines carry MCM's "name" label; with allSpecFields it also sets the
// spec fields MCM exports only when set.
func createMetricsDeployment(t *testing.T, mc versioned.Interface, ns, name, class string, replicas int32, allSpecFields bool) {
	t.Helper()
	labels := map[string]string{v1alpha1.MachineDeploymentNameLabelKey: name}
	maxSurge, maxUnavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	d := &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: class}},
			},
			Strategy: v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge: &maxSurge, MaxUnavailable: &maxUnavailable}}},
		},
	}
	if allSpecFields {
		history, deadline := int32(3), int32(600)
		d.Spec.RevisionHistoryLimit, d.Spec.ProgressDeadlineSeconds = &history, &deadline
	}
	if _, err := mc.MachineV1alpha1().MachineDeployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// metricFamily is one family of a /metrics page in the text format.
type metricFamily struct {
	typ     string
	samples []metricSample
}

type metricSample struct {
	name   string // with a histogram's _bucket, _sum or _count
	labels map[string]string
	value  string
}

// labelNames are the sample's label names, sorted, without a histogram
// bucket's le.
func (s metricSample) labelNames() []string {
	var names []string
	for n := range s.labels {
		if n != "le" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// find returns the first sample that has the labels (among others), nil
// if none.
func (f *metricFamily) find(labels map[string]string) *metricSample {
	if f == nil {
		return nil
	}
	for i, s := range f.samples {
		match := true
		for k, v := range labels {
			if s.labels[k] != v {
				match = false
				break
			}
		}
		if match {
			return &f.samples[i]
		}
	}
	return nil
}

// parseExposition parses Prometheus' text format as /metrics serves it:
// "# TYPE" lines open a family, the samples that follow belong to it.
func parseExposition(body string) (map[string]*metricFamily, error) {
	families := map[string]*metricFamily{}
	var current *metricFamily
	var currentName string
	for line := range strings.Lines(body) {
		line = strings.TrimSuffix(line, "\n")
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			current, currentName = &metricFamily{typ: typ}, name
			families[name] = current
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, err
		}
		if current == nil || !strings.HasPrefix(s.name, currentName) {
			return nil, fmt.Errorf("sample %q outside its family (last TYPE %s)", line, currentName)
		}
		current.samples = append(current.samples, s)
	}
	return families, nil
}

// parseSample parses `name{l1="v1",l2="v2"} value` (braces optional),
// with the format's escapes in label values.
func parseSample(line string) (metricSample, error) {
	s := metricSample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("sample %q has no value", line)
	}
	s.name = line[:i]
	rest := line[i:]
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for !strings.HasPrefix(rest, "}") {
			name, after, ok := strings.Cut(rest, `="`)
			if !ok {
				return s, fmt.Errorf("sample %q: bad label at %q", line, rest)
			}
			var value strings.Builder
			j := 0
			for ; j < len(after) && after[j] != '"'; j++ {
				if after[j] == '\\' && j+1 < len(after) {
					j++
					switch after[j] {
					case 'n':
						value.WriteByte('\n')
					default:
						value.WriteByte(after[j])
					}
					continue
				}
				value.WriteByte(after[j])
			}
			if j == len(after) {
				return s, fmt.Errorf("sample %q: unterminated label value", line)
			}
			s.labels[name] = value.String()
			rest = strings.TrimPrefix(after[j+1:], ",")
		}
		rest = rest[1:]
	}
	s.value = strings.Fields(rest)[0]
	return s, nil
}
