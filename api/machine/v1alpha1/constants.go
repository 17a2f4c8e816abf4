package v1alpha1

import corev1 "k8s.io/api/core/v1"

// Finalizers, kept from MCM so that objects move between MCM and mcm.
const (
	// MachineFinalizer keeps Machines, MachineClasses, MachineSets and
	// MachineDeployments until the controllers have cleaned up after them.
	MachineFinalizer = "machine.sapcloud.io/machine-controller-manager"
	// SecretFinalizer keeps a Secret referenced by a MachineClass from being
	// deleted while the class still uses it.
	SecretFinalizer = "machine.sapcloud.io/machine-controller"
	// NodeFinalizer keeps a Node that belongs to a Machine until the machine's
	// deletion flow removes it.
	NodeFinalizer = "node.machine.sapcloud.io/machine-controller"
)

// Labels.
const (
	// NodeLabelKey on a Machine holds the name of its Node.
	NodeLabelKey = "node"
	// MachineDeploymentNameLabelKey on a Machine holds the name of the
	// MachineDeployment it belongs to.
	MachineDeploymentNameLabelKey = "name"
	// MachineTemplateHashLabelKey on MachineSets and Machines holds the hash of
	// the MachineDeployment template revision they were created from.
	MachineTemplateHashLabelKey = "machine-template-hash"
	// MachineNameLabelKey on a Node holds the name of its Machine.
	MachineNameLabelKey = "node.gardener.cloud/machine-name"
	// FreezeLabelKey = "True" on a MachineSet or MachineDeployment marks it
	// frozen by the safety controller: it must not create machines.
	FreezeLabelKey = "freeze"
	// FreezeLabelValue is the value of FreezeLabelKey on a frozen object.
	FreezeLabelValue = "True"
	// ForceDeletionLabelKey = "True" on a Machine skips the graceful drain.
	ForceDeletionLabelKey = "force-deletion"
	// ForceDrainLabelKey = "True" on a Machine forces its drain.
	ForceDrainLabelKey = "force-drain"
)

// Annotations.
const (
	// MachinePriorityAnnotation on a Machine orders scale-down: machines with
	// a lower value are deleted first ("1" first, "3" is the default).
	MachinePriorityAnnotation = "machinepriority.machine.sapcloud.io"
	// MachinePriorityDefault is the priority a new machine gets.
	MachinePriorityDefault = "3"
	// MachinePriorityDeleteFirst marks a machine the autoscaler chose to remove.
	MachinePriorityDeleteFirst = "1"
	// TriggerDeletionByMCMAnnotation on a MachineDeployment lists machines the
	// cluster-autoscaler wants removed, as "name~RFC3339time" joined by commas.
	TriggerDeletionByMCMAnnotation = "node.machine.sapcloud.io/trigger-deletion-by-mcm"
	// MarkedForDeletionTimeAnnotation on a Machine records when the autoscaler
	// marked it for deletion (RFC 3339).
	MarkedForDeletionTimeAnnotation = "machine.sapcloud.io/marked-for-deletion-time"
	// LastReplicaChangeByScalerAnnotation on a MachineDeployment (copied to its
	// MachineSets) records when the autoscaler last changed replicas.
	LastReplicaChangeByScalerAnnotation = "machine.sapcloud.io/last-deployment-replica-change-by-scaler-time"
	// UnfreezeAnnotation on a frozen MachineSet or MachineDeployment asks the
	// safety controller to unfreeze it.
	UnfreezeAnnotation = "safety.machine.sapcloud.io/unfreeze"
	// EffectiveCreationTimeoutAnnotation overrides the creation timeout of the
	// machines of a MachineDeployment (copied to MachineSets and Machines).
	EffectiveCreationTimeoutAnnotation = "node.machine.sapcloud.io/effective-creation-timeout"
	// MachineJoinDurationAnnotation on a Machine records how long its Node took
	// to become Ready after creation (a Go duration).
	MachineJoinDurationAnnotation = "node.machine.sapcloud.io/machine-join-duration"
	// LastAppliedNodeTemplateAnnotation on a Node holds the JSON of the labels,
	// annotations and taints last applied from the machine's node template, for
	// three-way merges that leave everybody else's keys alone.
	LastAppliedNodeTemplateAnnotation = "node.machine.sapcloud.io/last-applied-anno-labels-taints"
	// LastAppliedVirtualCapacityAnnotation on a Node holds the JSON of the
	// virtual capacity last applied from the MachineClass.
	LastAppliedVirtualCapacityAnnotation = "node.machine.sapcloud.io/last-applied-virtual-capacity"
	// MachineUIDAnnotation on a Node holds the UID of the Machine the
	// machine controller bound it to: set once the driver named the
	// machine's VM (CreateMachine or GetMachineStatus for that machine)
	// and the Node showed that VM's provider ID. Only the Machine with
	// that UID and provider ID may drain, delete or label the Node. An
	// mcmkit addition; MCM neither writes nor reads it.
	MachineUIDAnnotation = "mcmkit.io/machine-uid"
	// NotManagedByMCMAnnotation = "1" on a Node marks a node without a Machine
	// that the controllers must leave alone.
	NotManagedByMCMAnnotation = "node.machine.sapcloud.io/not-managed-by-mcm"
	// PreserveAnnotation on a Machine or Node asks to preserve it: one of
	// PreserveNow, PreserveWhenFailed, PreserveAutoPreserved (set by the
	// MachineSet controller) or PreserveFalse. The Node's value wins.
	PreserveAnnotation = "node.machine.sapcloud.io/preserve"
	// LastAppliedNodePreserveValueAnnotation on a Machine records the
	// PreserveAnnotation value of its Node that the machine controller
	// applied, so that the MachineSet controller, which reads no nodes,
	// knows it too.
	LastAppliedNodePreserveValueAnnotation = "node.machine.sapcloud.io/last-applied-node-preserve-value"
	// ScaleDownDisabledAnnotation = "true" on a Node keeps the
	// cluster-autoscaler from removing it.
	ScaleDownDisabledAnnotation = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
	// ScaleDownDisabledByMCMAnnotation = "true" on a Node records that the
	// controllers, not a person, set ScaleDownDisabledAnnotation.
	ScaleDownDisabledByMCMAnnotation = "cluster-autoscaler.kubernetes.io/scale-down-disabled-by-mcm"
	// RevisionAnnotation on MachineSets and MachineDeployments holds the
	// rollout revision, as the Deployment controller does.
	RevisionAnnotation = "deployment.kubernetes.io/revision"
	// RevisionHistoryAnnotation on a MachineSet lists earlier revisions it had.
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	// DesiredReplicasAnnotation on a MachineSet holds its deployment's replicas.
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	// MaxReplicasAnnotation on a MachineSet holds replicas + maxSurge.
	MaxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"
)

