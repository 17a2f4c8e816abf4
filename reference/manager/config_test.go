package manager

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	certutil "k8s.io/client-go/util/cert"

	"github.com/mcmkit/mcm/safety"
)

func kubeconfigFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeCertPair writes a self-signed certificate and its key as PEM files.
func writeCertPair(t *testing.T, certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestParseFlagsAccepts(t *testing.T) {
	kc := kubeconfigFile(t)
	certFile, keyFile := filepath.Join(t.TempDir(), "tls.crt"), filepath.Join(t.TempDir(), "tls.key")
	writeCertPair(t, certFile, keyFile)
	base := []string{"--control-kubeconfig", kc, "--target-kubeconfig", kc, "--driver", "sim"}
	withDefaults := func(f func(*Config)) Config {
		c := DefaultConfig()
		c.ControlKubeconfig, c.TargetKubeconfig, c.Driver = kc, kc, "sim"
		f(&c)
		return c
	}
	tests := []struct {
		name string
		args []string
		want Config
	}{
		{"defaults", nil, withDefaults(func(*Config) {})},
		{"MCM flags", []string{
			"--namespace=shoot", "--controllers=machine", "--concurrent-syncs=5", "--kube-api-qps=50", "--kube-api-burst=100",
			"--machine-creation-timeout=5m", "--machine-health-timeout=1m", "--machine-drain-timeout=30m",
			"--machine-max-evict-retries=10", "--machine-pv-detach-timeout=1m", "--node-conditions=ReadonlyFilesystem",
			"--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s", "--leader-elect-retry-period=5s",
			"--leader-elect-resource-namespace=kube-system", "--leader-elect-resource-name=mc", "--port=0", "-v=3",
		}, withDefaults(func(c *Config) {
			c.Namespace, c.Controllers, c.ConcurrentSyncs, c.KubeAPIQPS, c.KubeAPIBurst = "shoot", []string{"machine"}, 5, 50, 100
			c.MachineCreationTimeout, c.MachineHealthTimeout, c.MachineDrainTimeout = 5*time.Minute, time.Minute, 30*time.Minute
			c.MachineMaxEvictRetries, c.MachinePVDetachTimeout, c.NodeConditions = 10, time.Minute, "ReadonlyFilesystem"
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 30*time.Second, 20*time.Second, 5*time.Second
			c.LeaseNamespace, c.LeaseName, c.Port, c.Verbosity = "kube-system", "mc", 0, 3
		})},
		{"no target cluster, no leader election", []string{"--target-kubeconfig=none", "--leader-elect=false", "--profiling"},
			withDefaults(func(c *Config) { c.TargetKubeconfig, c.LeaderElect, c.Profiling = NoTarget, false, true })},
		{"in-cluster, MCM spelling", []string{"--control-kubeconfig=inClusterConfig", "--target-kubeconfig=in-cluster"},
			withDefaults(func(c *Config) { c.ControlKubeconfig, c.TargetKubeconfig = "inClusterConfig", InCluster })},
		{"empty node conditions", []string{"--node-conditions="}, withDefaults(func(c *Config) { c.NodeConditions = "" })},
		{"sim kubelet", []string{
			"--sim-kubelet-qps=500", "--sim-kubelet-burst=1000", "--sim-kubelet-parallelism=64", "--sim-node-lease-duration=1m",
			"--sim-node-lease-renew-period=20s", "--sim-node-status-report-period=10m",
		}, withDefaults(func(c *Config) {
			c.SimKubeletQPS, c.SimKubeletBurst, c.SimKubeletParallelism = 500, 1000, 64
			c.SimNodeLeaseDuration, c.SimNodeLeaseRenewPeriod, c.SimNodeStatusReportPeriod = time.Minute, 20*time.Second, 10*time.Minute
		})},
		{"sim kubelet renewing as the kubelet", []string{"--sim-node-lease-duration=20s", "--sim-node-lease-renew-period=0"},
			withDefaults(func(c *Config) { c.SimNodeLeaseDuration, c.SimNodeLeaseRenewPeriod = 20*time.Second, 0 })},
		{"MCM flags that work here", []string{
			"--address=127.0.0.1", "--profiling", "--contention-profiling", "--kube-api-content-type=application/json",
			"--leader-elect-resource-lock=leases", "--leader-elect-machine-controller-resource-name=mc",
			"--bootstrap-token-auth-extra-groups= system:bootstrappers:a ,,system:bootstrappers:worker-b", "--resource-exhausted-retry=0s",
		}, withDefaults(func(c *Config) {
			c.Address, c.Profiling, c.ContentionProfiling, c.KubeAPIContentType = "127.0.0.1", true, true, "application/json"
			c.ResourceLock, c.MachineLeaseName = "leases", "mc"
			c.BootstrapTokenAuthExtraGroups = []string{"system:bootstrappers:a", "system:bootstrappers:worker-b"}
			c.ResourceExhaustedRetry = 0
		})},
		{"MCM flags ignored here, named in order, once", []string{
			"--vmodule=drain*=4,machine=2", "--cloud-provider=aws", "--min-resync-period=1h", "--controller-start-interval=0s",
			"--log-flush-frequency=1s", "--cloud-provider=gcp",
		}, withDefaults(func(c *Config) {
			c.IgnoredFlags = []string{"vmodule", "cloud-provider", "min-resync-period", "controller-start-interval", "log-flush-frequency"}
		})},
		{"--machine-inplace-update-timeout is the machines' in-place update timeout, not ignored", []string{"--machine-inplace-update-timeout=1h"},
			withDefaults(func(c *Config) { c.MachineInPlaceUpdateTimeout = time.Hour })},
		{"--inplace-critical-components-taint is on by default, as MCM always taints; false turns it off", []string{"--inplace-critical-components-taint=false"},
			withDefaults(func(c *Config) { c.InPlaceCriticalComponentsTaint = false })},
		{"--machine-preserve-timeout is the machines' preserve timeout, not ignored", []string{"--machine-preserve-timeout=1h"},
			withDefaults(func(c *Config) { c.MachinePreserveTimeout = time.Hour })},
		{"leader election flags without leader election: accepted and named, as MCM ignores them", []string{
			"--leader-elect=false", "--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s",
			"--leader-elect-retry-period=2s", "--leader-elect-resource-lock=leases", "--min-resync-period=1h",
		}, withDefaults(func(c *Config) {
			c.LeaderElect, c.LeaseDuration, c.RenewDeadline, c.RetryPeriod, c.ResourceLock = false, 15*time.Second, 10*time.Second, 2*time.Second, "leases"
			c.IgnoredFlags = []string{"min-resync-period", "leader-elect-lease-duration", "leader-elect-renew-deadline",
				"leader-elect-retry-period", "leader-elect-resource-lock"}
		})},
		{"MCM spellings: underscores and -vN", []string{"--machine_drain_timeout=1h", "--leader_elect_retry_period", "1s", "-v4"},
			withDefaults(func(c *Config) { c.MachineDrainTimeout, c.RetryPeriod, c.Verbosity = time.Hour, time.Second, 4 })},
		{"underscores in values are values", []string{"--namespace", "shoot_a", "--node-conditions=Kernel_Deadlock"},
			withDefaults(func(c *Config) { c.Namespace, c.NodeConditions = "shoot_a", "Kernel_Deadlock" })},
		{"replica ceiling", []string{"--machine-max-replicas=20000"}, withDefaults(func(c *Config) { c.MachineMaxReplicas = 20000 })},
		{"preserved machines hold a scale-down", []string{"--machine-keep-preserved-on-scale-down"},
			withDefaults(func(c *Config) { c.MachineKeepPreservedOnScaleDown = true })},
		{"secure metrics, self-signed", []string{"--metrics-secure"}, withDefaults(func(c *Config) { c.MetricsSecure = true })},
		{"secure metrics with a certificate", []string{"--metrics-secure", "--metrics-cert-file", certFile, "--metrics-key-file", keyFile},
			withDefaults(func(c *Config) { c.MetricsSecure, c.MetricsCertFile, c.MetricsKeyFile = true, certFile, keyFile })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFlags("mcm", append(append([]string{}, base...), tt.args...), DefaultControllers(), BuiltinDrivers(), io.Discard)
			if err != nil {
				t.Fatalf("ParseFlags: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseFlagsRejects(t *testing.T) {
	kc := kubeconfigFile(t)
	ok := []string{"--control-kubeconfig", kc, "--target-kubeconfig", kc, "--driver", "sim"}
	tests := []struct {
		name string
		args []string
		want string // the whole one-line message
	}{
		{"target kubeconfig pointing nowhere", []string{"--control-kubeconfig", kc, "--target-kubeconfig", "/does/not/exist", "--driver", "sim"},
			"--target-kubeconfig: kubeconfig /does/not/exist: no such file or directory"},
		{"kubeconfig is a directory", []string{"--control-kubeconfig", filepath.Dir(kc), "--target-kubeconfig", "none", "--driver", "sim"},
			"--control-kubeconfig: kubeconfig " + filepath.Dir(kc) + " is a directory"},
		{"kubeconfigs missing", []string{"--driver", "sim"},
			"--control-kubeconfig is required (a kubeconfig path or in-cluster); --target-kubeconfig is required (a kubeconfig path or in-cluster or none)"},
		{"control none", []string{"--control-kubeconfig", "none", "--target-kubeconfig", "none", "--driver", "sim"},
			`--control-kubeconfig cannot be "none": the control cluster is required`},
		{"unknown controller", append(ok, "--controllers=machine,foo"), `--controllers: unknown controller "foo" (known: machine, machinedeployment, machineset, overshoot, safety)`},
		{"no controller", append(ok, "--controllers="), "--controllers selects nothing (known: machine, machinedeployment, machineset, overshoot, safety)"},
		{"unknown driver", append(ok, "--driver=aws"), `--driver: unknown driver "aws" (known: sim)`},
		{"driver missing", []string{"--control-kubeconfig", kc, "--target-kubeconfig", kc}, "--driver is required by the selected controllers (known: sim)"},
		{"negative timeouts", append(ok, "--machine-creation-timeout=-1s", "--machine-drain-timeout=-2h"),
			"--machine-creation-timeout must not be negative, got -1s; --machine-drain-timeout must not be negative, got -2h0m0s"},
		{"negative evict retries", append(ok, "--machine-max-evict-retries=-1"), "--machine-max-evict-retries must not be negative, got -1"},
		{"sim state file without the sim driver", []string{"--control-kubeconfig", kc, "--target-kubeconfig", "none", "--controllers=machineset", "--sim-state-file=/tmp/x"},
			`--sim-state-file is for --driver=sim, not ""`},
		{"sim kubelet flag without the sim driver", []string{"--control-kubeconfig", kc, "--target-kubeconfig", kc, "--controllers=machineset", "--sim-kubelet-qps=50"},
			`--sim-kubelet-qps is for --driver=sim, not ""`},
		{"sim kubelet flag without a target cluster", []string{"--control-kubeconfig", kc, "--target-kubeconfig", "none", "--driver", "sim", "--sim-node-lease-renew-period=20s"},
			"--sim-node-lease-renew-period contradicts --target-kubeconfig=none: without a target cluster there is no simulated kubelet"},
		{"bad sim kubelet rate", append(ok, "--sim-kubelet-qps=0", "--sim-kubelet-burst=0", "--sim-kubelet-parallelism=0"),
			"--sim-kubelet-qps must be positive, got 0; --sim-kubelet-burst must be at least 1, got 0; --sim-kubelet-parallelism must be at least 1, got 0"},
		{"sim lease of fractional seconds", append(ok, "--sim-node-lease-duration=1500ms"),
			"--sim-node-lease-duration must be whole seconds (a lease holds seconds), got 1.5s"},
		{"sim lease too short", append(ok, "--sim-node-lease-duration=0s"), "--sim-node-lease-duration must be at least 1s, got 0s"},
		{"sim renew period not shorter than the lease", append(ok, "--sim-node-lease-duration=30s", "--sim-node-lease-renew-period=30s"),
			"--sim-node-lease-renew-period (30s) must be shorter than --sim-node-lease-duration (30s), or the leases expire between renewals"},
		{"sim renew period negative", append(ok, "--sim-node-lease-renew-period=-1s"), "--sim-node-lease-renew-period must not be negative, got -1s"},
		{"sim renew period below the sync period", append(ok, "--sim-node-lease-renew-period=100ms"),
			"--sim-node-lease-renew-period must be at least the simulated kubelet's sync period 250ms, got 100ms"},
		{"sim status report period zero", append(ok, "--sim-node-status-report-period=0s"),
			"--sim-node-status-report-period must be at least the simulated kubelet's sync period 250ms, got 0s"},
		{"zero orphan grace period", append(ok, "--machine-safety-orphan-vms-grace-period=0s"),
			"--machine-safety-orphan-vms-grace-period must be positive, got 0s"},
		{"bad max unhealthy", append(ok, "--machine-max-unhealthy=half"),
			`--machine-max-unhealthy: "half": want a number or a percentage`},
		{"zero replica ceiling", append(ok, "--machine-max-replicas=0"), "--machine-max-replicas must be at least 1, got 0"},
		{"zero safety thresholds", append(ok, "--safety-up=0", "--machine-safety-overshooting-period=0s"),
			"--safety-up and --safety-down must be at least 1, got 0 and 1; --machine-safety-overshooting-period, -orphan-vms-period, -apiserver-statuscheck-period and -apiserver-statuscheck-timeout must be positive, got 0s, 15m0s, 1m0s and 30s"},
		{"zero workers", append(ok, "--concurrent-syncs=0"), "--concurrent-syncs must be at least 1, got 0"},
		{"bad qps", append(ok, "--kube-api-qps=0", "--kube-api-burst=0"), "--kube-api-qps must be positive, got 0; --kube-api-burst must be at least 1, got 0"},
		{"lease shorter than renew deadline", append(ok, "--leader-elect-lease-duration=5s"),
			"--leader-elect-lease-duration (5s) must be greater than --leader-elect-renew-deadline (10s)"},
		{"retry period too long", append(ok, "--leader-elect-retry-period=9s"),
			"--leader-elect-renew-deadline (10s) must be greater than 1.2 × --leader-elect-retry-period (9s)"},
		{"profiling without server", append(ok, "--port=0", "--profiling"), "--profiling needs the HTTP server, but --port=0 disables it"},
		{"bad port", append(ok, "--port=70000"), "--port must be between 0 and 65535, got 70000"},
		{"bad node conditions", append(ok, "--node-conditions=A,,B"), `--node-conditions: "A,,B" is not a comma-separated list of condition types`},
		{"unknown flag", append(ok, "--machine-safety-foo=1"), "unknown flag --machine-safety-foo: neither this manager's nor machine-controller-manager's"},
		{"unknown flag, MCM's own flag library's klog flag", append(ok, "--logtostderr"),
			"unknown flag --logtostderr: neither this manager's nor machine-controller-manager's"},
		{"lock other than leases", append(ok, "--leader-elect-resource-lock=endpoints"),
			`--leader-elect-resource-lock must be "leases", got "endpoints": Kubernetes has removed the other kinds of lock`},
		{"one lease for both groups", append(ok, "--leader-elect-resource-name=mcm", "--leader-elect-machine-controller-resource-name=mcm"),
			`--leader-elect-resource-name and --leader-elect-machine-controller-resource-name must differ, both are "mcm"`},
		{"empty machine lease", append(ok, "--leader-elect-machine-controller-resource-name="),
			"--leader-elect-resource-name and --leader-elect-machine-controller-resource-name must not be empty"},
		{"content type", append(ok, "--kube-api-content-type=application/yaml"),
			`--kube-api-content-type must be application/vnd.kubernetes.protobuf or application/json, got "application/yaml"`},
		{"address not an IP", append(ok, "--address=localhost"), `--address must be an IP address, got "localhost"`},
		{"contention profiling without profiling", append(ok, "--contention-profiling"), "--contention-profiling needs --profiling"},
		{"secure metrics without server", append(ok, "--port=0", "--metrics-secure"), "--metrics-secure needs the HTTP server, but --port=0 disables it"},
		{"certificate without secure metrics", append(ok, "--metrics-cert-file=/tls.crt", "--metrics-key-file=/tls.key"),
			"--metrics-cert-file and --metrics-key-file need --metrics-secure"},
		{"certificate without key", append(ok, "--metrics-secure", "--metrics-cert-file=/tls.crt"), "--metrics-cert-file and --metrics-key-file go together"},
		{"certificate that is none", append(ok, "--metrics-secure", "--metrics-cert-file", kc, "--metrics-key-file", kc),
			"--metrics-cert-file and --metrics-key-file: tls: failed to find any PEM data in certificate input"},
		{"certificate missing", append(ok, "--metrics-secure", "--metrics-cert-file=/nowhere/tls.crt", "--metrics-key-file=/nowhere/tls.key"),
			"--metrics-cert-file and --metrics-key-file: open /nowhere/tls.crt: no such file or directory"},
		{"bootstrap group the API server refuses", append(ok, "--bootstrap-token-auth-extra-groups=system:bootstrappers:ok,workers"),
			`--bootstrap-token-auth-extra-groups: "workers" is not a bootstrap token group: it must be "system:bootstrappers:" followed by lowercase letters, digits, ':' or '-' (at most 256), ending in a letter or digit; the API server would refuse the tokens`},
		{"ignored flag with a value MCM refuses", append(ok, "--min-resync-period=-1h"), `invalid value "-1h" for flag -min-resync-period: must not be negative`},
		{"ignored duration that is none", append(ok, "--log-flush-frequency=long"), `invalid value "long" for flag -log-flush-frequency: parse error`},
		{"negative in-place update timeout", append(ok, "--machine-inplace-update-timeout=-1h"), "--machine-inplace-update-timeout must not be negative, got -1h0m0s"},
		{"negative preserve timeout", append(ok, "--machine-preserve-timeout=-1h"), "--machine-preserve-timeout must not be negative, got -1h0m0s"},
		{"vmodule klog refuses", append(ok, "--vmodule=drain"), `invalid value "drain" for flag -vmodule: "drain" is not pattern=N`},
		{"bad duration", append(ok, "--machine-health-timeout=soon"), `invalid value "soon" for flag -machine-health-timeout: parse error`},
		{"positional argument", append(ok, "extra"), `unexpected argument "extra": mcm takes flags only`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseFlags("mcm", tt.args, DefaultControllers(), BuiltinDrivers(), io.Discard)
			if err == nil {
				t.Fatal("ParseFlags accepted the flags")
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

// A controller table with one more entry is all another controller needs.
func TestControllerTableExtends(t *testing.T) {
	kc := kubeconfigFile(t)
	controllers := DefaultControllers()
	controllers["machineset"] = Controller{Group: MachineControllerManagerGroup, Resources: []string{"machinesets"}, New: nil}
	c, err := ParseFlags("mcm", []string{"--control-kubeconfig", kc, "--target-kubeconfig", "none", "--controllers=machineset"},
		controllers, BuiltinDrivers(), io.Discard)
	if err != nil {
		t.Fatalf("ParseFlags: %v", err)
	}
	got, err := selectedControllers(c, controllers)
	if err != nil || !cmp.Equal(got, []string{"machineset"}) {
		t.Errorf("selected = %v, %v; want [machineset]", got, err)
	}
	m := &Manager{cfg: DefaultConfig(), opts: Options{Controllers: controllers}}
	run, skipped := m.runnableControllers([]string{"machineclasses", "machines"})
	if diff := cmp.Diff([]string{"machine"}, run); diff != "" {
		t.Errorf("runnable (-want +got):\n%s", diff)
	}
	want := map[string][]string{"machineset": {"machinesets"}, "machinedeployment": {"machinedeployments", "machinesets"},
		"safety": {"machinedeployments", "machinesets"}, "overshoot": {"machinedeployments", "machinesets"}}
	if diff := cmp.Diff(want, skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
}

func TestReadiness(t *testing.T) {
	frozen := safety.GateFunc(func(context.Context) bool { return true })
	both := func(mc, mcm groupState) []*groupState {
		mc.group, mc.lease, mcm.group, mcm.lease = MachineControllerGroup, "machine-controller", MachineControllerManagerGroup, "machine-controller-manager"
		return []*groupState{&mc, &mcm}
	}
	tests := []struct {
		name  string
		state *state
		ready bool
		why   string
	}{
		{"starting", &state{waiting: "control API server https://x is not ready: connection refused", leaderElect: true}, false,
			"starting: control API server https://x is not ready: connection refused"},
		{"standby", &state{leaderElect: true, groups: both(groupState{holder: "other_1"}, groupState{holder: "other_1"})}, true,
			"standby; lease held by other_1"},
		{"standby behind two holders", &state{leaderElect: true, groups: both(groupState{holder: "mc-0"}, groupState{holder: "mcm-0"})}, true,
			"standby; lease machine-controller held by mc-0, lease machine-controller-manager held by mcm-0"},
		{"standby before any leader", &state{leaderElect: true, groups: both(groupState{}, groupState{})}, true, "standby; lease held by nobody yet"},
		{"standby, second lease not seen yet", &state{leaderElect: true, groups: both(groupState{holder: "other_1"}, groupState{})}, true,
			"standby; lease held by other_1"},
		{"leader syncing", &state{leaderElect: true, groups: both(groupState{running: true}, groupState{running: true, synced: true})}, false,
			"leading; waiting for informer caches to sync"},
		{"leader synced", &state{leaderElect: true, synced: true, groups: both(groupState{running: true, synced: true}, groupState{running: true, synced: true})}, true,
			"leader; caches synced"},
		{"leader of one group", &state{leaderElect: true, synced: true, groups: both(groupState{running: true, synced: true}, groupState{holder: "mcm-0"})}, true,
			"leader of machine-controller (standby for machine-controller-manager, lease held by mcm-0); caches synced"},
		{"leader of one group, syncing", &state{leaderElect: true, groups: both(groupState{holder: "mc-0"}, groupState{running: true})}, false,
			"leading of machine-controller-manager (standby for machine-controller, lease held by mc-0); waiting for informer caches to sync"},
		{"no leader election", &state{synced: true, groups: both(groupState{running: true, synced: true}, groupState{running: true, synced: true}),
			skipped: []string{"machineset"}}, true, "running without leader election; caches synced; skipped controllers: machineset"},
		{"no leader election, syncing", &state{groups: both(groupState{running: true}, groupState{running: true})}, false,
			"running without leader election; waiting for informer caches to sync"},
		{"stopping", &state{leaderElect: true, groups: both(groupState{running: true, synced: true}, groupState{}), stopping: true}, false, "shutting down"},
		{"frozen", &state{leaderElect: true, synced: true, groups: both(groupState{running: true, synced: true}, groupState{running: true, synced: true}),
			outage: frozen}, true,
			"leader; caches synced; frozen: an API server is out of reach, no machine is created or replaced"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready, why := tt.state.readiness()
			if ready != tt.ready || why != tt.why {
				t.Errorf("readiness() = %v, %q; want %v, %q", ready, why, tt.ready, tt.why)
			}
		})
	}
}
