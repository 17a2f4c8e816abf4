package v1alpha1

import corev1 "k8s.io/api/core/v1"

// The in-place update protocol (MCM's InPlaceUpdate strategy, GEP-31), in
// MCM v0.62.1's keys and values. The MachineDeployment controller marks
// the nodes of an old set's machines as candidates and (orchestration
// Auto) selects some; a person selects them under Manual. The machine
// controller drains a selected node and, once it is ready for the update,
// reports it in the node's InPlaceUpdate condition; the node agent (outside
// the controllers) updates the node and labels the result; the machine
// controller records it in the machine's phase, and the deployment
// controller moves an updated machine to the new set.
const (
	// CandidateForUpdateLabel = "true" on a Node: its machine belongs to
	// an old set of an InPlaceUpdate deployment and is to be updated.
	CandidateForUpdateLabel = "node.machine.sapcloud.io/candidate-for-update"
	// SelectedForUpdateLabel = "true" on a candidate Node: update it now.
	// The deployment controller sets it (Auto), a person (Manual).
	SelectedForUpdateLabel = "node.machine.sapcloud.io/selected-for-update"
	// UpdateResultLabel on a Node is the node agent's answer: one of
	// UpdateResultSuccessful or UpdateResultFailed. The deployment
	// controller also sets UpdateResultSuccessful on a machine it moves to
	// the new set, until the move is complete.
	UpdateResultLabel = "node.machine.sapcloud.io/update-result"
	// UpdateFailedReasonAnnotation on a Node is the node agent's reason for
	// UpdateResultFailed, free text.
	UpdateFailedReasonAnnotation = "node.machine.sapcloud.io/update-failed-reason"
	// ScaleUpDisabledLabel = "true" on a MachineSet: it creates no
	// machines (an old set of an in-place rollout, whose machines move to
	// the new set one by one).
	ScaleUpDisabledLabel = "node.machine.sapcloud.io/scale-up-disabled"
	// PreferNoScheduleAnnotation = "True" on a MachineSet: its nodes have
	// been given the PreferNoScheduleTaintKey taint.
	PreferNoScheduleAnnotation = "deployment.machine.sapcloud.io/prefer-no-schedule"
)

// The values of UpdateResultLabel.
const (
	UpdateResultSuccessful = "successful"
	UpdateResultFailed     = "failed"
)

// The Node condition of the in-place protocol: always True; its reason is
// the step the update has reached. Reasons and messages are MCM's strings.
const (
	// NodeInPlaceUpdate is the condition type.
	NodeInPlaceUpdate corev1.NodeConditionType = "InPlaceUpdate"

	// CandidateForUpdate: the node carries CandidateForUpdateLabel.
	CandidateForUpdate        = "CandidateForUpdate"
	CandidateForUpdateMessage = "Node is a candidate for in-place update"
	// SelectedForUpdate: the node carries SelectedForUpdateLabel too; it
	// is being drained.
	SelectedForUpdate        = "SelectedForUpdate"
	SelectedForUpdateMessage = "Node is selected for in-place update"
	// DrainSuccessful: the drain is done (MCM sets it for an instant
	// before ReadyForUpdate).
	DrainSuccessful        = "DrainSuccessful"
	DrainSuccessfulMessage = "Node draining successful"
	// ReadyForUpdate: the node agent may update the node.
	ReadyForUpdate        = "ReadyForUpdate"
	ReadyForUpdateMessage = "Node is ready for in-place update"
	// UpdateSuccessful: the agent labelled UpdateResultSuccessful.
	UpdateSuccessful        = "UpdateSuccessful"
	UpdateSuccessfulMessage = "Node in-place update successful"
	// UpdateFailed: the agent labelled UpdateResultFailed; the message is
	// UpdateFailedMessage followed by the agent's reason.
	UpdateFailed        = "UpdateFailed"
	UpdateFailedMessage = "Node in-place update failed: "
)
