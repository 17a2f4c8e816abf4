// Command mcmprovider is the main of an MCM provider switched to mcm: the
// provider's own driver, written for MCM's interface and unchanged, behind
// the adapter of driver/mcmdriver, run by the reference manager, which
// accepts the flags of MCM's provider binary. README.md walks through the
// switch.
//
// The module proxy this example was built with serves no
// machine-controller-manager-provider-* module, so the provider here is
// the simulated cloud put behind MCM's interface (mcmdriver.ToMCM), with
// its kubelet. In a real provider, newProviderDriver is the one line that
// calls the provider's constructor, for example
// provider.NewAWSDriver(spi.NewSPI()).
//
//	go run . --control-kubeconfig K --target-kubeconfig K --namespace ns
package main

import (
	"context"
	"os"
	"strings"

	mcm "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"

	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/mcmdriver"
	"github.com/mcmkit/mcm/reference/manager"
)

// providerName is the provider's name, the value of --driver; it is also
// the default, so the flags of MCM's provider binary need no new one.
const providerName = "mcm-provider-sim"

func main() {
	os.Exit(manager.Main("machine-controller-manager-provider-sim", withDefaultDriver(os.Args[1:]), manager.DefaultControllers(), drivers()))
}

// drivers is the built-in registry plus the provider's driver.
func drivers() manager.Drivers {
	d := manager.BuiltinDrivers()
	d[providerName] = func(ctx context.Context, env manager.DriverEnv) (driver.Driver, manager.Runnable, error) {
		provider, background, err := newProviderDriver(ctx, env)
		if err != nil {
			return nil, nil, err
		}
		return mcmdriver.New(provider), background, nil
	}
	return d
}

// newProviderDriver returns the provider's MCM driver. Replace its body
// with the provider's constructor; a real cloud has no background work, so
// return nil for it.
func newProviderDriver(ctx context.Context, env manager.DriverEnv) (mcm.Driver, manager.Runnable, error) {
	simulated, kubelet, err := manager.NewSimDriver(ctx, env)
	if err != nil {
		return nil, nil, err
	}
	return mcmdriver.ToMCM(simulated), kubelet, nil
}

// withDefaultDriver selects the provider's driver unless the flags name
// one: MCM's provider binary has no --driver flag.
func withDefaultDriver(args []string) []string {
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "driver" {
			return args
		}
	}
	return append([]string{"--driver=" + providerName}, args...)
}
