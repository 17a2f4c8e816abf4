package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=mcd
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.labelSelector
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`,description="Number of desired machines."
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.replicas`,description="Number of machines."
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`,description="Number of Running machines."
// +kubebuilder:printcolumn:name="Up-to-date",type=integer,JSONPath=`.status.updatedReplicas`,description="Number of machines with the current template."
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`,description="Number of available machines."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// MachineDeployment rolls out machines declaratively through MachineSets,
// like a Deployment rolls out pods through ReplicaSets.
type MachineDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired deployment.
	// +optional
	Spec MachineDeploymentSpec `json:"spec,omitempty"`

	// Status is the most recently observed state of the deployment.
	// +optional
	Status MachineDeploymentStatus `json:"status,omitempty"`
}

// MachineDeploymentSpec is the desired state of a MachineDeployment.
//
// +kubebuilder:validation:XValidation:rule="has(self.selector)",message="selector is required: it tells which machines belong to the set"
// +kubebuilder:validation:XValidation:rule="!has(self.selector) || (has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)",message="selector must not be empty: an empty selector would adopt every machine in the namespace"
// +kubebuilder:validation:XValidation:rule="!has(self.selector) || (has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || !has(self.selector.matchExpressions) || size(self.selector.matchExpressions) == 0 || self.selector.matchExpressions.exists(e, e.operator == 'In' || e.operator == 'Exists')",message="selector must have a positive requirement (a matchLabels entry, or a matchExpressions entry with operator In or Exists): a selector of only NotIn and DoesNotExist would adopt nearly every machine in the namespace"
// +kubebuilder:validation:XValidation:rule="!has(self.selector) || !has(self.selector.matchLabels) || self.selector.matchLabels.all(k, has(self.template.metadata) && has(self.template.metadata.labels) && k in self.template.metadata.labels && self.template.metadata.labels[k] == self.selector.matchLabels[k])",message="selector.matchLabels must match template.metadata.labels: machines created from the template would not be selected"
// +kubebuilder:validation:XValidation:rule="!has(self.selector) || !has(self.selector.matchExpressions) || self.selector.matchExpressions.all(e, e.operator == 'In' ? (has(self.template.metadata) && has(self.template.metadata.labels) && e.key in self.template.metadata.labels && e.values.exists(v, v == self.template.metadata.labels[e.key])) : e.operator == 'NotIn' ? !(has(self.template.metadata) && has(self.template.metadata.labels) && e.key in self.template.metadata.labels && e.values.exists(v, v == self.template.metadata.labels[e.key])) : e.operator == 'Exists' ? (has(self.template.metadata) && has(self.template.metadata.labels) && e.key in self.template.metadata.labels) : !(has(self.template.metadata) && has(self.template.metadata.labels) && e.key in self.template.metadata.labels))",message="selector.matchExpressions must match template.metadata.labels: machines created from the template would not be selected"
// +kubebuilder:validation:XValidation:rule="(!has(self.selector) || ((!has(self.selector.matchLabels) || !self.selector.matchLabels.exists(k, k in ['node', 'node.machine.sapcloud.io/update-result', 'machine-template-hash', 'node.machine.sapcloud.io/scale-up-disabled', 'freeze'])) && (!has(self.selector.matchExpressions) || !self.selector.matchExpressions.exists(e, e.key in ['node', 'node.machine.sapcloud.io/update-result', 'machine-template-hash', 'node.machine.sapcloud.io/scale-up-disabled', 'freeze'])))) && (!has(self.template) || !has(self.template.metadata) || !has(self.template.metadata.labels) || !self.template.metadata.labels.exists(k, k in ['node', 'node.machine.sapcloud.io/update-result', 'machine-template-hash', 'node.machine.sapcloud.io/scale-up-disabled', 'freeze']))",message="selector and template.metadata.labels must not use the label keys node, node.machine.sapcloud.io/update-result, machine-template-hash, node.machine.sapcloud.io/scale-up-disabled and freeze: the controllers write them on machines and machine sets, so a deployment selecting by them would lose its machine sets and create others without end, or adopt ones that are not its own"
// +kubebuilder:validation:XValidation:rule="!has(self.progressDeadlineSeconds) || self.progressDeadlineSeconds > (has(self.minReadySeconds) ? self.minReadySeconds : 0)",message="progressDeadlineSeconds must be greater than minReadySeconds"
type MachineDeploymentSpec struct {
	// Replicas is the desired number of machines.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Selector selects the machines of the deployment; it must match the
	// template's labels and have a positive requirement (a matchLabels entry,
	// or an In or Exists expression). Neither it nor the template's labels
	// may use a label key the controllers write on machines and machine
	// sets (node, node.machine.sapcloud.io/update-result,
	// machine-template-hash, which the deployment adds to its sets,
	// node.machine.sapcloud.io/scale-up-disabled and freeze).
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Template describes the machines the deployment creates.
	Template MachineTemplateSpec `json:"template"`

	// Strategy is how existing machines are replaced by new ones. Defaults
	// to RollingUpdate with maxSurge 1 and maxUnavailable 0.
	// +optional
	Strategy MachineDeploymentStrategy `json:"strategy,omitempty"`

	// MinReadySeconds is how long a new machine must be Running before it
	// counts as available, when the deployment opts in with the annotation
	// mcmkit.io/min-ready-seconds: apply. Otherwise, as in MCM, it is only
	// stored (and copied to the sets), and a machine is available once
	// Running.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`

	// RevisionHistoryLimit is how many old MachineSets are kept for rollback.
	// +kubebuilder:validation:Minimum=0
	// +optional
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// Paused stops the rollout of template changes.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// RollbackTo asks for a rollback to a revision; cleared once done.
	// Deprecated: kept for compatibility with MCM.
	// +optional
	RollbackTo *RollbackConfig `json:"rollbackTo,omitempty"`

	// ProgressDeadlineSeconds is how long a rollout may make no progress
	// before the Progressing condition reports ProgressDeadlineExceeded.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// AutoPreserveFailedMachineMax is how many Failed machines may be kept for
	// inspection instead of being replaced at once.
	// +kubebuilder:validation:Minimum=0
	// +optional
	AutoPreserveFailedMachineMax *int32 `json:"autoPreserveFailedMachineMax,omitempty"`
}

