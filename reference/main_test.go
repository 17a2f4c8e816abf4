package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/controlplane"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/reference/manager"
)

// The simulated kubelet runs inside the manager, so nodes miss their lease
// renewals whenever a test stops one manager and starts another
// (TestSwitchFromMCM's switch, the leader failover): the gap between the
// last renewal of one and the first of the next, which spreads a restarted
// kubelet's renewals over its renew period (10s), often exceeded the default
// 20s grace, and kube-controller-manager tainted nodes that real kubelets,
// which do not stop with the manager, would have kept Ready. No test here
// waits for a node to go Unknown.
const nodeMonitorGracePeriod = time.Minute

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcm-reference-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	built.dir = dir
	testenv.Main(m, testenv.Options{Setup: []func(context.Context, *rest.Config) error{crds.Install},
		ControlPlane: controlplane.Options{NodeMonitorGracePeriod: nodeMonitorGracePeriod},
		Teardown:     func() { os.RemoveAll(dir) }})
}

// binary builds the reference binary once, for every test of the package.
func binary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.path = filepath.Join(built.dir, "mcm")
		if out, err := exec.Command("go", "build", "-o", built.path, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// built is the reference binary, built once for the package's tests.
var built struct {
	dir  string // removed after the tests
	once sync.Once
	path string
	err  error
}

// deployManifests serializes the tests that apply reference/deploy: they
// share its namespace and cluster roles.
var deployManifests sync.Mutex

// Bad flags end the binary with exit code 2 and one line on stderr that
// gives the reason and the usage hint.
func TestBinaryRejectsBadFlags(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := []string{"--control-kubeconfig", kc, "--target-kubeconfig", kc, "--driver", "sim"}
	tests := []struct {
		name   string
		args   []string
		reason string
	}{
		{"target kubeconfig pointing nowhere", []string{"--control-kubeconfig", kc, "--target-kubeconfig", "/nowhere/kubeconfig", "--driver", "sim"},
			"--target-kubeconfig: kubeconfig /nowhere/kubeconfig: no such file or directory"},
		{"unknown controller", append(ok, "--controllers=foo"), `--controllers: unknown controller "foo" (known: machine, machinedeployment, machineset, overshoot, safety)`},
		{"negative timeout", append(ok, "--machine-health-timeout=-5m"), "--machine-health-timeout must not be negative, got -5m0s"},
		{"contradictory", append(ok, "--port=0", "--profiling"), "--profiling needs the HTTP server, but --port=0 disables it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := exec.Command(bin, tt.args...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("exit: %v, want exit code 2; stderr:\n%s", err, stderr.String())
			}
			want := "mcm: " + tt.reason + " (see mcm -h)\n"
			if stderr.String() != want {
				t.Errorf("stderr = %q\nwant     %q", stderr.String(), want)
			}
		})
	}
}

// instance is one running reference binary.
type instance struct {
	name string
	cmd  *exec.Cmd
	port int
	log  *bytes.Buffer
	mu   *sync.Mutex
	done chan error
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func start(t *testing.T, bin, name string, args ...string) *instance {
	t.Helper()
	in := &instance{name: name, port: freePort(t), log: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan error, 1)}
	args = append(args, "--address=127.0.0.1", "--port="+strconv.Itoa(in.port))
	in.cmd = exec.Command(bin, args...)
	in.cmd.Stdout = lockedWriter{in.mu, in.log}
	in.cmd.Stderr = lockedWriter{in.mu, in.log}
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { in.done <- in.cmd.Wait() }()
	t.Cleanup(func() {
		_ = in.cmd.Process.Kill()
		<-in.done
		if t.Failed() {
			in.mu.Lock()
			t.Logf("log of %s:\n%s", name, in.log.String())
			in.mu.Unlock()
		}
	})
	return in
}

