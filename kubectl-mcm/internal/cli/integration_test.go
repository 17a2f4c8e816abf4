package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/kubectl-mcm/internal/cli"
	"github.com/mcmkit/mcm/kubectl-mcm/internal/rollout"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Setup: []func(context.Context, *rest.Config) error{crds.Install}})
}

// settle bounds each wait: generous for a loaded two-core machine under
// -race.
const settle = 4 * time.Minute

// plugin runs kubectl mcm against the test's cluster and namespace.
type plugin struct {
	kubeconfig, ns string
}

func newPlugin(t *testing.T, s *simstack.Stack) plugin {
	return plugin{kubeconfig: testenv.Get(t).Kubeconfig(), ns: s.NS}
}

// run runs the plugin with args and returns its stdout, stderr and exit
// code.
func (p plugin) run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append(args, "--kubeconfig", p.kubeconfig, "-n", p.ns)
	ctx, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	code = cli.Main(ctx, args, cli.Streams{Out: &out, ErrOut: &errOut})
	return out.String(), errOut.String(), code
}

// ok runs the plugin and fails t unless it exits 0.
func (p plugin) ok(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := p.run(t, args...)
	if code != 0 {
		t.Fatalf("kubectl mcm %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// fails runs the plugin, fails t unless it exits 1 with an error naming
// want, and returns stderr.
func (p plugin) fails(t *testing.T, want string, args ...string) string {
	t.Helper()
	out, errOut, code := p.run(t, args...)
	if code != 1 || !strings.HasPrefix(errOut, "error: ") || !strings.Contains(errOut, want) {
		t.Fatalf("kubectl mcm %s: exit %d, want 1 and an error with %q\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errOut)
	}
	return errOut
}

func rollingDeployment(ns, name, class string, replicas int32) *v1alpha1.MachineDeployment {
	labels := map[string]string{"pool": name}
	surge, unavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	return &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: class}},
			},
			Strategy: v1alpha1.MachineDeploymentStrategy{
				Type:          v1alpha1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{MaxSurge: &surge, MaxUnavailable: &unavailable}},
			},
		},
	}
}

