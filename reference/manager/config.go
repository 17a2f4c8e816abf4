package manager

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/machine"
	"github.com/mcmkit/mcm/machineset"
	"github.com/mcmkit/mcm/safety"
)

// Special values of --control-kubeconfig and --target-kubeconfig.
const (
	// InCluster selects the pod's service account through
	// rest.InClusterConfig. MCM's spelling "inClusterConfig" is accepted too.
	InCluster = "in-cluster"
	// NoTarget (--target-kubeconfig only) runs without a target cluster:
	// no Nodes, no drain; machines become Available once their VM exists.
	NoTarget = "none"

	mcmInCluster = "inClusterConfig"
)

// AllControllers is the --controllers value that selects every controller
// of the table.
const AllControllers = "*"

// Defaults of the flags, MCM's where MCM has the flag.
const (
	DefaultNamespace           = "default"
	DefaultConcurrentSyncs     = 50 // MCM's machine controller
	DefaultKubeAPIQPS          = 20
	DefaultKubeAPIBurst        = 30
	DefaultLeaseDuration       = 15 * time.Second
	DefaultRenewDeadline       = 10 * time.Second
	DefaultRetryPeriod         = 2 * time.Second
	DefaultLeaseName           = string(MachineControllerManagerGroup) // MCM's machine-controller-manager process's lease
	DefaultMachineLeaseName    = string(MachineControllerGroup)        // MCM's machine-controller process's lease
	DefaultResourceLock        = "leases"
	DefaultKubeAPIContentType  = runtime.ContentTypeProtobuf
	DefaultAddress             = "0.0.0.0"
	DefaultPort                = 10258
	DefaultPVDetachTimeout     = drain.DefaultDetachTimeout
	DefaultPVReattachTimeout   = drain.DefaultReattachTimeout
	DefaultResourceExhaustedRe = machine.DefaultLongRetry // machine.Options' ResourceExhaustedRetry default
)

// Defaults of the sim driver's kubelet flags; see SimDriverOptions. The
// kubelet renews every lease every 10 s, as the kubelet does, which suits
// a cluster whose kube-controller-manager waits the default 50 s (the test
// environment's 20 s) before it marks a node Unknown; its client's rate
// limit covers that for about 2 500 nodes. Thousands more need a longer
// renew period and grace period (driver/sim's documentation has the
// measured figures).
const (
	DefaultSimKubeletQPS             = 300
	DefaultSimKubeletBurst           = 600
	DefaultSimNodeLeaseDuration      = sim.DefaultLeaseDuration
	DefaultSimNodeLeaseRenewPeriod   = 0 // a quarter of the lease duration: 10 s
	DefaultSimNodeStatusReportPeriod = sim.DefaultStatusReportPeriod
)