func (in *instance) get(path string) (int, string) {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d%s", in.port, path))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metric returns the value of an unlabelled sample, or "" if absent.
func (in *instance) metric(name string) string {
	_, body := in.get("/metrics")
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return ""
}

func randomSuffix(t *testing.T) string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// Two instances with leader election: one leads and reconciles, the other
// stands by (ready, but never calls the driver). When the leader is killed
// the standby takes over within the lease duration (plus one retry
// period) and reconciles; SIGTERM stops it within 5s, releasing the lease.
func TestLeaderElectionFailoverAndShutdown(t *testing.T) {
	t.Parallel()
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	mc := versioned.NewForConfigOrDie(env.Config())
	suffix := randomSuffix(t) // node names are cluster-wide
	createMachineObjects(t, env, mc, ns)

	const (
		leaseDuration = 4 * time.Second
		retryPeriod   = 500 * time.Millisecond
	)
	args := []string{
		"--control-kubeconfig", env.Kubeconfig(), "--target-kubeconfig", env.Kubeconfig(),
		"--namespace", ns, "--driver", "sim", "--concurrent-syncs", "5",
		"--leader-elect-lease-duration", leaseDuration.String(), "--leader-elect-renew-deadline", "3s",
		"--leader-elect-retry-period", retryPeriod.String(), "-v", "1",
	}
	bin := binary(t)
	a := start(t, bin, "a", args...)
	b := start(t, bin, "b", args...)

	var leader, standby *instance
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		la, lb := a.metric("mcm_manager_leader"), b.metric("mcm_manager_leader")
		switch {
		case la == "1" && lb == "0":
			leader, standby = a, b
		case lb == "1" && la == "0":
			leader, standby = b, a
		default:
			return false, fmt.Sprintf("mcm_manager_leader: a=%q b=%q, want one 1 and one 0", la, lb)
		}
		return true, ""
	})
	t.Logf("leader %s, standby %s", leader.name, standby.name)
	for _, in := range []*instance{leader, standby} {
		testenv.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
			code, body := in.get("/readyz")
			return code == http.StatusOK, fmt.Sprintf("%s /readyz = %d %q", in.name, code, body)
		})
		if code, body := in.get("/healthz"); code != http.StatusOK {
			t.Errorf("%s /healthz = %d %q", in.name, code, body)
		}
	}
	// Main's garbage collector target, as the Go collector reports it
	// (the binary inherits this process's environment).
	if _, set := os.LookupEnv("GOGC"); !set {
		if got := leader.metric("go_gc_gogc_percent"); got != "40" {
			t.Errorf("%s go_gc_gogc_percent = %q, want 40: Main sets it when the environment has no GOGC", leader.name, got)
		}
	}
	if _, body := standby.get("/readyz"); !strings.Contains(body, "standby; lease held by") {
		t.Errorf("standby /readyz = %q, want it to say standby", body)
	}
	if _, body := leader.get("/readyz"); !strings.Contains(body, "leader; caches synced") {
		t.Errorf("leader /readyz = %q, want it to say leader", body)
	}

	first := "first-" + suffix
	createMachine(t, mc, ns, first)
	waitPhase(t, mc, ns, first, v1alpha1.MachineRunning, 2*time.Minute)

	// Only the leader reconciled: only it called its driver and has
	// controller metrics.
	_, leaderMetrics := leader.get("/metrics")
	_, standbyMetrics := standby.get("/metrics")
	for _, m := range []string{"mcm_cloud_api_driver_request_duration_seconds_count", "mcm_machine_items_total", "mcm_workqueue_adds_total"} {
		if !strings.Contains(leaderMetrics, m) {
			t.Errorf("leader /metrics lacks %s", m)
		}
		if strings.Contains(standbyMetrics, m) {
			t.Errorf("standby /metrics has %s: the standby reconciled", m)
		}
	}
	lease, err := env.Client().CoordinationV1().Leases(ns).Get(ctx, manager.DefaultLeaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatalf("lease %s/%s: %v %+v, want a holder", ns, manager.DefaultLeaseName, err, lease)
	}

	// Kill the leader: no release, so the standby must wait out the lease.
	killed := time.Now()
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-leader.done
	leader.done <- nil // for the cleanup
	// Expiry comes at most leaseDuration after the last renewal (which was at
	// most one retry period before the kill); the standby notices within one
	// jittered retry period; allow 2s for API calls on a loaded machine.
	limit := leaseDuration + 2*retryPeriod + 2*time.Second
	testenv.Eventually(t, limit, func(context.Context) (bool, string) {
		v := standby.metric("mcm_manager_leader")
		return v == "1", fmt.Sprintf("standby mcm_manager_leader = %q %v after the leader was killed", v, time.Since(killed))
	})
	t.Logf("standby took over %v after the leader was killed (lease duration %v)", time.Since(killed).Round(10*time.Millisecond), leaseDuration)
	testenv.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		code, body := standby.get("/readyz")
		return code == http.StatusOK && strings.Contains(body, "leader; caches synced"),
			fmt.Sprintf("new leader %s /readyz = %d %q, want it to say leader", standby.name, code, body)
	})

	second := "second-" + suffix
	createMachine(t, mc, ns, second)
	waitPhase(t, mc, ns, second, v1alpha1.MachineRunning, 2*time.Minute)

	// SIGTERM: clean exit within 5s, lease released.
	term := time.Now()
	if err := standby.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-standby.done:
		standby.done <- err
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want 0", err)
		}
		t.Logf("exited %v after SIGTERM", time.Since(term).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatalf("still running 5s after SIGTERM")
	}
	lease, err = env.Client().CoordinationV1().Leases(ns).Get(ctx, manager.DefaultLeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("lease holder after shutdown = %q, want it released", *h)
	}
	standby.mu.Lock()
	log := standby.log.String()
	standby.mu.Unlock()
	for _, line := range []string{"Workers stopped", "Controllers stopped; lease released"} {
		if !strings.Contains(log, line) {
			t.Errorf("log lacks %q", line)
		}
	}
}

