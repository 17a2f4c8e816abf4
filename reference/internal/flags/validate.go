package flags

import (
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/machine"
	"github.com/mcmkit/mcm/safety/budget"
)

// Tables are what a configuration is checked against besides itself: the
// binary's controller table and driver registry.
type Tables struct {
	// Controllers are the entries of the controller table, by name.
	Controllers map[string]Controller
	// Groups are the groups an entry may name, in the order of the
	// manager's documentation.
	Groups []string
	// Drivers are the names of the driver registry's entries.
	Drivers []string
}

// Controller is what the checks need of a controller table entry.
type Controller struct {
	// Group is the entry's group; it must be one of Tables.Groups.
	Group string
	// NeedsDriver: --driver is required when the controller is selected.
	NeedsDriver bool
}

// problems collects what is wrong with a configuration, each naming its
// flag, in the order Validate checks them.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// Validate checks c against t and returns every problem, each naming its
// flag, joined in one line.
func Validate(c Config, t Tables) error {
	var p problems
	p.kubeconfig("control-kubeconfig", c.ControlKubeconfig, false)
	p.kubeconfig("target-kubeconfig", c.TargetKubeconfig, true)
	if c.Namespace == "" {
		p.add("--namespace must not be empty")
	}
	p.selection(c, t)
	p.clients(c)
	p.machine(c)
	p.safety(c)
	p.leaderElection(c)
	p = append(p, c.validateSim()...)
	p.server(c)
	p = append(p, c.validateMetricsSecure()...)
	if c.Verbosity < 0 {
		p.add("-v must not be negative, got %d", c.Verbosity)
	}
	if len(p) == 0 {
		return nil
	}
	return errors.New(strings.Join(p, "; "))
}

// kubeconfig checks the value of a kubeconfig flag: a file that exists,
// InCluster or, with allowNone, NoTarget.
func (p *problems) kubeconfig(flagName, value string, allowNone bool) {
	switch value {
	case "":
		hint := "a kubeconfig path or " + InCluster
		if allowNone {
			hint += " or " + NoTarget
		}
		p.add("--%s is required (%s)", flagName, hint)
	case InCluster, MCMInCluster:
	case NoTarget:
		if !allowNone {
			p.add("--%s cannot be %q: the control cluster is required", flagName, NoTarget)
		}
	default:
		if fi, err := os.Stat(value); err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			p.add("--%s: kubeconfig %s: %v", flagName, value, err)
		} else if fi.IsDir() {
			p.add("--%s: kubeconfig %s is a directory", flagName, value)
		}
	}
}

// selection checks --controllers and --driver against the tables.
func (p *problems) selection(c Config, t Tables) {
	selected, err := Selected(c, slices.Collect(maps.Keys(t.Controllers)))
	if err != nil {
		p.add("%v", err)
	}
	needsDriver := false
	for _, n := range selected {
		needsDriver = needsDriver || t.Controllers[n].NeedsDriver
		if g := t.Controllers[n].Group; !slices.Contains(t.Groups, g) {
			p.add("controller %q: its table entry names no group (%s), got %q", n, strings.Join(t.Groups, " or "), g)
		}
	}
	drivers := slices.Sorted(slices.Values(t.Drivers))
	switch {
	case c.Driver == "" && needsDriver:
		p.add("--driver is required by the selected controllers (known: %s)", strings.Join(drivers, ", "))
	case c.Driver != "" && !slices.Contains(drivers, c.Driver):
		p.add("--driver: unknown driver %q (known: %s)", c.Driver, strings.Join(drivers, ", "))
	}
}

// clients checks the workers, the driver's deadlines and the clients.
func (p *problems) clients(c Config) {
	if c.ConcurrentSyncs < 1 {
		p.add("--concurrent-syncs must be at least 1, got %d", c.ConcurrentSyncs)
	}
	if c.ConcurrentCreations < 0 || c.ConcurrentCreations > 0 && c.ConcurrentSyncs > 1 && c.ConcurrentCreations >= c.ConcurrentSyncs {
		p.add("--concurrent-creations must be 0 or below --concurrent-syncs (%d), got %d", c.ConcurrentSyncs, c.ConcurrentCreations)
	}
	if err := c.DriverTimeouts.Validate(); err != nil {
		p.add("--driver-timeouts: %v", err)
	}
	if c.KubeAPIQPS <= 0 {
		p.add("--kube-api-qps must be positive, got %v", c.KubeAPIQPS)
	}
	if c.KubeAPIBurst < 1 {
		p.add("--kube-api-burst must be at least 1, got %d", c.KubeAPIBurst)
	}
	if c.KubeAPIContentType != runtime.ContentTypeProtobuf && c.KubeAPIContentType != runtime.ContentTypeJSON {
		p.add("--kube-api-content-type must be %s or %s, got %q", runtime.ContentTypeProtobuf, runtime.ContentTypeJSON, c.KubeAPIContentType)
	}
	for _, g := range c.BootstrapTokenAuthExtraGroups {
		if err := machine.ValidateBootstrapGroup(g); err != nil {
			p.add("--bootstrap-token-auth-extra-groups: %v; the API server would refuse the tokens", err)
		}
	}
}

