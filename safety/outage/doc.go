// Package outage is the API-server outage gate: the safety.Gate that
// freezes machine creation and health transitions while an API server is
// out of reach, so that an outage never replaces a fleet.
//
// While Run runs, every StatusCheckPeriod (every fifth of
// StatusCheckTimeout while one is down) the gate's check reads a machine
// that does not exist from the control cluster and a node from the target:
// any answer of a working server (NotFound, Forbidden) is up. Down for
// longer than StatusCheckTimeout, the gate is Frozen: the machine,
// MachineSet and MachineDeployment controllers that ask it stop creations
// and health transitions while deletions go on. Up again, it thaws, and as
// a machine.OutageReporter it tells the machine controller when the
// outage ended, which gives the machines Unknown since before then a new
// health timeout (MCM's "Machine Health Timeout was reset due to APIServer
// being unreachable"). The machine controller exports the state as
// mcm_machine_controller_frozen; the freeze and the thaw are events
// (FrozenForAPIServerOutage, UnfrozenAfterAPIServerOutage) on the
// ProbeNamespace, delivered once the server is back.
//
// The check is one key on a workqueue.Queue ("safety-apiserver") that
// requeues itself after the period, so it has the queue's metrics and
// panic recovery like every other sync. A gate whose Run does not run (not
// started yet, or stopped) is not frozen: one gate value can be handed to
// controllers that run while its check does not, as the reference manager
// hands it to the controllers of both its lease groups.
//
// # Usage
//
//	gate, err := outage.New(machineClient, targetClient, outage.Options{ProbeNamespace: ns, Recorder: rec, Registerer: reg})
//	if err != nil {
//		return err
//	}
//	mc, err := machine.NewController(..., machine.Options{SafetyGate: gate})
//	sc, err := machineset.NewController(..., machineset.Options{SafetyGate: gate})
//	go gate.Run(ctx) // the check; the gate is not frozen while it does not run
package outage