// Config is the manager's configuration, one field per flag. Start from
// DefaultConfig, bind it to a flag.FlagSet with BindFlags or fill it in
// code, and check it with Validate (New does).
type Config struct {
	// ControlKubeconfig is the control cluster (Machines, MachineClasses,
	// Secrets, the lease): a kubeconfig path or InCluster. Required.
	ControlKubeconfig string
	// TargetKubeconfig is the target cluster (Nodes, Pods, volumes): a
	// kubeconfig path, InCluster or NoTarget. Required.
	TargetKubeconfig string
	// Namespace of the control cluster whose machine objects are managed.
	Namespace string
	// Controllers to run, names from the controller table, or AllControllers.
	Controllers []string
	// Driver names the driver registry entry that talks to the cloud.
	Driver string
	// SimStateFile, with the sim driver, keeps the simulated cloud in a
	// file so that a restarted manager finds its VMs (SimDriverOptions).
	SimStateFile string
	// SimKubeletQPS and SimKubeletBurst limit the sim driver's simulated
	// kubelet, which has a client of the target cluster of its own.
	SimKubeletQPS   float64
	SimKubeletBurst int
	// SimKubeletParallelism is how many API calls the simulated kubelet
	// makes at once (sim.KubeletOptions.Parallelism).
	SimKubeletParallelism int
	// SimNodeLeaseDuration, SimNodeLeaseRenewPeriod (zero: a quarter of the
	// duration) and SimNodeStatusReportPeriod are the simulated kubelet's
	// node heartbeats (SimDriverOptions).
	SimNodeLeaseDuration      time.Duration
	SimNodeLeaseRenewPeriod   time.Duration
	SimNodeStatusReportPeriod time.Duration

	ConcurrentSyncs int
	KubeAPIQPS      float64
	KubeAPIBurst    int
	// KubeAPIContentType is what the clients of Kubernetes' own types
	// (Nodes, Pods, Secrets, Leases, Events, ...) send and prefer to
	// receive: MCM's default, protobuf, or JSON. The machine.sapcloud.io
	// clients always speak JSON: custom resources have no protobuf.
	KubeAPIContentType string

	// ConcurrentCreations is how many of the machine controller's
	// ConcurrentSyncs workers may run creations at once
	// (machine.Options.MaxConcurrentCreations), so that creations hung in
	// the cloud leave the others to deletions and health checks; 0 means
	// four fifths of them. An addition to MCM's flags.
	ConcurrentCreations int
	// DriverTimeouts are the deadlines of the driver's calls, by operation
	// (driver.Timeouts; unset ones take the driver package's defaults),
	// for every controller that calls the driver. An addition to MCM's
	// flags: MCM calls its driver without a deadline.
	DriverTimeouts driver.Timeouts

	MachineCreationTimeout   time.Duration
	MachineHealthTimeout     time.Duration
	MachineDrainTimeout      time.Duration
	MachineMaxEvictRetries   int
	MachinePVDetachTimeout   time.Duration
	MachinePVReattachTimeout time.Duration
	ResourceExhaustedRetry   time.Duration
	NodeConditions           string
	// BootstrapTokenAuthExtraGroups are the groups, besides the bootstrap
	// token's own, that the nodes' bootstrap tokens authenticate as (their
	// auth-extra-groups); each must be a bootstrap group
	// (system:bootstrappers:...), or the API server refuses the token.
	BootstrapTokenAuthExtraGroups []string
	// AutoscalerScaleDownAnnotationDuringRollout: nodes of a deployment in
	// a rollout get cluster-autoscaler.kubernetes.io/scale-down-disabled.
	AutoscalerScaleDownAnnotationDuringRollout bool
	// SafetyUp, SafetyDown and OvershootPeriod configure the safety
	// controller's overshoot check.
	SafetyUp, SafetyDown int
	OvershootPeriod      time.Duration
	// MachineMaxUnhealthy, when not empty, is the safety controller's
	// remediation short-circuit (safety.Options.MaxUnhealthy): a number or
	// a percentage. An addition to MCM's flags; empty keeps MCM's
	// behaviour.
	MachineMaxUnhealthy string
	// MachineMaxReplicas is the most machines a MachineSet or a
	// MachineDeployment runs (machineset.Options.MaxReplicas and
	// deployment.Options.MaxReplicas): one whose spec.replicas asks for
	// more runs this many and says so in its mcmkit.io/ReplicasCapped
	// condition and a Warning event. An addition to MCM's flags; MCM has
	// no ceiling.
	MachineMaxReplicas int
	// StatusCheckPeriod and StatusCheckTimeout configure the safety
	// controller's API-server reachability check.
	StatusCheckPeriod, StatusCheckTimeout time.Duration
	// OrphanVMsPeriod is how often the safety controller looks for orphan
	// VMs.
	OrphanVMsPeriod time.Duration
	// OrphanGracePeriod is how long a VM must look orphaned before it is
	// deleted. An addition to MCM's flags, which has no grace period.
	OrphanGracePeriod time.Duration

	LeaderElect    bool
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration
	LeaseNamespace string // empty: Namespace
	// LeaseName is the lease of the MachineControllerManagerGroup (the
	// MachineSet and MachineDeployment controllers), MachineLeaseName the
	// lease of the MachineControllerGroup (the machine and safety
	// controllers): by default the leases of MCM's two processes, so that
	// this manager and MCM never run one controller twice (see the package
	// documentation).
	LeaseName        string
	MachineLeaseName string
	// ResourceLock is the kind of lock: only "leases", the one kind
	// client-go still has (MCM's flag and default).
	ResourceLock string
	// LeaderElectIdentity names this instance in the lease (no flag);
	// empty means the hostname plus a random suffix.
	LeaderElectIdentity string

	// Address and Port of the HTTP server (/metrics, /healthz, /readyz,
	// /debug/pprof with Profiling). Port 0 serves nothing.
	Address   string
	Port      int
	Profiling bool
	// ContentionProfiling, with Profiling, records every blocking event
	// for /debug/pprof/block (runtime.SetBlockProfileRate(1)), as MCM does.
	ContentionProfiling bool
	// MetricsSecure serves the HTTP server over TLS and serves /metrics
	// and /debug/pprof/ only to callers whose bearer token the control
	// cluster authenticates (TokenReview) and authorizes for the path
	// (SubjectAccessReview); /healthz and /readyz stay open to the probes.
	// An addition to MCM's flags; false keeps MCM's plain HTTP. It needs
	// the HTTP server (Port): Handler is never behind it.
	MetricsSecure bool
	// MetricsCertFile and MetricsKeyFile, with MetricsSecure, are the
	// serving certificate and key (PEM), reread when they change; without
	// them a self-signed certificate is generated at every start.
	MetricsCertFile, MetricsKeyFile string

	// Verbosity of the log (-v).
	Verbosity int

	// IgnoredFlags are the flags of MCM that were given and mean nothing
	// here (see the package documentation), in the order given, then the
	// leader election flags given with --leader-elect=false. BindFlags and
	// ParseFlags fill it; Run names them in one warning line.
	IgnoredFlags []string
}

