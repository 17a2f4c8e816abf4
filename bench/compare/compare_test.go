//go:build linux

// Package compare runs the same scenarios against Gardener's
// machine-controller-manager v0.62.1 and against mcm's reference manager,
// each on a fresh local control plane, and prints one table of what each
// took: wall time, API writes by verb and resource, writes per machine,
// peak RSS and CPU seconds of the managers' processes, and the ratio mcm /
// MCM. bench/README.md says how to run it and how to read the table.
//
// BenchmarkCompare runs both systems; BenchmarkReference runs mcm alone,
// and needs neither MCM's module nor the network. Each scenario of each
// system runs in a child process of the test binary (BenchmarkRun), which
// starts its own control plane (package testenv gives one per process),
// holds the lock file MCM_BENCH_LOCK for its whole run if one is named,
// and hands its figures back in a file.
//
// Both systems drive the same simulated cloud, the reference manager's
// "sim" driver with its simulated kubelet and node agent (which carries
// out scenario I's in-place updates by MCM's label protocol), served by
// the simcloud command over a unix socket in a process of its own: MCM's provider machine
// controller (bench/mcm, built from the module proxy with MCM's own
// dependencies) and the bench's build of the reference manager
// (./reference, with its "simcloud" driver) call it. The managers' RSS
// and CPU leave that process out. Nodes register once, Ready, and are not heartbeated: the
// simulated kubelets' leases and status reports are set to an hour and
// kube-controller-manager's node monitor grace period to two, so that no
// run pays for heartbeats and no node goes NotReady.
package compare

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcmkit/mcm/internal/controlplane"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// nodeMonitorGracePeriod is kube-controller-manager's
// --node-monitor-grace-period in every run, and simLeasePeriod the
// simulated kubelets' lease renewal and status report period: far beyond
// the length of a run, so that a node registered Ready stays so without a
// heartbeat, and neither system's figures include heartbeats.
const (
	nodeMonitorGracePeriod = 2 * time.Hour
	simLeasePeriod         = time.Hour
	// simKubeletQPS is the simulated kubelet's client limit (and burst),
	// simKubeletParallelism the API calls it makes at once.
	simKubeletQPS         = 2000
	simKubeletParallelism = 128
)

// Client limits of both managers, as the comparison is specified: every
// process of either system gets them.
const (
	managerQPS   = 200
	managerBurst = 300
)

// The environment variables that configure a comparison, and their
// defaults (bench/README.md documents them).
const (
	envScenarios     = "MCM_BENCH_SCENARIOS"
	envSystems       = "MCM_BENCH_SYSTEMS"
	envBootDelay     = "MCM_BENCH_BOOT_DELAY"
	envBootJitter    = "MCM_BENCH_BOOT_JITTER"
	envBootModels    = "MCM_BENCH_BOOT_MODELS"
	envRolloutBoot   = "MCM_BENCH_ROLLOUT_BOOT_DELAY"
	envRolloutJitter = "MCM_BENCH_ROLLOUT_BOOT_JITTER"
	envUpdateDelay   = "MCM_BENCH_INPLACE_UPDATE_DELAY"
	envSettle        = "MCM_BENCH_SETTLE"
	envSteady        = "MCM_BENCH_STEADY"
	envRunTimeout    = "MCM_BENCH_RUN_TIMEOUT"
	envToken         = "MCM_BENCH_BOOTSTRAP_TOKEN"
	envLock          = "MCM_BENCH_LOCK"
	envProfileDir    = "MCM_BENCH_PROFILE_DIR"
	envManagerEnv    = "MCM_BENCH_MANAGER_ENV"
	envRun           = "MCM_BENCH_RUN" // set by the parent for a child: the runSpec
	// simCloudSocketEnv tells ./reference's simcloud driver the socket.
	simCloudSocketEnv = "MCM_BENCH_SIMCLOUD_SOCKET"
	defaultScenario   = "M:100,500,1000 D:100,500,1000 R:1000 I:100 S:1000 P:1000 X:10000"
	defaultBootModels = bootReady + "," + bootJittered
)

// The systems compared.
const (
	systemMCM = "gardener" // Gardener MCM v0.62.1: its two processes, with the simulated cloud in a third
	systemRef = "mcm"      // mcm's reference manager with the simcloud driver (./reference)
)

var systemLabels = map[string]string{systemMCM: "MCM v0.62.1", systemRef: "mcm"}

// The scenarios, in the order a comparison runs them.
var scenarioOrder = []string{"M", "D", "R", "I", "S", "P", "X"}

// bootModelScenarios run once for each boot model of the comparison: the
// scenarios whose measured phase includes the VMs' boots and whose figures
// depend on how the VMs come up. The others run with the jittered model
// (R and I with boots of their own).
var bootModelScenarios = []string{"M", "D"}

