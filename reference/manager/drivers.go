package manager

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

// DriverEnv is what a DriverFactory may use.
type DriverEnv struct {
	// Config is the manager's validated configuration.
	Config Config
	// Target is the target cluster's client, nil with --target-kubeconfig=none.
	Target kubernetes.Interface
	// Logger for the driver.
	Logger logr.Logger
	// Registerer is the manager's metrics registry. The machine controller
	// already instruments the driver (driver.Instrument); register only
	// the driver's own extra metrics here.
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
}

// NewSimDriver is the "sim" driver as the flags configure it: its cloud in
// --sim-state-file, or in memory without it.
func NewSimDriver(ctx context.Context, env DriverEnv) (driver.Driver, Runnable, error) {
	return SimDriver(SimDriverOptions{StateFile: env.Config.SimStateFile})(ctx, env)
}

// SimDriver returns the factory of the "sim" driver: a simulated cloud
// (driver/sim) run by this process. With a target cluster its background
// Runnable is a sim.Kubelet that registers a Node for every running VM and
// keeps it Ready, so machines go Pending → Running as with a real cloud;
// without one, machines become Available. It is for demos and tests.
//
// Without opts.StateFile the cloud's VMs are in memory: when the process
// ends they are gone, and the next manager, a restarted one or a new
// leader, starts with an empty cloud (it recreates the VMs of existing
// machines, whose old Nodes then go NotReady). With it, a restarted
// manager finds its VMs, and Nodes, where the last one left them.
func SimDriver(opts SimDriverOptions) DriverFactory {
	return func(_ context.Context, env DriverEnv) (driver.Driver, Runnable, error) {
		cloud, err := sim.New(sim.Options{
			Seed:        uint64(time.Now().UnixNano()),
			BootDelay:   simBootDelay,
			BootJitter:  simBootJitter,
			DeleteDelay: simDeleteDelay,
			StateFile:   opts.StateFile,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("sim driver: %w", err)
		}
		if env.Target == nil {
			return cloud.Driver(), nil, nil
		}
		// The cloud's ID, kept in the state file, as the kubelet's identity:
		// the kubelet of a restarted manager then renews the leases of the
		// Nodes its predecessor registered instead of leaving them alone.
		kubelet := sim.NewKubelet(cloud, env.Target, sim.KubeletOptions{Identity: cloud.ID()})
		run := func(ctx context.Context) error {
			return kubelet.Run(logr.NewContext(ctx, env.Logger))
		}
		return cloud.Driver(), run, nil
	}
}
