package crds_test

import (
	"fmt"

	"github.com/mcmkit/mcm/api/crds"
)

// The embedded CRDs, as Install applies them.
func ExampleObjects() {
	objs, err := crds.Objects()
	if err != nil {
		panic(err)
	}
	for _, o := range objs {
		fmt.Println(o.GetName())
	}
	// Output:
	// machineclasses.machine.sapcloud.io
	// machinedeployments.machine.sapcloud.io
	// machines.machine.sapcloud.io
	// machinesets.machine.sapcloud.io
}