// machine checks the machine controller's timeouts and retries.
func (p *problems) machine(c Config) {
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{
		{"machine-creation-timeout", c.MachineCreationTimeout},
		{"machine-health-timeout", c.MachineHealthTimeout},
		{"machine-preserve-timeout", c.MachinePreserveTimeout},
		{"machine-inplace-update-timeout", c.MachineInPlaceUpdateTimeout},
		{"machine-drain-timeout", c.MachineDrainTimeout},
		{"machine-pv-detach-timeout", c.MachinePVDetachTimeout},
		{"machine-pv-reattach-timeout", c.MachinePVReattachTimeout},
		{"resource-exhausted-retry", c.ResourceExhaustedRetry},
	} {
		if d.value < 0 {
			p.add("--%s must not be negative, got %v", d.flag, d.value)
		}
	}
	if c.MachineMaxEvictRetries < 0 {
		p.add("--machine-max-evict-retries must not be negative, got %d", c.MachineMaxEvictRetries)
	}
}

// safety checks the safety controller's settings, the replica ceiling and
// the node conditions.
func (p *problems) safety(c Config) {
	// Zero would mean the library's default, not zero: refuse it rather
	// than run with another value than the one asked for.
	if c.SafetyUp < 1 || c.SafetyDown < 1 {
		p.add("--safety-up and --safety-down must be at least 1, got %d and %d", c.SafetyUp, c.SafetyDown)
	}
	if c.OrphanGracePeriod <= 0 {
		p.add("--machine-safety-orphan-vms-grace-period must be positive, got %v", c.OrphanGracePeriod)
	}
	if c.OvershootPeriod <= 0 || c.OrphanVMsPeriod <= 0 || c.StatusCheckPeriod <= 0 || c.StatusCheckTimeout <= 0 {
		p.add("--machine-safety-overshooting-period, -orphan-vms-period, -apiserver-statuscheck-period and -apiserver-statuscheck-timeout must be positive, got %v, %v, %v and %v",
			c.OvershootPeriod, c.OrphanVMsPeriod, c.StatusCheckPeriod, c.StatusCheckTimeout)
	}
	if _, err := budget.ParseMaxUnhealthy(c.MachineMaxUnhealthy); err != nil {
		p.add("--machine-max-unhealthy: %v", err)
	}
	// Zero would mean the libraries' default, not zero.
	if c.MachineMaxReplicas < 1 {
		p.add("--machine-max-replicas must be at least 1, got %d", c.MachineMaxReplicas)
	}
	for cond := range strings.SplitSeq(c.NodeConditions, ",") {
		if c.NodeConditions != "" && (cond == "" || strings.TrimSpace(cond) != cond || strings.ContainsAny(cond, " \t")) {
			p.add("--node-conditions: %q is not a comma-separated list of condition types", c.NodeConditions)
			break
		}
	}
}

// leaderElection checks the leases' timings and names, with
// --leader-elect only: without it they mean nothing.
func (p *problems) leaderElection(c Config) {
	if !c.LeaderElect {
		return
	}
	switch {
	case c.LeaseDuration <= 0 || c.RenewDeadline <= 0 || c.RetryPeriod <= 0:
		p.add("--leader-elect-lease-duration, -renew-deadline and -retry-period must be positive")
	case c.LeaseDuration <= c.RenewDeadline:
		p.add("--leader-elect-lease-duration (%v) must be greater than --leader-elect-renew-deadline (%v)", c.LeaseDuration, c.RenewDeadline)
	case float64(c.RenewDeadline) <= 1.2*float64(c.RetryPeriod):
		p.add("--leader-elect-renew-deadline (%v) must be greater than 1.2 × --leader-elect-retry-period (%v)", c.RenewDeadline, c.RetryPeriod)
	}
	switch {
	case c.LeaseName == "" || c.MachineLeaseName == "":
		p.add("--leader-elect-resource-name and --leader-elect-machine-controller-resource-name must not be empty")
	case c.LeaseName == c.MachineLeaseName:
		// One lease for two groups would have two electors of one
		// identity renewing it, each believing it leads.
		p.add("--leader-elect-resource-name and --leader-elect-machine-controller-resource-name must differ, both are %q", c.LeaseName)
	}
	if c.ResourceLock != DefaultResourceLock {
		p.add("--leader-elect-resource-lock must be %q, got %q: Kubernetes has removed the other kinds of lock", DefaultResourceLock, c.ResourceLock)
	}
}

