// Package safety holds the policies that keep the machine controllers from
// doing damage in bulk. This package is the one question the machine,
// MachineSet and MachineDeployment controllers ask — Gate: is creation
// frozen? — and each policy is a package of its own, with a constructor
// and an Options struct whose zero value works:
//
//   - safety/outage: the API-server outage gate, a Gate and a
//     machine.OutageReporter. While its check runs (Gate.Run) and an API
//     server has been out of reach for longer than the status-check
//     timeout, it is frozen: no machine is created and no health timeout
//     marks one Failed, deletions go on; when the server is back, the
//     machine controller restarts the health timeouts that ran across the
//     outage. A gate whose check does not run is not frozen.
//   - safety/budget: the replacement budget, a machine.ReplacementGate:
//     how many machines of one deployment may be replaced at once, the
//     group being the owner chain (machine → MachineSet →
//     MachineDeployment), never a label; with MaxUnhealthy, the
//     remediation short-circuit. A machine controller given none builds
//     MCM's limit (one at a time per set) itself.
//   - safety/overshoot: MCM's overshoot check, which freezes a set (and
//     its deployment) that has far more machines than it should; with
//     MaxUnhealthy, the deployments' mcmkit.io/RemediationAllowed
//     condition.
//   - safety/orphanvms: the collection of VMs no machine claims, paused by
//     the outage gate.
//   - safety/unmanaged: the not-managed-by-mcm mark on target nodes no
//     machine claims, under a rule several managers on one target cannot
//     fight over.
//
// The gate and the budget are built once and handed to every controller
// that asks them, so that the controllers freeze and thaw together and
// one budget counts every worker's replacements. MCM runs the overshoot
// check in its machine-controller-manager process and the rest in its
// provider machine-controller; the reference manager splits them the
// same way between its two lease groups. Every periodic job (the outage
// check, the orphan collection, the overshoot period) is a key of a
// workqueue.Queue that requeues itself, so its failures are reported once,
// counted in the workqueue metrics and retried with backoff, as every
// other sync's.
//
// # Usage
//
//	mf := externalversions.NewSharedInformerFactory(machineClient, 0)
//	gate, err := outage.New(machineClient, targetClient, outage.Options{Registerer: reg})
//	if err != nil {
//		return err
//	}
//	b, err := budget.New(mf.Machine().V1alpha1().Machines(), budget.Options{
//		MachineSets: mf.Machine().V1alpha1().MachineSets(), // one budget per deployment
//	})
//	if err != nil {
//		return err
//	}
//	mc, err := machine.NewController(..., machine.Options{SafetyGate: gate, ReplacementGate: b})
//	sc, err := machineset.NewController(..., machineset.Options{SafetyGate: gate})
//	dc, err := deployment.NewController(..., deployment.Options{SafetyGate: gate})
//	over, err := overshoot.New(machineClient, overshoot.Informers{...}, overshoot.Options{Registerer: reg})
//	...
//	go gate.Run(ctx)
//	go over.Run(ctx, 1)
package safety
