package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/mcmkit/mcm/internal/controlplane"
)

// EnvRequire set to 1 (make test does) turns a missing environment from a
// skip into a failure. Where the binaries are (MCM_TESTENV_DIR) and when
// to keep a cluster's files (MCM_TESTENV_KEEP) are controlplane's.
const EnvRequire = "MCM_REQUIRE_TESTENV"

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
	ControlPlane controlplane.Options
	// Teardown runs after the package's tests, before its clusters stop.
	Teardown func()
}

// Env is one running cluster: etcd, kube-apiserver, kube-controller-manager
// and kube-scheduler, with the methods of controlplane.Cluster (Config,
// Client, Kubectl, the outages) and Namespace for tests. Its methods are
// safe for concurrent use. The package's TestMain stops it.
type Env struct {
	*controlplane.Cluster
}

// lazy starts a cluster on first use and remembers the outcome, so tests
// that skip early (or run with -run selecting only unit tests) pay nothing.
type lazy struct {
	name  string
	setup []func(context.Context, *rest.Config) error
	cp    controlplane.Options
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
	if opts.Teardown != nil {
		opts.Teardown()
	}

	keep := os.Getenv(controlplane.EnvKeep) == "1"
	for _, l := range []*lazy{pkg.control, pkg.target} {
		if l.env == nil { // never started, or failed and cleaned up then
			continue
		}
		if err := l.env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping %s cluster: %v\n", l.name, err)
		}
		if keep {
			fmt.Fprintf(os.Stderr, "testenv: kept %s cluster files in %s\n", l.name, l.env.Dir())
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

// GetOwn starts a cluster for t alone, configured as the package's control
// cluster, and stops it when t ends. It is for tests that disturb their
// cluster (stop its API server, restart its controller manager), so that
// the package's other tests can share theirs and run beside them.
func GetOwn(t testing.TB) *Env {
	t.Helper()
	pkg.mu.Lock()
	control := pkg.control
	pkg.mu.Unlock()
	if control == nil {
		t.Fatal("testenv: the package's TestMain must call testenv.Main")
	}
	own := &lazy{name: "own", setup: control.setup, cp: control.cp}
	// Registered before get's, so it runs after: a failed test's logs are
	// read from the cluster before it stops.
	t.Cleanup(func() {
		if own.env == nil {
			return
		}
		if err := own.env.Stop(); err != nil {
			t.Errorf("testenv: stopping %s's cluster: %v", t.Name(), err)
		}
		if os.Getenv(controlplane.EnvKeep) == "1" {
			t.Logf("testenv: kept %s's cluster files in %s", t.Name(), own.env.Dir())
		}
	})
	return get(t, func() *lazy { return own })
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
	if _, err := controlplane.BinDir(); err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("testenv: %v (%s=1 requires the environment)", err, EnvRequire)
		}
		t.Skipf("testenv: %v", err)
	}
	l := which()
	l.once.Do(func() { l.start(t) })
	if l.err != nil {
		t.Fatalf("testenv: starting the %s cluster: %v", l.name, l.err)
	}
	env := l.env
	marks := env.LogMarks()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testenv: %s cluster logs during this test:\n%s", l.name, env.LogsSince(marks, 40))
		}
	})
	return env
}

// start starts the cluster for the first test that needs it, and prints
// the component logs of a failed start there, once.
func (l *lazy) start(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := controlplane.Start(ctx, l.name, l.cp, l.setup...)
	if err != nil {
		if se, ok := errors.AsType[*controlplane.StartError](err); ok {
			t.Logf("testenv: %s cluster component logs:\n%s", l.name, se.Logs)
			err = se.Err
		}
		l.err = err
		return
	}
	l.env = &Env{Cluster: c}
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
	if _, err := e.Client().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testenv: creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Deletion finishes in the background through the namespace
		// controller; later tests use other namespaces.
		if err := e.Client().CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("testenv: deleting namespace %s: %v", name, err)
		}
	})
	if err := e.WaitForServiceAccount(ctx, name); err != nil {
		t.Fatalf("testenv: namespace %s never got its default service account: %v", name, err)
	}
	return name
}

// Eventually polls cond every 200ms until it holds, failing t after timeout
// with cond's last explanation. cond reports whether it holds and, if not,
// why, in words that help whoever reads the failure.
func Eventually(t testing.TB, timeout time.Duration, cond func(context.Context) (bool, string)) {
	t.Helper()
	if why, ok := Poll(timeout, cond); !ok {
		t.Fatalf("not within %v: %s", timeout, why)
	}
}

// Poll calls cond every 200ms until it holds or timeout has passed, and
// returns cond's last explanation and whether it held. Each call gets a
// context of its own (30s), not one bounded by timeout, so that the last
// explanation is about the objects rather than a deadline that cut the
// call's reads short; a call that starts before timeout runs to its end.
func Poll(timeout time.Duration, cond func(context.Context) (bool, string)) (string, bool) {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ok, why := cond(ctx)
		cancel()
		if ok {
			return "", true
		}
		if time.Now().After(deadline) {
			return why, false
		}
		time.Sleep(200 * time.Millisecond)
	}
}