// DefaultConfig returns the flag defaults. The kubeconfigs and the driver
// have none: they must be given.
func DefaultConfig() Config {
	d := v1alpha1.DefaultMachineConfiguration()
	return Config{
		Namespace:                DefaultNamespace,
		Controllers:              []string{AllControllers},
		ConcurrentSyncs:          DefaultConcurrentSyncs,
		KubeAPIQPS:               DefaultKubeAPIQPS,
		KubeAPIBurst:             DefaultKubeAPIBurst,
		MachineCreationTimeout:   d.MachineCreationTimeout.Duration,
		MachineHealthTimeout:     d.MachineHealthTimeout.Duration,
		MachineDrainTimeout:      d.MachineDrainTimeout.Duration,
		MachineMaxEvictRetries:   int(*d.MaxEvictRetries),
		MachinePVDetachTimeout:   DefaultPVDetachTimeout,
		MachinePVReattachTimeout: DefaultPVReattachTimeout,
		ResourceExhaustedRetry:   DefaultResourceExhaustedRe,
		NodeConditions:           *d.NodeConditions,
		AutoscalerScaleDownAnnotationDuringRollout: true,
		SafetyUp:           safety.DefaultSafetyUp,
		SafetyDown:         safety.DefaultSafetyDown,
		OvershootPeriod:    safety.DefaultOvershootPeriod,
		StatusCheckPeriod:  safety.DefaultStatusCheckPeriod,
		StatusCheckTimeout: safety.DefaultStatusCheckTimeout,
		OrphanVMsPeriod:    safety.DefaultOrphanVMsPeriod,
		OrphanGracePeriod:  safety.DefaultOrphanGracePeriod,
		MachineMaxReplicas: machineset.DefaultMaxReplicas,
		LeaderElect:        true,
		LeaseDuration:      DefaultLeaseDuration,
		RenewDeadline:      DefaultRenewDeadline,
		RetryPeriod:        DefaultRetryPeriod,
		LeaseName:          DefaultLeaseName,
		MachineLeaseName:   DefaultMachineLeaseName,
		ResourceLock:       DefaultResourceLock,
		KubeAPIContentType: DefaultKubeAPIContentType,
		Address:            DefaultAddress,
		Port:               DefaultPort,

		SimKubeletQPS:             DefaultSimKubeletQPS,
		SimKubeletBurst:           DefaultSimKubeletBurst,
		SimKubeletParallelism:     sim.DefaultParallelism,
		SimNodeLeaseDuration:      DefaultSimNodeLeaseDuration,
		SimNodeLeaseRenewPeriod:   DefaultSimNodeLeaseRenewPeriod,
		SimNodeStatusReportPeriod: DefaultSimNodeStatusReportPeriod,
	}
}

// listFlag is a comma-separated list.
type listFlag struct{ list *[]string }

func (l listFlag) String() string {
	if l.list == nil {
		return ""
	}
	return strings.Join(*l.list, ",")
}

func (l listFlag) Set(s string) error {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	*l.list = out
	return nil
}