// server checks the HTTP server's address and profiling.
func (p *problems) server(c Config) {
	if c.Port < 0 || c.Port > 65535 {
		p.add("--port must be between 0 and 65535, got %d", c.Port)
	}
	if net.ParseIP(c.Address) == nil {
		p.add("--address must be an IP address, got %q", c.Address)
	}
	if c.ContentionProfiling && !c.Profiling {
		p.add("--contention-profiling needs --profiling")
	}
}

// validateMetricsSecure checks --metrics-secure and its certificate.
func (c Config) validateMetricsSecure() []string {
	switch {
	case c.MetricsSecure && c.Port == 0:
		return []string{"--metrics-secure needs the HTTP server, but --port=0 disables it"}
	case (c.MetricsCertFile != "" || c.MetricsKeyFile != "") && !c.MetricsSecure:
		return []string{"--metrics-cert-file and --metrics-key-file need --metrics-secure"}
	case (c.MetricsCertFile == "") != (c.MetricsKeyFile == ""):
		return []string{"--metrics-cert-file and --metrics-key-file go together"}
	case c.MetricsCertFile != "":
		if _, err := tls.LoadX509KeyPair(c.MetricsCertFile, c.MetricsKeyFile); err != nil {
			return []string{fmt.Sprintf("--metrics-cert-file and --metrics-key-file: %v", err)}
		}
	}
	return nil
}

// validateSim checks the sim driver's kubelet flags, whatever the driver:
// their defaults are valid, and ParseFlags refuses them with another one.
func (c Config) validateSim() []string {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if c.SimKubeletQPS <= 0 {
		add("--sim-kubelet-qps must be positive, got %v", c.SimKubeletQPS)
	}
	if c.SimKubeletBurst < 1 {
		add("--sim-kubelet-burst must be at least 1, got %d", c.SimKubeletBurst)
	}
	if c.SimKubeletParallelism < 1 {
		add("--sim-kubelet-parallelism must be at least 1, got %d", c.SimKubeletParallelism)
	}
	switch d := c.SimNodeLeaseDuration; {
	case d < time.Second:
		add("--sim-node-lease-duration must be at least 1s, got %v", d)
	case d%time.Second != 0:
		add("--sim-node-lease-duration must be whole seconds (a lease holds seconds), got %v", d)
	}
	switch p := c.SimNodeLeaseRenewPeriod; {
	case p < 0:
		add("--sim-node-lease-renew-period must not be negative, got %v", p)
	case p > 0 && p < sim.DefaultSyncPeriod:
		add("--sim-node-lease-renew-period must be at least the simulated kubelet's sync period %v, got %v", sim.DefaultSyncPeriod, p)
	case p >= c.SimNodeLeaseDuration && c.SimNodeLeaseDuration > 0:
		add("--sim-node-lease-renew-period (%v) must be shorter than --sim-node-lease-duration (%v), or the leases expire between renewals", p, c.SimNodeLeaseDuration)
	}
	if p := c.SimNodeStatusReportPeriod; p < sim.DefaultSyncPeriod {
		add("--sim-node-status-report-period must be at least the simulated kubelet's sync period %v, got %v", sim.DefaultSyncPeriod, p)
	}
	return errs
}

// Selected resolves --controllers against the names of the controller
// table, known: the names it selects, sorted, each once.
func Selected(c Config, known []string) ([]string, error) {
	known = slices.Sorted(slices.Values(known))
	if len(c.Controllers) == 0 {
		return nil, fmt.Errorf("--controllers selects nothing (known: %s)", strings.Join(known, ", "))
	}
	var out []string
	for _, n := range c.Controllers {
		if n == AllControllers {
			return known, nil
		}
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("--controllers: unknown controller %q (known: %s)", n, strings.Join(known, ", "))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}