func createMachineObjects(t *testing.T, env *testenv.Env, mc versioned.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloud", Namespace: ns}, Data: map[string][]byte{
		v1alpha1.UserDataKey: []byte("#cloud-config"), sim.CredentialsKey: []byte("token"),
	}}
	if _, err := env.Client().CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "sim", Namespace: ns},
		Provider:     sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}.RawExtension(),
		SecretRef:    &corev1.SecretReference{Name: "cloud", Namespace: ns},
	}
	if _, err := mc.MachineV1alpha1().MachineClasses(ns).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createMachine(t *testing.T, mc versioned.Interface, ns, name string) {
	t.Helper()
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "sim"}}}
	if _, err := mc.MachineV1alpha1().Machines(ns).Create(context.Background(), m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitPhase(t *testing.T, mc versioned.Interface, ns, name string, phase v1alpha1.MachinePhase, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, func(ctx context.Context) (bool, string) {
		m, err := mc.MachineV1alpha1().Machines(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return m.Status.CurrentStatus.Phase == phase, fmt.Sprintf("machine %s phase %q (%s), want %s",
			name, m.Status.CurrentStatus.Phase, m.Status.LastOperation.Description, phase)
	})
}

// TestDeployManifestsGrantEnough applies reference/deploy (the Deployment
// only as a server-side dry run: it needs an image) and runs the binary as
// the manifests' ServiceAccount, impersonated, with exactly the RBAC the
// manifests grant. With the opt-in rbac-sim.yaml, a machine reaches Running
// and is deleted again without a single denial. Without it, the manager's
// own controllers still meet none: only the sim driver's simulated kubelet
// is denied, so the machine gets its VM but no Node. A rule missing from
// the manifests fails this test instead of a user's installation, and so
// does a kubelet right creeping back into the manager's own manifests.
func TestDeployManifestsGrantEnough(t *testing.T) {
	t.Parallel()
	// They share the namespace mcm-system and cluster roles. Unlocked by
	// the first cleanup registered, which runs last, after the test's own
	// cleanups removed what it applied.
	deployManifests.Lock()
	t.Cleanup(deployManifests.Unlock)
	env := testenv.Get(t)
	ctx := context.Background()
	const ns, account = "mcm-system", "machine-controller-manager"
	apply := func(t *testing.T, files ...string) {
		t.Helper()
		for _, f := range files {
			if out, err := env.Kubectl(ctx, "apply", "-f", filepath.Join("deploy", f)); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		}
	}
	// Deleted in reverse, the namespace last and waited for, so that a
	// next run (-count) does not meet it still terminating.
	remove := func(t *testing.T, files ...string) {
		for _, f := range slices.Backward(files) {
			if out, err := env.Kubectl(context.Background(), "delete", "--ignore-not-found", "--timeout=1m", "-f", filepath.Join("deploy", f)); err != nil {
				t.Logf("deleting %s: %v\n%s", f, err, out)
			}
		}
	}
	base := []string{"namespace.yaml", "rbac-control.yaml", "rbac-target.yaml"}
	apply(t, base...)
	t.Cleanup(func() { remove(t, base...) })
	if out, err := env.Kubectl(ctx, "apply", "--dry-run=server", "-f", filepath.Join("deploy", "deployment.yaml")); err != nil {
		t.Fatalf("deployment.yaml: %v\n%s", err, out)
	}
	bin := binary(t)
	kubeconfig := impersonating(t, env, ns, account)
	mc := versioned.NewForConfigOrDie(env.Config())
	// run creates the machine objects and starts the binary. The returned
	// stop ends it with SIGTERM, releasing its lease for the next subtest's
	// instance; it also runs on cleanup, when a failure skipped it.
	run := func(t *testing.T) (in *instance, machine string, stop func()) {
		t.Helper()
		// Registered before start, so it runs after the binary has ended:
		// what a failed run left behind must not hold up the namespace.
		t.Cleanup(func() { forceDeleteMachineObjects(t, env, mc, ns) })
		createMachineObjects(t, env, mc, ns)
		machine = "rbac-" + randomSuffix(t)
		createMachine(t, mc, ns, machine)
		in = start(t, bin, "sa", "--control-kubeconfig", kubeconfig, "--target-kubeconfig", kubeconfig,
			"--namespace", ns, "--driver", "sim", "--concurrent-syncs", "5", "-v", "1")
		stop = sync.OnceFunc(func() { terminate(t, in) })
		t.Cleanup(stop)
		return in, machine, stop
	}

	t.Run("with rbac-sim.yaml", func(t *testing.T) {
		apply(t, "rbac-sim.yaml")
		t.Cleanup(func() { remove(t, "rbac-sim.yaml") })
		in, name, stop := run(t)
		waitPhase(t, mc, ns, name, v1alpha1.MachineRunning, 2*time.Minute)
		// A pod on the machine's node: the simulated kubelet runs it, the
		// drain evicts it and the kubelet ends its termination.
		pod := runPod(t, env, mc, ns, name)
		deleteMachineObjects(t, env, mc, ns, name)
		testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
			_, err := env.Client().CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprintf("pod %s/%s still there after the drain (%v)", pod.Namespace, pod.Name, err)
		})
		stop()
		if denied := forbiddenLines(in); len(denied) > 0 {
			t.Errorf("the manager hit RBAC denials as %s:\n%s", account, strings.Join(denied, "\n"))
		}
	})

	t.Run("without rbac-sim.yaml", func(t *testing.T) {
		in, name, stop := run(t)
		// The machine controller created the VM and says so; no Node can
		// join.
		testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
			m, err := mc.MachineV1alpha1().Machines(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			op := m.Status.LastOperation
			return m.Spec.ProviderID != "" && m.Status.CurrentStatus.Phase == v1alpha1.MachinePending &&
					op.Type == v1alpha1.MachineOperationCreate && op.Description == "Creating machine on cloud provider",
				fmt.Sprintf("machine %s: providerID %q, phase %q, last operation %s %q, want a VM and Pending",
					name, m.Spec.ProviderID, m.Status.CurrentStatus.Phase, op.Type, op.Description)
		})
		// The simulated kubelet is denied registering the VM's Node.
		testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			for _, line := range forbiddenLines(in) {
				if fromDriver(line) && strings.Contains(line, `cannot create resource \"nodes\"`) {
					return true, ""
				}
			}
			return false, "no denial of the simulated kubelet's node registration logged"
		})
		deleteMachineObjects(t, env, mc, ns, name)
		stop()
		var denied []string
		for _, line := range forbiddenLines(in) {
			if !fromDriver(line) {
				denied = append(denied, line)
			}
		}
		if len(denied) > 0 {
			t.Errorf("the manager's controllers hit RBAC denials as %s:\n%s", account, strings.Join(denied, "\n"))
		}
	})
}

