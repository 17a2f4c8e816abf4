// Command reference is the reference machine-controller-manager: the
// controllers of this module (machine, MachineSet, MachineDeployment, safety) with the
// built-in drivers (today "sim", a simulated cloud), leader election and
// metrics, configured by MCM's flags. All of it is package
// reference/manager; this file only picks the tables.
//
//	go build -o mcm ./reference
//	./mcm --control-kubeconfig=in-cluster --target-kubeconfig=in-cluster --namespace=shoot--a--b --driver=sim
//
// See reference/deploy for manifests and `make run` for a local demo.
package main

import (
	"os"

	"github.com/mcmkit/mcm/reference/manager"
)

func main() {
	os.Exit(manager.Main("mcm", os.Args[1:], manager.DefaultControllers(), manager.BuiltinDrivers()))
}
