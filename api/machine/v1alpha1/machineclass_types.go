package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +genclient
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=mcc
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.provider`,description="Provider the driver serves."
// +kubebuilder:printcolumn:name="Instance Type",type=string,JSONPath=`.nodeTemplate.instanceType`,description="Instance type of the machines.",priority=1
// +kubebuilder:printcolumn:name="Zone",type=string,JSONPath=`.nodeTemplate.zone`,description="Zone of the machines.",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// MachineClass is a reusable provider configuration for machines: the
// provider-specific spec, the secrets holding credentials and user data, and
// what a node of this class looks like (for scale-from-zero).
type MachineClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// NodeTemplate describes the nodes of this class for autoscalers that
	// scale a group up from zero.
	// +optional
	NodeTemplate *NodeTemplate `json:"nodeTemplate,omitempty"`

	// CredentialsSecretRef references a secret with cloud credentials. Its
	// data is merged with SecretRef's before it is passed to the driver, so
	// several classes can share credentials but differ in user data.
	// +kubebuilder:validation:XValidation:rule="has(self.name) && self.name != ''",message="credentialsSecretRef.name is required when credentialsSecretRef is set"
	// +optional
	CredentialsSecretRef *corev1.SecretReference `json:"credentialsSecretRef,omitempty"`

	// ProviderSpec is the provider-specific configuration, passed to the
	// driver as is. Unknown fields are preserved.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:pruning:PreserveUnknownFields
	ProviderSpec runtime.RawExtension `json:"providerSpec"`

	// Provider names the provider (driver) of this class.
	// +optional
	Provider string `json:"provider,omitempty"`

	// SecretRef references a secret with the user data (key userData) and,
	// unless CredentialsSecretRef is set, the credentials.
	// +kubebuilder:validation:XValidation:rule="has(self.name) && self.name != ''",message="secretRef.name is required when secretRef is set"
	// +optional
	SecretRef *corev1.SecretReference `json:"secretRef,omitempty"`
}

// NodeTemplate describes the nodes a MachineClass produces.
//
// +kubebuilder:validation:XValidation:rule="'cpu' in self.capacity && 'memory' in self.capacity",message="nodeTemplate.capacity must contain cpu and memory: autoscalers size new nodes from it"
type NodeTemplate struct {
	// Capacity of a node: cpu, gpu, memory and any extended resources.
	Capacity corev1.ResourceList `json:"capacity"`

	// VirtualCapacity are extended resources advertised on the node's
	// capacity without being backed by the VM.
	// +optional
	VirtualCapacity corev1.ResourceList `json:"virtualCapacity,omitempty"`

	// InstanceType of the VM.
	InstanceType string `json:"instanceType"`

	// Region of the VM.
	Region string `json:"region"`

	// Zone of the VM.
	Zone string `json:"zone"`

	// Architecture of the VM, for example amd64 or arm64.
	// +optional
	Architecture *string `json:"architecture,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// MachineClassList is a list of MachineClasses.
type MachineClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the machine classes.
	Items []MachineClass `json:"items"`
}
