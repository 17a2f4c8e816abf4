// Package drivertest checks that a driver.Driver keeps the contract that
// package driver documents, so that provider authors find contract
// violations in their own tests instead of in a stuck machine rollout.
//
// One call runs every check as a subtest, each against a fresh driver:
//
//   - CreateIsIdempotent: creating the same machine twice yields one VM,
//     with one provider ID, that GetMachineStatus (and ListMachines, if
//     claimed) then report.
//   - StatusOfUnknownMachineIsNotFound: GetMachineStatus of a machine never
//     created returns NotFound.
//   - DeleteOfUnknownMachineSucceeds: DeleteMachine of a machine never
//     created succeeds.
//   - DeleteIsIdempotent: deleting a machine twice succeeds both times, and
//     the machine then disappears from GetMachineStatus and ListMachines.
//   - ListShowsExactlyTheCreatedMachines: ListMachines shows each created
//     machine once, with its provider ID, and forgets deleted ones.
//   - ListIsScopedToTheClass: ListMachines of the fixture's class does not
//     show a VM created with Fixture.OtherMachineClass, nor the other way
//     round, since orphan collection deletes what a class lists and no
//     Machine claims.
//   - ContextCancellationIsHonoured: with a canceled context every call
//     returns Canceled (and an expired deadline DeadlineExceeded), and a
//     canceled create creates nothing.
//   - ErrorsAreTyped: the errors the driver returns are *driver.Error.
//   - InvalidProviderSpecIsInvalidArgument: CreateMachine with the fixture's
//     invalid providerSpec returns InvalidArgument and creates nothing.
//   - ConcurrentCreatesDoNotInterfere: creating several machines at once
//     yields one distinct VM for each.
//   - InitializeMachineAfterCreate: InitializeMachine of a created machine
//     succeeds, after which GetMachineStatus reports it initialized;
//     InitializeMachine of an unknown machine is NotFound.
//   - GetVolumeIDsSkipsForeignVolumes: GetVolumeIDs leaves out volumes that
//     are not the driver's (and returns the fixture's volume ID).
//   - UnsupportedOperationsAreUnimplemented: optional operations the driver
//     does not claim return Unimplemented.
//
// Checks of operations the driver does not claim, and checks whose fixture
// data is missing, are skipped. On every call of every check the kit also
// verifies that errors are *driver.Error, that a call without an error
// returns a response, that the requests' objects are left unmodified, and
// that GetMachineStatus returns a response along with Uninitialized.
//
// After each check the kit deletes the machines it created; failing to
// delete one fails the check, because on a real cloud it would leak a VM.
// Machine names start with Options.MachineNamePrefix, then the check.
//
// # Eventual consistency
//
// Real clouds show a new VM in their lists, or stop showing a deleted one,
// only after a while. Wherever that matters the kit waits through
// Fixture.Eventually: by default it polls every Options.PollInterval for up
// to Options.PollTimeout. Immediate results never wait. A driver on a fake
// clock (like driver/sim) supplies a hook that steps its clock between
// attempts instead, so its tests never sleep.
//
// # Usage
//
// In a provider's tests:
//
//	func TestConformance(t *testing.T) {
//		drivertest.Run(t, func(t drivertest.TB) (driver.Driver, drivertest.Fixture) {
//			d := provider.NewDriver(testAccount(t))
//			return d, drivertest.Fixture{
//				MachineClass:        testClass(),   // a class valid for the driver
//				Secret:              testSecret(),  // merged: userData and credentials
//				InvalidProviderSpec: &runtime.RawExtension{Raw: []byte(`{"imageID": 42}`)},
//			}
//		}, drivertest.Options{SupportsListMachines: true})
//	}
//
// Run takes a *testing.T; the checks themselves only use the TB interface,
// which the kit's own tests implement with a recorder to assert that
// deliberately broken drivers fail exactly the right checks.
package drivertest