// impersonating writes a kubeconfig that is the admin kubeconfig of env,
// impersonating the ServiceAccount ns/account.
func impersonating(t *testing.T, env *testenv.Env, ns, account string) string {
	t.Helper()
	kubeconfig, err := clientcmd.LoadFromFile(env.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range kubeconfig.AuthInfos {
		auth.Impersonate = "system:serviceaccount:" + ns + ":" + account
		auth.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), "sa.kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// runPod creates a pod bound to the node of the machine and waits until
// it runs.
func runPod(t *testing.T, env *testenv.Env, mc versioned.Interface, ns, machine string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	m, err := mc.MachineV1alpha1().Machines(ns).Get(ctx, machine, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "workload", Namespace: env.Namespace(t)},
		Spec: corev1.PodSpec{
			NodeName:                      m.Labels[v1alpha1.NodeLabelKey],
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{{Name: "c", Image: "sim"}},
		},
	}
	if pod, err = env.Client().CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		p, err := env.Client().CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, fmt.Sprintf("pod %s/%s on node %s: phase %q, want Running", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase)
	})
	return pod
}

// terminate ends the instance with SIGTERM, so that it releases its lease
// for the next instance, and waits for it to exit.
func terminate(t *testing.T, in *instance) {
	t.Helper()
	_ = in.cmd.Process.Signal(syscall.SIGTERM) // fails only if it exited already, which done tells
	select {
	case err := <-in.done:
		in.done <- err // for the cleanup of start
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("%s still running 10s after SIGTERM", in.name)
	}
}