// BindFlags defines the manager's flags on fs, with c's current values as
// defaults, writing into c when fs is parsed.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.ControlKubeconfig, "control-kubeconfig", c.ControlKubeconfig,
		"control cluster (machines, classes, secrets, lease): kubeconfig path or "+InCluster+" (required)")
	fs.StringVar(&c.TargetKubeconfig, "target-kubeconfig", c.TargetKubeconfig,
		"target cluster (nodes, pods, volumes): kubeconfig path, "+InCluster+" or "+NoTarget+" (required)")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "control cluster namespace whose machine objects are managed")
	fs.Var(listFlag{&c.Controllers}, "controllers", "comma-separated controllers to run, or "+AllControllers+" for all")
	fs.StringVar(&c.Driver, "driver", c.Driver, "driver registry entry that talks to the cloud (required by the machine controller)")
	fs.IntVar(&c.ConcurrentSyncs, "concurrent-syncs", c.ConcurrentSyncs, "workers per machine queue")
	fs.IntVar(&c.ConcurrentCreations, "concurrent-creations", c.ConcurrentCreations,
		"machine workers that may create machines at once, below --concurrent-syncs, so that creations hung in the cloud leave workers for deletions and health checks (0: four fifths of --concurrent-syncs)")
	fs.Var(&c.DriverTimeouts, "driver-timeouts",
		"deadlines of driver calls, comma-separated Operation=duration; a call past its deadline fails its machine with DeadlineExceeded and is retried, "+
			"one that ignores its deadline is abandoned and named by /readyz; operations not given keep their defaults, "+(&driver.Timeouts{}).String())
	fs.Float64Var(&c.KubeAPIQPS, "kube-api-qps", c.KubeAPIQPS, "queries per second of each client: each controller group has its own clients of each cluster")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", c.KubeAPIBurst, "burst of queries of each client")
	fs.DurationVar(&c.MachineCreationTimeout, "machine-creation-timeout", c.MachineCreationTimeout, "how long a new machine may take to join")
	fs.DurationVar(&c.MachineHealthTimeout, "machine-health-timeout", c.MachineHealthTimeout, "how long a machine may be unhealthy before it is Failed")
	fs.DurationVar(&c.MachineDrainTimeout, "machine-drain-timeout", c.MachineDrainTimeout, "how long a drain may take before pods are force-deleted")
	fs.IntVar(&c.MachineMaxEvictRetries, "machine-max-evict-retries", c.MachineMaxEvictRetries, "eviction attempts per pod during a drain")
	fs.DurationVar(&c.MachinePVDetachTimeout, "machine-pv-detach-timeout", c.MachinePVDetachTimeout, "how long to wait for volumes to detach from a drained node")
	fs.DurationVar(&c.MachinePVReattachTimeout, "machine-pv-reattach-timeout", c.MachinePVReattachTimeout, "how long to wait for volumes to attach elsewhere")
	fs.DurationVar(&c.ResourceExhaustedRetry, "resource-exhausted-retry", c.ResourceExhaustedRetry, "first wait after a ResourceExhausted driver error")
	fs.StringVar(&c.NodeConditions, "node-conditions", c.NodeConditions, "comma-separated node conditions that make a machine unhealthy while True")
	fs.BoolVar(&c.AutoscalerScaleDownAnnotationDuringRollout, "autoscaler-scaledown-annotation-during-rollout", c.AutoscalerScaleDownAnnotationDuringRollout,
		"keep the cluster-autoscaler from scaling down a deployment's nodes during its rollout")
	fs.IntVar(&c.SafetyUp, "safety-up", c.SafetyUp, "machines above a set's most (deployment replicas + maxSurge, or twice its replicas) at which it is frozen")
	fs.IntVar(&c.SafetyDown, "safety-down", c.SafetyDown, "how far below the freezing count a frozen set is unfrozen")
	fs.DurationVar(&c.OvershootPeriod, "machine-safety-overshooting-period", c.OvershootPeriod, "how often every namespace is checked for overshooting sets")
	fs.StringVar(&c.MachineMaxUnhealthy, "machine-max-unhealthy", c.MachineMaxUnhealthy,
		"with the safety controller: let no health timeout mark a machine of a deployment Failed while more of its machines than this number or percentage are unhealthy at once (a zone or network outage); join timeouts are not gated, as in MCM; empty: no limit, as MCM")
	fs.IntVar(&c.MachineMaxReplicas, "machine-max-replicas", c.MachineMaxReplicas,
		"most machines a machine set or machine deployment runs: one whose replicas ask for more runs this many and says so in its mcmkit.io/ReplicasCapped condition")
	fs.DurationVar(&c.OrphanVMsPeriod, "machine-safety-orphan-vms-period", c.OrphanVMsPeriod, "how often the VMs of every class are checked for orphans")
	fs.DurationVar(&c.OrphanGracePeriod, "machine-safety-orphan-vms-grace-period", c.OrphanGracePeriod,
		"how long a VM must look orphaned (no machine claims it, an uncached read confirms) before it is deleted")
	fs.DurationVar(&c.StatusCheckPeriod, "machine-safety-apiserver-statuscheck-period", c.StatusCheckPeriod, "how often the API servers' reachability is checked")
	fs.DurationVar(&c.StatusCheckTimeout, "machine-safety-apiserver-statuscheck-timeout", c.StatusCheckTimeout,
		"how long an API server may be out of reach before machine creation and health timeouts freeze")
	fs.StringVar(&c.SimStateFile, "sim-state-file", c.SimStateFile,
		"with --driver=sim: keep the simulated cloud's VMs in this file, so that a restarted manager finds them (one process per file)")
	fs.Float64Var(&c.SimKubeletQPS, "sim-kubelet-qps", c.SimKubeletQPS,
		"with --driver=sim: queries per second of the simulated kubelet's own target-cluster client; its lease renewals alone need nodes / --sim-node-lease-renew-period")
	fs.IntVar(&c.SimKubeletBurst, "sim-kubelet-burst", c.SimKubeletBurst, "with --driver=sim: burst of the simulated kubelet's target-cluster client")
	fs.IntVar(&c.SimKubeletParallelism, "sim-kubelet-parallelism", c.SimKubeletParallelism,
		"with --driver=sim: how many API calls the simulated kubelet makes at once; registering many nodes at once needs more")
	fs.DurationVar(&c.SimNodeLeaseDuration, "sim-node-lease-duration", c.SimNodeLeaseDuration,
		"with --driver=sim: duration of the simulated nodes' leases, whole seconds")
	fs.DurationVar(&c.SimNodeLeaseRenewPeriod, "sim-node-lease-renew-period", c.SimNodeLeaseRenewPeriod,
		"with --driver=sim: how often a simulated node's lease is renewed (0: a quarter of --sim-node-lease-duration, as the kubelet); "+
			"kube-controller-manager's --node-monitor-grace-period must exceed it with margin")
	fs.DurationVar(&c.SimNodeStatusReportPeriod, "sim-node-status-report-period", c.SimNodeStatusReportPeriod,
		"with --driver=sim: how often a simulated node's unchanged status is written again (a changed one is written at once)")
	fs.BoolVar(&c.LeaderElect, "leader-elect", c.LeaderElect,
		"elect a leader per controller group through a Lease in the control cluster; only the leader of a group runs its controllers")
	fs.DurationVar(&c.LeaseDuration, "leader-elect-lease-duration", c.LeaseDuration, "how long standbys wait before taking over an unrenewed lease")
	fs.DurationVar(&c.RenewDeadline, "leader-elect-renew-deadline", c.RenewDeadline, "how long the leader retries renewing before it gives up leadership")
	fs.DurationVar(&c.RetryPeriod, "leader-elect-retry-period", c.RetryPeriod, "how often to try to acquire or renew the lease")
	fs.StringVar(&c.ResourceLock, "leader-elect-resource-lock", c.ResourceLock, "kind of lock: only leases (the one client-go still has)")
	fs.StringVar(&c.LeaseNamespace, "leader-elect-resource-namespace", c.LeaseNamespace, "namespace of the leases (default: --namespace, as MCM)")
	fs.StringVar(&c.LeaseName, "leader-elect-resource-name", c.LeaseName,
		"lease of the MachineSet and MachineDeployment controllers (the lease of MCM's machine-controller-manager process)")
	fs.StringVar(&c.MachineLeaseName, "leader-elect-machine-controller-resource-name", c.MachineLeaseName,
		"lease of the machine and safety controllers (the lease of MCM's machine-controller process)")
	fs.StringVar(&c.Address, "address", c.Address, "IP address of the HTTP server (metrics, health, pprof)")
	fs.IntVar(&c.Port, "port", c.Port, "port of the HTTP server; 0 serves nothing")
	fs.BoolVar(&c.Profiling, "profiling", c.Profiling, "serve /debug/pprof on the HTTP server")
	fs.BoolVar(&c.ContentionProfiling, "contention-profiling", c.ContentionProfiling,
		"with --profiling: record every blocking event for /debug/pprof/block (costs CPU)")
	fs.BoolVar(&c.MetricsSecure, "metrics-secure", c.MetricsSecure,
		"serve HTTPS, and /metrics and /debug/pprof only to bearer tokens the control cluster authenticates and authorizes for the path (RBAC nonResourceURLs); "+
			"/healthz and /readyz stay open; false: plain HTTP, as MCM")
	fs.StringVar(&c.MetricsCertFile, "metrics-cert-file", c.MetricsCertFile,
		"with --metrics-secure: PEM serving certificate, reread when it changes (default: a self-signed one generated at start)")
	fs.StringVar(&c.MetricsKeyFile, "metrics-key-file", c.MetricsKeyFile, "with --metrics-secure: PEM private key of --metrics-cert-file")
	fs.StringVar(&c.KubeAPIContentType, "kube-api-content-type", c.KubeAPIContentType,
		"content type the clients of Kubernetes' own types send and prefer: "+runtime.ContentTypeProtobuf+" or "+runtime.ContentTypeJSON+
			" (machine.sapcloud.io resources always JSON: custom resources have no protobuf)")
	fs.Var(listFlag{&c.BootstrapTokenAuthExtraGroups}, "bootstrap-token-auth-extra-groups",
		"comma-separated groups (system:bootstrappers:...) the nodes' bootstrap tokens authenticate as besides their own (auth-extra-groups)")
	fs.IntVar(&c.Verbosity, "v", c.Verbosity, "log verbosity")
	c.bindIgnored(fs)
}