// MachineDeploymentStrategy is how machines of an old template are replaced.
//
// +kubebuilder:validation:XValidation:rule="!has(self.rollingUpdate) || !has(self.type) || self.type == 'RollingUpdate'",message="strategy.rollingUpdate may only be set when strategy.type is RollingUpdate"
// +kubebuilder:validation:XValidation:rule="!has(self.inPlaceUpdate) || (has(self.type) && self.type == 'InPlaceUpdate')",message="strategy.inPlaceUpdate may only be set when strategy.type is InPlaceUpdate"
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type != 'InPlaceUpdate' || has(self.inPlaceUpdate)",message="strategy.type InPlaceUpdate needs strategy.inPlaceUpdate"
type MachineDeploymentStrategy struct {
	// Type is Recreate, RollingUpdate or InPlaceUpdate. Defaults to RollingUpdate.
	// +optional
	Type MachineDeploymentStrategyType `json:"type,omitempty"`

	// RollingUpdate parameters; only with type RollingUpdate.
	// +optional
	RollingUpdate *RollingUpdateMachineDeployment `json:"rollingUpdate,omitempty"`

	// InPlaceUpdate parameters; only with type InPlaceUpdate.
	// +optional
	InPlaceUpdate *InPlaceUpdateMachineDeployment `json:"inPlaceUpdate,omitempty"`
}

// MachineDeploymentStrategyType is the kind of rollout.
// +kubebuilder:validation:Enum=Recreate;RollingUpdate;InPlaceUpdate
type MachineDeploymentStrategyType string

// Rollout strategies.
const (
	// RecreateMachineDeploymentStrategyType deletes all old machines before
	// creating new ones.
	RecreateMachineDeploymentStrategyType MachineDeploymentStrategyType = "Recreate"
	// RollingUpdateMachineDeploymentStrategyType replaces machines gradually
	// within maxSurge and maxUnavailable.
	RollingUpdateMachineDeploymentStrategyType MachineDeploymentStrategyType = "RollingUpdate"
	// InPlaceUpdateMachineDeploymentStrategyType updates machines without
	// replacing their VMs.
	InPlaceUpdateMachineDeploymentStrategyType MachineDeploymentStrategyType = "InPlaceUpdate"
)

// UpdateConfiguration bounds how many machines a rollout may add or take away.
type UpdateConfiguration struct {
	// MaxUnavailable is how many machines may be unavailable during the
	// rollout: a number or a percentage of replicas (rounded down).
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="string(self).matches('^[0-9]+%?$')",message="maxUnavailable must be a non-negative number or a percentage such as 25%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// MaxSurge is how many machines may exist above replicas during the
	// rollout: a number or a percentage of replicas (rounded up).
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="string(self).matches('^[0-9]+%?$')",message="maxSurge must be a non-negative number or a percentage such as 25%"
	// +optional
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
}

