package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// KubeVersion is the Kubernetes release the environment runs; hack/testenv.sh
// builds the same one.
const KubeVersion = "v1.37.1"

// Environment variables that steer the environment.
const (
	// EnvDir locates the built binaries in $MCM_TESTENV_DIR/bin.
	EnvDir = "MCM_TESTENV_DIR"
	// EnvRequire set to 1 (make test does) turns a missing environment from
	// a skip into a failure.
	EnvRequire = "MCM_REQUIRE_TESTENV"
	// EnvKeep set to 1 keeps the temp dirs (etcd data, certificates, logs)
	// after the run for inspection.
	EnvKeep = "MCM_TESTENV_KEEP"
)

// startTimeout bounds how long one cluster may take to come up; a loaded
// two-core machine needs well under a minute.
const startTimeout = 3 * time.Minute

// Options configure the environment of one test package.
type Options struct {
	// Setup runs against the control cluster once it is up, before any test
	// uses it, e.g. crds.Install.
	Setup []func(context.Context, *rest.Config) error
	// TargetSetup runs against the separate target cluster when a test asks
	// for one with GetTarget.
	TargetSetup []func(context.Context, *rest.Config) error
	// ControlPlane configures the components of the package's clusters.
	ControlPlane ControlPlane
}

// DefaultNodeMonitorGracePeriod is kube-controller-manager's
// --node-monitor-grace-period in the environment: short, so that tests see
// a silent node go Unknown quickly, and still twice the 10 s in which a
// kubelet (and the simulated one, by default) renews its lease.
const DefaultNodeMonitorGracePeriod = 20 * time.Second

// ControlPlane configures a cluster's components where a test needs other
// settings than the environment's. The zero value is the default.
type ControlPlane struct {
	// NodeMonitorGracePeriod is kube-controller-manager's
	// --node-monitor-grace-period: how long a node's lease may go
	// unrenewed before the node is marked Unknown. It must exceed the
	// lease renew period of the cluster's kubelets with margin, so tests
	// whose simulated kubelets renew less often (thousands of nodes on a
	// small machine) need more than the default. Zero means
	// DefaultNodeMonitorGracePeriod.
	NodeMonitorGracePeriod time.Duration
}

// Env is one running cluster: etcd, kube-apiserver, kube-controller-manager
// and kube-scheduler. Its methods are safe for concurrent use.
type Env struct {
	cluster *cluster
	client  kubernetes.Interface
	kubectl string
}

// lazy starts a cluster on first use and remembers the outcome, so tests
// that skip early (or run with -run selecting only unit tests) pay nothing.
type lazy struct {
	name  string
	setup []func(context.Context, *rest.Config) error
	cp    ControlPlane
	once  sync.Once
	env   *Env
	err   error
}

var pkg struct {
	mu      sync.Mutex
	started bool // Main was called
	control *lazy
	target  *lazy
}

// Main runs the tests of a package and stops its clusters afterwards. Call it
// from TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{...}) }
//
// Clusters start on the first Get or GetTarget, not here.
func Main(m *testing.M, opts Options) {
	flag.Parse()
	pkg.mu.Lock()
	pkg.started = true
	pkg.control = &lazy{name: "control", setup: opts.Setup, cp: opts.ControlPlane}
	pkg.target = &lazy{name: "target", setup: opts.TargetSetup, cp: opts.ControlPlane}
	pkg.mu.Unlock()

	code := m.Run()

	keep := os.Getenv(EnvKeep) == "1"
	for _, l := range []*lazy{pkg.control, pkg.target} {
		if l.env == nil { // never started, or failed and cleaned up then
			continue
		}
		if err := l.env.cluster.stop(keep); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping %s cluster: %v\n", l.name, err)
		}
		if keep {
			fmt.Fprintf(os.Stderr, "testenv: kept %s cluster files in %s\n", l.name, l.env.cluster.dir)
		}
	}
	os.Exit(code)
}

// Get returns the package's control cluster, starting it on first use. It
// skips t with one line naming make testenv when the binaries are missing, or
// fails t when MCM_REQUIRE_TESTENV=1. When t fails, the last lines each
// component logged during t are printed.
func Get(t testing.TB) *Env {
	t.Helper()
	return get(t, func() *lazy { return pkg.control })
}

// GetTarget returns a second, separate cluster of the package, for tests in
// which the control cluster (Machines) and the target cluster (Nodes, Pods)
// differ.
func GetTarget(t testing.TB) *Env {
	t.Helper()
	return get(t, func() *lazy { return pkg.target })
}

func get(t testing.TB, which func() *lazy) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped in -short mode")
	}
	pkg.mu.Lock()
	started := pkg.started
	pkg.mu.Unlock()
	if !started {
		t.Fatal("testenv: the package's TestMain must call testenv.Main")
	}
	bin, missing := binDir()
	if missing != "" {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("testenv: %s (%s=1 requires the environment)", missing, EnvRequire)
		}
		t.Skipf("testenv: %s; run 'make testenv' to build it", missing)
	}
	l := which()
	l.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		var logs string
		l.env, logs, l.err = start(ctx, l.name, bin, l.cp, l.setup)
		if l.err != nil && logs != "" {
			// Once, in the first test that needed the cluster.
			t.Logf("testenv: %s cluster component logs:\n%s", l.name, logs)
		}
	})
	if l.err != nil {
		t.Fatalf("testenv: starting the %s cluster: %v", l.name, l.err)
	}
	env := l.env
	marks := env.cluster.logMarks()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testenv: %s cluster logs during this test:\n%s", l.name, env.cluster.tails(marks, 40))
		}
	})
	return env
}