// scenarioSizes is a scenario with the machine counts it runs at.
type scenarioSizes struct {
	name  string
	sizes []int
}

// bootTime is how the VMs of a scenario's classes boot: after Delay plus
// a uniformly random extra of up to Jitter (the sim providerSpec's
// bootDelay and bootJitter).
type bootTime struct {
	Delay  time.Duration `json:"delay"`
	Jitter time.Duration `json:"jitter"`
}

// The boot models of M and D. With VMs that are ready when the cloud call
// returns, both managers are bound by their clients' write budget; with
// VMs that join a few seconds later, by how promptly they notice a node
// and act on it. A ratio holds for its model only, so the table shows
// both.
const (
	// bootReady: the VM runs when CreateMachine returns, and the
	// simulated kubelet registers its Node at once.
	bootReady = "ready"
	// bootJittered: the VM boots after MCM_BENCH_BOOT_DELAY plus a
	// random extra of up to MCM_BENCH_BOOT_JITTER (0 s and 3 s).
	bootJittered = "jittered"
)

// bootModel is a named way for the VMs to boot.
type bootModel struct {
	Name string   `json:"name"`
	Boot bootTime `json:"boot"`
}

// String is how the table names the model: its boot time.
func (b bootTime) String() string {
	switch {
	case b.Delay == 0 && b.Jitter == 0:
		return "at once"
	case b.Jitter == 0:
		return b.Delay.String()
	}
	return fmt.Sprintf("%v+0-%v", b.Delay, b.Jitter)
}

// options configure a comparison.
type options struct {
	scenarios []scenarioSizes
	systems   []string
	// boot is how the VMs boot in the jittered model, which every
	// scenario but R runs with; rolloutBoot is R's.
	boot, rolloutBoot bootTime
	// bootModels are the models M and D run with, each a run of its own.
	bootModels []bootModel
	// updateDelay is how long I's node agent takes to update a node in
	// place.
	updateDelay time.Duration
	// bootstrapToken makes the machines' user data ask for a bootstrap
	// token.
	bootstrapToken bool
	// settle is how long writes are still counted after a run's end
	// condition holds, so that the writes a scenario causes and that
	// come a little late (status updates) are counted.
	settle time.Duration
	// steady is how long X watches the managers once all machines run.
	steady time.Duration
	// runTimeout bounds one scenario of one system.
	runTimeout time.Duration
	// lock is the file a child holds locked for its whole run; empty for
	// none.
	lock string
	// profileDir receives a heap profile of mcm at the end of X's steady
	// state; empty for none.
	profileDir string
	// managerEnv is added to the managers' environment (NAME=VALUE).
	managerEnv []string
}

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{
		ControlPlane: controlplane.Options{NodeMonitorGracePeriod: nodeMonitorGracePeriod},
	})
}

// BenchmarkCompare runs the scenarios of MCM_BENCH_SCENARIOS against
// Gardener MCM v0.62.1 and mcm's reference manager and prints the table.
// It builds MCM from the Go module proxy (bench/mcm). Runs take minutes:
// use -benchtime 1x.
func BenchmarkCompare(b *testing.B) {
	compare(b, optionsFromEnv(b, []string{systemMCM, systemRef}))
}

// BenchmarkReference runs the scenarios against mcm's reference manager
// alone: the same runs and table as BenchmarkCompare without MCM's
// column, for which nothing is downloaded.
func BenchmarkReference(b *testing.B) {
	opts := optionsFromEnv(b, []string{systemRef})
	opts.systems = []string{systemRef}
	compare(b, opts)
}

// BenchmarkRun is one scenario of one system, in a child process that
// BenchmarkCompare or BenchmarkReference started; on its own it skips.
func BenchmarkRun(b *testing.B) {
	raw := os.Getenv(envRun)
	if raw == "" {
		b.Skip("runs one scenario in a child process of BenchmarkCompare or BenchmarkReference")
	}
	var spec runSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		b.Fatalf("%s: %v", envRun, err)
	}
	if b.N != 1 {
		b.Fatalf("one run only (b.N = %d)", b.N)
	}
	res := runScenario(b, spec)
	raw2, err := json.Marshal(res)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(spec.Out, raw2, 0o600); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(0, "ns/op") // the parent reports the figures
}

