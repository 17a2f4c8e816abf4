package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/reference/internal/flags"
)

// DriverEnv is what a DriverFactory may use.
type DriverEnv struct {
	// Config is the manager's validated configuration.
	Config Config
	// Target is the target cluster's client, nil with --target-kubeconfig=none.
	Target kubernetes.Interface
	// TargetConfig is the target cluster's client configuration, nil with
	// --target-kubeconfig=none. A driver that talks to the target cluster
	// on its own account builds a client of its own from a copy
	// (rest.CopyConfig), with its own rate limit and user agent, rather than
	// share Target's limit with the controllers: either would starve the
	// other.
	TargetConfig *rest.Config
	// Machines is the control cluster's machine client, for a driver
	// whose background work reads machine objects (the sim's node agent
	// reads the classes machines are to have); nil in tests that give
	// none.
	Machines versioned.Interface
	// Logger for the driver.
	Logger logr.Logger
	// Registerer is the manager's metrics registry. The machine controller
	// already instruments the driver (driver.Instrument, whose provider
	// label is the class's provider, else the name the driver gives as a
	// driver.ProviderNamer); register only the driver's own metrics here,
	// such as its requests to its cloud's API (driver.NewCloudAPI).
	Registerer prometheus.Registerer
}

// Runnable runs until its context ends, then returns.
type Runnable func(ctx context.Context) error

// DriverFactory builds a driver once the API servers are reachable. It may
// return a background Runnable (nil if none) that the manager runs beside
// the controllers for its whole life, leader or not, and stops on shutdown.
type DriverFactory func(ctx context.Context, env DriverEnv) (d driver.Driver, background Runnable, err error)

// Drivers is the driver registry: --driver names an entry. A provider's own
// main adds its entry to BuiltinDrivers():
//
//	drivers := manager.BuiltinDrivers()
//	drivers["mycloud"] = mycloud.NewDriver
//	os.Exit(manager.Main("mycloud-mcm", os.Args[1:], manager.DefaultControllers(), drivers))
type Drivers map[string]DriverFactory

// BuiltinDrivers returns a fresh registry with the drivers of this module:
// "sim", the simulated cloud (NewSimDriver), in memory or, with
// --sim-state-file, in a file.
func BuiltinDrivers() Drivers {
	return Drivers{"sim": NewSimDriver}
}

// Timings of the VMs of the built-in sim driver: long enough to watch a
// machine go through its phases, short enough for a demo.
const (
	simBootDelay   = 2 * time.Second
	simBootJitter  = 3 * time.Second
	simDeleteDelay = 2 * time.Second
)

// Defaults of the sim driver's simulated kubelet (SimDriverOptions, and
// the --sim-* flags). The kubelet renews every lease every 10 s, as the
// kubelet does, which suits a cluster whose kube-controller-manager waits
// the default 50 s (the test environment's 20 s) before it marks a node
// Unknown; its client's rate limit covers that for about 2 500 nodes.
// Thousands more need a longer renew period and grace period (driver/sim's
// documentation has the measured figures).
const (
	DefaultSimKubeletQPS             = flags.DefaultSimKubeletQPS
	DefaultSimKubeletBurst           = flags.DefaultSimKubeletBurst
	DefaultSimNodeLeaseDuration      = flags.DefaultSimNodeLeaseDuration
	DefaultSimNodeLeaseRenewPeriod   = flags.DefaultSimNodeLeaseRenewPeriod // a quarter of the lease duration: 10 s
	DefaultSimNodeStatusReportPeriod = flags.DefaultSimNodeStatusReportPeriod
)

// SimKubeletUserAgent is the user agent of the sim driver's simulated
// kubelet, so that its requests can be told from the controllers'.
const SimKubeletUserAgent = "mcm-reference/sim-kubelet"

