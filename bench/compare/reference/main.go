// Command reference is mcm's reference manager as the comparison runs it:
// the reference binary's controllers and drivers, plus the "simcloud"
// driver, which calls the simulated cloud served by bench/compare/simcloud
// on the unix socket that the environment variable MCM_BENCH_SIMCLOUD_SOCKET
// names. With it, the simulated cloud and its kubelet run in a process of
// their own, as beside MCM, and the manager's RSS and CPU are its own.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/mcmkit/mcm/bench/internal/simwire"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/reference/manager"
)

// socketEnv names the simulated cloud's socket.
const socketEnv = "MCM_BENCH_SIMCLOUD_SOCKET"

func main() {
	drivers := manager.BuiltinDrivers()
	drivers["simcloud"] = func(context.Context, manager.DriverEnv) (driver.Driver, manager.Runnable, error) {
		socket := os.Getenv(socketEnv)
		if socket == "" {
			return nil, nil, fmt.Errorf("the simcloud driver needs the socket of the simulated cloud in %s", socketEnv)
		}
		return simwire.Dial(socket), nil, nil
	}
	os.Exit(manager.Main("mcm", os.Args[1:], manager.DefaultControllers(), drivers))
}
