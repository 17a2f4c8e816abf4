package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=mc
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.currentStatus.phase`,description="Phase of the machine."
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.metadata.labels.node`,description="Node backing the machine."
// +kubebuilder:printcolumn:name="ProviderID",type=string,JSONPath=`.spec.providerID`,description="Provider ID of the VM backing the machine."
// +kubebuilder:printcolumn:name="Preserved",type=string,JSONPath=`.status.currentStatus.preserveExpiryTime`,description="Until when the machine is preserved."
// +kubebuilder:printcolumn:name="Last Operation",type=string,JSONPath=`.status.lastOperation.type`,description="Type of the last operation.",priority=1
// +kubebuilder:printcolumn:name="Error",type=string,JSONPath=`.status.lastOperation.errorCode`,description="Driver error code of the last operation.",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters: a machine's name is used as a label value and as its host name"

// Machine is one physical or virtual machine of a cluster: a VM created
// through a driver from a MachineClass, joined to the target cluster as a Node.
type Machine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired machine.
	// +optional
	Spec MachineSpec `json:"spec,omitempty"`

	// Status is the most recently observed state of the machine.
	// +optional
	Status MachineStatus `json:"status,omitempty"`
}

// MachineSpec is the desired state of a Machine.
type MachineSpec struct {
	// Class names the MachineClass the machine is created from.
	// +required
	// +kubebuilder:validation:XValidation:rule="has(self.name) && self.name != ''",message="class.name is required: name the MachineClass to create the machine from"
	// +kubebuilder:validation:XValidation:rule="!has(self.kind) || self.kind == '' || self.kind == 'MachineClass'",message="class.kind must be MachineClass (or left empty)"
	Class ClassSpec `json:"class"`

	// ProviderID is the provider's unique ID of the VM, set once the VM exists.
	// +optional
	ProviderID string `json:"providerID,omitempty"`

	// NodeTemplateSpec holds labels, annotations and taints the machine's Node
	// is kept in sync with.
	// +optional
	NodeTemplateSpec NodeTemplateSpec `json:"nodeTemplate,omitempty"`

	// MachineConfiguration overrides controller-wide settings for this machine.
	// +optional
	*MachineConfiguration `json:",inline"`
}

// ClassSpec references the MachineClass of a machine.
type ClassSpec struct {
	// APIGroup of the class; machine.sapcloud.io when set.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`

	// Kind of the class; MachineClass when set.
	// +optional
	Kind string `json:"kind,omitempty"`

	// Name of the MachineClass in the machine's namespace.
	// +optional
	Name string `json:"name,omitempty"`
}

// NodeTemplateSpec describes the metadata and spec a machine's Node carries.
type NodeTemplateSpec struct {
	// Labels and annotations applied to the Node.
	// +kubebuilder:validation:XPreserveUnknownFields
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec of the Node; taints are applied from here.
	// +optional
	Spec corev1.NodeSpec `json:"spec,omitempty"`
}