// MinReadySecondsAnnotation on a MachineDeployment or a MachineSet chooses
// what spec.minReadySeconds does; its values are MinReadySecondsIgnore (the
// default, also when the annotation is absent or empty) and
// MinReadySecondsApply. MCM only stores minReadySeconds and counts a machine
// available as soon as it is Running; the Deployment-like wait is this
// module's opt-in, so that a MachineDeployment written for MCM (Gardener's
// worker actuator sets minReadySeconds 500) rolls out as fast as under MCM.
// A MachineDeployment copies the annotation to all of its MachineSets, old
// ones too, and removes it from them when it loses it; on a set of a
// deployment the deployment's value wins. An unknown value counts as
// MinReadySecondsIgnore, and the object's status says so in a condition of
// type mcmkit.io/InvalidAnnotation.
const MinReadySecondsAnnotation = "mcmkit.io/min-ready-seconds"

// Values of MinReadySecondsAnnotation.
const (
	// MinReadySecondsIgnore is MCM's behaviour: a machine counts as
	// available once it is Running (or Available, without a target
	// cluster); minReadySeconds is stored, copied from the deployment to
	// its sets and exported as a metric, and does nothing else.
	MinReadySecondsIgnore = "ignore"
	// MinReadySecondsApply is a Kubernetes Deployment's behaviour: a machine
	// counts as available once it has been Running for minReadySeconds, so
	// a rolling update waits that long after each batch comes up, and
	// machines still waiting are deleted before available ones.
	MinReadySecondsApply = "apply"
)

// InvalidAnnotationCondition is the type of the MachineSet and
// MachineDeployment condition, True, that tells of an mcmkit.io/
// annotation whose value the controllers do not know and therefore
// ignore; it is removed once the value is fixed. The type is qualified:
// MCM has no such condition. InvalidMinReadySecondsReason is its reason for
// MinReadySecondsAnnotation.
const (
	InvalidAnnotationCondition   = "mcmkit.io/InvalidAnnotation"
	InvalidMinReadySecondsReason = "InvalidMinReadySeconds"
)

// ReplicasCappedCondition is the type of the MachineSet and
// MachineDeployment condition, True, that tells that spec.replicas asks for
// more machines than the controller's ceiling: the object then runs at the
// ceiling, never above, until its replicas are lowered or the ceiling
// raised, and the condition goes. TooManyReplicasReason is its reason. The
// type is qualified: MCM has no ceiling.
const (
	ReplicasCappedCondition = "mcmkit.io/ReplicasCapped"
	TooManyReplicasReason   = "TooManyReplicas"
)

