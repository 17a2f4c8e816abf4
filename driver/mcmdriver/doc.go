// Package mcmdriver runs a driver written for Gardener MCM's provider
// interface (github.com/gardener/machine-controller-manager/pkg/util/provider/driver.Driver,
// the interface of every machine-controller-manager-provider-* project)
// as a driver.Driver of this module, unchanged. An installation that
// switches from MCM to mcm keeps its cloud provider: its main builds the
// provider's driver as before and hands New's result to the manager.
//
// It is a module of its own (github.com/mcmkit/mcm/driver/mcmdriver) so
// that only programs that import it download MCM and its dependencies; the
// root module's graph stays as lean as hack/check-deps.sh demands.
//
// # Versions
//
// The module requires MCM v0.62.1 and runs its tests against it. MCM
// v0.62.1 is built with Kubernetes v0.34, mcm with v0.37: in one binary,
// minimal version selection picks v0.37, and the MCM packages a provider's
// driver links (pkg/apis/machine/v1alpha1, pkg/util/provider/driver and
// machinecodes) compile and work with it, which this module's build and
// tests prove on every `make test`. A provider that requires an older MCM
// is raised to v0.62.1 by the same selection; one that requires a newer
// MCM raises MCM for the whole binary, a combination these tests have not
// seen, so run this package's tests (and drivertest) with it first.
//
// # What is converted
//
// Machine and MachineClass go through the wire format the two APIs share
// (group machine.sapcloud.io/v1alpha1): every serialized field arrives,
// providerSpec, secretRef, credentialsSecretRef, nodeTemplate and provider
// included, in fresh objects that share no map, slice or byte with the
// informer cache, so an MCM driver that writes to its request changes
// nothing of ours. The Secret is deep-copied: it is already the merge MCM's
// provider app hands its driver (driver.MergeSecrets: the data of secretRef,
// then of credentialsSecretRef, which wins on a shared key). GetVolumeIDs'
// persistent volume specs are deep-copied too.
//
// Responses are kept whole: provider ID, node name, addresses,
// LastKnownState of CreateMachine and DeleteMachine (our controller stores
// it in status.lastKnownState, as MCM's does), ListMachines' provider ID to
// machine name map (copied) and the volume IDs. A GetMachineStatus
// response that comes with an error (Uninitialized) is kept beside it.
//
// # Errors
//
// ErrorFromMCM turns an MCM driver's error into an *driver.Error with the
// same code (CodeFromMCM, every machine code, the message kept):
// a *status.Status anywhere in the error chain, or a status that MCM's own
// status.FromError decodes from the text, as MCM's controller reads it. An
// error without a machine code becomes Internal: MCM's controller cannot
// decode it either and retries at its medium or long period, which
// Internal gets here too (Unknown would be retried after five seconds).
//
// InitializeMachine's Unimplemented means "no such step" to both
// controllers, and NotFound a failure after which the machine starts over,
// so both pass through unchanged.
//
// Differences from calling the driver in MCM, each invisible to the
// driver: every call first checks its context and returns Canceled or
// DeadlineExceeded without calling the driver when it has ended (MCM
// providers often ignore their context; the machine controller's
// deadlines, see driver.WithDeadlines, bound the calls that do run), and
// a call that returns neither response nor error fails with Internal
// instead of handing the controller a nil response.
//
// ToMCM is the way back, our driver behind MCM's interface, with
// ErrorToMCM and CodeToMCM.
//
// # Usage
//
// A provider's main, with its MCM driver (here the AWS provider's):
//
//	drivers := manager.BuiltinDrivers()
//	drivers["aws"] = func(context.Context, manager.DriverEnv) (driver.Driver, manager.Runnable, error) {
//		return mcmdriver.New(provider.NewAWSDriver(spi.NewSPI())), nil, nil
//	}
//	os.Exit(manager.Main("machine-controller-manager-provider-aws", os.Args[1:], manager.DefaultControllers(), drivers))
//
// examples/mcmprovider is such a main, with a README that walks through
// the switch. In the provider's tests, drivertest.Run checks the adapted
// driver against our contract:
//
//	drivertest.Run(t, func(t drivertest.TB) (driver.Driver, drivertest.Fixture) {
//		return mcmdriver.New(newTestDriver(t)), fixture
//	}, drivertest.Options{SupportsListMachines: true})
package mcmdriver
