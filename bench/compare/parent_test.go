//go:build linux

package compare

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// binaries are what the runs start, built once per comparison.
type binaries struct {
	Reference string `json:"reference,omitempty"` // mcm's reference manager with the simcloud driver (./reference)
	SimCloud  string `json:"simCloud,omitempty"`  // the simulated cloud both managers' drivers call (./simcloud)
	MCM       string `json:"mcm,omitempty"`       // MCM's machine-controller-manager
	MC        string `json:"mc,omitempty"`        // MCM's provider machine controller (bench/mcm/provider)
	MCMCRDs   string `json:"mcmCRDs,omitempty"`   // MCM's CRDs, in its module (kubernetes/crds)
}

// runSpec is one scenario of one system, as the parent hands it to a child.
type runSpec struct {
	Scenario string   `json:"scenario"`
	Machines int      `json:"machines"`
	System   string   `json:"system"`
	Bins     binaries `json:"bins"`
	// BootModel names how Boot was chosen (bootReady or bootJittered).
	BootModel   string   `json:"bootModel"`
	Boot        bootTime `json:"boot"`
	RolloutBoot bootTime `json:"rolloutBoot"`
	// UpdateDelay is how long I's node agent takes to update a node.
	UpdateDelay time.Duration `json:"updateDelay"`
	// BootstrapToken puts MCM's bootstrap token placeholder into the
	// user data.
	BootstrapToken bool          `json:"bootstrapToken,omitempty"`
	Settle         time.Duration `json:"settle"`
	Steady         time.Duration `json:"steady"`
	Timeout        time.Duration `json:"timeout"`
	// ProfileDir receives mcm's heap profile at the end of X's steady
	// state; empty for none.
	ProfileDir string `json:"profileDir,omitempty"`
	// ManagerEnv is added to the environment of the system's manager
	// processes (not the simulated cloud's), e.g. GOMEMLIMIT=130MiB.
	ManagerEnv []string `json:"managerEnv,omitempty"`
	// Out is the file the child writes its result to.
	Out string `json:"out"`
}

func (s runSpec) String() string {
	return fmt.Sprintf("%s N=%d (boot %s) %s", s.Scenario, s.Machines, s.bootLabel(), systemLabels[s.System])
}

// bootLabel is how the VMs of the measured phase boot: R's rollout boot,
// the model's boot otherwise.
func (s runSpec) bootLabel() string {
	if s.Scenario == "R" {
		return s.RolloutBoot.String()
	}
	return s.Boot.String()
}

// compare builds what the systems need and runs every scenario for each
// system, one child process each, then prints the table.
func compare(b *testing.B, opts options) {
	if b.N != 1 {
		b.Fatalf("each scenario takes a fresh control plane and up to many minutes: use -benchtime 1x (b.N = %d)", b.N)
	}
	dir := b.TempDir()
	bins := build(b, dir, opts.systems)
	var runs []runSpec
	for _, sc := range opts.scenarios {
		models := []bootModel{{Name: bootJittered, Boot: opts.boot}}
		if slices.Contains(bootModelScenarios, sc.name) {
			models = opts.bootModels
		}
		for _, n := range sc.sizes {
			for _, model := range models {
				for _, system := range opts.systems {
					runs = append(runs, runSpec{
						Scenario: sc.name, Machines: n, System: system, Bins: bins,
						BootModel: model.Name, Boot: model.Boot, RolloutBoot: opts.rolloutBoot, UpdateDelay: opts.updateDelay, BootstrapToken: opts.bootstrapToken,
						Settle: opts.settle, Steady: opts.steady, Timeout: opts.runTimeout, ProfileDir: opts.profileDir, ManagerEnv: opts.managerEnv,
						Out: filepath.Join(dir, fmt.Sprintf("%s-%d-%s-%s.json", sc.name, n, model.Name, system)),
					})
				}
			}
		}
	}
	progress("%d runs: %s", len(runs), strings.Join(runNames(runs), ", "))
	var results []result
	start := time.Now()
	for i, spec := range runs {
		b.Run(fmt.Sprintf("%s-%d-%s/%s", spec.Scenario, spec.Machines, spec.BootModel, spec.System), func(b *testing.B) {
			progress("run %d of %d: %s (%v so far)", i+1, len(runs), spec, time.Since(start).Round(time.Second))
			res := runChild(b, spec, opts.lock)
			results = append(results, res)
			if res.Error != "" {
				b.Errorf("%s: %s", spec, res.Error)
				return
			}
			b.ReportMetric(res.Wall.Seconds(), "s")
			b.ReportMetric(res.writesPerMachine(), "writes/machine")
			b.ReportMetric(res.managerWritesPerMachine(), "manager-writes/machine")
			b.ReportMetric(float64(res.PeakRSS)/(1<<20), "MiB-peak-rss")
			b.ReportMetric(res.CPU.Seconds(), "cpu-s")
			b.ReportMetric(0, "ns/op") // one run: the figures above say it
		})
	}
	fmt.Fprintf(os.Stdout, "\n%s", table(results, opts.systems))
	progress("done in %v", time.Since(start).Round(time.Second))
}