// SimDriverOptions configure the "sim" driver beyond the manager's flags.
type SimDriverOptions struct {
	// StateFile keeps the simulated cloud in this file (see the state file
	// in package driver/sim), so that it outlives the process as a real
	// cloud outlives its manager: a manager restarted with the same file,
	// after a crash or a SIGKILL, finds the VMs of its machines as it left
	// them, boots and deletions in flight included, and its simulated
	// kubelet carries on with their Nodes. An absent file starts an empty
	// cloud; a file that is not a sim cloud's state fails the driver
	// rather than start an empty cloud, in which every machine's VM would
	// look gone. One process at a time: replicas that run at once, such as
	// a leader and its standby, must not share a file. Empty keeps the
	// cloud in memory.
	StateFile string
	// KubeletQPS and KubeletBurst limit the simulated kubelet's client of
	// the target cluster, its own one, built from DriverEnv.TargetConfig:
	// its lease renewals alone take nodes/NodeLeaseRenewPeriod requests per
	// second, which on the controllers' client would starve them and be
	// starved by them until nodes flap NotReady. Zero means
	// DefaultSimKubeletQPS and DefaultSimKubeletBurst. A caller whose
	// DriverEnv has a Target but no TargetConfig (a test with a fake
	// clientset) gets a kubelet on Target, with Target's limit.
	KubeletQPS   float64
	KubeletBurst int
	// KubeletParallelism is the simulated kubelet's Parallelism
	// (sim.KubeletOptions); zero means sim's default.
	KubeletParallelism int
	// NodeLeaseDuration, NodeLeaseRenewPeriod and NodeStatusReportPeriod
	// are the simulated kubelet's LeaseDuration, LeaseRenewPeriod and
	// StatusReportPeriod (sim.KubeletOptions); zero means sim's defaults.
	// kube-controller-manager's --node-monitor-grace-period must exceed
	// the renew period with margin.
	NodeLeaseDuration      time.Duration
	NodeLeaseRenewPeriod   time.Duration
	NodeStatusReportPeriod time.Duration
}

// validate refuses what the kubelet would otherwise change silently.
func (o SimDriverOptions) validate() error {
	switch {
	case o.KubeletQPS < 0 || o.KubeletBurst < 0 || o.KubeletParallelism < 0:
		return fmt.Errorf("negative kubelet QPS %v, burst %d or parallelism %d", o.KubeletQPS, o.KubeletBurst, o.KubeletParallelism)
	case o.NodeLeaseDuration < 0 || o.NodeLeaseRenewPeriod < 0 || o.NodeStatusReportPeriod < 0:
		return fmt.Errorf("negative node lease duration %v, renew period %v or status report period %v",
			o.NodeLeaseDuration, o.NodeLeaseRenewPeriod, o.NodeStatusReportPeriod)
	case o.NodeLeaseDuration%time.Second != 0:
		return fmt.Errorf("node lease duration %v is not whole seconds", o.NodeLeaseDuration)
	}
	return nil
}

// NewSimDriver is the "sim" driver as the flags configure it: its cloud in
// --sim-state-file, or in memory without it, and its kubelet as the
// --sim-kubelet-* and --sim-node-* flags say.
func NewSimDriver(ctx context.Context, env DriverEnv) (driver.Driver, Runnable, error) {
	c := env.Config
	return SimDriver(SimDriverOptions{
		StateFile:              c.SimStateFile,
		KubeletQPS:             c.SimKubeletQPS,
		KubeletBurst:           c.SimKubeletBurst,
		KubeletParallelism:     c.SimKubeletParallelism,
		NodeLeaseDuration:      c.SimNodeLeaseDuration,
		NodeLeaseRenewPeriod:   c.SimNodeLeaseRenewPeriod,
		NodeStatusReportPeriod: c.SimNodeStatusReportPeriod,
	})(ctx, env)
}