func create(t *testing.T, s *simstack.Stack, d *v1alpha1.MachineDeployment) {
	t.Helper()
	if _, err := s.Machines.MachineV1alpha1().MachineDeployments(s.NS).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func getDeployment(t *testing.T, s *simstack.Stack, name string) *v1alpha1.MachineDeployment {
	t.Helper()
	d, err := s.Machines.MachineV1alpha1().MachineDeployments(s.NS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// machineNames lists the namespace's machines that are not being deleted.
func machineNames(t *testing.T, s *simstack.Stack) []string {
	t.Helper()
	list, err := s.Machines.MachineV1alpha1().Machines(s.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list.Items {
		if m.DeletionTimestamp == nil {
			names = append(names, m.Name)
		}
	}
	sort.Strings(names)
	return names
}

// TestIntegrationTree draws a deployment rolled out on the simulated
// cloud, with the random parts of names and the ages made stable, and
// compares it with a golden file; -o json gives the same tree.
func TestIntegrationTree(t *testing.T) {
	s := simstack.Start(t, simstack.Options{Deployments: true})
	p := newPlugin(t, s)
	create(t, s, rollingDeployment(s.NS, "web", s.Class, 3))
	p.ok(t, "rollout", "status", "web", "--timeout", settle.String())
	// The deployment's status may count the machines before the sets'
	// statuses do: wait for the set to say 3 ready too.
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		out, _, _ := p.run(t, "tree", "web")
		return strings.Contains(out, "desired 3, current 3, ready 3"), out
	})
	got := stable(t, s, p.ok(t, "tree", "web"))
	golden(t, filepath.Join("testdata", "integration-tree.golden"), got)

	var tree struct {
		Deployments []struct {
			Name string `json:"name"`
			Sets []struct {
				Machines []struct {
					Phase string `json:"phase"`
				} `json:"machines"`
			} `json:"machineSets"`
		} `json:"deployments"`
	}
	if err := json.Unmarshal([]byte(p.ok(t, "tree", "-o", "json")), &tree); err != nil {
		t.Fatal(err)
	}
	if len(tree.Deployments) != 1 || len(tree.Deployments[0].Sets) != 1 || len(tree.Deployments[0].Sets[0].Machines) != 3 {
		t.Errorf("tree -o json: want one deployment with one set of 3 machines, got %+v", tree)
	}
	p.fails(t, "not found", "tree", "nope")
}

var age = regexp.MustCompile(`\b\d+[smhdy](\d+[smh])?\b`)

// stable replaces the names of the namespace's sets and machines by
// set-N and machine-N in the order they appear in out, and ages by <age>.
func stable(t *testing.T, s *simstack.Stack, out string) string {
	t.Helper()
	ctx := context.Background()
	sets, err := s.Machines.MachineV1alpha1().MachineSets(s.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var setNames []string
	for _, set := range sets.Items {
		setNames = append(setNames, set.Name)
	}
	// Machine names start with their set's name: machines first.
	out = byAppearance(out, machineNames(t, s), "machine")
	out = byAppearance(out, setNames, "set")
	return age.ReplaceAllString(out, "<age>")
}

func byAppearance(out string, names []string, kind string) string {
	slices.SortFunc(names, func(a, b string) int { return strings.Index(out, a) - strings.Index(out, b) })
	n := 0
	for _, name := range names {
		if strings.Contains(out, name) {
			n++
			out = strings.ReplaceAll(out, name, fmt.Sprintf("%s-%d", kind, n))
		}
	}
	return out
}

// TestIntegrationRolloutStatusDeadline: rollout status exits 0 once a
// rollout completes, and 1 on a deployment whose machines never join
// (VMs that take an hour to boot) once its short progress deadline
// passes.
func TestIntegrationRolloutStatusDeadline(t *testing.T) {
	s := simstack.Start(t, simstack.Options{Deployments: true})
	p := newPlugin(t, s)
	create(t, s, rollingDeployment(s.NS, "web", s.Class, 2))
	out := p.ok(t, "rollout", "status", "web", "--timeout", settle.String())
	if !strings.Contains(out, `machinedeployment "web" successfully rolled out`) {
		t.Errorf("rollout status printed:\n%s", out)
	}

	slow := createSlowClass(t, s, "never-joins", time.Hour)
	stuck := rollingDeployment(s.NS, "stuck", slow, 1)
	deadline := int32(5)
	stuck.Spec.ProgressDeadlineSeconds = &deadline
	create(t, s, stuck)
	p.fails(t, "exceeded its progress deadline", "rollout", "status", "stuck", "--timeout", settle.String())
	// --watch=false tells the same at once.
	p.fails(t, "exceeded its progress deadline", "rollout", "status", "stuck", "--watch=false")
}

// createSlowClass creates a class of the simulated cloud whose VMs take
// boot to boot, so their machines stay Pending.
func createSlowClass(t *testing.T, s *simstack.Stack, name string, boot time.Duration) string {
	t.Helper()
	ctx := context.Background()
	base, err := s.Machines.MachineV1alpha1().MachineClasses(s.NS).Get(ctx, s.Class, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: name, Namespace: s.NS},
		Provider:     base.Provider,
		SecretRef:    base.SecretRef,
		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "large", BootDelay: &metav1.Duration{Duration: boot}}.RawExtension(),
	}
	if _, err := s.Machines.MachineV1alpha1().MachineClasses(s.NS).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestIntegrationRolloutCommands: pause and resume flip spec.paused (and
// refuse to repeat themselves); restart replaces every machine; history
// lists both revisions; undo brings revision 1's template back; a missing
// revision is an error.
func TestIntegrationRolloutCommands(t *testing.T) {
	s := simstack.Start(t, simstack.Options{Deployments: true})
	p := newPlugin(t, s)
	create(t, s, rollingDeployment(s.NS, "web", s.Class, 3))
	p.ok(t, "rollout", "status", "web", "--timeout", settle.String())

	if out := p.ok(t, "rollout", "pause", "web"); !strings.Contains(out, "machinedeployment.machine.sapcloud.io/web paused") {
		t.Errorf("pause printed %q", out)
	}
	if !getDeployment(t, s, "web").Spec.Paused {
		t.Error("pause: spec.paused is false")
	}
	p.fails(t, "already paused", "rollout", "pause", "web")
	p.fails(t, "run rollout resume first", "rollout", "restart", "web")
	p.ok(t, "rollout", "resume", "web")
	if getDeployment(t, s, "web").Spec.Paused {
		t.Error("resume: spec.paused is true")
	}
	p.fails(t, "not paused", "rollout", "resume", "web")

	before := machineNames(t, s)
	p.ok(t, "rollout", "restart", "web")
	if getDeployment(t, s, "web").Spec.Template.Annotations[rollout.RestartedAtAnnotation] == "" {
		t.Fatal("restart: the template has no restartedAt annotation")
	}
	p.ok(t, "rollout", "status", "web", "--timeout", settle.String())
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		after := machineNames(t, s)
		left := slices.DeleteFunc(slices.Clone(after), func(n string) bool { return !slices.Contains(before, n) })
		return len(after) == 3 && len(left) == 0, fmt.Sprintf("want 3 machines, none of %v; have %v", before, after)
	})

	history := p.ok(t, "rollout", "history", "web")
	if !regexp.MustCompile(`(?m)^1 +web-\S+ +<none>$`).MatchString(history) || !regexp.MustCompile(`(?m)^2 +web-`).MatchString(history) {
		t.Errorf("history:\n%s", history)
	}
	if out := p.ok(t, "rollout", "undo", "web", "--to-revision", "1"); !strings.Contains(out, "rolled back to revision 1") {
		t.Errorf("undo printed %q", out)
	}
	p.ok(t, "rollout", "status", "web", "--timeout", settle.String())
	if d := getDeployment(t, s, "web"); d.Spec.Template.Annotations[rollout.RestartedAtAnnotation] != "" {
		t.Errorf("undo: the template still has %s", rollout.RestartedAtAnnotation)
	}
	var revisions []rollout.Revision
	if err := json.Unmarshal([]byte(p.ok(t, "rollout", "history", "web", "-o", "json")), &revisions); err != nil {
		t.Fatal(err)
	}
	var numbers []int64
	for _, r := range revisions {
		numbers = append(numbers, r.Revision)
	}
	if !slices.Equal(numbers, []int64{2, 3}) {
		t.Errorf("history after undo: revisions %v, want [2 3] (revision 1's set is revision 3 now)", numbers)
	}
	p.fails(t, "unable to find specified revision 9", "rollout", "undo", "web", "--to-revision", "9")
	p.fails(t, "not found", "rollout", "status", "nope", "--timeout", "30s")
	if out := p.ok(t, "rollout", "undo", "web", "--to-revision", "3"); !strings.Contains(out, "skipped rollback") {
		t.Errorf("undo to the current revision printed %q", out)
	}
}