func runNames(runs []runSpec) []string {
	var out []string
	for _, r := range runs {
		if name := fmt.Sprintf("%s:%d", r.Scenario, r.Machines); !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// build compiles the binaries of the systems into dir.
func build(b *testing.B, dir string, systems []string) binaries {
	var bins binaries
	goBuild := func(what, moduleDir string, args ...string) {
		start := time.Now()
		cmd := exec.Command("go", append([]string{"build"}, args...)...)
		cmd.Dir = moduleDir
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("building %s: %v\n%s", what, err, out)
		}
		progress("built %s in %v", what, time.Since(start).Round(100*time.Millisecond))
	}
	// The test runs in bench/compare.
	benchDir, mcmDir := "..", filepath.Join("..", "mcm")
	bins.SimCloud = filepath.Join(dir, "simcloud")
	goBuild("the simulated cloud's server", benchDir, "-o", bins.SimCloud, "./compare/simcloud")
	if slices.Contains(systems, systemRef) {
		bins.Reference = filepath.Join(dir, "mcm-reference")
		goBuild("mcm's reference manager with the simulated cloud's driver", benchDir, "-o", bins.Reference, "./compare/reference")
	}
	if slices.Contains(systems, systemMCM) {
		progress("building Gardener MCM v0.62.1 from the Go module proxy (the first time it downloads its modules and compiles for minutes)")
		bins.MCM = filepath.Join(dir, "machine-controller-manager")
		goBuild("MCM's machine-controller-manager", mcmDir, "-o", bins.MCM, "github.com/gardener/machine-controller-manager/cmd/machine-controller-manager")
		bins.MC = filepath.Join(dir, "machine-controller")
		goBuild("MCM's provider machine controller with the simulated cloud's driver", mcmDir, "-o", bins.MC, "./provider")
		cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/gardener/machine-controller-manager")
		cmd.Dir = mcmDir
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("locating MCM's module: %v", err)
		}
		bins.MCMCRDs = filepath.Join(strings.TrimSpace(string(out)), "kubernetes", "crds")
		if _, err := os.Stat(bins.MCMCRDs); err != nil {
			b.Fatalf("MCM's CRDs: %v", err)
		}
	}
	return bins
}

// runChild runs spec in a child process of this test binary, holding the
// lock file, if any, for the child's whole run, and returns its result.
// Its progress lines go to this process's stderr as they come.
func runChild(b *testing.B, spec runSpec, lock string) result {
	failed := func(format string, args ...any) result {
		return result{Scenario: spec.Scenario, Machines: spec.Machines, Boot: spec.bootLabel(), System: spec.System, Error: fmt.Sprintf(format, args...)}
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		b.Fatal(err)
	}
	if lock != "" {
		unlock, err := lockFile(lock)
		if err != nil {
			return failed("locking %s: %v", lock, err)
		}
		defer unlock()
	}
	logPath := filepath.Join(b.TempDir(), "child.log")
	log, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(os.Args[0],
		"-test.run=^$", "-test.bench=^BenchmarkRun$", "-test.benchtime=1x",
		"-test.timeout="+(spec.Timeout+15*time.Minute).String())
	cmd.Env = append(os.Environ(), envRun+"="+string(raw))
	cmd.Stdout = log
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return failed("starting the run: %v", err)
	}
	// Progress lines pass through; everything also goes to the log,
	// which is shown when the run fails.
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		s := bufio.NewScanner(io.TeeReader(stderr, log))
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			if line := s.Text(); strings.Contains(line, " compare: ") {
				fmt.Fprintln(os.Stderr, "  "+line)
			}
		}
	}()
	<-forwarded
	waitErr := cmd.Wait()
	raw, err = os.ReadFile(spec.Out)
	if err != nil {
		return failed("the run ended (%v) without a result; its output:\n%s", waitErr, tailOf(logPath))
	}
	var res result
	if err := json.Unmarshal(raw, &res); err != nil {
		return failed("reading the result: %v", err)
	}
	if waitErr != nil && res.Error == "" {
		res.Error = fmt.Sprintf("the run failed after its result (%v); its output:\n%s", waitErr, tailOf(logPath))
	}
	return res
}

func tailOf(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-60):], "\n")
}

// lockFile takes an exclusive lock on the file at path, waiting for it if
// another process holds it, and returns the function that releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		progress("waiting for the lock %s", path)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
