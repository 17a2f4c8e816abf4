// Command run runs MCM v0.62.1's integration suite
// (../test/integration/controller) against mcm's reference manager on a
// local control plane, and ends with a table of the specs' results.
//
// It builds the reference binary (make build) and the suite's test binary,
// starts a local control plane (internal/controlplane, the test environment's) with
// mcm's CRDs, creates the control namespace and the secret of the suite's
// machine classes, lays out dev/mcm, the stand-in for the clone of MCM's
// repository that the suite expects, and runs the suite with the
// environment it reads. The suite starts both processes through their
// Makefiles' start targets.
//
// The suite runs in a PID namespace of its own: before and after the specs
// it kills, with SIGKILL, every process on the machine whose command line
// starts with "machine-controller-manager --control-kubeconfig",
// "machine-controller --control-kubeconfig", "make --directory=../../.."
// and a few more (stopMCM in its framework.go), which would hit the
// processes of anyone else on the machine. In the namespace it sees only
// those of this run, and whatever is left of them dies with it.
//
// Arguments after the flags, and after --, go to the suite's test binary:
// run -- -ginkgo.focus='machine resource'.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/internal/controlplane"
)

const (
	// namespace is the control namespace; the machine classes' secretRef
	// names it (.ci/controllers-test/machineClasses).
	namespace = "mcm-e2e"
	// secretName is the machine classes' secret.
	secretName = "test-mc-secret"
	// testPackage is the suite, relative to the suite's module; the
	// framework finds everything else relative to it.
	testPackage = "test/integration/controller"
)

// frameworkEnv are the variables the framework and the Makefiles read that
// this runner does not set: taken from the caller's environment they would
// change what runs (a seed cluster, another deployment, string tags), and
// make's variables from an outer make (make e2e) would hand the suite's
// make a job server it cannot reach.
var frameworkEnv = []string{
	"TARGET_CLUSTER_NAME", "IS_CONTROL_CLUSTER_SEED", "TAGS_ARE_STRINGS", "GNA_SECRET_NAME",
	"PRESERVE_CRD_AT_END", "IS_VIRTUAL_PROVIDER", "MACHINE_CONTROLLER_MANAGER_DEPLOYMENT_NAME",
	"LEADER_ELECT", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES",
}

func main() {
	suiteDir := flag.String("suite", "..", "directory of the suite's module (the provider repository's root)")
	timeout := flag.Duration("timeout", time.Hour, "how long the suite may run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *suiteDir, *timeout, flag.Args()); err != nil {
		fmt.Fprintf(os.Stderr, "mcmsuite: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, suiteDir string, timeout time.Duration, testArgs []string) error {
	start := time.Now()
	suite, err := filepath.Abs(suiteDir)
	if err != nil {
		return err
	}
	logs := filepath.Join(suite, ".ci", "controllers-test", "logs")
	if err := fresh(logs); err != nil {
		return err
	}

	if err := step(ctx, "building the reference binary", suite, "make", "build"); err != nil {
		return err
	}
	testBin := filepath.Join(suite, "bin", "controller.test")
	progress("the first build downloads MCM v0.62.1 and its modules from the Go module proxy and compiles them for minutes")
	if err := step(ctx, "building the suite", suite, "go", "test", "-c", "-o", testBin, "./"+testPackage); err != nil {
		return err
	}
	built := time.Since(start)

	progress("starting the control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) with mcm's CRDs")
	env, err := controlplane.Start(ctx, "mcmsuite", controlplane.Options{}, crds.Install)
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "mcmsuite: stopping the control plane: %v\n", err)
		}
	}()
	if err := createNamespace(ctx, env.Client()); err != nil {
		return err
	}
	stateFile, err := layOutDev(suite)
	if err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	classes := filepath.Join(suite, ".ci", "controllers-test", "machineClasses")
	vars := []string{
		"CONTROL_KUBECONFIG=" + env.Kubeconfig(),
		"TARGET_KUBECONFIG=" + env.Kubeconfig(),
		"CONTROL_CLUSTER_NAMESPACE=" + namespace,
		"MACHINECLASS_V1=" + filepath.Join(classes, "v1machineclass.yaml"),
		"MACHINECLASS_V2=" + filepath.Join(classes, "v2machineclass.yaml"),
		"SIM_STATE_FILE=" + stateFile,
		"MC_PORT=" + strconv.Itoa(ports[0]),
		"MCM_PORT=" + strconv.Itoa(ports[1]),
	}
	progress("running the suite; the controllers' logs are in %s", logs)
	suiteStart := time.Now()
	report := filepath.Join(logs, "report.json")
	suiteErr := runSuite(ctx, suite, testBin, timeout, vars, report, logs, testArgs)
	suiteTime := time.Since(suiteStart)

	specs, err := readReport(report)
	if err != nil {
		return errors.Join(suiteErr, err)
	}
	failed := printTable(os.Stdout, specs)
	fmt.Printf("\nbuild %v, suite %v, all %v\n", built.Round(time.Second), suiteTime.Round(time.Second), time.Since(start).Round(time.Second))
	switch {
	case failed > 0:
		return fmt.Errorf("%d of the suite's specs and nodes failed", failed)
	case suiteErr != nil:
		return suiteErr
	}
	return nil
}

// environ is this process's environment without frameworkEnv.
func environ() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(frameworkEnv, name)
	})
}

// createNamespace creates the control namespace and the machine classes'
// secret: the sim driver wants userData and an apiToken.
func createNamespace(ctx context.Context, client kubernetes.Interface) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: namespace},
		Data:       map[string][]byte{"userData": []byte("#cloud-config"), "apiToken": []byte("mcm-e2e")},
	}
	if _, err := client.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating secret %s/%s: %w", namespace, secretName, err)
	}
	return nil
}

