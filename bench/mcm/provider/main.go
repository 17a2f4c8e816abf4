// Command machine-controller is Gardener MCM's provider machine controller
// (MCM v0.62.1's pkg/util/provider/app, as a provider's main runs it)
// around a driver that forwards every operation to the simulated cloud of
// package github.com/mcmkit/mcm/driver/sim, run by the bench module's
// simcloud command on a unix socket. MCM's controller and the mcm
// reference manager then drive the same simulated cloud and kubelet: the
// same boot and deletion delays, the same Node registration, the same
// writes to the target cluster.
//
// It takes MCM's provider flags plus --sim-cloud-socket.
package main

import (
	"fmt"
	"os"

	"github.com/gardener/machine-controller-manager/pkg/util/provider/app"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/app/options"
	"github.com/spf13/pflag"
	"k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"

	// The metrics MCM's provider binaries register, as providers do.
	_ "github.com/gardener/machine-controller-manager/pkg/util/client/metrics/prometheus"
	_ "github.com/gardener/machine-controller-manager/pkg/util/reflector/prometheus"
	_ "github.com/gardener/machine-controller-manager/pkg/util/workqueue/prometheus"
)

func main() {
	s := options.NewMCServer()
	s.AddFlags(pflag.CommandLine)
	socket := pflag.CommandLine.String("sim-cloud-socket", "", "unix socket of the simulated cloud (the bench module's simcloud command); required")

	flag.InitFlags()
	logs.InitLogs()
	defer logs.FlushLogs()

	if *socket == "" {
		fmt.Fprintln(os.Stderr, "--sim-cloud-socket is required")
		os.Exit(2)
	}
	if err := app.Run(s, newRemoteDriver(*socket)); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
}
