// Package unmanaged marks the target cluster's nodes that no machine
// claims with node.machine.sapcloud.io/not-managed-by-mcm, as MCM's
// provider machine-controller does, in a way that several managers on one
// target cannot fight over.
//
// With a target cluster, a node no machine claims (no machine's "node"
// label names it) gets node.machine.sapcloud.io/not-managed-by-mcm=1 once
// it is older than Options.CreationTimeout (a machine's label is written
// only after its node joined), and loses it once a machine claims it, as
// MCM does: with one manager on a target, the nodes without a machine are
// the marked ones, which Gardener relies on.
//
// Several managers (one per control namespace) may share a target: each
// sees the others' nodes as claimed by none of its machines. Under MCM's
// rule as it stands, each would mark the others' nodes and remove the
// others' marks, forever. So the rule also reads the node's own word on
// who holds it — v1alpha1.NodeFinalizer, which a machine controller (this
// module's or MCM's) adds to the node of a machine it manages and removes
// only right before deleting the node — and differs from MCM in two
// points:
//
//   - A node that carries the finalizer is not marked, even though none of
//     this manager's machines claims it: another manager's machine holds
//     it. (MCM removes the finalizer from such a node and marks it. A node
//     left behind with the finalizer by a machine that is gone stays
//     unmarked here.)
//   - The mark is removed from a node this manager's machine claims once
//     the finalizer is on it — the machine controller's first sync of the
//     node, a moment after the label — not at the label alone. A mark on a
//     node none of this manager's machines claims is never removed, whoever
//     made it.
//
// Adding needs the finalizer absent and removing needs it present, a fact
// every manager reads alike, so no two managers ever want opposite writes:
// with the node's finalizer and claims unchanged, the managers together
// write its mark at most once, and at steady state they write nothing. A
// node that is nobody's (no finalizer, no machine anywhere) is marked by
// whichever manager's check comes first after Options.CreationTimeout:
// the verdict is the same for every manager. The check is event driven
// (a node's registration, its mark or finalizer changing, a machine's node
// label changing, the node coming of age) rather than MCM's pass every
// orphan-VM period, so a mark comes and goes without that delay. Every
// manager sharing a target must follow this rule: one that follows MCM's
// (MCM itself, or an older version) still undoes the others' writes.
//
// # Usage
//
//	mf := externalversions.NewSharedInformerFactory(machineClient, 0)
//	tf := informers.NewSharedInformerFactory(targetClient, 0)
//	c, err := unmanaged.New(targetClient, unmanaged.Informers{
//		Machines: mf.Machine().V1alpha1().Machines(),
//		Nodes:    tf.Core().V1().Nodes(),
//	}, unmanaged.Options{Registerer: reg})
//	if err != nil {
//		return err
//	}
//	mf.Start(ctx.Done())
//	tf.Start(ctx.Done())
//	go c.Run(ctx, 1)
package unmanaged