// SimDriver returns the factory of the "sim" driver: a simulated cloud
// (driver/sim) run by this process. With a target cluster its background
// Runnable is a sim.Kubelet that registers a Node for every running VM and
// keeps it Ready, so machines join and become Running as with a real cloud
// (its VMs boot within seconds, sooner than the machine controller's
// PendingDelay, so a machine shows Pending only when its node is slow);
// without one, machines become Available. The kubelet talks to the target
// cluster through a client of its own (user agent SimKubeletUserAgent,
// rate limit KubeletQPS and KubeletBurst). With a target cluster and
// DriverEnv.Machines, the Runnable also runs the sim's node agent
// (sim.Agent) on that client, for the machines of --namespace: it carries
// out in-place updates on the VMs of classes whose providerSpec enables
// it (inPlaceUpdate.agent) and leaves all others alone. It is for demos
// and tests.
//
// Without opts.StateFile the cloud's VMs are in memory: when the process
// ends they are gone, and the next manager, a restarted one or a new
// leader, starts with an empty cloud (it recreates the VMs of existing
// machines, whose old Nodes then go NotReady). With it, a restarted
// manager finds its VMs, and Nodes, where the last one left them.
func SimDriver(opts SimDriverOptions) DriverFactory {
	return func(_ context.Context, env DriverEnv) (driver.Driver, Runnable, error) {
		if err := opts.validate(); err != nil {
			return nil, nil, fmt.Errorf("sim driver: %w", err)
		}
		cloud, err := sim.New(sim.Options{
			Seed:        uint64(time.Now().UnixNano()),
			BootDelay:   simBootDelay,
			BootJitter:  simBootJitter,
			DeleteDelay: simDeleteDelay,
			StateFile:   opts.StateFile,
			Registerer:  env.Registerer, // the simulated cloud's API requests
		})
		if err != nil {
			return nil, nil, fmt.Errorf("sim driver: %w", err)
		}
		if env.Target == nil && env.TargetConfig == nil {
			return cloud.Driver(), nil, nil
		}
		client := env.Target
		if env.TargetConfig != nil {
			if client, err = kubernetes.NewForConfig(simKubeletConfig(env.TargetConfig, opts)); err != nil {
				return nil, nil, fmt.Errorf("sim driver: kubelet client: %w", err)
			}
		}
		kubelet := sim.NewKubelet(cloud, client, sim.KubeletOptions{
			// The cloud's ID, kept in the state file, as the kubelet's
			// identity: the kubelet of a restarted manager then renews the
			// leases of the Nodes its predecessor registered instead of
			// leaving them alone.
			Identity:           cloud.ID(),
			LeaseDuration:      opts.NodeLeaseDuration,
			LeaseRenewPeriod:   opts.NodeLeaseRenewPeriod,
			StatusReportPeriod: opts.NodeStatusReportPeriod,
			Parallelism:        opts.KubeletParallelism,
		})
		var agent *sim.Agent
		if env.Machines != nil {
			agent, err = sim.NewAgent(cloud, client, env.Machines, sim.AgentOptions{
				Identity: cloud.ID(), Namespace: env.Config.Namespace,
			})
			if err != nil {
				return nil, nil, fmt.Errorf("sim driver: %w", err)
			}
		}
		return cloud.Driver(), simBackground(env.Logger, kubelet, agent), nil
	}
}

// simBackground runs the kubelet and, if not nil, the agent until ctx
// ends. Each runs on, whatever the other does: the kubelet keeps the
// nodes Ready without the agent.
func simBackground(logger logr.Logger, kubelet *sim.Kubelet, agent *sim.Agent) Runnable {
	return func(ctx context.Context) error {
		ctx = logr.NewContext(ctx, logger)
		if agent == nil {
			return kubelet.Run(ctx)
		}
		agentDone := make(chan error, 1)
		go func() { agentDone <- agent.Run(ctx) }()
		err := kubelet.Run(ctx)
		return errors.Join(err, <-agentDone)
	}
}

// simKubeletConfig is the simulated kubelet's own client configuration of
// the target cluster: a copy of cfg with the kubelet's rate limit and user
// agent. It speaks protobuf, as the kubelet does: encoding and decoding
// thousands of leases and nodes costs the API server and this process
// several times less than JSON.
func simKubeletConfig(cfg *rest.Config, opts SimDriverOptions) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS = float32(cmp.Or(opts.KubeletQPS, DefaultSimKubeletQPS))
	c.Burst = cmp.Or(opts.KubeletBurst, DefaultSimKubeletBurst)
	c.RateLimiter = nil // a limiter in cfg would be shared, and override QPS and Burst
	c.UserAgent = SimKubeletUserAgent
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}
