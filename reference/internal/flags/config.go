package flags

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/machine"
	"github.com/mcmkit/mcm/machineset"
	"github.com/mcmkit/mcm/safety/orphanvms"
	"github.com/mcmkit/mcm/safety/outage"
	"github.com/mcmkit/mcm/safety/overshoot"
)

// Special values of --control-kubeconfig and --target-kubeconfig.
const (
	// InCluster selects the pod's service account through
	// rest.InClusterConfig. MCM's spelling "inClusterConfig" is accepted too.
	InCluster = "in-cluster"
	// NoTarget (--target-kubeconfig only) runs without a target cluster:
	// no Nodes, no drain; machines become Available once their VM exists.
	NoTarget = "none"
	// MCMInCluster is MCM's spelling of InCluster.
	MCMInCluster = "inClusterConfig"
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
	DefaultLeaseName           = "machine-controller-manager" // MCM's machine-controller-manager process's lease
	DefaultMachineLeaseName    = "machine-controller"         // MCM's machine-controller process's lease
	DefaultResourceLock        = "leases"
	DefaultKubeAPIContentType  = runtime.ContentTypeProtobuf
	DefaultAddress             = "0.0.0.0"
	DefaultPort                = 10258
	DefaultPVDetachTimeout     = drain.DefaultDetachTimeout
	DefaultPVReattachTimeout   = drain.DefaultReattachTimeout
	DefaultResourceExhaustedRe = machine.DefaultLongRetry // machine.Options' ResourceExhaustedRetry default
)

// Defaults of the sim driver's kubelet flags; see the reference manager's
// SimDriverOptions. The
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
// Default, bind it to a flag.FlagSet with BindFlags or fill it in code,
// and check it with Validate (the manager's New does).
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
	// file so that a restarted manager finds its VMs (the manager's
	// SimDriverOptions).
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
	// node heartbeats (the manager's SimDriverOptions).
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

	MachineCreationTimeout time.Duration
	MachineHealthTimeout   time.Duration
	MachinePreserveTimeout time.Duration
	// MachineInPlaceUpdateTimeout bounds an in-place update of a machine
	// whose inPlaceUpdateTimeout is not set (MCM's flag of that name).
	MachineInPlaceUpdateTimeout time.Duration
	MachineDrainTimeout         time.Duration
	MachineMaxEvictRetries      int
	MachinePVDetachTimeout      time.Duration
	MachinePVReattachTimeout    time.Duration
	ResourceExhaustedRetry      time.Duration
	NodeConditions              string
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
	// MachineMaxUnhealthy, when not empty, is the replacement budget's
	// remediation short-circuit (budget.Options.MaxUnhealthy of package
	// safety/budget, reported by the overshoot check): a number or a
	// percentage. An addition to MCM's flags; empty keeps MCM's
	// behaviour.
	MachineMaxUnhealthy string
	// MachineMaxReplicas is the most machines a MachineSet or a
	// MachineDeployment runs (machineset.Options.MaxReplicas and
	// deployment.Options.MaxReplicas): one whose spec.replicas asks for
	// more runs this many and says so in its mcmkit.io/ReplicasCapped
	// condition and a Warning event. An addition to MCM's flags; MCM has
	// no ceiling.
	MachineMaxReplicas int
	// MachineKeepPreservedOnScaleDown makes a MachineSet's scale-down stop
	// short of its preserved machines until their preservation ends
	// (machineset.Options.KeepPreservedOnScaleDown). An addition to MCM's
	// flags; false keeps MCM's behaviour: preserved machines go last, and
	// go when the scale-down needs them.
	MachineKeepPreservedOnScaleDown bool
	// InPlaceCriticalComponentsTaint gives the node of a machine whose
	// in-place update is done the taint
	// node.gardener.cloud/critical-components-not-ready:NoSchedule when the
	// machine moves to its new set
	// (deployment.Options.CriticalComponentsNotReadyTaint). An addition to
	// MCM's flags: true, the default, is MCM's behaviour, which Gardener
	// relies on (its resource manager removes the taint once the node's
	// critical components run); false is for installations where nobody
	// would remove it.
	InPlaceCriticalComponentsTaint bool
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
	// The rate is the process's: the manager's Main sets it, Run does not.
	ContentionProfiling bool
	// MetricsSecure serves the HTTP server over TLS and serves /metrics
	// and /debug/pprof/ only to callers whose bearer token the control
	// cluster authenticates (TokenReview) and authorizes for the path
	// (SubjectAccessReview); /healthz and /readyz stay open to the probes.
	// An addition to MCM's flags; false keeps MCM's plain HTTP. It needs
	// the HTTP server (Port).
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
	// Parse fill it; the manager's Run names them in one warning line.
	IgnoredFlags []string
}

