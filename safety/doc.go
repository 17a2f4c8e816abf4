// Package safety holds the policies that keep the machine controllers from
// doing damage in bulk: the replacement budget, and the safety controller.
// The controller runs the overshoot check, marks nodes no machine claims,
// freezes creation during API-server outages and collects orphan VMs.
// Options.Checks splits these as MCM's two processes split them — the
// overshoot check (CheckOvershoot, MCM's machine-controller-manager) and
// the rest (CheckMachines, its provider machine-controller) — so that a
// manager running each half under its MCM process's lease never runs a
// check twice next to either process.
//
// # Orphan VMs
//
// With a driver, at start and every OrphanVMsPeriod (MCM's 15 minutes), the
// driver lists each MachineClass's VMs (exactly that class's, by the driver
// contract). A VM is an orphan when no machine claims it: none has its
// machine name in the class's namespace with the same, or still no,
// provider ID (a machine being created claims its VM by name), and none has
// its provider ID. An orphan is deleted through the driver only after it
// has looked orphaned across checks for OrphanGracePeriod and an uncached
// read confirms that no machine of its name claims it; never while frozen,
// never before the caches synced, and not within one period after an
// outage ended, so that a cache that is briefly wrong after a restart or an
// outage (MCM #657) cannot delete a healthy VM. Each deletion is logged
// with the VM, recorded as an event on its class and counted in
// mcm_safety_orphan_vms_deleted_total. The driver's calls run under
// deadlines (Options.DriverTimeouts, or those of a shared
// *driver.Deadlines), so a hung cloud holds no check for long.
//
// # API-server outages
//
// Every StatusCheckPeriod (every fifth of StatusCheckTimeout while one is
// down) the controller reads a machine that does not exist from the control
// cluster and a node from the target: any answer of a working server
// (NotFound, Forbidden) is up. Down for longer than StatusCheckTimeout, the
// controller is Frozen: as the SafetyGate of the machine, MachineSet and
// MachineDeployment controllers it stops creations and health transitions
// while deletions go on. Up again, it thaws, and as a
// machine.OutageReporter it tells the machine controller when the outage
// ended, which gives the machines Unknown since before then a new health
// timeout (MCM's "Machine Health Timeout was reset due to APIServer being
// unreachable"), so that an outage never replaces a fleet. The machine
// controller exports the state as mcm_machine_controller_frozen; the
// freeze and the thaw are events (FrozenForAPIServerOutage,
// UnfrozenAfterAPIServerOutage) on the ProbeNamespace, delivered once the
// server is back.
//
// # Overshoot
//
// A set with far more machines than it should have (machines created by
// hand into its selector, a controller bug) is frozen: label freeze=True
// and the Frozen condition (reason OverShootingReplicaCount) on the set and
// on its deployment, so that neither creates machines while scale-down
// goes on. MCM's thresholds: frozen at deployment replicas + maxSurge +
// SafetyUp machines (twice the set's replicas + SafetyUp without a
// deployment), unfrozen SafetyDown below, or by the annotation
// safety.machine.sapcloud.io/unfreeze on the set or its deployment. The
// controller checks a namespace whenever a machine appears or goes or a
// set or deployment changes, and every OvershootPeriod. Unlike MCM it never
// lifts a freeze it did not make (a person's freeze=True label) except by
// the unfreeze annotation. The Frozen condition is this controller's alone:
// the MachineSet and MachineDeployment controllers keep it as it is.
//
// # Nodes without a machine
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
// # Replacement budget
//
// A Budget bounds, per MachineDeployment, how many machines may be
// replaced at once: Failed, being deleted, or not up yet (phase empty,
// Pending, CrashLoopBackOff: the replacements on their way), as MCM counts
// them. The machine controller asks
// it before the health timeout marks an unhealthy machine Failed (which
// makes its MachineSet replace it), so that a zone outage that makes every
// node NotReady does not replace the whole fleet at once. A Budget
// implements machine.ReplacementGate.
//
// A deployment's machines are those its MachineSets control: the
// machine's controller reference names a MachineSet, whose controller
// reference names the deployment, matched by UID at each step
// (BudgetOptions.MachineSets is the set cache; the controller's budget
// has it). Unlike MCM, which counts the machines labelled
// name=<deployment> (v1alpha1.MachineDeploymentNameLabelKey), a label
// counts for nothing: anyone who may create a Machine may label it, and
// two such machines stuck in CrashLoopBackOff would otherwise hold a
// deployment's only slot for good, so that its broken machines were never
// replaced. A machine no set controls, or of a set no deployment
// controls, is never held back, as MCM never holds back a machine without
// a deployment; a Budget without the set cache counts each set's machines
// on their own (a deployment in a rollout then has a slot per set).
//
// With BudgetOptions.MaxUnhealthy (Options.MaxUnhealthy of the
// controller, --machine-max-unhealthy of the reference binary; off by
// default, as in MCM) the budget also short-circuits, as Cluster API's
// MachineHealthCheck does: while more of a deployment's machines are
// unhealthy (Unknown or Failed, not being deleted) than that number or
// percentage, no health timeout marks one of them Failed, however long it
// has run out — so many machines failing at once is taken for an outage
// of a zone, the network or the API server, not for broken machines. Only
// the health timeout is gated. A machine whose node does not join within
// its creation timeout is marked Failed all the same (MCM gates no join
// timeout either), and a Failed machine is replaced by its set whatever
// made it Failed; the messages say so rather than that no machine is
// replaced. The controller reports the short-circuit on the deployment:
// condition mcmkit.io/RemediationAllowed False (reason TooManyUnhealthy,
// with the counts) and a RemediationShortCircuited event; True and a
// RemediationResumed event once few enough are unhealthy. Its
// ReplacementGate is the budget with those options, for the machine
// controller.
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
//		Max:         ptr.To(intstr.FromString("20%")), // of each deployment's machines, at least 1
//		MachineSets: mf.Machine().V1alpha1().MachineSets(),
//	})
//	if err != nil {
//		return err
//	}
//	ctrl, err := machine.NewController(..., machine.Options{ReplacementGate: budget})
//
//	sc, err := safety.NewController(machineClient, targetClient, safety.Informers{
//		MachineSets: mf.Machine().V1alpha1().MachineSets(),
//		Deployments: mf.Machine().V1alpha1().MachineDeployments(),
//		Machines:    mf.Machine().V1alpha1().Machines(),
//		Nodes:       tf.Core().V1().Nodes(), // nil, with a nil targetClient, without a target cluster
//	}, nil, safety.Options{Registerer: registry, MaxUnhealthy: ptr.To(intstr.FromString("40%"))})
//	...
//	// The machine controller takes sc.ReplacementGate() instead of its own budget.
//	go sc.Run(ctx, 1)
package safety
