// Package safety holds the policies that keep the machine controllers from
// doing damage in bulk. Today it has the replacement budget and the
// overshoot decision (which sets and deployments to freeze because they
// have far more machines than they should, MCM's thresholds); the safety
// controller that applies it, collects orphan VMs and freezes creation
// during API-server outages will join them.
//
// # Replacement budget
//
// A Budget bounds, per MachineDeployment, how many machines may be
// replaced at once: Failed or being deleted. The machine controller asks
// it before the health timeout marks an unhealthy machine Failed (which
// makes its MachineSet replace it), so that a zone outage that makes every
// node NotReady does not replace the whole fleet at once. A Budget
// implements machine.ReplacementGate; machines of the same deployment are
// those sharing the "name" label (v1alpha1.MachineDeploymentNameLabelKey)
// in one namespace, as in Gardener MCM.
//
// The budget counts from the informer cache, plus the machines it allowed
// whose Failed phase the cache does not show yet, so two workers, or a
// lagging cache, cannot take the same last slot twice. It holds its lock
// only over that in-memory arithmetic, never across an API call.
//
// # Usage
//
//	mf := externalversions.NewSharedInformerFactory(machineClient, 0)
//	budget, err := safety.NewBudget(mf.Machine().V1alpha1().Machines(), safety.BudgetOptions{
//		Max: ptr.To(intstr.FromString("20%")), // of each deployment's machines, at least 1
//	})
//	if err != nil {
//		return err
//	}
//	ctrl, err := machine.NewController(..., machine.Options{ReplacementGate: budget})
package safety