// An ignoredFlag is a flag of MCM's machine-controller-manager or
// machine-controller that means nothing here. It is accepted, with MCM's
// type and default, so that MCM's command lines work unchanged; a value
// MCM would refuse is refused too. Given, it is named in Config.IgnoredFlags
// and so in the warning Run logs.
type ignoredFlag struct {
	name string
	// kind names the value's type in -h.
	kind string
	// value parses as MCM does and checks what MCM checks; its String is
	// MCM's default.
	value func() flag.Value
	// why it means nothing here, for -h.
	why string
}

// ignoredFlags are MCM's flags that mean nothing here, and why.
var ignoredFlags = []ignoredFlag{
	{"cloud-provider", "string", func() flag.Value { return new(stringValue) }, "MCM reads it nowhere; the cloud is --driver"},
	{"controller-start-interval", "duration", func() flag.Value { return nonNegativeDuration(0) }, "MCM reads it nowhere"},
	{"min-resync-period", "duration", func() flag.Value { return nonNegativeDuration(12 * time.Hour) },
		"informers here never resync: each controller requeues what time drives by itself (a settled machine every 10m)"},
	{"machine-inplace-update-timeout", "duration", func() flag.Value { return nonNegativeDuration(20 * time.Minute) },
		"this manager does not update machines in place"},
	{"machine-preserve-timeout", "duration", func() flag.Value { return nonNegativeDuration(96 * time.Hour) },
		"this manager does not preserve failed machines"},
	{"log-flush-frequency", "duration", func() flag.Value { return nonNegativeDuration(5 * time.Second) },
		"the log is written line by line, unbuffered: there is nothing to flush"},
	{"vmodule", "pattern=N,...", func() flag.Value { return new(moduleSpec) }, "the log has one verbosity, -v, for every file"},
}

// bindIgnored defines the ignoredFlags on fs; each one given is appended
// to c.IgnoredFlags (once) when fs is parsed.
func (c *Config) bindIgnored(fs *flag.FlagSet) {
	for _, f := range ignoredFlags {
		fs.Var(&ignoredValue{Value: f.value(), name: f.name, seen: &c.IgnoredFlags}, f.name, ignoredUsage+", a `"+f.kind+"`: "+f.why)
	}
}