// Default returns the flag defaults. The kubeconfigs and the driver have
// none: they must be given.
func Default() Config {
	d := v1alpha1.DefaultMachineConfiguration()
	return Config{
		Namespace:                                  DefaultNamespace,
		Controllers:                                []string{AllControllers},
		ConcurrentSyncs:                            DefaultConcurrentSyncs,
		KubeAPIQPS:                                 DefaultKubeAPIQPS,
		KubeAPIBurst:                               DefaultKubeAPIBurst,
		MachineCreationTimeout:                     d.MachineCreationTimeout.Duration,
		MachineHealthTimeout:                       d.MachineHealthTimeout.Duration,
		MachinePreserveTimeout:                     d.MachinePreserveTimeout.Duration,
		MachineInPlaceUpdateTimeout:                d.MachineInPlaceUpdateTimeout.Duration,
		MachineDrainTimeout:                        d.MachineDrainTimeout.Duration,
		MachineMaxEvictRetries:                     int(*d.MaxEvictRetries),
		MachinePVDetachTimeout:                     DefaultPVDetachTimeout,
		MachinePVReattachTimeout:                   DefaultPVReattachTimeout,
		ResourceExhaustedRetry:                     DefaultResourceExhaustedRe,
		NodeConditions:                             *d.NodeConditions,
		AutoscalerScaleDownAnnotationDuringRollout: true,
		InPlaceCriticalComponentsTaint:             true,
		SafetyUp:                                   overshoot.DefaultSafetyUp,
		SafetyDown:                                 overshoot.DefaultSafetyDown,
		OvershootPeriod:                            overshoot.DefaultOvershootPeriod,
		StatusCheckPeriod:                          outage.DefaultStatusCheckPeriod,
		StatusCheckTimeout:                         outage.DefaultStatusCheckTimeout,
		OrphanVMsPeriod:                            orphanvms.DefaultOrphanVMsPeriod,
		OrphanGracePeriod:                          orphanvms.DefaultOrphanGracePeriod,
		MachineMaxReplicas:                         machineset.DefaultMaxReplicas,
		LeaderElect:                                true,
		LeaseDuration:                              DefaultLeaseDuration,
		RenewDeadline:                              DefaultRenewDeadline,
		RetryPeriod:                                DefaultRetryPeriod,
		LeaseName:                                  DefaultLeaseName,
		MachineLeaseName:                           DefaultMachineLeaseName,
		ResourceLock:                               DefaultResourceLock,
		KubeAPIContentType:                         DefaultKubeAPIContentType,
		Address:                                    DefaultAddress,
		Port:                                       DefaultPort,

		SimKubeletQPS:             DefaultSimKubeletQPS,
		SimKubeletBurst:           DefaultSimKubeletBurst,
		SimKubeletParallelism:     sim.DefaultParallelism,
		SimNodeLeaseDuration:      DefaultSimNodeLeaseDuration,
		SimNodeLeaseRenewPeriod:   DefaultSimNodeLeaseRenewPeriod,
		SimNodeStatusReportPeriod: DefaultSimNodeStatusReportPeriod,
	}
}

// LeaseNamespace is the namespace of the leader-election leases:
// --leader-elect-resource-namespace, or --namespace, as MCM.
func LeaseNamespace(c Config) string {
	if c.LeaseNamespace != "" {
		return c.LeaseNamespace
	}
	return c.Namespace
}