// forbiddenLines are the lines of the instance's log that report an RBAC
// denial. An entry is one line: the logger quotes line breaks.
func forbiddenLines(in *instance) []string {
	in.mu.Lock()
	log := in.log.String()
	in.mu.Unlock()
	var lines []string
	for line := range strings.Lines(log) {
		if strings.Contains(line, "forbidden") {
			lines = append(lines, strings.TrimSuffix(line, "\n"))
		}
	}
	return lines
}

// fromDriver reports whether a log line comes from the driver's background
// work (the manager's logger "driver" and its children, such as the sim
// driver's driver/sim-kubelet), not from a controller.
func fromDriver(line string) bool {
	name, _, ok := strings.Cut(line, ": ")
	return ok && (name == "driver" || strings.HasPrefix(name, "driver/"))
}

// deleteMachineObjects deletes the machine and then the class and the
// secret of createMachineObjects, waiting for each to be gone (the running
// manager removes their finalizers): the deletion flow, too, runs with the
// manifests' RBAC.
func deleteMachineObjects(t *testing.T, env *testenv.Env, mc versioned.Interface, ns, machine string) {
	t.Helper()
	ctx := context.Background()
	machines, classes, secrets := mc.MachineV1alpha1().Machines(ns), mc.MachineV1alpha1().MachineClasses(ns), env.Client().CoreV1().Secrets(ns)
	for _, o := range []struct {
		kind   string
		name   string
		delete func(context.Context, string, metav1.DeleteOptions) error
		get    func(context.Context, string) error
	}{
		{"machine", machine, machines.Delete, func(ctx context.Context, name string) error {
			_, err := machines.Get(ctx, name, metav1.GetOptions{})
			return err
		}},
		{"machine class", "sim", classes.Delete, func(ctx context.Context, name string) error {
			_, err := classes.Get(ctx, name, metav1.GetOptions{})
			return err
		}},
		{"secret", "cloud", secrets.Delete, func(ctx context.Context, name string) error {
			_, err := secrets.Get(ctx, name, metav1.GetOptions{})
			return err
		}},
	} {
		if err := o.delete(ctx, o.name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting %s %s: %v", o.kind, o.name, err)
		}
		testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
			err := o.get(ctx, o.name)
			return apierrors.IsNotFound(err), fmt.Sprintf("%s %s still there (%v)", o.kind, o.name, err)
		})
	}
}

// forceDeleteMachineObjects removes what is left in ns of the machine
// objects of createMachineObjects and createMachine, finalizers and all,
// once no manager runs to remove them.
func forceDeleteMachineObjects(t *testing.T, env *testenv.Env, mc versioned.Interface, ns string) {
	ctx := context.Background()
	unfinalize := []byte(`{"metadata":{"finalizers":null}}`)
	var errs []error
	if list, err := mc.MachineV1alpha1().Machines(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, m := range list.Items {
			_, err := mc.MachineV1alpha1().Machines(ns).Patch(ctx, m.Name, types.MergePatchType, unfinalize, metav1.PatchOptions{})
			errs = append(errs, err, mc.MachineV1alpha1().Machines(ns).Delete(ctx, m.Name, metav1.DeleteOptions{}))
		}
	}
	_, err := mc.MachineV1alpha1().MachineClasses(ns).Patch(ctx, "sim", types.MergePatchType, unfinalize, metav1.PatchOptions{})
	errs = append(errs, err, mc.MachineV1alpha1().MachineClasses(ns).Delete(ctx, "sim", metav1.DeleteOptions{}))
	_, err = env.Client().CoreV1().Secrets(ns).Patch(ctx, "cloud", types.MergePatchType, unfinalize, metav1.PatchOptions{})
	errs = append(errs, err, env.Client().CoreV1().Secrets(ns).Delete(ctx, "cloud", metav1.DeleteOptions{}))
	for _, err := range errs {
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("cleaning up %s: %v", ns, err)
		}
	}
}