// MachineConfiguration holds per-machine overrides of controller settings.
// Unset fields take the controller's value.
//
// Each duration is bounded at 10000h: a typed client cannot decode a
// duration that overflows Go's time.Duration (about 2.5 million hours), and
// one such object used to make every list of its kind fail. The second
// pattern of the bound admits at most as many digits per unit as 10000h
// needs in that unit, so duration() is only asked to parse values that
// cannot overflow; anything longer is over the bound anyway.
type MachineConfiguration struct {
	// DrainTimeout bounds the drain before remaining pods are force-deleted.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$')",message="drainTimeout must be a non-negative duration such as 90s, 20m or 2h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') || (self.matches('^([0-9]{1,5}(\\\\.[0-9]+)?h|[0-9]{1,7}(\\\\.[0-9]+)?m|[0-9]{1,9}(\\\\.[0-9]+)?s|[0-9]{1,12}(\\\\.[0-9]+)?ms|[0-9]{1,15}(\\\\.[0-9]+)?us|[0-9]{1,18}(\\\\.[0-9]+)?ns)+$') && duration(self) <= duration('10000h'))",message="drainTimeout must be at most 10000h"
	// +optional
	MachineDrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`

	// HealthTimeout is how long a machine may stay unhealthy before it is Failed.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$')",message="healthTimeout must be a non-negative duration such as 90s, 20m or 2h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') || (self.matches('^([0-9]{1,5}(\\\\.[0-9]+)?h|[0-9]{1,7}(\\\\.[0-9]+)?m|[0-9]{1,9}(\\\\.[0-9]+)?s|[0-9]{1,12}(\\\\.[0-9]+)?ms|[0-9]{1,15}(\\\\.[0-9]+)?us|[0-9]{1,18}(\\\\.[0-9]+)?ns)+$') && duration(self) <= duration('10000h'))",message="healthTimeout must be at most 10000h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,5}(\\\\.[0-9]+)?h|[0-9]{1,7}(\\\\.[0-9]+)?m|[0-9]{1,9}(\\\\.[0-9]+)?s|[0-9]{1,12}(\\\\.[0-9]+)?ms|[0-9]{1,15}(\\\\.[0-9]+)?us|[0-9]{1,18}(\\\\.[0-9]+)?ns)+$') || duration(self) > duration('0s')",message="healthTimeout must be greater than 0s"
	// +optional
	MachineHealthTimeout *metav1.Duration `json:"healthTimeout,omitempty"`

	// CreationTimeout is how long a machine may take to join before it is Failed.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$')",message="creationTimeout must be a non-negative duration such as 90s, 20m or 2h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') || (self.matches('^([0-9]{1,5}(\\\\.[0-9]+)?h|[0-9]{1,7}(\\\\.[0-9]+)?m|[0-9]{1,9}(\\\\.[0-9]+)?s|[0-9]{1,12}(\\\\.[0-9]+)?ms|[0-9]{1,15}(\\\\.[0-9]+)?us|[0-9]{1,18}(\\\\.[0-9]+)?ns)+$') && duration(self) <= duration('10000h'))",message="creationTimeout must be at most 10000h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,5}(\\\\.[0-9]+)?h|[0-9]{1,7}(\\\\.[0-9]+)?m|[0-9]{1,9}(\\\\.[0-9]+)?s|[0-9]{1,12}(\\\\.[0-9]+)?ms|[0-9]{1,15}(\\\\.[0-9]+)?us|[0-9]{1,18}(\\\\.[0-9]+)?ns)+$') || duration(self) > duration('0s')",message="creationTimeout must be greater than 0s"
	// +optional
	MachineCreationTimeout *metav1.Duration `json:"creationTimeout,omitempty"`

	// InPlaceUpdateTimeout bounds an in-place update of the machine.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$')",message="inPlaceUpdateTimeout must be a non-negative duration such as 90s, 20m or 2h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') || (self.matches('^([0-9]{1,5}(\\\\.[0-9]+)?h|[0-9]{1,7}(\\\\.[0-9]+)?m|[0-9]{1,9}(\\\\.[0-9]+)?s|[0-9]{1,12}(\\\\.[0-9]+)?ms|[0-9]{1,15}(\\\\.[0-9]+)?us|[0-9]{1,18}(\\\\.[0-9]+)?ns)+$') && duration(self) <= duration('10000h'))",message="inPlaceUpdateTimeout must be at most 10000h"
	// +optional
	MachineInPlaceUpdateTimeout *metav1.Duration `json:"inPlaceUpdateTimeout,omitempty"`

	// PreserveTimeout is how long a preserved machine is kept.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$')",message="machinePreserveTimeout must be a non-negative duration such as 90s, 20m or 2h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') || (self.matches('^([0-9]{1,5}(\\\\.[0-9]+)?h|[0-9]{1,7}(\\\\.[0-9]+)?m|[0-9]{1,9}(\\\\.[0-9]+)?s|[0-9]{1,12}(\\\\.[0-9]+)?ms|[0-9]{1,15}(\\\\.[0-9]+)?us|[0-9]{1,18}(\\\\.[0-9]+)?ns)+$') && duration(self) <= duration('10000h'))",message="machinePreserveTimeout must be at most 10000h"
	// +optional
	MachinePreserveTimeout *metav1.Duration `json:"machinePreserveTimeout,omitempty"`

	// DisableHealthTimeout keeps an unhealthy machine from ever being Failed
	// by the health timeout.
	// +optional
	DisableHealthTimeout *bool `json:"disableHealthTimeout,omitempty"`

	// MaxEvictRetries is how many times the drain retries an eviction.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxEvictRetries *int32 `json:"maxEvictRetries,omitempty"`

	// NodeConditions is a comma-separated list of node condition types that
	// make the machine unhealthy when True.
	// +optional
	NodeConditions *string `json:"nodeConditions,omitempty"`
}

// MachineStatus is the observed state of a Machine.
type MachineStatus struct {
	// Addresses of the machine as reported by the driver. Only set when there
	// is no target cluster; otherwise read the Node's addresses.
	// +optional
	Addresses []corev1.NodeAddress `json:"addresses,omitempty"`

	// Conditions are copied from the machine's Node.
	// +optional
	Conditions []corev1.NodeCondition `json:"conditions,omitempty"`

	// LastOperation is the last operation performed on the machine.
	// +optional
	LastOperation LastOperation `json:"lastOperation,omitempty"`

	// CurrentStatus holds the phase of the machine.
	// +optional
	CurrentStatus CurrentStatus `json:"currentStatus,omitempty"`

	// LastKnownState is opaque state the driver asked to keep between calls.
	// +optional
	LastKnownState string `json:"lastKnownState,omitempty"`
}

// LastOperation describes the last operation performed on an object.
type LastOperation struct {
	// Description is a human-readable account of the operation. Programs
	// read State, Type and ErrorCode, never this text.
	// +optional
	Description string `json:"description,omitempty"`

	// ErrorCode is the driver error code name (for example ResourceExhausted)
	// when the operation failed because of the driver.
	// +optional
	ErrorCode string `json:"errorCode,omitempty"`

	// LastUpdateTime is when the operation was last updated.
	// +optional
	LastUpdateTime metav1.Time `json:"lastUpdateTime,omitempty"`

	// State of the operation.
	// +optional
	State MachineState `json:"state,omitempty"`

	// Type of the operation.
	// +optional
	Type MachineOperationType `json:"type,omitempty"`
}

// CurrentStatus holds the phase of a machine.
type CurrentStatus struct {
	// Phase of the machine.
	// +optional
	Phase MachinePhase `json:"phase,omitempty"`

	// TimeoutActive is true while a creation or health timeout runs.
	// +optional
	TimeoutActive bool `json:"timeoutActive,omitempty"`

	// LastUpdateTime is when the phase last changed.
	// +optional
	LastUpdateTime metav1.Time `json:"lastUpdateTime,omitempty"`

	// PreserveExpiryTime is when preservation of the machine ends.
	// +optional
	PreserveExpiryTime *metav1.Time `json:"preserveExpiryTime,omitempty"`
}

// MachinePhase is the lifecycle phase of a machine.
// +kubebuilder:validation:Enum="";Pending;Available;Running;Terminating;Unknown;Failed;CrashLoopBackOff;InPlaceUpdating;InPlaceUpdateSuccessful;InPlaceUpdateFailed
type MachinePhase string

// Machine phases, spelled as MCM spells them.
const (
	// MachinePending: the VM exists, the Node has not become Ready yet.
	MachinePending MachinePhase = "Pending"
	// MachineAvailable: the VM exists and there is no target cluster to join.
	MachineAvailable MachinePhase = "Available"
	// MachineRunning: the Node is Ready and healthy.
	MachineRunning MachinePhase = "Running"
	// MachineTerminating: the machine is being deleted.
	MachineTerminating MachinePhase = "Terminating"
	// MachineUnknown: the Node is unhealthy or gone; the health timeout runs.
	MachineUnknown MachinePhase = "Unknown"
	// MachineFailed: creation or health timed out; the machine will be replaced.
	MachineFailed MachinePhase = "Failed"
	// MachineCrashLoopBackOff: VM creation fails and is being retried.
	MachineCrashLoopBackOff MachinePhase = "CrashLoopBackOff"
	// MachineInPlaceUpdating: an in-place update is in progress.
	MachineInPlaceUpdating MachinePhase = "InPlaceUpdating"
	// MachineInPlaceUpdateSuccessful: the in-place update finished.
	MachineInPlaceUpdateSuccessful MachinePhase = "InPlaceUpdateSuccessful"
	// MachineInPlaceUpdateFailed: the in-place update failed.
	MachineInPlaceUpdateFailed MachinePhase = "InPlaceUpdateFailed"
)

// MachineState is the state of an operation.
// +kubebuilder:validation:Enum="";Processing;Failed;Successful
type MachineState string

// Operation states.
const (
	// MachineStateProcessing: the operation has not finished.
	MachineStateProcessing MachineState = "Processing"
	// MachineStateFailed: the operation failed; it may be retried.
	MachineStateFailed MachineState = "Failed"
	// MachineStateSuccessful: the operation finished.
	MachineStateSuccessful MachineState = "Successful"
)

// MachineOperationType is the kind of operation performed on a machine.
// +kubebuilder:validation:Enum="";Create;Update;InPlaceUpdate;DrainNode;HealthCheck;Delete
type MachineOperationType string

// Operation types.
const (
	// MachineOperationCreate: VM creation and join.
	MachineOperationCreate MachineOperationType = "Create"
	// MachineOperationUpdate: an update of the machine.
	MachineOperationUpdate MachineOperationType = "Update"
	// MachineOperationInPlaceUpdate: an in-place update of the machine.
	MachineOperationInPlaceUpdate MachineOperationType = "InPlaceUpdate"
	// MachineOperationDrainNode: draining the machine's Node.
	MachineOperationDrainNode MachineOperationType = "DrainNode"
	// MachineOperationHealthCheck: a health transition observed on the Node.
	MachineOperationHealthCheck MachineOperationType = "HealthCheck"
	// MachineOperationDelete: deletion of the machine and its VM.
	MachineOperationDelete MachineOperationType = "Delete"
)

// ConditionStatus is the status of a MachineSet or MachineDeployment condition.
type ConditionStatus string

// Condition statuses.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// MachineList is a list of Machines.
type MachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the machines.
	Items []Machine `json:"items"`
}

// MachineSummary summarises a machine whose last operation failed.
type MachineSummary struct {
	// Name of the machine.
	// +optional
	Name string `json:"name,omitempty"`

	// ProviderID of the machine's VM.
	// +optional
	ProviderID string `json:"providerID,omitempty"`

	// LastOperation of the machine.
	// +optional
	LastOperation LastOperation `json:"lastOperation,omitempty"`

	// OwnerRef is the name of the machine's owner.
	// +optional
	OwnerRef string `json:"ownerRef,omitempty"`
}

// MachineTemplateSpec describes the machines a MachineSet creates.
type MachineTemplateSpec struct {
	// Metadata of the machines; its labels must match the selector.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec of the machines.
	// +required
	Spec MachineSpec `json:"spec,omitempty"`
}
