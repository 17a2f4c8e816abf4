// Package replacement is the replacement budget's core: how many machines
// of one group may be replaced at once, and the remediation short-circuit
// that lets none be replaced by a health timeout while too many of a
// deployment's machines are unhealthy. It sits below the controllers so
// that the machine controller builds its default budget (MCM's limit: one
// replacement at a time per group) from it, and package safety/budget,
// which embedders configure, is this Budget under its public name. It
// reads only the API types and informer caches.
//
// A Budget counts, per group, the machines in replacement — Failed, being
// deleted, or not up yet (phase empty, Pending, CrashLoopBackOff: the
// replacements on their way), as MCM counts them — from the informer
// cache, plus the machines it allowed whose Failed phase the cache does
// not show yet, so two workers, or a lagging cache, cannot take the same
// last slot twice. It holds its lock only over that in-memory arithmetic,
// never across an API call.
//
// A group is the owner chain, never a label: a machine's controller
// reference names a MachineSet, whose controller reference names a
// MachineDeployment, matched by UID at each step (Options.MachineSets is
// the set cache). Unlike MCM, which counts the machines labelled
// name=<deployment>, a label counts for nothing: anyone who may create a
// Machine may label it, and no machine this module creates carries the
// label. Nor does a controller reference alone: a deployment counts only
// the machines its sets created, leaving out those a set lists as foreign
// (machinestate.ForeignMachines: adopted, or created by someone else with
// the set's controller reference), Terminating ones included, which a
// finalizer of their creator could keep forever. A machine no set controls, or of a set no deployment controls, is
// never held back, as MCM never holds back a machine without a
// deployment; without the set cache each set's machines are a group of
// their own (a deployment in a rollout then has a slot per set).
//
// # Usage
//
//	b, err := replacement.New(machineInformer, replacement.Options{MachineSets: setInformer})
//	if ok, why := b.MayReplace(ctx, m); ok {
//		marked := markFailed(ctx, m) == nil
//		b.Replaced(ctx, m, marked)
//	}
package replacement