// layOutDev creates dev/ afresh, as a provider repository's dev/ holds the
// clone of MCM's repository: dev/mcm with the Makefile whose start target
// runs the machine-controller-manager process (mcm/Makefile), mcm's CRDs
// in kubernetes/crds, where the suite applies MCM's CRDs from (they are
// installed already, so it finds them there, and deletes them at the
// end), and .git, which the suite checks for. It returns the path of the
// simulated cloud's state file, which does not exist yet: the cloud starts
// empty.
func layOutDev(suite string) (string, error) {
	dev := filepath.Join(suite, "dev")
	if err := fresh(dev); err != nil {
		return "", err
	}
	crdDir := filepath.Join(dev, "mcm", "kubernetes", "crds")
	for _, dir := range []string{crdDir, filepath.Join(dev, "mcm", ".git")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
	}
	if err := os.Symlink(filepath.Join("..", "..", "mcm", "Makefile"), filepath.Join(dev, "mcm", "Makefile")); err != nil {
		return "", err
	}
	files, err := crds.Files()
	if err != nil {
		return "", err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(crdDir, name), data, 0o644); err != nil {
			return "", err
		}
	}
	return filepath.Join(dev, "sim-cloud.json"), nil
}

// runSuite runs the suite's test binary from its package directory, as
// `go test` would, in a PID namespace of its own (see the package
// documentation), with its output on stdout and in logs/suite.log.
func runSuite(ctx context.Context, suite, testBin string, timeout time.Duration, vars []string, report, logs string, testArgs []string) error {
	log, err := os.Create(filepath.Join(logs, "suite.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	args := []string{"--pid", "--fork", "--mount-proc", "--kill-child"}
	if os.Geteuid() != 0 {
		// A PID namespace needs CAP_SYS_ADMIN, which a user namespace
		// grants.
		args = append([]string{"--user", "--map-root-user"}, args...)
	}
	args = append(args, testBin, "-test.v", "-test.timeout="+timeout.String(),
		"-ginkgo.v", "-ginkgo.no-color", "-ginkgo.json-report="+report)
	cmd := exec.CommandContext(ctx, "unshare", append(args, testArgs...)...)
	cmd.Dir = filepath.Join(suite, testPackage)
	cmd.Env = append(environ(), vars...)
	cmd.Stdout = io.MultiWriter(os.Stdout, log)
	cmd.Stderr = cmd.Stdout
	// If this process dies, unshare dies with it, and with unshare
	// (--kill-child) the namespace and everything in it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("the suite: %w", err)
	}
	return nil
}

// spec is what the table shows of one entry of ginkgo's JSON report
// (types.SpecReport).
type spec struct {
	ContainerHierarchyTexts []string
	LeafNodeType            string
	LeafNodeText            string
	State                   string
	RunTime                 time.Duration
	Failure                 struct {
		Message  string
		Location struct {
			FileName   string
			LineNumber int
		}
	}
}

// readReport reads the spec reports of ginkgo's JSON report, one suite.
func readReport(path string) ([]spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the suite wrote no report: %w", err)
	}
	var suites []struct{ SpecReports []spec }
	if err := json.Unmarshal(data, &suites); err != nil {
		return nil, fmt.Errorf("reading the suite's report %s: %w", path, err)
	}
	var out []spec
	for _, s := range suites {
		out = append(out, s.SpecReports...)
	}
	return out, nil
}

// printTable prints one line per spec, and per suite node (BeforeSuite,
// AfterSuite), with the first line of each failure and where it happened,
// and returns how many failed.
func printTable(w io.Writer, specs []spec) (failed int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nRESULT\tTIME\tSPEC")
	passed, skipped, total := 0, 0, 0
	for _, s := range specs {
		name := s.LeafNodeText
		if s.LeafNodeType != "It" {
			name = "[" + s.LeafNodeType + "]"
		} else {
			total++
			// The first container is the suite's one Describe.
			name = strings.Join(append(s.ContainerHierarchyTexts[min(1, len(s.ContainerHierarchyTexts)):], name), " › ")
		}
		bad := !slices.Contains([]string{"passed", "skipped", "pending"}, s.State)
		result := s.State
		switch {
		case bad:
			result = strings.ToUpper(s.State)
			failed++
		case s.LeafNodeType != "It":
		case s.State == "passed":
			passed++
		default:
			skipped++
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\n", result, s.RunTime.Round(100*time.Millisecond), name)
		if bad && s.Failure.Message != "" {
			first, _, _ := strings.Cut(strings.TrimSpace(s.Failure.Message), "\n")
			fmt.Fprintf(tw, "\t\t  %s (%s:%d)\n", first, filepath.Base(s.Failure.Location.FileName), s.Failure.Location.LineNumber)
		}
	}
	fmt.Fprintf(tw, "\n%d of %d specs passed, %d skipped\n", passed, total, skipped)
	_ = tw.Flush()
	return failed
}

// step runs name in dir with its output on stderr, saying every 30 s
// that it still runs: a cold build compiles for minutes without a word.
func step(ctx context.Context, what, dir, name string, args ...string) error {
	progress("%s: %s %s", what, name, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = environ()
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	done := make(chan struct{})
	defer close(done)
	go func() {
		start := time.Now()
		tick := time.NewTicker(30 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				progress("still %s (%v)", what, time.Since(start).Round(time.Second))
			}
		}
	}()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// fresh removes dir and creates it empty.
func fresh(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o755)
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close() // held until all are found, so that they differ
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s mcmsuite: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
