package manager

import (
	"io"
	"maps"
	"slices"

	"github.com/mcmkit/mcm/reference/internal/flags"
)

// Config is the manager's configuration, one field per flag (see Flags in
// the package documentation). Start from DefaultConfig, bind it to a
// flag.FlagSet with its BindFlags or fill it in code; New checks it
// against the tables.
type Config = flags.Config

// Special values of --control-kubeconfig and --target-kubeconfig.
const (
	// InCluster selects the pod's service account through
	// rest.InClusterConfig. MCM's spelling "inClusterConfig" is accepted too.
	InCluster = flags.InCluster
	// NoTarget (--target-kubeconfig only) runs without a target cluster:
	// no Nodes, no drain; machines become Available once their VM exists.
	NoTarget = flags.NoTarget
)

// The leases of the two groups by default: those of MCM's two processes
// (see Leader election in the package documentation).
const (
	// DefaultLeaseName is the MachineControllerManagerGroup's lease
	// (--leader-elect-resource-name).
	DefaultLeaseName = flags.DefaultLeaseName
	// DefaultMachineLeaseName is the MachineControllerGroup's lease
	// (--leader-elect-machine-controller-resource-name).
	DefaultMachineLeaseName = flags.DefaultMachineLeaseName
)

// DefaultConfig returns the flag defaults. The kubeconfigs and the driver
// have none: they must be given.
func DefaultConfig() Config { return flags.Default() }

// ParseFlags parses args into a Config that starts from DefaultConfig and
// validates it against the controller and driver tables. Flags that
// contradict each other are an error. It returns flag.ErrHelp, after
// printing the usage to usage, for -h. MCM's spellings are accepted too:
// underscores for dashes in flag names (--machine_drain_timeout) and -v3
// for -v=3, as MCM's flag library takes them.
func ParseFlags(name string, args []string, controllers Controllers, drivers Drivers, usage io.Writer) (Config, error) {
	return flags.Parse(name, args, tables(controllers, drivers), usage)
}

// validate checks c against the controller and driver tables and returns
// every problem, each naming its flag, joined in one line.
func validate(c Config, controllers Controllers, drivers Drivers) error {
	return flags.Validate(c, tables(controllers, drivers))
}

// tables is what the flags are checked against.
func tables(controllers Controllers, drivers Drivers) flags.Tables {
	t := flags.Tables{Controllers: make(map[string]flags.Controller, len(controllers)), Drivers: slices.Collect(maps.Keys(drivers))}
	for name, c := range controllers {
		t.Controllers[name] = flags.Controller{Group: string(c.Group), NeedsDriver: c.NeedsDriver}
	}
	for _, g := range groups {
		t.Groups = append(t.Groups, string(g))
	}
	return t
}

// selectedControllers resolves --controllers against the table, sorted.
func selectedControllers(c Config, controllers Controllers) ([]string, error) {
	return flags.Selected(c, slices.Collect(maps.Keys(controllers)))
}

// leaseName is the name of a group's lease.
func leaseName(c Config, g Group) string {
	if g == MachineControllerGroup {
		return c.MachineLeaseName
	}
	return c.LeaseName
}
