package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=mcs
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.labelSelector
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`,description="Number of desired machines."
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.replicas`,description="Number of machines."
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`,description="Number of Running machines."
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`,description="Number of available machines."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// MachineSet keeps a number of identical machines, like a ReplicaSet keeps pods.
type MachineSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired machine set.
	// +optional
	Spec MachineSetSpec `json:"spec,omitempty"`

	// Status is the most recently observed state of the machine set.
	// +optional
	Status MachineSetStatus `json:"status,omitempty"`
}

// MachineSetSpec is the desired state of a MachineSet.
//
// +kubebuilder:validation:XValidation:rule="has(self.selector)",message="selector is required: it tells which machines belong to the set"
// +kubebuilder:validation:XValidation:rule="!has(self.selector) || (has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)",message="selector must not be empty: an empty selector would adopt every machine in the namespace"
// +kubebuilder:validation:XValidation:rule="!has(self.selector) || (has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || !has(self.selector.matchExpressions) || size(self.selector.matchExpressions) == 0 || self.selector.matchExpressions.exists(e, e.operator == 'In' || e.operator == 'Exists')",message="selector must have a positive requirement (a matchLabels entry, or a matchExpressions entry with operator In or Exists): a selector of only NotIn and DoesNotExist would adopt nearly every machine in the namespace"
// +kubebuilder:validation:XValidation:rule="!has(self.selector) || !has(self.selector.matchLabels) || self.selector.matchLabels.all(k, has(self.template.metadata) && has(self.template.metadata.labels) && k in self.template.metadata.labels && self.template.metadata.labels[k] == self.selector.matchLabels[k])",message="selector.matchLabels must match template.metadata.labels: machines created from the template would not be selected"
// +kubebuilder:validation:XValidation:rule="!has(self.selector) || !has(self.selector.matchExpressions) || self.selector.matchExpressions.all(e, e.operator == 'In' ? (has(self.template.metadata) && has(self.template.metadata.labels) && e.key in self.template.metadata.labels && e.values.exists(v, v == self.template.metadata.labels[e.key])) : e.operator == 'NotIn' ? !(has(self.template.metadata) && has(self.template.metadata.labels) && e.key in self.template.metadata.labels && e.values.exists(v, v == self.template.metadata.labels[e.key])) : e.operator == 'Exists' ? (has(self.template.metadata) && has(self.template.metadata.labels) && e.key in self.template.metadata.labels) : !(has(self.template.metadata) && has(self.template.metadata.labels) && e.key in self.template.metadata.labels))",message="selector.matchExpressions must match template.metadata.labels: machines created from the template would not be selected"
// +kubebuilder:validation:XValidation:rule="(!has(self.selector) || ((!has(self.selector.matchLabels) || !self.selector.matchLabels.exists(k, k in ['node', 'node.machine.sapcloud.io/update-result'])) && (!has(self.selector.matchExpressions) || !self.selector.matchExpressions.exists(e, e.key in ['node', 'node.machine.sapcloud.io/update-result'])))) && (!has(self.template) || !has(self.template.metadata) || !has(self.template.metadata.labels) || !self.template.metadata.labels.exists(k, k in ['node', 'node.machine.sapcloud.io/update-result']))",message="selector and template.metadata.labels must not use the label keys node and node.machine.sapcloud.io/update-result: the controllers write them on machines, so a set selecting by them would lose its machines and create others without end, or adopt machines that are not its own"
type MachineSetSpec struct {
	// Replicas is the desired number of machines.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Selector selects the machines of the set; it must match the template's
	// labels and have a positive requirement (a matchLabels entry, or an In
	// or Exists expression). Neither it nor the template's labels may use
	// a label key the controllers write on machines (node,
	// node.machine.sapcloud.io/update-result): the set would lose each
	// machine once the controller labels it, or adopt machines labelled for
	// others. machine-template-hash is allowed: a deployment's sets carry it.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// MachineClass is kept for compatibility with old MCM objects; the
	// template's class is what is used.
	// +optional
	MachineClass ClassSpec `json:"machineClass,omitempty"`

	// Template describes the machines the set creates.
	// +optional
	Template MachineTemplateSpec `json:"template,omitempty"`

	// MinReadySeconds is how long a new machine must be Running before it
	// counts as available, when the set opts in with the annotation
	// mcmkit.io/min-ready-seconds: apply (a set of a MachineDeployment gets
	// it from the deployment). Otherwise, as in MCM, it is only stored, and
	// a machine is available once Running.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`

	// AutoPreserveFailedMachineMax is how many Failed machines may be kept for
	// inspection instead of being replaced at once.
	// +kubebuilder:validation:Minimum=0
	// +optional
	AutoPreserveFailedMachineMax *int32 `json:"autoPreserveFailedMachineMax,omitempty"`
}

// MachineSetConditionType is the type of a MachineSet condition.
type MachineSetConditionType string

// MachineSet condition types.
const (
	// MachineSetReplicaFailure: a machine could not be created or deleted.
	MachineSetReplicaFailure MachineSetConditionType = "ReplicaFailure"
	// MachineSetFrozen: the safety controller froze the set because it has
	// more machines than it should.
	MachineSetFrozen MachineSetConditionType = "Frozen"
)

// MachineSetCondition is an observation about a MachineSet.
type MachineSetCondition struct {
	// Type of the condition.
	Type MachineSetConditionType `json:"type"`

	// Status of the condition: True, False or Unknown.
	Status ConditionStatus `json:"status"`

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

// MachineSetStatus is the observed state of a MachineSet.
type MachineSetStatus struct {
	// Replicas is the number of machines of the set.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// FullyLabeledReplicas is the number of machines whose labels match the
	// template's labels.
	// +optional
	FullyLabeledReplicas int32 `json:"fullyLabeledReplicas,omitempty"`

	// ReadyReplicas is the number of Running machines.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// AvailableReplicas is the number of machines Running (or Available);
	// with the mcmkit.io/min-ready-seconds opt-in, those that have been so
	// for at least minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`

	// PreservedFailedReplicas is the number of the set's Failed machines
	// that are preserved: they are neither deleted nor replaced while so,
	// and are not in FailedMachines.
	// +optional
	PreservedFailedReplicas int32 `json:"preservedFailedReplicas,omitempty"`

	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions of the set. The JSON name is MCM's.
	// +optional
	Conditions []MachineSetCondition `json:"machineSetCondition,omitempty"`

	// LastOperation is the last operation performed on the set.
	// +optional
	LastOperation LastOperation `json:"lastOperation,omitempty"`

	// FailedMachines summarises machines whose last operation failed.
	// +optional
	FailedMachines *[]MachineSummary `json:"failedMachines,omitempty"`

	// AutoPreserveFailedMachineCount is how many of the set's machines carry
	// the controller's auto-preserved mark (PreserveAnnotation), as MCM
	// counts them.
	// +optional
	AutoPreserveFailedMachineCount *int32 `json:"autoPreserveFailedMachineCount,omitempty"`

	// LabelSelector is the selector in string form, for the scale subresource
	// (kubectl scale, horizontal autoscalers).
	// +optional
	LabelSelector string `json:"labelSelector,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// MachineSetList is a list of MachineSets.
type MachineSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the machine sets.
	Items []MachineSet `json:"items"`
}
