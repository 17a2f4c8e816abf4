// Package mcm manages the whole lifecycle of Kubernetes worker machines: it
// creates virtual machines through a cloud driver, watches them join a
// cluster as Nodes, keeps them healthy, rolls out new machine templates and
// drains and deletes machines safely. It is a library first — the pieces are
// meant to be embedded in other operators and tools — and it speaks the
// machine.sapcloud.io/v1alpha1 API of Gardener's machine-controller-manager,
// so existing objects and the cluster-autoscaler's MCM provider keep working.
//
// # Clusters
//
// Two clusters take part, and they may be the same one:
//
//   - the control cluster holds Machines, MachineSets, MachineDeployments,
//     MachineClasses and the Secrets the classes reference;
//   - the target cluster holds the Nodes, Pods, PodDisruptionBudgets and
//     VolumeAttachments of the machines. It may be absent ("none"), in which
//     case machines become Available as soon as their VM exists.
//
// # Packages
//
//   - api/machine/v1alpha1: the API types, constants and defaults;
//     api/machine/v1alpha1/validation checks objects that got past admission.
//   - api/crds: the CustomResourceDefinitions (with CEL admission rules) and
//     an installer.
//   - client: the generated clientset, listers and informers; tolerant:
//     the same informer factory, except that a stored machine object that
//     cannot be decoded is reported and left out instead of keeping every
//     informer of its kind from syncing.
//   - driver: the interface a cloud provider implements, with typed error
//     codes; driver/sim is a simulated cloud and kubelet for tests and demos.
//   - drain: an embeddable node drain with ordering, PodDisruptionBudget
//     awareness, deadlines and volume-detach waits.
//   - machine, machineset, deployment, safety: the controllers. Each is a
//     constructor taking clients, informers, small interfaces and an Options
//     struct whose zero value works, plus Run(ctx, workers). The consumer-side
//     interfaces the machine controller asks (machine.Drainer, safety.Gate,
//     machine.ReplacementGate) are how the pieces meet: safety/budget's
//     Budget, the replacement budget, implements ReplacementGate;
//     safety/outage's API-server outage gate answers safety.Gate, which the
//     MachineSet and MachineDeployment controllers ask too.
//   - workqueue: the worker loop all controllers share (retries with backoff,
//     panic recovery, metrics on a caller-given registry; the one place
//     that reports reconcile errors, with 409 Conflicts, which the next
//     sync resolves, below error level).
//   - expectations: bookkeeping that keeps controllers from acting twice while
//     their caches lag: creation and deletion expectations (Store), and
//     read-your-writes for each object a controller patched (Writes).
//   - reference: the reference manager, a drop-in for MCM's
//     machine-controller-manager (MCM's flags, leader election, metrics and
//     health endpoints) that composes every controller; a provider's main
//     calls manager.Main with its driver added to the driver table.
//
// Every controller writes the fields it owns with guarded JSON merge
// patches, only when they changed (the module's internal patch package).
// A writer names what it owns once, whole fields or single keys of a map,
// and the same naming reads the object as stored and as wanted, so a key
// of someone else's (kubectl's last-applied configuration on a
// MachineDeployment, the autoscaler's options) is never sent. On Nodes, whose labels, annotations and finalizers other writers change
// all the time, keys and added finalizers go as unguarded strategic merge
// patches, which cannot undo anyone's change. A machine on its way from
// created to Running costs the machine controller three machine writes and
// one node write when its node joins within the machine controller's
// PendingDelay (one more, the Pending status, when it takes longer), and a
// MachineSet's machine one write less: it is created with the finalizer.
//
// # What a Machine can reach
//
// A Machine's node label and provider ID are anyone's to write who may
// create or patch machines, so they are claims, not facts: the machine
// controller acts on a node or VM only through a binding it established
// from the driver's answer for that very machine and that the node
// confirms (its provider ID), recorded on the node (mcmkit.io/machine-uid).
// Claims the node or the driver refutes are reported and ignored; the
// binding is a guarded write, so one node has one machine even across
// managers sharing a target; and a driver's answer naming another
// machine's VM is refused, so no driver call carries another machine's
// provider ID. What the flows act on is the controller's own: a
// deletion's step and drain parameters are recorded in the machine's
// status, which only the manager writes (a patch of the machine cannot
// move a deletion on or shorten its drain), and its own timestamps are
// never taken from the future. Sets and deployments may not select by the
// labels the controllers write. Every driver call runs under a deadline
// (driver.WithDeadlines), and texts from outside are bounded before they
// reach the status. reference/README.md has the threat model, each claim
// with the test that pins it.
//
// # Rollouts, in place, and preserved machines
//
// A MachineDeployment rolls a new template out as MCM's strategies do:
// RollingUpdate and Recreate replace machines; InPlaceUpdate keeps every
// VM and has a node agent outside mcm (gardener-node-agent, or driver/sim's
// simulated one) update each node the deployment or a person selects,
// after the machine controller drained it, then moves the machine to the
// new MachineSet. Package deployment documents the label protocol an agent
// follows, and package machine the machine's side (phases, timeout).
// Machine preservation (node.machine.sapcloud.io/preserve, a set's
// autoPreserveFailedMachineMax) keeps a machine and its VM, failed or not,
// for a while instead of replacing it; package machine documents it.
//
// # Switching from MCM
//
// A namespace that Gardener MCM manages can be taken over as it is: the
// objects, finalizers, labels, annotations and the Nodes' bookkeeping
// (the last-applied node template and virtual capacity records, the node
// finalizer) are MCM's, read in MCM's format and written in it, so the
// machine controller adopts running machines without creating, deleting
// or relabelling anything, and keys an older template applied are
// removed. Its first sync of each machine asks the driver, by the
// machine's name, which VM backs it, and binds the node in the node write
// it makes anyway or in one of its own. Stored objects MCM accepted and the API now rejects are
// reported by package tolerant and skipped, never blocking the rest.
//
// # Usage
//
// A program embeds the pieces it needs. Registering the API on its own scheme
// and reading machines through the generated informers looks like this:
//
//	scheme := runtime.NewScheme()
//	_ = v1alpha1.AddToScheme(scheme)
//
//	clients := versioned.NewForConfigOrDie(controlConfig)
//	factory := externalversions.NewSharedInformerFactoryWithOptions(clients, 10*time.Minute,
//		externalversions.WithNamespace("machines"))
//	machines := factory.Machine().V1alpha1().Machines()
//	factory.Start(ctx.Done())
//
// Controllers are built the same way: construct with clients, informers and
// Options, then call Run(ctx, workers), which returns when ctx ends and
// removes the controller's event handlers, so informers may outlive it and
// serve the next. A constructor sets its transform on the informers that
// have not started: managed fields dropped, and a Node's status cut to the
// fields mcm reads (conditions, volumesAttached, and of the capacity only
// the class's virtual capacity), and Machines and Nodes cached as compact
// copies that share their repeated strings, label and annotation maps and
// owner references; start a node informer first, or give the controllers
// a factory of their own, if your code reads more of the node from it. As
// with any informer, objects from these caches are read-only: DeepCopy one
// before changing it, or a change to a shared map shows on every object
// that shares it. Nothing in the library uses global state: metrics go to
// the prometheus.Registerer you pass, logs to the logr.Logger in the
// context, and schemes are yours.
package mcm
