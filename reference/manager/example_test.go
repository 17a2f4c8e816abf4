package manager_test

import (
	"fmt"
	"io"

	"github.com/mcmkit/mcm/reference/manager"
)

// A bad flag value is rejected before anything connects, with a one-line
// reason.
func ExampleParseFlags() {
	_, err := manager.ParseFlags("mcm", []string{
		"--control-kubeconfig=in-cluster", "--target-kubeconfig=none",
		"--controllers=machine,foo",
	}, manager.DefaultControllers(), manager.BuiltinDrivers(), io.Discard)
	fmt.Println(err)
	// Output: --controllers: unknown controller "foo" (known: machine, machinedeployment, machineset, overshoot, safety)
}