// optionsFromEnv reads the comparison's configuration, failing b on a
// value it cannot use.
func optionsFromEnv(b *testing.B, defaultSystems []string) options {
	opts := options{
		systems:     defaultSystems,
		boot:        bootTime{Delay: envDuration(b, envBootDelay, 0), Jitter: envDuration(b, envBootJitter, 3*time.Second)},
		rolloutBoot: bootTime{Delay: envDuration(b, envRolloutBoot, time.Minute), Jitter: envDuration(b, envRolloutJitter, 0)},
		updateDelay: envDuration(b, envUpdateDelay, 30*time.Second),
		settle:      envDuration(b, envSettle, 5*time.Second),
		steady:      envDuration(b, envSteady, time.Minute),
		runTimeout:  envDuration(b, envRunTimeout, 30*time.Minute),
		lock:        os.Getenv(envLock),
		profileDir:  os.Getenv(envProfileDir),
	}
	// Created now rather than when the first profile is due, minutes into
	// a run: a directory that cannot be made fails before anything runs.
	if opts.profileDir != "" {
		if err := os.MkdirAll(opts.profileDir, 0o755); err != nil {
			b.Fatalf("%s: %v", envProfileDir, err)
		}
	}
	var err error
	if opts.bootModels, err = parseBootModels(cmp.Or(os.Getenv(envBootModels), defaultBootModels), opts.boot); err != nil {
		b.Fatalf("%s: %v", envBootModels, err)
	}
	if opts.bootstrapToken, err = parseSwitch(os.Getenv(envToken)); err != nil {
		b.Fatalf("%s: %v", envToken, err)
	}
	if opts.scenarios, err = parseScenarios(cmp.Or(os.Getenv(envScenarios), defaultScenario)); err != nil {
		b.Fatalf("%s: %v", envScenarios, err)
	}
	if s := os.Getenv(envSystems); s != "" {
		if opts.systems, err = parseSystems(s); err != nil {
			b.Fatalf("%s: %v", envSystems, err)
		}
	}
	if opts.managerEnv, err = parseManagerEnv(os.Getenv(envManagerEnv)); err != nil {
		b.Fatalf("%s: %v", envManagerEnv, err)
	}
	if opts.runTimeout <= 0 {
		b.Fatalf("%s must be positive", envRunTimeout)
	}
	return opts
}

// parseSwitch reads an on/off environment variable: 1 or true, 0, false
// or unset.
func parseSwitch(v string) (bool, error) {
	switch v {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	}
	return false, fmt.Errorf("%q: want 1 or 0", v)
}

// parseManagerEnv reads "NAME=VALUE NAME=VALUE": environment entries for
// the managers, separated by spaces.
func parseManagerEnv(s string) ([]string, error) {
	env := strings.Fields(s)
	for _, kv := range env {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			return nil, fmt.Errorf("%q is not NAME=VALUE", kv)
		}
	}
	return env, nil
}

// parseScenarios reads "M:100,500 D:100 R:1000": scenario names with the
// machine counts to run them at, separated by spaces.
func parseScenarios(s string) ([]scenarioSizes, error) {
	var out []scenarioSizes
	seen := map[string]bool{}
	for field := range strings.FieldsSeq(s) {
		name, sizesText, ok := strings.Cut(field, ":")
		if !ok || sizesText == "" {
			return nil, fmt.Errorf("%q: want a scenario and its machine counts, such as M:100,500", field)
		}
		if !slices.Contains(scenarioOrder, name) {
			return nil, fmt.Errorf("%q: unknown scenario %q (want one of %s)", field, name, strings.Join(scenarioOrder, ", "))
		}
		if seen[name] {
			return nil, fmt.Errorf("scenario %s given twice", name)
		}
		seen[name] = true
		sc := scenarioSizes{name: name}
		for sizeText := range strings.SplitSeq(sizesText, ",") {
			n, err := strconv.Atoi(sizeText)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%q: machine count %q is not a positive number", field, sizeText)
			}
			sc.sizes = append(sc.sizes, n)
		}
		out = append(out, sc)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scenario in %q", s)
	}
	return out, nil
}

// parseBootModels reads a comma-separated list of boot models: ready, and
// jittered, whose VMs boot as jittered says.
func parseBootModels(s string, jittered bootTime) ([]bootModel, error) {
	var out []bootModel
	for name := range strings.SplitSeq(s, ",") {
		var m bootModel
		switch name = strings.TrimSpace(name); name {
		case bootReady:
			m = bootModel{Name: bootReady}
		case bootJittered:
			m = bootModel{Name: bootJittered, Boot: jittered}
		default:
			return nil, fmt.Errorf("unknown boot model %q (want %s or %s)", name, bootReady, bootJittered)
		}
		if !slices.ContainsFunc(out, func(o bootModel) bool { return o.Name == name }) {
			out = append(out, m)
		}
	}
	return out, nil
}

// parseSystems reads a comma-separated list of systems.
func parseSystems(s string) ([]string, error) {
	var out []string
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		if _, ok := systemLabels[name]; !ok {
			return nil, fmt.Errorf("unknown system %q (want %s or %s)", name, systemMCM, systemRef)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		b.Fatalf("%s=%q: want a non-negative duration such as 5s", name, s)
	}
	return d
}

// progress prints a line as the comparison goes: a benchmark's own log is
// cut short and printed only at its end.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format(time.TimeOnly)+" compare: "+format+"\n", args...)
}