// ignoredUsage starts the help text of every ignored flag.
const ignoredUsage = "(ignored, accepted for compatibility with MCM)"

// ignoredValue records that its flag was given.
type ignoredValue struct {
	flag.Value
	name string
	seen *[]string
}

func (v *ignoredValue) String() string {
	if v == nil || v.Value == nil {
		return "" // the zero value flag.PrintDefaults makes
	}
	return v.Value.String()
}

func (v *ignoredValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return err
	}
	if !slices.Contains(*v.seen, v.name) {
		*v.seen = append(*v.seen, v.name)
	}
	return nil
}

// IsBoolFlag is false: none of the ignored flags is a bool, and the
// embedded Value must not make one look like it.
func (v *ignoredValue) IsBoolFlag() bool { return false }

type stringValue string

func (s *stringValue) String() string     { return string(*s) }
func (s *stringValue) Set(v string) error { *s = stringValue(v); return nil }

// durationValue is a duration that, as MCM checks, must not be negative.
type durationValue time.Duration

func nonNegativeDuration(d time.Duration) *durationValue { v := durationValue(d); return &v }

func (d *durationValue) String() string { return time.Duration(*d).String() }
func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("parse error")
	}
	if v < 0 {
		return fmt.Errorf("must not be negative")
	}
	*d = durationValue(v)
	return nil
}

// moduleSpec is klog's --vmodule syntax: comma-separated pattern=N.
type moduleSpec string

func (m *moduleSpec) String() string { return string(*m) }
func (m *moduleSpec) Set(s string) error {
	for item := range strings.SplitSeq(s, ",") {
		if item == "" {
			continue
		}
		pattern, level, ok := strings.Cut(item, "=")
		if !ok || pattern == "" || level == "" {
			return fmt.Errorf("%q is not pattern=N", item)
		}
		if _, err := strconv.ParseInt(level, 10, 32); err != nil {
			return fmt.Errorf("%q: the level is not a number", item)
		}
	}
	*m = moduleSpec(s)
	return nil
}

// leaderElectFlags are meaningless with --leader-elect=false. MCM accepts
// them then, and deployments that turn election off for a single replica
// keep passing them: given, they are named among Config.IgnoredFlags.
var leaderElectFlags = []string{
	"leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period", "leader-elect-resource-lock",
	"leader-elect-resource-namespace", "leader-elect-resource-name", "leader-elect-machine-controller-resource-name",
}

// ParseFlags parses args into a Config that starts from DefaultConfig and
// validates it against the controller and driver tables. Flags that
// contradict each other are an error. It returns flag.ErrHelp, after
// printing the usage to usage, for -h. MCM's spellings are accepted too:
// underscores for dashes in flag names (--machine_drain_timeout) and -v3
// for -v=3, as MCM's flag library takes them.
func ParseFlags(name string, args []string, controllers Controllers, drivers Drivers, usage io.Writer) (Config, error) {
	c := DefaultConfig()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	c.BindFlags(fs)
	fs.SetOutput(io.Discard) // errors are reported in one line by the caller
	fs.Usage = func() {}
	if err := fs.Parse(mcmSpellings(args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(usage, name, fs)
			return c, err
		}
		if flagName, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			return c, fmt.Errorf("unknown flag --%s: neither this manager's nor machine-controller-manager's", flagName)
		}
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q: %s takes flags only", fs.Arg(0), name)
	}
	if err := checkExplicit(fs, &c); err != nil {
		return c, err
	}
	return c, c.Validate(controllers, drivers)
}

// mcmSpellings rewrites the spellings MCM's flag library (pflag, with
// Kubernetes' word-separator normalization) accepts and Go's does not:
// --a_b for --a-b, and -vN, the short flag with its value attached, for
// -v=N. Values and everything after "--" are left alone.
func mcmSpellings(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			out = append(out, a)
			continue
		}
		dashes := "-"
		if strings.HasPrefix(a, "--") {
			dashes = "--"
		}
		flagName, value, hasValue := strings.Cut(a[len(dashes):], "=")
		if dashes == "-" && !hasValue && len(flagName) > 1 && flagName[0] == 'v' && isDigits(flagName[1:]) {
			out = append(out, "-v="+flagName[1:])
			continue
		}
		flagName = strings.ReplaceAll(flagName, "_", "-")
		if hasValue {
			flagName += "=" + value
		}
		out = append(out, dashes+flagName)
	}
	return out
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// printUsage prints the flags of fs, the ignored ones of MCM in a group of
// their own at the end.
func printUsage(w io.Writer, name string, fs *flag.FlagSet) {
	used := flag.NewFlagSet(name, flag.ContinueOnError)
	ignored := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.VisitAll(func(f *flag.Flag) {
		to := used
		if strings.HasPrefix(f.Usage, ignoredUsage) {
			to = ignored
		}
		to.Var(f.Value, f.Name, f.Usage)
		to.Lookup(f.Name).DefValue = f.DefValue
	})
	fmt.Fprintf(w, "Usage of %s:\n", name)
	used.SetOutput(w)
	used.PrintDefaults()
	fmt.Fprintf(w, "\nFlags of machine-controller-manager accepted for compatibility and ignored (a warning at start-up names those given):\n")
	ignored.SetOutput(w)
	ignored.PrintDefaults()
}

