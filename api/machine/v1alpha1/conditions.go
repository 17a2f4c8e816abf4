package v1alpha1

// Reasons of MachineSet and MachineDeployment conditions, as MCM spells them.
const (
	// FailedCreateReason: a ReplicaFailure because a machine could not be created.
	FailedCreateReason = "FailedCreate"
	// FailedDeleteReason: a ReplicaFailure because a machine could not be deleted.
	FailedDeleteReason = "FailedDelete"

	// MinimumReplicasAvailableReason: Available is True.
	MinimumReplicasAvailableReason = "MinimumReplicasAvailable"
	// MinimumReplicasUnavailableReason: Available is False.
	MinimumReplicasUnavailableReason = "MinimumReplicasUnavailable"

	// NewMachineSetCreatedReason: Progressing, a new MachineSet was created.
	NewMachineSetCreatedReason = "NewMachineSetCreated"
	// FoundNewMachineSetReason: Progressing, the new MachineSet already existed.
	FoundNewMachineSetReason = "FoundNewMachineSet"
	// MachineSetUpdatedReason: Progressing, a MachineSet was scaled.
	MachineSetUpdatedReason = "MachineSetUpdated"
	// NewMachineSetAvailableReason: Progressing finished, the rollout is complete.
	NewMachineSetAvailableReason = "NewMachineSetAvailable"
	// ProgressDeadlineExceededReason: Progressing is False, the rollout stalled.
	ProgressDeadlineExceededReason = "ProgressDeadlineExceeded"
	// DeploymentPausedReason: Progressing is Unknown while paused.
	DeploymentPausedReason = "DeploymentPaused"
	// DeploymentResumedReason: Progressing after a pause ended.
	DeploymentResumedReason = "DeploymentResumed"
	// MachineSetCreateErrorReason: Progressing is False, a MachineSet could not be created.
	MachineSetCreateErrorReason = "MachineSetCreateError"
)