// BinDir returns the directory of the environment's binaries, or an error
// naming what is missing and how to build it.
func BinDir() (string, error) {
	dir, missing := binDir()
	if missing != "" {
		return "", fmt.Errorf("testenv: %s; run 'make testenv' to build it", missing)
	}
	return dir, nil
}

// Start runs a cluster outside of tests, e.g. for a local demo: the same
// control plane as Get, named name, with setup applied. Stop it with Stop;
// MCM_TESTENV_KEEP=1 keeps its files. On failure the error carries the tail
// of the component logs.
func Start(ctx context.Context, name string, setup ...func(context.Context, *rest.Config) error) (*Env, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	env, logs, err := start(ctx, name, bin, ControlPlane{}, setup)
	if err != nil && logs != "" {
		return nil, fmt.Errorf("%w\n%s", err, logs)
	}
	return env, err
}

// Stop ends the cluster's components and removes its files (unless
// MCM_TESTENV_KEEP=1). Only for clusters from Start: Main stops the
// clusters of tests.
func (e *Env) Stop() error {
	return e.cluster.stop(os.Getenv(EnvKeep) == "1")
}

// Dir is the cluster's temp dir: data, certificates, kubeconfig and logs.
func (e *Env) Dir() string { return e.cluster.dir }

// binDir finds the environment's binaries, or says what is missing.
func binDir() (dir, missing string) {
	root := os.Getenv(EnvDir)
	if root == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Sprintf("%s is unset and the home directory is unknown", EnvDir)
		}
		root = filepath.Join(home, ".cache", "mcm", "testenv", KubeVersion)
	}
	dir = filepath.Join(root, "bin")
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Sprintf("%s not found in %s", b, dir)
		}
	}
	return dir, ""
}

// start brings up a cluster and runs setup against it. On failure it also
// returns the tail of the component logs, since nobody else will print them.
func start(ctx context.Context, name, bin string, cp ControlPlane, setup []func(context.Context, *rest.Config) error) (*Env, string, error) {
	keep := os.Getenv(EnvKeep) == "1"
	c, err := startCluster(ctx, name, bin, cp)
	if err != nil {
		if c == nil {
			return nil, "", err
		}
		logs := c.tails(nil, 60)
		_ = c.stop(keep)
		return nil, logs, err
	}
	client, err := kubernetes.NewForConfig(c.config)
	if err != nil {
		_ = c.stop(keep)
		return nil, "", fmt.Errorf("creating client: %w", err)
	}
	env := &Env{cluster: c, client: client, kubectl: filepath.Join(bin, "kubectl")}
	for _, f := range setup {
		if err := f(ctx, env.Config()); err != nil {
			logs := c.tails(nil, 60)
			_ = c.stop(keep)
			return nil, logs, fmt.Errorf("setup of the %s cluster: %w", name, err)
		}
	}
	return env, "", nil
}

// Config returns a fresh copy of the admin client configuration; callers may
// change it freely.
func (e *Env) Config() *rest.Config {
	return rest.CopyConfig(e.cluster.config)
}

// Kubeconfig is the path of a kubeconfig file for the admin user.
func (e *Env) Kubeconfig() string { return e.cluster.kubeconfig }

// Client is a clientset for the admin user.
func (e *Env) Client() kubernetes.Interface { return e.client }

// Kubectl runs kubectl against the cluster and returns its combined output.
func (e *Env) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, e.kubectl, append([]string{"--kubeconfig", e.cluster.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a fresh namespace for t, named after the test, waits
// until pods can be created in it (its default service account exists) and
// deletes it when t ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	suffix := make([]byte, 3)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	base := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 50 {
		base = strings.TrimRight(base[:50], "-")
	}
	name := base + "-" + hex.EncodeToString(suffix)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"mcm.test/test": "true"}}}
	if _, err := e.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testenv: creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Deletion finishes in the background through the namespace
		// controller; later tests use other namespaces.
		if err := e.client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("testenv: deleting namespace %s: %v", name, err)
		}
	})
	if err := waitForServiceAccount(ctx, e.client, name, nil); err != nil {
		t.Fatalf("testenv: namespace %s never got its default service account: %v", name, err)
	}
	return name
}

// Eventually polls cond every 200ms until it holds, failing t after timeout
// with cond's last explanation. cond reports whether it holds and, if not,
// why, in words that help whoever reads the failure.
func Eventually(t testing.TB, timeout time.Duration, cond func(context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var ok bool
		ok, last = cond(ctx)
		return ok, nil
	})
	if err != nil {
		t.Fatalf("not within %v: %s", timeout, last)
	}
}
