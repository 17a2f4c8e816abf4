// Package deployment is the MachineDeployment controller: it rolls machines
// of a MachineDeployment from one template to the next through MachineSets,
// as Gardener MCM's controller does (itself a port of kube-controller-manager's
// Deployment controller), with the arithmetic kept in small pure planners.
//
// # What a sync does
//
// Each sync has four phases, as Cluster API's reconcilers (scope and
// phases) and kube-controller-manager's Deployment controller: observe
// reads the informer caches (and, before an adoption, the deployment once
// uncached, to confirm it) into a scope and writes nothing; plan decides
// every write of the sync from the scope alone, with pure functions
// (planStep on top of planRolling, planRecreate and planScale;
// planRollback; planTriggerDeletion; setsToDelete); apply makes the
// writes in the plan's order: the finalizer, adoptions and releases, then
// one of deleting the sets, a rollback, the autoscaler's marks or the
// step; last the status, computed from the scope and what apply did
// (calculateStatus), is written when it changed. What the syncs do:
//
//   - Sets are claimed by the deployment's selector with a controllerRef,
//     orphans adopted after an uncached read confirms the deployment; a
//     selector without a positive requirement (empty, or only NotIn and
//     DoesNotExist), or a selector or template using a label key the
//     controllers write on machines or sets (node, update-result,
//     machine-template-hash, scale-up-disabled, freeze:
//     validation.SelectorAdopts), makes the deployment invalid and
//     selects nothing: it would lose its sets and machines through the
//     controllers' own writes and create others, or claim others'. A
//     sync waits until the cache shows the controller's own writes to the
//     sets, the new set it created included, so no set is scaled or
//     created twice.
//   - The new set, <deployment>-<hash>, is created when the template
//     changes in a way that needs new machines (see Template hash); a name
//     taken by another template raises status.collisionCount. The new set
//     carries the deployment's annotations and revision; the deployment's
//     revision annotation follows it.
//   - Scaling events, rollouts (RollingUpdate, Recreate), pause (scaling
//     only, Progressing reason DeploymentPaused/DeploymentResumed) and the
//     freeze (label freeze=True, or Options.SafetyGate: nothing grows,
//     scale-down goes on) are described below, and so are in-place
//     rollouts (InPlaceUpdate).
//   - Rollback: spec.rollbackTo or the RollbackAnnotation brings back the
//     template of a revision (0: the previous one) and is cleared, with the
//     event DeploymentRollback, DeploymentRollbackRevisionNotFound or
//     DeploymentRollbackTemplateUnchanged.
//   - The cluster-autoscaler's MCM provider names machines to remove in
//     node.machine.sapcloud.io/trigger-deletion-by-mcm: they get priority 1
//     and marked-for-deletion-time, the list is pruned of machines that are
//     gone, being deleted or Failed, and the deployment is scaled only once
//     the marks are in the cache, so that its sets remove exactly those
//     machines. Names written without a time get the time of the sync that
//     sees them, which is also written as the deployment's
//     last-deployment-replica-change-by-scaler-time, in the same patch; the
//     new set carries it, and deletes a machine marked at or before it even
//     when its replica decrease was absorbed, as MCM does. Unlike MCM, which
//     stamps that time only on a deployment that has none and gives later
//     plain names that old time, the time is renewed for every plain name
//     (see autoscaler.go): a set still carrying the old time could delete the
//     newly marked machines before the decrease reaches it.
//   - During a RollingUpdate the nodes of old sets get the PreferNoSchedule
//     taint, and all nodes of the deployment the cluster-autoscaler's
//     scale-down-disabled annotation (unless
//     Options.SkipAutoscalerAnnotationDuringRollout); both are removed when
//     the rollout completes (the annotation only where this controller put
//     it). A node is the deployment's to mark only when the machine
//     controller bound it to one of its machines (nodebinding.Bound: the
//     node's machine-uid annotation names the machine): a machine's node
//     label and provider ID are anyone's to write who may create machines,
//     so a forged claim never gets a node marked (nor, in an in-place
//     update, labelled, cordoned or drained). The marks are planned
//     (planNodeMarks) and written from a second
//     queue, "machinedeployment-nodes" (ReconcileNodes), 16 nodes at a time,
//     which every sync of a deployment and every change of a node's marks
//     feed: marking the thousand nodes of a rollout's old sets does not
//     hold up its scaling steps. Without a target cluster nodes are left
//     alone.
//   - Once a rollout is complete, old sets beyond spec.revisionHistoryLimit
//     are deleted. A deployment being deleted deletes its sets and keeps its
//     finalizer until none is left.
//   - A deployment that got past admission but cannot work gets the
//     ReplicaFailure condition and one event, and is retried with backoff.
//   - The progress deadline requeues the deployment when it would pass, and,
//     with the minReadySeconds opt-in, a wait when a machine would become
//     available.
//
// # Metrics
//
// With Options.Registerer: the queue's (package workqueue) and MCM's, under
// MCM's names, types and labels, computed from the deployment cache when
// scraped (all gauges):
//
//	mcm_machine_deployment_items_total
//	mcm_machine_deployment_info                   name, namespace, createdAt, spec_strategy_type
//	mcm_machine_deployment_info_spec_{paused,replicas,min_ready_seconds,rolling_update_max_surge,
//	    rolling_update_max_unavailable,revision_history_limit,progress_deadline_seconds,
//	    rollback_to_revision}                     name, namespace
//	mcm_machine_deployment_status_{available_replicas,unavailable_replicas,ready_replicas,
//	    updated_replicas,collision_count,replicas}
//	                                              name, namespace
//	mcm_machine_deployment_status_condition       name, namespace, condition
//	mcm_machine_deployment_failed_machines        name, namespace, failed_machine_name, failed_machine_provider_id,
//	                                              failed_machine_owner_ref, failed_machine_last_operation_state,
//	                                              failed_machine_last_operation_machine_operation_type
//
// info and failed_machines are always 1; createdAt is in Unix seconds;
// status_condition is True 1, False 0, Unknown 2. The rolling update
// bounds are those the rollout applies, percentages resolved against the
// replicas (MCM exports a percentage as 0), for every strategy but
// Recreate; revision_history_limit, progress_deadline_seconds and
// rollback_to_revision only when set (a rollback asked for by annotation
// too). A deployment that is deleted leaves no series behind. A list from
// the cache that fails counts in
// mcm_misc_scrape_failure_total{kind="Machinedeployment-count"} (with
// binary="machine-controller-manager"). A controller built later on the
// same registry replaces the scrape-time collector of an earlier one,
// whose cache stopped with it.
//
// # Sets and machines
//
// The new set is the oldest set whose template equals the deployment's
// template once the fields below that propagate without a rollout are set
// aside (findNewSet); every other set is old. A set is active while its
// spec.replicas is above 0. Machines are counted per set (countMachines): a
// machine with a deletionTimestamp or in phase Terminating is on its way out;
// one in phase Running or Available is available; every other machine is
// unavailable.
//
// # Which events sync a deployment and check its nodes
//
// A machine's update syncs its deployment only when something the
// deployment's sync or its nodes' check reads changed
// (machineChangeMatters): its labels (its node), owner references,
// deletion, spec, status.currentStatus, the autoscaler's and the
// preservation annotations, its InPlaceUpdate condition, and its
// lastOperation while that failed or the machine is Failed or
// InPlaceUpdateFailed. A machine that left a set of another deployment
// syncs that one too. Resyncs of machines sync nothing: the deployment's
// own resync (Reconcile's RequeueAfter, its informer's resync) looks at it
// again.
//
// The check of the nodes' rollout marks (ReconcileNodes, which lists every
// machine of the deployment) is queued by a sync only when the machines'
// side of the marks changed since it last queued one (nodeMarksInputs:
// rolling or complete, and each machine's node, VM, set and preservation);
// the nodes' side comes by their events: a node that appears, or whose
// rollout marks or binding to a machine change. A settled deployment with
// no such event checks no node. A check that found the deployment deleted
// or invalid, or failed, lets the next sync queue it again. A table test
// and rapid properties (the plan, status and node marks differ only when
// the filter lets the update through, and the node marks only when their
// inputs differ) keep the filter and the syncs in step.
//
// # minReadySeconds
//
// As in MCM, spec.minReadySeconds is copied to the sets and exported, and
// does not delay availability: a machine counts as available once it is
// Running, in status.availableReplicas and the Available condition, in the
// rollout's steps and in the progress deadline's view of progress. Gardener
// gives every MachineDeployment minReadySeconds 500; applied, it would hold
// each batch of a rolling update for 8 min 20 s, and the deployment's
// availableReplicas would lag 500 s behind MCM's. Unlike MCM, the
// annotation mcmkit.io/min-ready-seconds: apply
// (v1alpha1.MinReadySecondsAnnotation) opts in to a Kubernetes Deployment's
// behaviour: a machine counts as available once it has been Running for
// minReadySeconds, the deployment syncs again when one will, and its sets
// delete machines still waiting before available ones. The deployment owns
// the annotation on all its sets, old ones too: it writes its own value on
// them and removes it when it loses it (withSetPolicy), so that sets and
// deployment count by one rule. ignore, or no annotation, is MCM's
// behaviour; any other value counts as ignore, and the status tells of it
// in the condition mcmkit.io/InvalidAnnotation (ConditionInvalidAnnotation).
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
// MCM hashes differently (FNV-32a over a dump of its Go structs, the
// label holding the number in decimal, the set's name only the first five
// characters of its encoding), so the same template has another hash
// under MCM. Nothing depends on that: the new set is the set whose
// template is the deployment's (findNewSet), never one found by name or
// hash, and a set's hash label and selector are never rewritten. A set
// MCM created, in a rollout taken over part-way, is therefore the new set
// with MCM's name and hash (a second one is not created); the machines
// moved there get its selector's labels, MCM's hash among them.
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
//   - gives the replicas to the only active set; when no set is active
//     (scaling from zero, or a rollout that took the old sets to 0 first), the
//     new set (the newest set when there is no new one) grows as far as the
//     rollout allows: within spec.replicas + maxSurge for RollingUpdate, not
//     while another set still has machines for Recreate;
//   - scales old sets to 0 when the new set is saturated;
//   - during a rolling update, shrinks all active sets in proportion to their
//     share of the deployment.kubernetes.io/max-replicas they were sized for,
//     taking what rounding leaves to remove from the largest set first, so
//     that the sets add up to spec.replicas + maxSurge; growth goes to the new
//     set only (the newest active set while there is no new set), as MCM does
//     since its issues 754 and 802, and never takes it above spec.replicas.
//
// Recreate deployments with several active sets are left to their rollout;
// for InPlaceUpdate see In-place update.
//
// A deployment runs at most Options.MaxReplicas machines (10000 by default;
// MCM has no ceiling): one whose spec.replicas asks for more is planned,
// rolled out and sized as if it asked for that many (withinCeiling), never
// more, and says so in the condition mcmkit.io/ReplicasCapped
// (ConditionReplicasCapped) and one TooManyReplicas Warning event.
//
// # In-place update
//
// An InPlaceUpdate deployment keeps every machine and its VM: machines of
// old sets are updated on their nodes by a node agent (gardener-node-agent
// in a Gardener shoot; the simulated cloud has one) and then moved to the
// new set. planInPlace plans each sync from the sets, their machines and
// the machines' nodes (a target cluster is needed: without one the
// deployment is only scaled and Progressing says why). Created from zero,
// the deployment gets its set with spec.replicas, as MCM's. The protocol,
// with MCM v0.62.1's keys and values (package v1alpha1):
//
//  1. A new template creates the new set: with Auto orchestration sized
//     spec.replicas + maxSurge - the old sets' machines (at most
//     spec.replicas; the surge is new VMs, as in MCM), with Manual 0.
//  2. Old sets with replicas or machines get the label
//     node.machine.sapcloud.io/scale-up-disabled=true (they create no
//     machine; package machineset) and the annotation
//     deployment.machine.sapcloud.io/prefer-no-schedule=True; their nodes
//     the PreferNoSchedule taint and, unless
//     Options.SkipAutoscalerAnnotationDuringRollout, the cluster-autoscaler's
//     scale-down-disabled annotation with the by-mcm marker (both from the
//     node-marks queue, as in a rolling update; the annotation goes at
//     completion, only where the marker is), and the label
//     node.machine.sapcloud.io/candidate-for-update=true. Unlike MCM, the new
//     set loses scale-up-disabled (after a rollback it must grow again).
//  3. Auto: the controller labels nodes
//     node.machine.sapcloud.io/selected-for-update=true, oldest old set
//     first, within a set unavailable machines first, then by machine name
//     (MCM takes an arbitrary order), never more from a set than its size
//     nor more than the new set still needs. A machine in flight (selected,
//     not yet moved) counts once: at most maxUnavailable machines are
//     unavailable or in flight at a time, plus the surge's new machines,
//     and a freed slot is filled at once. MCM counts an in-flight machine
//     twice (unavailable, and selected), so it selects in waves. Selecting
//     an unavailable machine costs no availability. Manual: a person
//     labels the nodes; every one is updated at once, as in MCM, and the
//     surge is 0.
//  4. The machine controller drains a selected node (cordon first), sets
//     the machine InPlaceUpdating and the node condition InPlaceUpdate to
//     ReadyForUpdate; the agent updates the node and labels it
//     node.machine.sapcloud.io/update-result=successful, or failed with the
//     annotation node.machine.sapcloud.io/update-failed-reason. An agent
//     must leave the candidate and selected labels and the cordon alone,
//     and keep the result label until this controller removes it.
//  5. A machine is moved to the new set once its node says successful, its
//     copy of the node condition says UpdateSuccessful and its phase is
//     past the update (neither InPlaceUpdating nor InPlaceUpdateFailed;
//     MCM accepts InPlaceUpdateFailed, and such a machine stays failed in
//     the new set): one merge patch of its controller reference (other
//     owner references stay; never two controllers), its labels (the new
//     selector's, and update-result=successful, which keeps the new set
//     from deleting it until its spec.replicas counts it; removed then, or
//     when a step sizes the set to 0 after a template change made it old)
//     and nothing of its spec, so spec.class still names the old class,
//     as in MCM; the new set then copies its in-place parts (node template,
//     machine configuration, class kind) onto it. The old set shrinks and
//     the new set grows by the machines moved in the next sync, once the
//     cache shows the moves: MCM resizes both at once, and a set controller
//     whose machine cache lags behind its set cache then deletes a machine
//     of the old set or creates one in the new set. The node loses the candidate, selected and result
//     labels, the failure reason and the PreferNoSchedule taint, and is
//     uncordoned; the node condition stays UpdateSuccessful, as in MCM.
//  6. The nodes of old sets' machines not selected yet carry
//     mcmkit.io/in-place-update-target (InPlaceTargetAnnotation), the new
//     set their update is for. A machine whose update is done for another
//     set (the template changed meanwhile) is not moved but made a
//     candidate again and updated again: MCM moves it to the newer set
//     without the newer template. A node without the annotation (selected
//     by MCM before a switch) is taken as MCM takes it.
//  7. As in MCM, an old set shrinks to the machines it has left (one
//     deleted is not replaced there) and the new set makes up for them;
//     once the new set holds spec.replicas, the old sets go to 0 (with a
//     surge, deleting the machines it replaced).
//
// Divergences from MCM besides those above:
//
//   - Fail closed: while the update of an old set's machine that failed
//     since the new set was created (phase InPlaceUpdateFailed, or the
//     node's update-result=failed) is not cleared, no further machine is
//     selected, and Progressing is False with reason InPlaceUpdateFailed
//     and a Warning event name the machine and the agent's reason (the
//     first such machine by name; the condition follows when that
//     changes, one event per message). Neither
//     controller retries or replaces it: the agent may retry and label
//     successful, a person may label successful or delete the machine. A
//     new template starts a new rollout; the failed machine still counts
//     as unavailable there. MCM only lists it in status.failedMachines.
//   - Scaling during an in-place rollout (MCM's stalls: its scale handles
//     one active set): growth goes to the new set, a shrink is shared in
//     proportion to the sets' sizes (shrinkProportionally), and the
//     rollout goes on.
//   - node.gardener.cloud/critical-components-not-ready:NoSchedule, which
//     MCM appends to every moved node (and a second time if it is there),
//     is added only with Options.CriticalComponentsNotReadyTaint, once;
//     outside Gardener nobody removes it.
//   - After a rollback, the new set's nodes that are not being updated lose
//     the candidate label (MCM leaves it); a machine of the new set whose
//     update finished for the abandoned template is updated again (the
//     new set grows by the surge meanwhile). A machine whose update
//     finished before that is not told apart from one never updated: it
//     keeps what its agent applied.
//
// Node writes are merge patches naming only these keys; a taint change
// sends the node's full taint list guarded by its resourceVersion. The
// controller syncs a deployment again when a node's in-place labels,
// failure reason or cordon change, and waits for its own machine moves
// to show in the cache before it plans again.
//
// # Revisions and history
//
// A set's revision is its deployment.kubernetes.io/revision annotation. The
// new set gets one more than the highest old revision (newSetAnnotations),
// keeping earlier revisions it had in deployment.kubernetes.io/revision-history;
// the new set takes the deployment's annotations except the bookkeeping ones
// (skipCopy), and every set its policy annotations (withSetPolicy).
// setsToDelete picks the old sets beyond spec.revisionHistoryLimit, lowest
// revision first, and only those with no replicas and no machines left.
//
// # Preview
//
// PreviewChange tells, without a cluster, what the controller would do if
// a deployment became a proposed one: nothing, propagation of in-place
// parts to every machine (node template, machine configuration, class
// kind), a rollout that replaces machines (with the number of waves
// planRolling takes when machines boot slowly and go quickly: ceil(N /
// maxSurge) without maxUnavailable; 1 for Recreate), or an in-place
// update (batches of maxUnavailable under Auto), with a rollback to an old
// set's revision recognised by sameTemplate, and the template fields that
// differ. It uses the controller's own rules, so a tool that shows it
// (kubectl mcm preview) cannot disagree with what the controller then does.
//
// # Status
//
// calculateStatus counts the machines of all sets, keeps
// status.collisionCount, lists machines whose last operation failed and sets
// the Available condition (at least spec.replicas - maxUnavailable -
// preservedFailedReplicas available machines, never below 0, as MCM),
// ReplicaFailure (from the sets) and mcmkit.io/InvalidAnnotation.
//
// # Preservation
//
// Package machineset keeps preserved Failed machines; the deployment
// reports them: status.preservedFailedReplicas is the sum of its sets',
// and failedMachines leaves out the Failed machines the sets keep. As in
// MCM, spec.autoPreserveFailedMachineMax is written into the new set only
// (when created and whenever it changes), never into old sets, which keep
// their marks while they shrink. When a rollout completes, the nodes of
// preserved machines keep cluster-autoscaler.kubernetes.io/scale-down-disabled:
// the machine controller set it, under the same by-mcm marker, for the
// preservation, and takes it off when the preservation ends. The
// MachineSet option KeepPreservedOnScaleDown (opt-in; see package
// machineset) makes a scale-down stop short of preserved machines rather
// than delete them last, as MCM does.
// withProgress maintains the Progressing condition the way Kubernetes does,
// with MCM's reasons; pausedCondition reports pausing and resuming.
//
// # Usage
//
//	mf := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace(ns))
//	tf := informers.NewSharedInformerFactory(targetClient, 0)
//	ctrl, err := deployment.NewController(client, targetClient, deployment.Informers{
//		Deployments: mf.Machine().V1alpha1().MachineDeployments(),
//		MachineSets: mf.Machine().V1alpha1().MachineSets(),
//		Machines:    mf.Machine().V1alpha1().Machines(),
//		Nodes:       tf.Core().V1().Nodes(), // nil, with a nil targetClient, without a target cluster
//	}, deployment.Options{Registerer: registry})
//	if err != nil {
//		return err
//	}
//	mf.Start(ctx.Done())
//	tf.Start(ctx.Done())
//	return ctrl.Run(ctx, 5) // returns when ctx ends
package deployment
