// Command provider is a provider author's own manager binary: the reference
// manager (flags, leader election, metrics, health, the controller table)
// with one more entry in the driver registry. Here "mycloud" is the
// simulated cloud behind a wrapper that logs every VM it creates; a real
// provider returns its own driver.Driver from the factory instead.
//
//	go run ./examples/provider --driver=mycloud --control-kubeconfig K --target-kubeconfig K --namespace ns
package main

import (
	"context"
	"os"

	"github.com/go-logr/logr"

	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/reference/manager"
)

func main() {
	os.Exit(manager.Main("mycloud-mcm", os.Args[1:], manager.DefaultControllers(), drivers()))
}

// drivers is the built-in registry plus this provider's driver.
func drivers() manager.Drivers {
	d := manager.BuiltinDrivers()
	d["mycloud"] = newMyCloud
	return d
}

// newMyCloud builds the driver once the clusters are reachable. A real
// provider reads its credentials and endpoints here.
func newMyCloud(ctx context.Context, env manager.DriverEnv) (driver.Driver, manager.Runnable, error) {
	d, background, err := manager.NewSimDriver(ctx, env)
	if err != nil {
		return nil, nil, err
	}
	return &myCloud{Driver: d, log: env.Logger.WithName("mycloud")}, background, nil
}

// myCloud is "their" driver: every operation but CreateMachine is the
// simulated cloud's.
type myCloud struct {
	driver.Driver
	log logr.Logger
}

func (c *myCloud) CreateMachine(ctx context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	resp, err := c.Driver.CreateMachine(ctx, req)
	if err == nil {
		c.log.Info("Created VM", "machine", req.Machine.Name, "providerID", resp.ProviderID)
	}
	return resp, err
}
