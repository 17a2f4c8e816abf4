// Package machineset is the MachineSet controller: it keeps the number of
// machines of each MachineSet, as Gardener MCM's does (and a ReplicaSet
// does for pods), with MCM's known defects fixed.
//
// # What a sync does
//
// Each sync runs four phases (sync): observe reads the informer caches,
// and the set once more from the API server before an adoption, and writes
// nothing; plan decides, purely, every write but the status (the set's
// finalizer, adoptions and releases, the template's in-place parts, the
// foreign-machines annotation, creations and deletions, with
// ownership.Decide, planReplicas and rankForDeletion); apply makes those
// writes; status computes the status from what the sync saw and did
// (calculateStatus, pure) and writes it only when it changed. An adoption
// that fails leaves the machine out: the set's machines are planned again
// without it, so that the set never counts or deletes a machine it does
// not control.
//
//   - Ownership: machines matching the selector without a controller are
//     adopted (controllerRef with blockOwnerDeletion) after an uncached
//     read confirms the set's UID and that it is not being deleted;
//     machines that no longer match are released; a machine being deleted
//     is never adopted.
//   - Expectations are enforced: a set is not scaled again until the
//     creations and deletions it issued are seen in the cache (or their
//     five-minute TTL passed); creations skipped after a failed
//     slow-start batch are taken off. MCM records them but never waits.
//   - Scale up: machines named <set>-<random> (by the set, as
//     generateName would name them) from the template, in
//     slow-start batches 1, 2, 4, ... that stop at the first failed batch,
//     at most Options.BurstReplicas per sync; not while frozen (label
//     freeze=True on the set, or Options.SafetyGate). Scale-down and
//     deletion go on while frozen. A scale-down, a freeze label or the
//     set's deletion seen while a sync is still creating cancels the
//     creations not sent yet (those waiting for the client's rate limiter
//     among them; one that may have been sent is left to finish), and a
//     CanceledCreate event counts them. MCM sends them all.
//   - Ceiling: a set keeps at most Options.MaxReplicas machines (10000 by
//     default); one whose spec.replicas asks for more keeps that many,
//     never more, with the condition mcmkit.io/ReplicasCapped
//     (ConditionReplicasCapped) and one TooManyReplicas Warning event. MCM
//     has no ceiling.
//   - Scale down, the cluster-autoscaler's marked machines and Failed
//     machines are deleted in the order of the deletion ladder below, at
//     most Options.BurstReplicas per sync, all of a sync's deletions in
//     parallel; a deleted Failed machine is replaced.
//   - In-place rollouts (package deployment), as in MCM: a set labelled
//     node.machine.sapcloud.io/scale-up-disabled (an old set, whose
//     machines move to the new set one by one) creates no machines, and
//     still deletes; a machine labelled
//     node.machine.sapcloud.io/update-result=successful (moved into the set
//     by the deployment, which takes the label off once the set's
//     spec.replicas counts it) is neither deleted nor counted in the
//     surplus, so that the moment between the move and the new size
//     deletes nothing (planReplicas).
//   - The template's nodeTemplate, machine configuration and class kind
//     are patched into existing machines; nothing else of a machine
//     changes without replacing it.
//   - A set being deleted deletes its machines in ladder order and keeps
//     its finalizer until none is left.
//   - A set that got past admission but cannot work gets the
//     ReplicaFailure condition and one event, and is retried with
//     backoff: a selector that does not match its template, or that has
//     no positive requirement (only NotIn and DoesNotExist; a requirement
//     on a key the controllers write does not count), or a selector or
//     template using a label key the controllers write on machines (node,
//     update-result: validation.SelectorAdopts; the set would
//     release each machine once it is bound and create another without
//     end, or adopt every bound machine), stored before the CRDs refused
//     it; or, with Informers.Classes, a template naming a MachineClass
//     that does not exist. Nothing is created until it can work, and an
//     invalid selector adopts and deletes nothing. A set waiting for its
//     class still scales down, and resumes creating when the class appears.
//
// # The deletion ladder
//
// Machines are deleted in this order (rankForDeletion):
//
//  1. machines already being deleted (or in phase Terminating);
//  2. machines whose preservation holds go after all others (see
//     Preservation): auto-preserved ones before those a user preserved,
//     then the earlier expiry;
//  3. machines the set did not create (see Foreign machines);
//  4. lower machinepriority.machine.sapcloud.io first (the
//     cluster-autoscaler sets 1; the default is 3);
//  5. machines with machine.sapcloud.io/marked-for-deletion-time before
//     those without, the older mark first;
//  6. by phase: Failed, CrashLoopBackOff, Unknown (and phases not named
//     here), Pending (and no phase yet), Running but not yet for
//     minReadySeconds (only with the opt-in below), Available, Running;
//  7. within a rung, the deletion policy: Oldest (MCM's), Newest or
//     Random, chosen per set by the mcmkit.io/deletion-policy annotation or
//     for all sets by Options.DeletionPolicy.
//
// # Preservation
//
// The machine controller decides and records a machine's preservation
// (status.currentStatus.preserveExpiryTime, from the annotation
// node.machine.sapcloud.io/preserve on the machine or its Node); the set
// reads it through the shared rules of package machinestate. A Failed
// machine whose preservation holds, or that asks for one the machine
// controller has not started yet, is neither deleted nor replaced (it
// counts toward the replicas); once the preservation runs out it is
// replaced as usual. Such machines are counted in
// status.preservedFailedReplicas and left out of status.failedMachines.
//
// With spec.autoPreserveFailedMachineMax, the set marks up to that many of
// its Failed machines that ask nothing of preservation with
// preserve=auto-preserved, newest first, and takes the mark off the
// oldest marked ones when the maximum is lowered: one guarded patch of
// that annotation each, planned with the set's other writes and before its
// deletions, so that a machine marked in a sync is not deleted by it.
// status.autoPreserveFailedMachineCount counts the marks, absent when zero
// as on MCM's wire.
//
// A scale-down takes preserved machines last, and deletes them when it
// needs them, with a PreservedMachineDeleted event naming the machine and
// its expiry (MCM's behaviour). With Options.KeepPreservedOnScaleDown it
// stops short of them instead: a ScaleDownHeldByPreservation event names
// the machine that holds it and its expiry, and the set syncs again then.
// A set being deleted deletes all its machines either way. The set also
// syncs at the earliest preservation expiry of its machines, so that an
// expiry takes effect at once rather than at the next event or resync.
//
// Divergences from MCM v0.62.1: the auto-preservation capacity is counted
// from the machines, not from the last written status (which lags a sync
// that marks by one); a machine whose preservation ran out is never
// auto-preserved again (MCM may renew it for another timeout); a machine
// preserved through its Node is no candidate for the mark (MCM adds the
// mark and the machine controller strips it, over and over); a
// preservation that ran out stops counting in preservedFailedReplicas at
// its expiry; and Options.KeepPreservedOnScaleDown is opt-in.
//
// # Foreign machines
//
// Anyone who may create machines can make one with a set's labels, a
// controller reference to it and a high priority; MCM counts it as the
// set's and, at the next scale-down, deletes the set's own machines to keep
// it. Here a set knows the machines it created: it names each one itself
// before sending the request, and binds the name to the UID it gets back.
// Machines the informer showed controlled by the set when the controller
// started are its own too, unless the set lists them in
// v1alpha1.ForeignMachinesAnnotation, which the controller keeps so that a
// restart does not launder them; it lists a foreign machine until it is
// gone, being deleted included, so that the replacement budget (which
// reads it) never counts one that a finalizer of its creator keeps
// Terminating. Every other machine the set controls
// (an adopted orphan, a machine created with its controller reference) is
// foreign: it stays the set's, as in MCM, but goes first on the ladder, is
// named once by a ForeignMachine Warning event and in the condition
// mcmkit.io/ForeignMachines (ConditionForeignMachines). A machine created
// while no controller watched is trusted, and so is one that a set with
// the same controller (a sibling of the same deployment) created or
// inherited as its own: an in-place rollout moves machines from old sets
// to the new one. provenance.go says why nothing
// on a machine could tell instead.
//
// # Availability and minReadySeconds
//
// status.availableReplicas counts the machines, not being deleted, in phase
// Running (or Available, without a target cluster), as MCM does:
// spec.minReadySeconds is stored and exported but does not delay
// availability. Unlike MCM, and like a ReplicaSet, a set annotated
// mcmkit.io/min-ready-seconds: apply (v1alpha1.MinReadySecondsAnnotation)
// counts a machine available only once it has been Running for
// minReadySeconds, and deletes machines still waiting before available
// ones. A set of a MachineDeployment gets the annotation from the
// deployment; a standalone set may carry it itself. Any other value than
// apply or ignore counts as ignore, and the status tells of it in the
// condition mcmkit.io/InvalidAnnotation (ConditionInvalidAnnotation).
//
// # Which machine events sync a set
//
// A machine's update syncs its set only when something the set's sync
// reads changed (machineChangeMatters): its labels, owner references,
// creation and deletion, spec, status.currentStatus, the priority,
// marked-for-deletion-time and preservation annotations, and its
// lastOperation while that failed or the machine is Failed. A refreshed
// lastOperation time of a healthy machine, Node conditions copied onto it
// or someone else's annotation sync nothing: in a settled set of 10 000
// machines such an event cost a sync that listed them all. A deletion is
// still recorded against the set's expectations whatever else changed.
// Resyncs of machines were already ignored; the set's own resync looks at
// it again. A table test and a rapid property (the set's plan and status
// with the old and the new machine differ only when the filter lets the
// update through) keep the filter and the sync in step: a new machine
// field read by the sync must be added to setSyncView.
//
// # Metrics
//
// With Options.Registerer: the queue's (package workqueue) and MCM's, under
// MCM's names, types and labels, computed from the set cache when scraped:
//
//	mcm_machine_set_items_total                      gauge
//	mcm_machine_set_info                             gauge  name, namespace, createdAt, spec_machine_class_api_group,
//	                                                        spec_machine_class_kind, spec_machine_class_name
//	mcm_machine_set_info_spec_replicas               gauge  name, namespace
//	mcm_machine_set_info_spec_min_ready_seconds      gauge  name, namespace
//	mcm_machine_set_status_replicas                  gauge  name, namespace
//	mcm_machine_set_status_available_replicas        gauge  name, namespace
//	mcm_machine_set_status_fully_labelled_replicas   gauge  name, namespace
//	mcm_machine_set_status_ready_replicas            gauge  name, namespace
//	mcm_machine_set_status_condition                 gauge  name, namespace, condition
//	mcm_machine_set_failed_machines                  gauge  name, namespace, failed_machine_name, failed_machine_provider_id,
//	                                                        failed_machine_owner_ref, failed_machine_last_operation_state,
//	                                                        failed_machine_last_operation_machine_operation_type
//
// info and failed_machines are always 1; createdAt is in Unix seconds; the
// class is the template's, or spec.machineClass on an old MCM object that
// names it only there. status_condition is True 1, False 0, Unknown 2.
// status_replicas is status.replicas (MCM reports the ready replicas
// there). A set that is deleted leaves no series behind. Besides:
// mcm_machine_stale_machines_total counts the machines a set deleted
// because the health timeout had marked them Failed (as in MCM, not those
// whose creation timed out), and
// mcm_misc_scrape_failure_total{kind="Machineset-count"} (with
// binary="machine-controller-manager") the scrapes whose list from the
// cache failed. A controller built later on the same registry replaces the
// scrape-time collector of an earlier one, whose cache stopped with it.
//
// # Usage
//
//	mf := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace(ns))
//	ctrl, err := machineset.NewController(client, machineset.Informers{
//		MachineSets: mf.Machine().V1alpha1().MachineSets(),
//		Machines:    mf.Machine().V1alpha1().Machines(),
//		Classes:     mf.Machine().V1alpha1().MachineClasses(), // optional
//	}, machineset.Options{Registerer: registry})
//	if err != nil {
//		return err
//	}
//	mf.Start(ctx.Done())
//	return ctrl.Run(ctx, 5) // returns when ctx ends
package machineset