// checkExplicit rejects flags that were set but cannot take effect, and
// adds those MCM takes without effect to c.IgnoredFlags.
func checkExplicit(fs *flag.FlagSet, c *Config) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !c.LeaderElect {
		for _, f := range leaderElectFlags {
			if set[f] {
				c.IgnoredFlags = append(c.IgnoredFlags, f)
			}
		}
	}
	if c.Port == 0 && set["profiling"] && c.Profiling {
		return errors.New("--profiling needs the HTTP server, but --port=0 disables it")
	}
	for _, f := range simFlags {
		if set[f] && c.Driver != "sim" {
			return fmt.Errorf("--%s is for --driver=sim, not %q", f, c.Driver)
		}
	}
	for _, f := range simKubeletFlags {
		if set[f] && c.TargetKubeconfig == NoTarget {
			return fmt.Errorf("--%s contradicts --target-kubeconfig=%s: without a target cluster there is no simulated kubelet", f, NoTarget)
		}
	}
	return nil
}

// simKubeletFlags configure the sim driver's simulated kubelet, which runs
// only with a target cluster.
var simKubeletFlags = []string{
	"sim-kubelet-qps", "sim-kubelet-burst", "sim-kubelet-parallelism", "sim-node-lease-duration", "sim-node-lease-renew-period", "sim-node-status-report-period",
}

// simFlags are meaningless with another driver than sim.
var simFlags = append([]string{"sim-state-file"}, simKubeletFlags...)

