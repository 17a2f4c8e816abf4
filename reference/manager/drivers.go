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
// "sim", the simulated cloud.
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

// NewSimDriver is the "sim" driver: a simulated cloud (driver/sim) that
// lives in this process. With a target cluster its background Runnable is a
// sim.Kubelet that registers a Node for every running VM and keeps it
// Ready, so machines go Pending → Running as with a real cloud; without
// one, machines become Available.
//
// The cloud's VMs are in memory: when the process ends they are gone, and
// a new leader starts with an empty cloud (it recreates the VMs of existing
// machines, whose old Nodes then go NotReady). It is for demos and tests.
func NewSimDriver(_ context.Context, env DriverEnv) (driver.Driver, Runnable, error) {
	cloud, err := sim.New(sim.Options{
		Seed:        uint64(time.Now().UnixNano()),
		BootDelay:   simBootDelay,
		BootJitter:  simBootJitter,
		DeleteDelay: simDeleteDelay,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sim driver: %w", err)
	}
	if env.Target == nil {
		return cloud.Driver(), nil, nil
	}
	kubelet := sim.NewKubelet(cloud, env.Target, sim.KubeletOptions{})
	run := func(ctx context.Context) error {
		return kubelet.Run(logr.NewContext(ctx, env.Logger))
	}
	return cloud.Driver(), run, nil
}
