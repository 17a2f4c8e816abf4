package flags

import (
	"flag"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

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
// defaults, writing into c when fs is parsed: MCM's flags with MCM's names
// and types, ours, and MCM's that mean nothing here (see Config.IgnoredFlags).
func (c *Config) BindFlags(fs *flag.FlagSet) {
	c.bindSelection(fs)
	c.bindClients(fs)
	c.bindMachine(fs)
	c.bindSafety(fs)
	c.bindSim(fs)
	c.bindLeaderElection(fs)
	c.bindServer(fs)
	c.bindIgnored(fs)
}

// bindSelection binds what the manager manages, where, and with which
// controllers and driver.
func (c *Config) bindSelection(fs *flag.FlagSet) {
	fs.StringVar(&c.ControlKubeconfig, "control-kubeconfig", c.ControlKubeconfig,
		"control cluster (machines, classes, secrets, lease): kubeconfig path or "+InCluster+" (required)")
	fs.StringVar(&c.TargetKubeconfig, "target-kubeconfig", c.TargetKubeconfig,
		"target cluster (nodes, pods, volumes): kubeconfig path, "+InCluster+" or "+NoTarget+" (required)")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "control cluster namespace whose machine objects are managed")
	fs.Var(listFlag{&c.Controllers}, "controllers", "comma-separated controllers to run, or "+AllControllers+" for all")
	fs.StringVar(&c.Driver, "driver", c.Driver, "driver registry entry that talks to the cloud (required by the machine controller)")
}

// bindClients binds the workers and the clients' limits.
func (c *Config) bindClients(fs *flag.FlagSet) {
	fs.IntVar(&c.ConcurrentSyncs, "concurrent-syncs", c.ConcurrentSyncs, "workers per machine queue")
	fs.IntVar(&c.ConcurrentCreations, "concurrent-creations", c.ConcurrentCreations,
		"machine workers that may create machines at once, below --concurrent-syncs, so that creations hung in the cloud leave workers for deletions and health checks (0: four fifths of --concurrent-syncs)")
	fs.Var(&c.DriverTimeouts, "driver-timeouts",
		"deadlines of driver calls, comma-separated Operation=duration; a call past its deadline fails its machine with DeadlineExceeded and is retried, "+
			"one that ignores its deadline is abandoned and named by /readyz; operations not given keep their defaults, "+(&driver.Timeouts{}).String())
	fs.Float64Var(&c.KubeAPIQPS, "kube-api-qps", c.KubeAPIQPS, "queries per second of each client: each controller group has its own clients of each cluster")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", c.KubeAPIBurst, "burst of queries of each client")
	fs.StringVar(&c.KubeAPIContentType, "kube-api-content-type", c.KubeAPIContentType,
		"content type the clients of Kubernetes' own types send and prefer: "+runtime.ContentTypeProtobuf+" or "+runtime.ContentTypeJSON+
			" (machine.sapcloud.io resources always JSON: custom resources have no protobuf)")
}

// bindMachine binds the machine controller's settings.
func (c *Config) bindMachine(fs *flag.FlagSet) {
	fs.DurationVar(&c.MachineCreationTimeout, "machine-creation-timeout", c.MachineCreationTimeout, "how long a new machine may take to join")
	fs.DurationVar(&c.MachineHealthTimeout, "machine-health-timeout", c.MachineHealthTimeout, "how long a machine may be unhealthy before it is Failed")
	fs.DurationVar(&c.MachinePreserveTimeout, "machine-preserve-timeout", c.MachinePreserveTimeout,
		"how long a machine is preserved (node.machine.sapcloud.io/preserve) when its machinePreserveTimeout is not set")
	fs.DurationVar(&c.MachineInPlaceUpdateTimeout, "machine-inplace-update-timeout", c.MachineInPlaceUpdateTimeout,
		"how long an in-place update of a machine may take, from its drain's end to the node agent's result, when its inPlaceUpdateTimeout is not set")
	fs.BoolVar(&c.MachineKeepPreservedOnScaleDown, "machine-keep-preserved-on-scale-down", c.MachineKeepPreservedOnScaleDown,
		"let a machine set's scale-down stop short of its preserved machines until their preservation ends, instead of deleting them last (MCM)")
	fs.DurationVar(&c.MachineDrainTimeout, "machine-drain-timeout", c.MachineDrainTimeout, "how long a drain may take before pods are force-deleted")
	fs.IntVar(&c.MachineMaxEvictRetries, "machine-max-evict-retries", c.MachineMaxEvictRetries, "eviction attempts per pod during a drain")
	fs.DurationVar(&c.MachinePVDetachTimeout, "machine-pv-detach-timeout", c.MachinePVDetachTimeout, "how long to wait for volumes to detach from a drained node")
	fs.DurationVar(&c.MachinePVReattachTimeout, "machine-pv-reattach-timeout", c.MachinePVReattachTimeout, "how long to wait for volumes to attach elsewhere")
	fs.DurationVar(&c.ResourceExhaustedRetry, "resource-exhausted-retry", c.ResourceExhaustedRetry, "first wait after a ResourceExhausted driver error")
	fs.StringVar(&c.NodeConditions, "node-conditions", c.NodeConditions, "comma-separated node conditions that make a machine unhealthy while True")
	fs.BoolVar(&c.AutoscalerScaleDownAnnotationDuringRollout, "autoscaler-scaledown-annotation-during-rollout", c.AutoscalerScaleDownAnnotationDuringRollout,
		"keep the cluster-autoscaler from scaling down a deployment's nodes during its rollout")
	fs.BoolVar(&c.InPlaceCriticalComponentsTaint, "inplace-critical-components-taint", c.InPlaceCriticalComponentsTaint,
		"taint the node of a machine whose in-place update is done "+v1alpha1.CriticalComponentsNotReadyTaintKey+
			":NoSchedule when it moves to the new set, as MCM does (Gardener removes it once the node's critical components run)")
	fs.Var(listFlag{&c.BootstrapTokenAuthExtraGroups}, "bootstrap-token-auth-extra-groups",
		"comma-separated groups (system:bootstrappers:...) the nodes' bootstrap tokens authenticate as besides their own (auth-extra-groups)")
}

// bindSafety binds the safety controller's settings and the replica ceiling.
func (c *Config) bindSafety(fs *flag.FlagSet) {
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
}

// bindSim binds the sim driver's settings.
func (c *Config) bindSim(fs *flag.FlagSet) {
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
}

// bindLeaderElection binds the leases of the two controller groups.
func (c *Config) bindLeaderElection(fs *flag.FlagSet) {
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
}

// bindServer binds the HTTP server and the log.
func (c *Config) bindServer(fs *flag.FlagSet) {
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
	fs.IntVar(&c.Verbosity, "v", c.Verbosity, "log verbosity")
}