// Validate checks c against the controller and driver tables and returns
// every problem, each naming its flag, joined in one line.
func (c Config) Validate(controllers Controllers, drivers Drivers) error {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }

	checkKubeconfig := func(flagName, value string, allowNone bool) {
		switch value {
		case "":
			hint := "a kubeconfig path or " + InCluster
			if allowNone {
				hint += " or " + NoTarget
			}
			add("--%s is required (%s)", flagName, hint)
		case InCluster, mcmInCluster:
		case NoTarget:
			if !allowNone {
				add("--%s cannot be %q: the control cluster is required", flagName, NoTarget)
			}
		default:
			if fi, err := os.Stat(value); err != nil {
				var pe *os.PathError
				if errors.As(err, &pe) {
					err = pe.Err
				}
				add("--%s: kubeconfig %s: %v", flagName, value, err)
			} else if fi.IsDir() {
				add("--%s: kubeconfig %s is a directory", flagName, value)
			}
		}
	}
	checkKubeconfig("control-kubeconfig", c.ControlKubeconfig, false)
	checkKubeconfig("target-kubeconfig", c.TargetKubeconfig, true)

	if c.Namespace == "" {
		add("--namespace must not be empty")
	}
	selected, err := c.selectedControllers(controllers)
	if err != nil {
		add("%v", err)
	}
	needsDriver := false
	for _, n := range selected {
		needsDriver = needsDriver || controllers[n].NeedsDriver
		if g := controllers[n].Group; !slices.Contains(groups, g) {
			add("controller %q: its table entry names no group (%s or %s), got %q", n, MachineControllerGroup, MachineControllerManagerGroup, g)
		}
	}
	switch {
	case c.Driver == "" && needsDriver:
		add("--driver is required by the selected controllers (known: %s)", strings.Join(sortedKeys(drivers), ", "))
	case c.Driver != "" && drivers[c.Driver] == nil:
		add("--driver: unknown driver %q (known: %s)", c.Driver, strings.Join(sortedKeys(drivers), ", "))
	}

	if c.ConcurrentSyncs < 1 {
		add("--concurrent-syncs must be at least 1, got %d", c.ConcurrentSyncs)
	}
	if c.ConcurrentCreations < 0 || c.ConcurrentCreations > 0 && c.ConcurrentSyncs > 1 && c.ConcurrentCreations >= c.ConcurrentSyncs {
		add("--concurrent-creations must be 0 or below --concurrent-syncs (%d), got %d", c.ConcurrentSyncs, c.ConcurrentCreations)
	}
	if err := c.DriverTimeouts.Validate(); err != nil {
		add("--driver-timeouts: %v", err)
	}
	if c.KubeAPIQPS <= 0 {
		add("--kube-api-qps must be positive, got %v", c.KubeAPIQPS)
	}
	if c.KubeAPIBurst < 1 {
		add("--kube-api-burst must be at least 1, got %d", c.KubeAPIBurst)
	}
	if c.KubeAPIContentType != runtime.ContentTypeProtobuf && c.KubeAPIContentType != runtime.ContentTypeJSON {
		add("--kube-api-content-type must be %s or %s, got %q", runtime.ContentTypeProtobuf, runtime.ContentTypeJSON, c.KubeAPIContentType)
	}
	for _, g := range c.BootstrapTokenAuthExtraGroups {
		if err := machine.ValidateBootstrapGroup(g); err != nil {
			add("--bootstrap-token-auth-extra-groups: %v; the API server would refuse the tokens", err)
		}
	}
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{
		{"machine-creation-timeout", c.MachineCreationTimeout},
		{"machine-health-timeout", c.MachineHealthTimeout},
		{"machine-drain-timeout", c.MachineDrainTimeout},
		{"machine-pv-detach-timeout", c.MachinePVDetachTimeout},
		{"machine-pv-reattach-timeout", c.MachinePVReattachTimeout},
		{"resource-exhausted-retry", c.ResourceExhaustedRetry},
	} {
		if d.value < 0 {
			add("--%s must not be negative, got %v", d.flag, d.value)
		}
	}
	if c.MachineMaxEvictRetries < 0 {
		add("--machine-max-evict-retries must not be negative, got %d", c.MachineMaxEvictRetries)
	}
	// Zero would mean the library's default, not zero: refuse it rather
	// than run with another value than the one asked for.
	if c.SafetyUp < 1 || c.SafetyDown < 1 {
		add("--safety-up and --safety-down must be at least 1, got %d and %d", c.SafetyUp, c.SafetyDown)
	}
	if c.OrphanGracePeriod <= 0 {
		add("--machine-safety-orphan-vms-grace-period must be positive, got %v", c.OrphanGracePeriod)
	}
	if c.OvershootPeriod <= 0 || c.OrphanVMsPeriod <= 0 || c.StatusCheckPeriod <= 0 || c.StatusCheckTimeout <= 0 {
		add("--machine-safety-overshooting-period, -orphan-vms-period, -apiserver-statuscheck-period and -apiserver-statuscheck-timeout must be positive, got %v, %v, %v and %v",
			c.OvershootPeriod, c.OrphanVMsPeriod, c.StatusCheckPeriod, c.StatusCheckTimeout)
	}
	if _, err := safety.ParseMaxUnhealthy(c.MachineMaxUnhealthy); err != nil {
		add("--machine-max-unhealthy: %v", err)
	}
	// Zero would mean the libraries' default, not zero.
	if c.MachineMaxReplicas < 1 {
		add("--machine-max-replicas must be at least 1, got %d", c.MachineMaxReplicas)
	}
	for cond := range strings.SplitSeq(c.NodeConditions, ",") {
		if c.NodeConditions != "" && (cond == "" || strings.TrimSpace(cond) != cond || strings.ContainsAny(cond, " \t")) {
			add("--node-conditions: %q is not a comma-separated list of condition types", c.NodeConditions)
			break
		}
	}
	if c.LeaderElect {
		switch {
		case c.LeaseDuration <= 0 || c.RenewDeadline <= 0 || c.RetryPeriod <= 0:
			add("--leader-elect-lease-duration, -renew-deadline and -retry-period must be positive")
		case c.LeaseDuration <= c.RenewDeadline:
			add("--leader-elect-lease-duration (%v) must be greater than --leader-elect-renew-deadline (%v)", c.LeaseDuration, c.RenewDeadline)
		case float64(c.RenewDeadline) <= 1.2*float64(c.RetryPeriod):
			add("--leader-elect-renew-deadline (%v) must be greater than 1.2 × --leader-elect-retry-period (%v)", c.RenewDeadline, c.RetryPeriod)
		}
		switch {
		case c.LeaseName == "" || c.MachineLeaseName == "":
			add("--leader-elect-resource-name and --leader-elect-machine-controller-resource-name must not be empty")
		case c.LeaseName == c.MachineLeaseName:
			// One lease for two groups would have two electors of one
			// identity renewing it, each believing it leads.
			add("--leader-elect-resource-name and --leader-elect-machine-controller-resource-name must differ, both are %q", c.LeaseName)
		}
		if c.ResourceLock != DefaultResourceLock {
			add("--leader-elect-resource-lock must be %q, got %q: Kubernetes has removed the other kinds of lock", DefaultResourceLock, c.ResourceLock)
		}
	}
	errs = append(errs, c.validateSim()...)
	if c.Port < 0 || c.Port > 65535 {
		add("--port must be between 0 and 65535, got %d", c.Port)
	}
	if net.ParseIP(c.Address) == nil {
		add("--address must be an IP address, got %q", c.Address)
	}
	if c.ContentionProfiling && !c.Profiling {
		add("--contention-profiling needs --profiling")
	}
	errs = append(errs, c.validateMetricsSecure()...)
	if c.Verbosity < 0 {
		add("-v must not be negative, got %d", c.Verbosity)
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; "))
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

// selectedControllers resolves --controllers against the table, sorted.
func (c Config) selectedControllers(controllers Controllers) ([]string, error) {
	if len(c.Controllers) == 0 {
		return nil, fmt.Errorf("--controllers selects nothing (known: %s)", strings.Join(sortedKeys(controllers), ", "))
	}
	var out []string
	for _, n := range c.Controllers {
		if n == AllControllers {
			return sortedKeys(controllers), nil
		}
		if _, ok := controllers[n]; !ok {
			return nil, fmt.Errorf("--controllers: unknown controller %q (known: %s)", n, strings.Join(sortedKeys(controllers), ", "))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// leaseNamespace is the namespace of the leader-election lease.
func (c Config) leaseNamespace() string {
	if c.LeaseNamespace != "" {
		return c.LeaseNamespace
	}
	return c.Namespace
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