// RollingUpdateMachineDeployment parameterises a rolling update.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.maxSurge) && string(self.maxSurge).matches('^0+%?$') && (!has(self.maxUnavailable) || string(self.maxUnavailable).matches('^0+%?$')))",message="maxSurge and maxUnavailable must not both be 0 (an unset maxUnavailable is 0): the rollout could never make progress"
type RollingUpdateMachineDeployment struct {
	UpdateConfiguration `json:",inline"`
}

// InPlaceUpdateMachineDeployment parameterises an in-place update.
type InPlaceUpdateMachineDeployment struct {
	UpdateConfiguration `json:",inline"`

	// OrchestrationType is Auto (the controller picks machines to update) or
	// Manual (an operator labels them).
	// +optional
	OrchestrationType OrchestrationType `json:"orchestrationType,omitempty"`
}

// OrchestrationType selects who picks the machines of an in-place update.
// +kubebuilder:validation:Enum=Auto;Manual
type OrchestrationType string

// Orchestration types.
const (
	// OrchestrationTypeAuto: the controller selects machines to update.
	OrchestrationTypeAuto OrchestrationType = "Auto"
	// OrchestrationTypeManual: an operator selects machines to update.
	OrchestrationTypeManual OrchestrationType = "Manual"
)

// RollbackConfig names the revision to roll back to.
type RollbackConfig struct {
	// Revision to roll back to; 0 means the previous one.
	// +optional
	Revision int64 `json:"revision,omitempty"`
}

// MachineDeploymentStatus is the observed state of a MachineDeployment.
type MachineDeploymentStatus struct {
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas is the number of machines selected by the deployment.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// UpdatedReplicas is the number of machines with the current template.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`

	// ReadyReplicas is the number of Running machines.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// AvailableReplicas is the number of machines Running (or Available);
	// with the mcmkit.io/min-ready-seconds opt-in, those that have been so
	// for at least minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`

	// PreservedFailedReplicas is the number of the deployment's Failed
	// machines that are preserved (the sum of its sets').
	// +optional
	PreservedFailedReplicas int32 `json:"preservedFailedReplicas,omitempty"`

	// UnavailableReplicas is the number of machines still needed for full
	// available capacity.
	// +optional
	UnavailableReplicas int32 `json:"unavailableReplicas,omitempty"`

	// Conditions of the deployment.
	// +optional
	// +patchMergeKey=type
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=type
	Conditions []MachineDeploymentCondition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// CollisionCount counts template-hash collisions; it salts the name of
	// new MachineSets.
	// +optional
	CollisionCount *int32 `json:"collisionCount,omitempty"`

	// FailedMachines summarises machines whose last operation failed.
	// +optional
	FailedMachines []*MachineSummary `json:"failedMachines,omitempty"`

	// LabelSelector is the selector in string form, for the scale subresource.
	// +optional
	LabelSelector string `json:"labelSelector,omitempty"`
}

// MachineDeploymentConditionType is the type of a MachineDeployment condition.
type MachineDeploymentConditionType string

// MachineDeployment condition types.
const (
	// MachineDeploymentAvailable: at least replicas - maxUnavailable machines
	// are available.
	MachineDeploymentAvailable MachineDeploymentConditionType = "Available"
	// MachineDeploymentProgressing: the rollout is making progress (or, with
	// reason ProgressDeadlineExceeded, is not).
	MachineDeploymentProgressing MachineDeploymentConditionType = "Progressing"
	// MachineDeploymentReplicaFailure: a machine could not be created or deleted.
	MachineDeploymentReplicaFailure MachineDeploymentConditionType = "ReplicaFailure"
	// MachineDeploymentFrozen: the safety controller froze the deployment.
	MachineDeploymentFrozen MachineDeploymentConditionType = "Frozen"
)

// MachineDeploymentCondition is an observation about a MachineDeployment.
type MachineDeploymentCondition struct {
	// Type of the condition.
	Type MachineDeploymentConditionType `json:"type"`

	// Status of the condition: True, False or Unknown.
	Status ConditionStatus `json:"status"`

	// LastUpdateTime is when the condition was last written.
	// +optional
	LastUpdateTime metav1.Time `json:"lastUpdateTime,omitempty"`

	// LastTransitionTime is when the status last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`

	// Reason is a CamelCase reason for the last transition.
	// +optional
	Reason string `json:"reason,omitempty"`

	// Message is a human-readable explanation.
	// +optional
	Message string `json:"message,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// MachineDeploymentList is a list of MachineDeployments.
type MachineDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the machine deployments.
	Items []MachineDeployment `json:"items"`
}
