// Package budget is the replacement budget: it bounds, per
// MachineDeployment, how many machines may be replaced at once — Failed,
// being deleted, or not up yet (phase empty, Pending, CrashLoopBackOff: the
// replacements on their way), as MCM counts them. The machine controller
// asks it before the health timeout marks an unhealthy machine Failed
// (which makes its MachineSet replace it), so that a zone outage that
// makes every node NotReady does not replace the whole fleet at once. A
// Budget implements machine.ReplacementGate.
//
// A machine controller given no budget builds its own with the zero
// Options: one replacement at a time among the machines one MachineSet
// controls, MCM's limit, whatever the machines' labels. Give it one from
// this package for more: a deployment's budget across all its sets
// (Options.MachineSets), a larger limit (Options.Max), or the remediation
// short-circuit (Options.MaxUnhealthy).
//
// A deployment's machines are those its MachineSets control: the
// machine's controller reference names a MachineSet, whose controller
// reference names the deployment, matched by UID at each step. Unlike MCM,
// which counts the machines labelled name=<deployment>
// (v1alpha1.MachineDeploymentNameLabelKey), a label counts for nothing:
// anyone who may create a Machine may label it, and two such machines
// stuck in CrashLoopBackOff would otherwise hold a deployment's only slot
// for good, so that its broken machines were never replaced; and no
// machine this module's controllers create carries the label. A
// controller reference is anyone's to write too: of a set's machines only
// those it created count, not those it lists as foreign in its
// mcmkit.io/foreign-machines annotation (adopted, or created by someone
// else with its controller reference; package machineset keeps the list,
// being deleted included, until they are gone), so that a forged machine
// kept Terminating by a finalizer of its creator holds no slot. Such a
// machine counts until its set's first sync lists it, and always without
// the set cache (Options.MachineSets), which alone shows the list. A machine no
// set controls, or of a set no deployment controls, is never held back, as
// MCM never holds back a machine without a deployment; a Budget without
// the set cache counts each set's machines on their own (a deployment in a
// rollout then has a slot per set).
//
// A machine whose preservation holds at the budget's clock
// (machinestate.Preserved: kept for diagnosis by its set, neither deleted
// nor replaced) is not a replacement in progress, nor unhealthy for the
// short-circuit, as MCM leaves machines with a preserve expiry out of its
// count; once the preservation runs out it counts again. (MCM keeps not
// counting an expired preservation until the machine controller clears
// it.)
//
// # Remediation short-circuit
//
// With Options.MaxUnhealthy (--machine-max-unhealthy of the reference
// binary; off by default, as in MCM) the budget also short-circuits, as
// Cluster API's MachineHealthCheck does: while more of a deployment's
// machines are unhealthy (Unknown or Failed, not being deleted) than that
// number or percentage, no health timeout marks one of them Failed,
// however long it has run out — so many machines failing at once is taken
// for an outage of a zone, the network or the API server, not for broken
// machines. Only the health timeout is gated. A machine whose node does
// not join within its creation timeout is marked Failed all the same (MCM
// gates no join timeout either), and a Failed machine is replaced by its
// set whatever made it Failed; the messages say so rather than that no
// machine is replaced. Package safety/overshoot, given the same
// MaxUnhealthy, reports the short-circuit on the deployment (condition
// mcmkit.io/RemediationAllowed and events).
//
// The budget counts from the informer cache, plus the machines it allowed
// whose Failed phase the cache does not show yet, so two workers, or a
// lagging cache, cannot take the same last slot twice. It holds its lock
// only over that in-memory arithmetic, never across an API call.
//
// # Usage
//
//	mf := externalversions.NewSharedInformerFactory(machineClient, 0)
//	b, err := budget.New(mf.Machine().V1alpha1().Machines(), budget.Options{
//		Max:          ptr.To(intstr.FromString("20%")), // of each deployment's machines, at least 1
//		MaxUnhealthy: ptr.To(intstr.FromString("40%")),
//		MachineSets:  mf.Machine().V1alpha1().MachineSets(),
//	})
//	if err != nil {
//		return err
//	}
//	ctrl, err := machine.NewController(..., machine.Options{ReplacementGate: b})
package budget