// ForeignMachinesAnnotation on a MachineSet lists, comma-separated and
// sorted, the UIDs of the machines the set controls but did not create
// (adopted ones, and ones created by someone else with the set's controller
// reference): they are deleted before the set's own machines. The
// MachineSet controller writes it, so that a restarted controller does not
// take them for its own; a MachineDeployment never copies it to its sets.
// ForeignMachinesCondition is the type of the MachineSet condition, True,
// that names them, NotCreatedBySetReason its reason. The keys are qualified:
// MCM ranks such machines like the set's own.
const (
	ForeignMachinesAnnotation = "mcmkit.io/foreign-machines"
	ForeignMachinesCondition  = "mcmkit.io/ForeignMachines"
	NotCreatedBySetReason     = "NotCreatedBySet"
)

// Taints.
const (
	// PreferNoScheduleTaintKey marks the Nodes of an old MachineSet during a
	// rollout so that pods prefer the new machines.
	PreferNoScheduleTaintKey = "deployment.machine.sapcloud.io/prefer-no-schedule"
	// CriticalComponentsNotReadyTaintKey on a Node keeps its Pending machine
	// from becoming Running until the node's critical components are ready.
	CriticalComponentsNotReadyTaintKey = "node.gardener.cloud/critical-components-not-ready"
	// PreservedTaintKey (NoSchedule) keeps new pods off the node of a
	// preserved Failed machine, whose pods are drained. MCM v0.62.1
	// cordons such a node through its drain instead; later MCM taints it,
	// as the machine controller here does.
	PreservedTaintKey = "node.machine.sapcloud.io/preserved"
)

// Node condition types the machine controller sets on Nodes.
const (
	// NodeTerminationCondition is set on a Node whose machine is being deleted;
	// its reason is NodeUnhealthy or NodeScaleDown.
	NodeTerminationCondition corev1.NodeConditionType = "Terminating"
	// NodeUnhealthy is the Terminating reason for a Failed machine.
	NodeUnhealthy = "Unhealthy"
	// NodeScaleDown is the Terminating reason for a machine removed by scale-down.
	NodeScaleDown = "ScaleDown"

	// NodePreserved is set on the Node of a preserved machine: True while
	// it is preserved (False while the drain of a preserved Failed machine
	// does not succeed), False once the preservation stopped. Its reasons
	// and message parts are MCM's strings.
	NodePreserved corev1.NodeConditionType = "Preserved"
	// PreservedByMCM is the Preserved reason of a machine the MachineSet
	// controller auto-preserved.
	PreservedByMCM = "Preserved by MCM."
	// PreservedByUser is the Preserved reason of a machine a person
	// preserved (now or when-failed).
	PreservedByUser = "Preserved by user."
	// PreservationStopped is the Preserved reason once it stopped.
	PreservationStopped = "Preservation stopped."
	// PreservedNodeDrainSuccessful and PreservedNodeDrainUnsuccessful
	// begin the Preserved message of a Failed machine's node.
	PreservedNodeDrainSuccessful   = "Preserved node drained successfully."
	PreservedNodeDrainUnsuccessful = "Preserved node could not be drained."
)

// PreserveValue is a value of PreserveAnnotation.
type PreserveValue string

// The values of PreserveAnnotation, MCM's.
const (
	// PreserveNow preserves the machine at once, in any phase.
	PreserveNow PreserveValue = "now"
	// PreserveWhenFailed preserves the machine while it is Failed.
	PreserveWhenFailed PreserveValue = "when-failed"
	// PreserveAutoPreserved is the MachineSet controller's mark on at most
	// spec.autoPreserveFailedMachineMax of its Failed machines: preserved
	// while Failed.
	PreserveAutoPreserved PreserveValue = "auto-preserved"
	// PreserveFalse never auto-preserves the machine, and stops a
	// preservation.
	PreserveFalse PreserveValue = "false"
)

// Node template resource names that MCM's node templates use.
const (
	// ResourceGPU is the capacity key for GPUs in a NodeTemplate.
	ResourceGPU corev1.ResourceName = "gpu"
)

// Secret data keys.
const (
	// UserDataKey is the key of the user data (cloud-init or similar) in the
	// merged secret of a MachineClass.
	UserDataKey = "userData"
	// MachineNamePlaceholder in the user data is replaced by the machine's name.
	MachineNamePlaceholder = "<<MACHINE_NAME>>"
	// BootstrapTokenPlaceholder in the user data is replaced by a bootstrap token.
	BootstrapTokenPlaceholder = "<<BOOTSTRAP_TOKEN>>"
)
