// Package machinestate is what a machine means to the controllers that
// count, order, update and index machines, each rule in one place:
//
//   - Lifecycle (machinestate.go): whether a machine is on its way out,
//     whether and since when it is available, and since when the
//     cluster-autoscaler wants it gone. The MachineSet and
//     MachineDeployment controllers and the safety controller's counts
//     read these by one rule: a set's status, its deletion order and a
//     rollout's arithmetic must agree, or a rollout that counts on a
//     machine being available loses it to a set that does not. As in MCM,
//     a machine is available once it is Running: minReadySeconds delays
//     that only when the set or deployment opts in with
//     v1alpha1.MinReadySecondsAnnotation (MinReady).
//   - In-place parts of a spec (inplace.go): what changes without
//     replacing the machine, copied by the MachineDeployment controller
//     into its sets, by the MachineSet controller into its machines and
//     by the machine controller onto the nodes.
//   - Virtual capacity (virtualcapacity.go): the record of what the
//     machine controller last applied to a node.
//   - Birth (birth.go): a MachineSet's new machine (NewMachine), with the
//     defaults every Machine gets (SetDefaults), decided here once: the
//     MachineSet controller creates its machines with them, so that the
//     machine controller has nothing to store before it creates their
//     VMs, and the machine controller stores them on a machine that lacks
//     them.
//   - Preservation (preserve.go): what preservation a machine is asked
//     for (its Node's value, recorded on it, wins over its own), whether
//     it is preserved now, and which Failed machines its MachineSet keeps
//     or may auto-preserve. The machine controller decides and records a
//     preservation; the MachineSet controller and the replacement budget
//     read it here.
//   - Indexes (index.go): the informer indexes of machines that several
//     controllers read, added once per informer by EnsureIndex.
//   - Foreign machines (foreign.go): the machines a MachineSet lists as
//     not created by it (ForeignMachines), which package machineset
//     decides and writes, and which the replacement budget leaves out of
//     a deployment's machines.
//   - Freeze (frozen.go): why a MachineSet or MachineDeployment adds no
//     machines now (FrozenReason): its freeze label, or the safety gate;
//     both controllers hold creations back for the same reasons, told in
//     the same words.
//
// # Usage
//
//	minReady, err := machinestate.MinReady(set.Annotations, set.Spec.MinReadySeconds)
//	if machinestate.Available(m, minReady, now) { ... }
//	if machinestate.BeingDeleted(m) { ... }
//	if at, ok := machinestate.MarkedForDeletionAt(m); ok { ... }
//	if why := machinestate.FrozenReason(ctx, "set", set.Labels, gate); why != "" { ... }
//
//	if !machinestate.SameInPlace(&have.Spec, &want.Spec) {
//		data, err := patch.Diff(machinestate.MachineInPlaceFields, &have.Spec, &want.Spec, rv)
//		...
//	}
//
//	last, recorded := machinestate.RecordedVirtualCapacity(node)
//
//	m := machinestate.NewMachine(set) // finalizer, priority, the set's controller reference
//
//	err := machinestate.EnsureIndex(machines.Informer(), machinestate.ByNodeIndex, machinestate.IndexByNode)
//	objs, err := machines.Informer().GetIndexer().ByIndex(machinestate.ByNodeIndex, nodeName)
package machinestate
