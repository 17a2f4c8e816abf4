// Package deployment is the MachineDeployment controller: it rolls machines
// of a MachineDeployment from one template to the next through MachineSets,
// as Gardener MCM's controller does (itself a port of kube-controller-manager's
// Deployment controller), with the arithmetic kept in small pure planners.
//
// So far the package holds the planners the controller is built on,
// described below. They read no clients, informers or clocks: the caller
// passes the deployment, its sets, what it counted of their machines and the
// current time, and applies what they return.
//
// # Sets and machines
//
// The new set is the oldest set whose template equals the deployment's
// template once the fields below that propagate without a rollout are set
// aside (findNewSet); every other set is old. A set is active while its
// spec.replicas is above 0. Machines are counted per set (countMachines): a
// machine with a deletionTimestamp or in phase Terminating is on its way out;
// one in phase Running or Available for at least minReadySeconds is available;
// every other machine is unavailable.
//
// # Template hash
//
// templateHash names a template revision: FNV-32a of the template's JSON,
// salted with status.collisionCount, rendered as Kubernetes renders its
// pod-template-hash. It leaves out spec.nodeTemplate, the machine
// configuration (timeouts, maxEvictRetries, nodeConditions and the other
// inline fields), spec.class.kind and the machine-template-hash label: the
// first three are copied into the existing sets and machines in place, so
// changing them must not start a rollout. Any other change of the template
// (its labels, annotations, class name, ...) gives a new hash and a new set.
//
// # Rolling update
//
// maxSurge and maxUnavailable are numbers or percentages of spec.replicas;
// a percentage of maxSurge rounds up and one of maxUnavailable rounds down,
// and when both come to 0 maxUnavailable is 1 so that the rollout can move
// (rolloutBounds). Each step of planRolling
//
//   - grows the new set, never above spec.replicas, while the machines of all
//     sets stay within spec.replicas + maxSurge (a set counts what it is
//     sized for or the machines it still has, whichever is more);
//   - shrinks old sets, oldest first: first by their unavailable machines,
//     which costs no capacity, as far as the machines left can still give
//     spec.replicas - maxUnavailable available ones once the new set's are
//     up; then by available machines, only while more than
//     spec.replicas - maxUnavailable machines are available.
//
// Unavailable old machines therefore never hold a rollout up, and a step
// never takes the deployment above spec.replicas + maxSurge machines or
// below spec.replicas - maxUnavailable available ones (nor further out, when
// it starts outside those bounds).
//
// # Recreate
//
// planRecreate scales every old set to 0 and waits until no machine of an old
// set exists any more, those being deleted included; only then does it create
// the new set (or scale it) with spec.replicas.
//
// # Scaling
//
// A change of spec.replicas is told from a rollout by the
// deployment.kubernetes.io/desired-replicas annotation of the active sets
// (isScalingEvent). planScale then
//
//   - gives the replicas to the only active set, or to the new set (the newest
//     set when there is no new one) when no set is active: scaling from zero;
//   - scales old sets to 0 when the new set is saturated;
//   - during a rolling update, shrinks all active sets in proportion to their
//     share of the deployment.kubernetes.io/max-replicas they were sized for,
//     taking what rounding leaves to remove from the largest set first, so
//     that the sets add up to spec.replicas + maxSurge; growth goes to the new
//     set only (the newest active set while there is no new set), as MCM does
//     since its issues 754 and 802, and never takes it above spec.replicas.
//
// Recreate and InPlaceUpdate deployments with several active sets are left
// to their rollout.
//
// # Revisions and history
//
// A set's revision is its deployment.kubernetes.io/revision annotation. The
// new set gets one more than the highest old revision (newSetAnnotations),
// keeping earlier revisions it had in deployment.kubernetes.io/revision-history;
// sets take the deployment's annotations except the bookkeeping ones
// (skipCopy). setsToDelete picks the old sets beyond spec.revisionHistoryLimit,
// lowest revision first, and only those with no replicas and no machines left.
//
// # Status
//
// calculateStatus counts the machines of all sets, keeps
// status.collisionCount, lists machines whose last operation failed and sets
// the Available condition (at least spec.replicas - maxUnavailable available
// machines) and ReplicaFailure (from the sets). withProgress maintains the
// Progressing condition the way Kubernetes does, with MCM's reasons;
// pausedCondition reports pausing and resuming.
package deployment
