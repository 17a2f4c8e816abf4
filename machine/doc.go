// Package machine is the machine controller: it reconciles Machines of the
// machine.sapcloud.io/v1alpha1 API against a driver.Driver (the cloud) and
// the Nodes of a target cluster, as Gardener MCM's machine controller does,
// and keeps finalizers on the MachineClasses and Secrets that machines use.
// A provider embeds it with its driver.
//
// # Machines
//
// Every sync of a machine observes without writing (informer caches,
// safety gate, clock; the driver's GetMachineStatus when a claim needs
// its word, the replacement gate's answer when a health timeout ran
// out), plans once with a pure function (planMachine, decideDeletion,
// with planHealth and planNodeSync), applies the plan, and patches the
// status only when it changed. A creation is one phase of the apply: after
// the driver's calls and a read of the node's cache, planCreation decides
// the machine's write once (Running, Pending, or the status left alone);
// only the write-ahead that stores the finalizer before a VM may exist
// goes before it. Phases and lastOperation use MCM's vocabulary, and
// lastOperation.errorCode carries the driver's error code (for example
// ResourceExhausted) for the cluster-autoscaler; the description is for
// people and is never parsed. Texts from outside (a driver's error, a node
// agent's reason, a node's condition messages) are cut, at a character
// boundary and with a suffix saying how many bytes went, to 4 KiB where
// they are stored (lastOperation, conditions) and to 1 KiB in events, so
// that a message of any size never makes a status write fail.
//
//   - Validation: a machine, class or secret that is invalid or missing
//     gets lastOperation state Failed with a clear description and a
//     Warning event; nothing is created, and the machine is retried with
//     backoff (sooner when the machine's spec, the class or the secret's
//     data changes).
//   - Creation: first the machine finalizer and CreationStartedAnnotation
//     are stored (a machine born with its defaults, as a MachineSet
//     creates them with machinestate.NewMachine, needs no write first and
//     stores the creation start with the provider ID instead). Then, with
//     a target cluster and <<BOOTSTRAP_TOKEN>> (plain or URL-encoded) in
//     the user data, the machine's bootstrap
//     token: a bootstrap.kubernetes.io/token Secret bootstrap-token-<id>
//     in the target's kube-system, with MCM's ID for the machine name (so
//     a token MCM created is reused), valid for the creation timeout, with
//     Options.BootstrapTokenAuthExtraGroups. It names its machine
//     (annotation mcmkit.io/machine): no machine is given, or deletes,
//     another's token, and one whose ID another's token holds takes a
//     second ID. An expired token is renewed. "<id>.<secret>" replaces
//     the placeholder in a copy of the user data; the Secret is deleted
//     once the machine is Running, or with the machine; failing to issue
//     it is a failed creation like a driver's. Then GetMachineStatus, so
//     an existing VM (an earlier attempt whose answer was lost) is
//     adopted; CreateMachine only on NotFound; InitializeMachine
//     afterwards (Unimplemented skips it; NotFound is a failure, as in
//     MCM's controller). The provider ID, the node label and the default
//     priority annotation are stored, then phase Pending (Available
//     without a target cluster, with the driver's addresses) — on a first
//     creation only once Options.PendingDelay has passed without the node
//     joining: a node that joins sooner takes the machine from no phase
//     straight to Running. An answer (of CreateMachine, InitializeMachine
//     or GetMachineStatus) that names another machine's VM — one another
//     machine of this controller owns (see Claims), or whose node is
//     bound to another machine, another manager's on a shared target —
//     is refused before any call carries its provider ID, and no VM is
//     deleted for it (a VM the driver made for the machine goes with the
//     machine, asked for by its name): the machine is Failed
//     (lastOperation errorCode Internal, event ForeignVM) without a
//     provider ID or node label. A VM of its own whose
//     node name belongs to another machine's Node is deleted and the
//     machine marked Failed. An answer the machine could not store is the
//     driver's fault (Internal), refused whole before anything is written
//     and retried on the backoff: a node name that cannot be a Node's name
//     and the node label's value, a provider ID over 1 KiB or not UTF-8, a
//     lastKnownState over 64 KiB, and without a target cluster more than
//     32 addresses or one over 253 bytes (a DeleteMachine's lastKnownState
//     over 64 KiB is not stored, with a Warning event, and the deletion
//     goes on). Failures give CrashLoopBackOff, or
//     Failed once the creation timeout has passed since
//     CreationStartedAnnotation (never before the machine's creation,
//     never after now: see Timestamps):
//     the retry after a failure comes no later than the timeout, which a
//     CrashLoopBackOff machine is then Failed by without another driver
//     call.
//   - Join and health: Pending becomes Running when the node is Ready and
//     none of the configured node conditions is True, and Failed when the
//     creation timeout passes first (a join timeout: not gated, as in
//     MCM); Running becomes Unknown when that stops
//     (UnhealthySinceAnnotation records when); Unknown becomes Failed
//     after the health timeout, when Options.ReplacementGate allows it (by
//     default MCM's limit, the safety/budget package's with its zero
//     options: one machine at a time among those one MachineSet controls —
//     the controller reference, not a label). Node
//     conditions are copied to the status when they change (the
//     controller's own, under mcmkit.io/, stay). A node that
//     turns Ready queues its Pending, Unknown or InPlaceUpdateSuccessful
//     machine ahead of the other machines waiting (workqueue's AddFirst),
//     and so does an event of such a machine whose node is Ready already,
//     so that its Running status does not wait behind a wave of creations.
//   - Node sync: the nodeTemplate's labels, annotations and taints are
//     applied to the Node by a three-way merge against the
//     node.machine.sapcloud.io/last-applied-anno-labels-taints annotation
//     (MCM's format, the JSON of the NodeTemplateSpec; the record is
//     rewritten only when what it says changes), so keys someone else set
//     survive and keys the template dropped are removed, also after a
//     switch from MCM. The class's nodeTemplate.virtualCapacity is applied
//     to the node's status.capacity the same way (record:
//     node.machine.sapcloud.io/last-applied-virtual-capacity). The
//     machine-name label and the node finalizer
//     (node.machine.sapcloud.io/machine-controller) are set in the same
//     patch.
//   - Node deletion: a node being deleted (kubectl delete node), or gone,
//     deletes the machine it is (or, from the informer's last copy of a
//     gone node, was) bound to by UID, whatever its phase — never a
//     machine that merely names the node, nor, on a shared target, one
//     whose node another manager's machine won — and the machine's
//     deletion drains the node and removes the finalizer with the node. A
//     node being deleted that is bound to no machine loses the finalizer
//     at once, so it never stays Terminating for want of a machine; one
//     bound to a machine this controller does not know (another
//     manager's) keeps it for that manager.
//   - Deletion: an explicit step machine recorded in the machine's status
//     (the condition DeletionCondition, mirrored for people and tools in
//     DeletionStepAnnotation, which is never read; see DeletionStep):
//     pre-drain hooks, drain, pre-terminate hooks, DeleteMachine, Node
//     deletion, finalizer removal. The record holds the step, when it
//     began, and the drain timeout and maxEvictRetries in force when the
//     deletion began: patching the annotation or the machine's
//     configuration during the deletion neither moves the flow on nor
//     shortens the drain. A machine without a record (a deletion begun by
//     an older version or by MCM) starts at the first step. Before the drain,
//     the node is marked with the Terminating condition (reason Unhealthy
//     for a Failed machine, ScaleDown otherwise), and a machine without
//     the node label finds its node by the node's machine-name label or,
//     failing that, through the driver's GetMachineStatus (the label is
//     then written if it can be; the deletion does not wait for it). A
//     node the machine does not own (see Claims) is neither marked,
//     drained nor deleted (event NodeNotOwned), and DeleteMachine is
//     asked for the VM by the machine's name unless the machine owns the
//     VM its provider ID names; a machine that never recorded a VM and
//     whose class the driver refuses (InvalidArgument) skips
//     DeleteMachine. Each sync observes,
//     decides the step (decideDeletion), runs it, and goes on with the next
//     until one waits or fails; only then is the outcome (the record,
//     phase Terminating, lastOperation: one status write) written, and a
//     flow that ends within the sync writes only the finalizer's removal.
//     Each step is idempotent and the recorded step only advances after
//     its work, so a crash repeats the
//     steps done since the last write. The drain runs in non-blocking passes of
//     the drain engine (state in DrainStateAnnotation, which anyone who
//     may patch the machine can write: the deadline and maxEvictRetries
//     always come from the machine's deletion timestamp and the
//     record's drain parameters, and a state the machine or the engine cannot trust
//     restarts the drain, event DrainStateReset), forced after the
//     drain timeout or with the force-deletion label; a pod whose eviction
//     PodDisruptionBudgets refused maxEvictRetries times is deleted without
//     eviction (event EvictRetriesExhausted); the engine itself
//     forces on a node NotReady for long, waits for the volumes of evicted
//     pods to detach and, on an unreachable node, deletes its
//     VolumeAttachments. A machine whose drain waits on a
//     PodDisruptionBudget is synced again as soon as the budget allows a
//     disruption (with Informers.Target; the budgets are listed in
//     mcmkit.io/drain-blocked-by, written with the state). No worker waits
//     for a drain.
//   - Frozen (Options.SafetyGate): no creation and no health transition;
//     deletions go on. A gate that is also an OutageReporter (the
//     API-server outage gate of package safety/outage) ends an outage by
//     resetting the health timeout of the
//     machines Unknown since before then: back to Running with MCM's
//     "Machine Health Timeout was reset due to APIServer being
//     unreachable", so that an outage never replaces a fleet.
//
// # Preservation
//
// A machine is preserved — kept, with its VM and node, for diagnosis —
// when the annotation node.machine.sapcloud.io/preserve
// (v1alpha1.PreserveAnnotation) on its Node or on itself asks for it; the
// Node's value wins. Its values are MCM's: "now" preserves in any phase,
// "when-failed" while the machine is Failed, "auto-preserved" (set by
// the MachineSet controller on at most spec.autoPreserveFailedMachineMax
// Failed machines) likewise, and "false" never preserves and stops a
// preservation. The controller records the Node's value on the machine
// (node.machine.sapcloud.io/last-applied-node-preserve-value) and
// removes the record when the Node's annotation goes.
//
// The step is planned by planPreservation after the health step, so a
// machine the health timeout just marked Failed is preserved in the same
// write; it decides start, keep or stop from the machine, its node and
// the clock:
//
//   - Start: status.currentStatus.preserveExpiryTime = now +
//     machinePreserveTimeout (the machine's, else
//     --machine-preserve-timeout, 96h). The MachineSet neither deletes nor
//     replaces a preserved Failed machine (package machinestate holds the
//     shared rules).
//   - The node, while preserved: cluster-autoscaler.kubernetes.io/
//     scale-down-disabled="true" with the by-mcm marker (only when the
//     annotation is not there already: a person's is left alone and never
//     removed), and the condition Preserved with MCM's reasons ("Preserved
//     by MCM." for auto-preserved, else "Preserved by user.") and messages
//     ("Machine preserved until <t>.", or for a Failed machine "Preserved
//     node drained successfully. …" True / "Preserved node could not be
//     drained. …" False). A Failed machine's node gets the taint
//     node.machine.sapcloud.io/preserved:NoSchedule and is then drained
//     under the machine's drain rules: the drain timeout counted from the
//     start of the preservation, force with the force-drain label, and the
//     drain engine's force on a node NotReady for long. The start, the
//     drain timeout and maxEvictRetries in force when the drain began are
//     recorded in the machine's status (PreserveDrainCondition), stored
//     before the first pass sends anything, so that patching the
//     machine's drain or preserve timeout during the drain changes
//     neither; a drain an older version began records the
//     machine's configuration at its next pass. In non-blocking passes
//     like the deletion's, its state kept in
//     PreserveDrainStateAnnotation, failures retried with backoff, the
//     outcome recorded in the same condition (reason Drained, mirrored
//     in PreserveDrainedAnnotation, whose removal drains nothing again;
//     the condition goes when the preservation ends or the machine is no
//     longer Failed) and told by the Preserved condition. The drain engine the controller builds does not cordon;
//     a Drainer given in Options cordons, and that cordon is recorded
//     (PreserveCordonedAnnotation) before the drain runs and undone once
//     the machine runs again.
//   - Stop: on expiry, when the annotation goes, on "false", or when a
//     when-failed or auto-preserved machine is no longer Failed (a
//     preserved Failed machine whose node is healthy again runs again, as
//     in MCM; one that is not preserved stays Failed for its set). The
//     condition turns False ("Preservation stopped.", with a message
//     saying why), the taint and the scale-down-disabled annotations
//     carrying the marker go, the expiry is cleared. An expired annotation
//     (now, when-failed, auto-preserved) is removed where it came from,
//     the Node or the machine; auto-preserved also on recovery, as MCM
//     does; "false" never is.
//   - An unknown value is reported once (a Warning event
//     InvalidPreserveValue and lastOperation, recorded in
//     mcmkit.io/preserve-invalid-reported) and otherwise ignored: the
//     current state stays, but an expiry still ends a preservation.
//   - The machine is synced again at its expiry, and at once when a
//     Node's or Machine's preserve annotation changes. A machine being
//     deleted is not preserved: its deletion goes on. mcm_machine_preserved
//     shows which machines are preserved.
//
// A frozen controller leaves preservations as they are, as in MCM; a
// machine whose node or VM another machine claims too (see Claims) acts
// on neither, its preservation included, until one claim is gone.
//
// Where preservation differs from MCM v0.62.1: DIVERGENCES.md at the
// repository's root, section Preservation, the one list of divergences.
//
// # In-place updates
//
// A machine of an InPlaceUpdate MachineDeployment keeps its VM across a
// rollout: the deployment controller marks its node and moves it to the
// new MachineSet once the node agent (outside the controllers; Gardener's
// gardener-node-agent) has updated it. The machine controller's side of
// that protocol is MCM v0.62.1's, with MCM's keys, values, reasons and
// texts (v1alpha1's in-place constants). Planned by planInPlace after the
// health step, for a machine whose own node is in the cache:
//
//   - The node's condition InPlaceUpdate (always True) tells its state,
//     reason by reason, from the node's labels: with
//     node.machine.sapcloud.io/candidate-for-update (any value; without
//     it the labels are not read) CandidateForUpdate, when the node has
//     no such condition yet or its last update succeeded and its result
//     label is gone; with node.machine.sapcloud.io/selected-for-update
//     too, SelectedForUpdate; once drained, ReadyForUpdate; on the
//     agent's node.machine.sapcloud.io/update-result, UpdateSuccessful
//     ("successful") or UpdateFailed ("failed", the message ending in the
//     node's node.machine.sapcloud.io/update-failed-reason). The
//     condition is written by a strategic merge patch of the node's
//     status naming only it, when its reason or message changes; its
//     transition time moves with the reason. The controller never writes
//     the labels and never removes the condition.
//   - SelectedForUpdate: the node of a Running (or Unknown) machine is
//     cordoned and drained under the machine's drain rules, as a
//     deletion's drain (the same drain engine, in non-blocking passes):
//     the drain timeout counted from the drain's first pass (never
//     earlier than the condition's transition to SelectedForUpdate),
//     forced with the force-drain label, the engine's force on a node
//     NotReady for long; its state in InPlaceDrainStateAnnotation. The
//     start, the drain timeout and maxEvictRetries in force then are
//     recorded in the machine's status (InPlaceDrainCondition, stored
//     before the first pass, removed when the drain ends; the start
//     mirrored in
//     InPlaceDrainStartedAnnotation), so that patching the machine during
//     the drain neither shortens nor postpones it; a drain an older
//     version began takes its start from the annotation and records the
//     machine's configuration at its next pass. A failed pass gives lastOperation
//     DrainNode Failed, MCM's "Drain failed due to - <error>. Will retry
//     in next sync. Initiate node drain", a DrainFailed event, and a
//     retry with the machine's backoff. The machine stays as it was,
//     Running and available, while its node drains.
//   - Drained: phase InPlaceUpdating, lastOperation InPlaceUpdate
//     Processing "Machine <m> is undergoing an in-place update" (event
//     InPlaceUpdating), written before the condition turns ReadyForUpdate:
//     the agent's go. The in-place timeout counts from here
//     (currentStatus.lastUpdateTime): the machine's inPlaceUpdateTimeout,
//     else Options.Machine's (--machine-inplace-update-timeout), 20m.
//   - The agent's answer, a label on the node (its candidate and selected
//     labels and the cordon left alone, the result label kept until the
//     deployment controller removes it): successful gives
//     InPlaceUpdateSuccessful, lastOperation InPlaceUpdate Successful
//     "Machine <m> successfully updated dependencies"; failed gives
//     InPlaceUpdateFailed, InPlaceUpdate Failed "Machine <m> failed to
//     update dependencies: <reason>", and a Warning event
//     InPlaceUpdateFailed naming the reason. No answer within the
//     timeout gives InPlaceUpdateFailed, "Machine <m> failed to in-place
//     update in <timeout> minutes." (MCM's text, e.g. "20m0s minutes."),
//     at the timeout (the machine is synced again then); a failure
//     labelled after it puts the agent's reason on lastOperation. A
//     success labelled later, after a failure or the timeout, still
//     gives InPlaceUpdateSuccessful.
//   - InPlaceUpdateSuccessful on a healthy node gives Running,
//     HealthCheck Successful "Machine <m> successfully re-joined the
//     cluster". The machine's status.conditions copy the node's, as ever.
//   - Health: while InPlaceUpdating or InPlaceUpdateFailed neither the
//     Running/Unknown transitions nor the health timeout apply. A failed
//     update is never marked Failed, and never retried by the controller:
//     the agent may retry and label successful, a person may label it or
//     delete the machine. An InPlaceUpdateSuccessful machine whose node
//     does not become healthy gets the health timeout, counted from the
//     success, as an Unknown one does (unless disableHealthTimeout; the
//     replacement gate is asked).
//   - A change of a node's labels or annotations syncs its machine at
//     once. The in-place phases do not count against the replacement gate
//     (only Failed and machines not up yet do), and a machine in them
//     whose node is deleted is deleted with it, as a Running one.
//   - Metrics: mcm_machine_inplace_updates_total{namespace,result}
//     (started, successful, failed: a timeout counts as failed, and an
//     update that failed and then succeeded counts both) and
//     mcm_machine_inplace_update_seconds{namespace,result}, the time from
//     InPlaceUpdating to the answer or the timeout; the drain's time goes
//     to the drain metrics. MCM has no in-place metrics.
//
// The update's drain holds no worker, and its clock is the recorded
// selection; a Failed, Pending or updating machine's node is not drained
// for an update.
//
// Where in-place updates differ from MCM v0.62.1: DIVERGENCES.md at the
// repository's root, section In-place updates.
//
// # Claims
//
// A machine's node label and spec.providerID are claims: anyone who may
// create or patch machines writes them, and may name another machine's
// node or VM, or one no machine has. The controller acts on a node or VM
// only through a binding it established: the driver named the VM for
// this very machine (CreateMachine, or GetMachineStatus asked by the
// machine's name — never by the provider ID it claims; driver requests of
// the creation flow carry no claimed provider ID), and the Node shows that
// VM's provider ID. The node sync then records the binding on the Node,
// v1alpha1.MachineUIDAnnotation (the machine's UID), which users of the
// control cluster cannot write; until then the driver's word is kept in
// memory. The binding is exclusive: it is written first and alone, as a
// merge patch guarded by the node's resourceVersion, and on a conflict
// only while the node as the API server has it is bound to no other
// machine and shows the VM, so that of two machines binding one node at
// once (two managers on a shared target) exactly one wins; the other
// writes nothing that says it has the node, and its next sync finds the
// node bound to another machine. No driver call carries a provider ID the
// machine does not own, the machine in the request included: the driver's
// answers are checked before any call carries theirs (see Creation), and
// a machine that does not own the VM it claims is asked about by its name
// with the provider ID blanked. A claim nobody vouched for (a restart, or
// a switch from MCM, whose nodes carry no binding yet) is checked with
// GetMachineStatus by name, once: a node bound to another machine or
// running on another VM, or a driver that names another VM or none,
// refutes it. A refuted claim
// is reported (event ForeignClaim) and ignored: the creation flow finds or
// creates the machine's own VM and writes its provider ID and node over
// the claim. Two machines the driver vouched for that claim the same
// node or VM act on neither (event ContestedClaim) until one claim is
// refuted or gone. Health is read only from a node the machine owns; a
// node that shows no provider ID yet is not the machine's until it does.
//
// Writes are guarded JSON merge patches of the fields the controller owns
// (package internal/patch). Each write's resourceVersion is remembered
// (expectations.Writes) until the informer cache has caught up, so no sync
// acts on a cache older than the controller's own writes.
//
// # Timestamps
//
// The times the timeouts count from are kept in the controller's
// annotations (CreationStartedAnnotation, UnhealthySinceAnnotation, and
// for an in-place drain an older version began
// mcmkit.io/inplace-drain-started), which anyone who may patch a machine
// can write and which a leader whose clock runs ahead writes in the
// future. (The drains' starts are kept in the status: see Deletion,
// Preservation and In-place updates; a recorded start in the future
// counts from now.) One rule (clampTime) reads them: never after now, and the
// creation start never before the machine's creation. A sync that finds
// one in the future stores now in its place with whatever else it writes
// and reports it once (a Warning event FutureTimestamp and a log line), so
// a forged 2099 puts no timeout off: it runs from when it was found.
//
// # Retries
//
// A failed driver call is returned to the work queue as an error (logged
// once and counted in mcm_workqueue_reconcile_total{result="error"}), with
// the delay after which the machine is retried, chosen by the driver error
// code: ShortRetry (5s) for Unavailable, DeadlineExceeded, Aborted,
// Unknown, Canceled and Uninitialized; ResourceExhaustedRetry (default
// LongRetry, 10m) for ResourceExhausted; MediumRetry (3m) for everything
// else. Bad input waits MediumRetry too; it is reported on the machine and
// by an event, not as a queue error. Consecutive failures of one machine
// double the wait, up to MaxRetryDelay.
//
// The wait holds whatever queues the machine, from when the driver
// answered (a failed write of the failure keeps it): a sync that comes
// before a failed creation's wait has passed (a node, a creation slot, an
// event, the queue's retry of a failed write) calls no driver and is
// requeued for the rest of it, unless what the
// creation is made from changed meanwhile: the machine's spec (its
// generation), its class's (generation) or its secret's data. A machine is
// synced on every change of it (labels, annotations, finalizers, deletion,
// spec, others' status writes) but the controller's own status writes,
// whose sync planned them whole and asked for its own requeue (MCM syncs
// on spec changes only); a sync that found the cache older than its own
// last write waits for that write's event, which syncs the machine then.
//
// # Hung clouds
//
// Every driver call has a deadline (Options.DriverTimeouts, see
// driver.WithDeadlines): past it the call fails with DeadlineExceeded and
// the worker moves on, even if the driver ignores its context; the
// machine gets no other driver call until such an abandoned call returns.
// At most Options.MaxConcurrentCreations workers (four fifths of them by
// default) run creations at once, so that creations hung until their
// deadline never hold the workers that deletions and health checks need;
// a machine that finds no creation slot free is queued again when one
// frees.
//
// # Observability
//
// Events use the Reason* constants; their messages are at most 1 KiB (see
// Machines). With Options.Registerer set: the queue
// metrics of package workqueue; the driver's through driver.Instrument;
// the drain engine's; and MCM's machine metrics under MCM's names, types
// and labels, so that dashboards and alerts built for MCM keep working:
//
//	mcm_machine_create_duration_seconds       gauge    namespace, machine_deployment, instance_type, zone
//	mcm_machine_initialize_duration_seconds   gauge    namespace, machine_deployment, instance_type, zone
//	mcm_machine_join_duration_seconds         gauge    namespace, machine_deployment, instance_type, zone
//	mcm_machine_drain_duration_seconds        gauge    namespace, machine_deployment
//	mcm_machine_delete_duration_seconds       gauge    namespace, machine_deployment, instance_type, zone
//	mcm_machine_num_failed_join               counter  namespace, machine_deployment, instance_type, zone
//	mcm_machine_items_total                   gauge
//	mcm_machine_controller_frozen             gauge
//	mcm_machine_current_status_phase          gauge    name, namespace
//	mcm_machine_info                          gauge    name, namespace, createdAt, spec_provider_id,
//	                                                   spec_class_api_group, spec_class_kind, spec_class_name, node_name
//	mcm_machine_status_condition              gauge    name, namespace, condition
//	mcm_misc_scrape_failure_total             counter  kind (binary="machine-controller-manager-provider")
//
// The duration gauges hold the last value, as MCM's do; every value also
// goes to a histogram of our own under the same labels,
// mcm_machine_{create,initialize,join,drain,delete}_seconds, for
// percentiles and rates. The labels are MCM's: machine_deployment is the
// machine's "name" label (empty outside a deployment), instance_type the
// class's nodeTemplate.instanceType, zone the topology.kubernetes.io/zone
// label of the machine's nodeTemplate or else the class's
// nodeTemplate.zone. Join is the time from the start of the machine's
// creation until its node was Ready, drain from the drain's first pass
// until it was done, create from the machine's creation timestamp until
// CreateMachine succeeded, delete from its deletion timestamp until
// DeleteMachine succeeded (the drain included), all as in MCM; initialize
// is the duration of the successful InitializeMachine call.
//
// At scrape time, from the machine cache: mcm_machine_items_total,
// mcm_machine_current_status_phase (Terminating -4, Failed -3,
// CrashLoopBackOff -2, Unknown -1, Running 1, any other phase 0, the
// in-place ones included, as in MCM; a machine
// with a deletion timestamp is Terminating), mcm_machine_info (always 1;
// createdAt in Unix seconds), mcm_machine_status_condition (the node's
// conditions: True 1, False 0, Unknown 2), mcm_machine_controller_frozen
// (1 while Options.SafetyGate freezes the controller) and, of our own,
// mcm_machine_phase_machines{namespace,phase}, the number of machines per
// phase, and mcm_machine_preserved{name,namespace} (1 while a machine's
// preservation holds, else 0). The in-place updates have
// mcm_machine_inplace_updates_total and mcm_machine_inplace_update_seconds
// (see In-place updates). A list from the cache that fails counts in
// mcm_misc_scrape_failure_total{kind="Machine-count"}. A controller's Run
// replaces the scrape-time collector of an earlier controller on the same
// registry, whose caches stopped with it.
//
// # Usage
//
//	mf := externalversions.NewSharedInformerFactoryWithOptions(machineClient, 0, externalversions.WithNamespace(ns))
//	cf := informers.NewSharedInformerFactoryWithOptions(controlClient, 0, informers.WithNamespace(ns))
//	tf := informers.NewSharedInformerFactory(targetClient, 0)
//	ctrl, err := machine.NewController(machineClient, controlClient, targetClient, machine.Informers{
//		Machines: mf.Machine().V1alpha1().Machines(),
//		Classes:  mf.Machine().V1alpha1().MachineClasses(),
//		Secrets:  cf.Core().V1().Secrets(),
//		Nodes:    tf.Core().V1().Nodes(), // nil, with a nil targetClient, for no target cluster
//	}, providerDriver, machine.Options{Registerer: registry, Recorder: recorder})
//	if err != nil {
//		return err
//	}
//	mf.Start(ctx.Done())
//	cf.Start(ctx.Done())
//	tf.Start(ctx.Done())
//	return ctrl.Run(ctx, 10) // blocks until ctx ends
package machine
