package driver

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// Driver creates, inspects and deletes the VMs that back Machines in one
// cloud. The package documentation states the contract of every operation.
//
// All methods must be safe for concurrent use: the controller calls them from
// several workers at once, though never concurrently for the same machine.
// Every pointer in a request is read-only: the objects come from informer
// caches shared by the whole process. Every non-nil error should be an
// *Error (see CodeOf); anything else counts as Unknown.
type Driver interface {
	// CreateMachine creates the VM for req.Machine, or returns the one that
	// already exists for it.
	CreateMachine(ctx context.Context, req *CreateMachineRequest) (*CreateMachineResponse, error)
	// InitializeMachine finishes the set-up of a VM that CreateMachine
	// created (for example network configuration that needs the VM to
	// exist). Drivers that need no such step return Unimplemented.
	InitializeMachine(ctx context.Context, req *InitializeMachineRequest) (*InitializeMachineResponse, error)
	// DeleteMachine deletes the VM of req.Machine and everything created
	// with it. Deleting a machine without a VM succeeds.
	DeleteMachine(ctx context.Context, req *DeleteMachineRequest) (*DeleteMachineResponse, error)
	// GetMachineStatus reports whether a VM backs req.Machine, and which.
	GetMachineStatus(ctx context.Context, req *GetMachineStatusRequest) (*GetMachineStatusResponse, error)
	// ListMachines lists the VMs created for machines of req.MachineClass,
	// and no other VM. The safety controller deletes every listed VM that
	// no Machine claims, so a VM of another class, namespace or cluster
	// listed here would be deleted. Drivers that cannot list return
	// Unimplemented.
	ListMachines(ctx context.Context, req *ListMachinesRequest) (*ListMachinesResponse, error)
	// GetVolumeIDs maps persistent volumes to the cloud's volume IDs, so
	// that a drain waits for the detachment of the cloud's volumes only.
	// Drivers that cannot tell return Unimplemented, and a drain then
	// waits for all of the node's volumes.
	GetVolumeIDs(ctx context.Context, req *GetVolumeIDsRequest) (*GetVolumeIDsResponse, error)
}

// CreateMachineRequest asks for the VM of a machine.
type CreateMachineRequest struct {
	// Machine to create the VM for. Read-only.
	Machine *v1alpha1.Machine
	// MachineClass the machine refers to. Read-only.
	MachineClass *v1alpha1.MachineClass
	// Secret holds the merged data of the class's secretRef and
	// credentialsSecretRef (see MergeSecrets), with the user data's
	// placeholders already replaced for this machine. Read-only.
	Secret *corev1.Secret
}

// CreateMachineResponse describes the VM created or found.
type CreateMachineResponse struct {
	// ProviderID identifies the VM; the controller stores it in the
	// Machine's spec.providerID. Required.
	ProviderID string
	// NodeName is the name the VM's Node will register with.
	NodeName string
	// Addresses of the VM. The controller stores them in the Machine's
	// status only when there is no target cluster to read them from.
	Addresses []corev1.NodeAddress
	// LastKnownState is opaque driver state that the controller stores in
	// the Machine's status.lastKnownState.
	LastKnownState string
}

// InitializeMachineRequest asks to finish setting up a machine's VM.
type InitializeMachineRequest struct {
	// Machine whose VM to initialize. Read-only.
	Machine *v1alpha1.Machine
	// MachineClass the machine refers to. Read-only.
	MachineClass *v1alpha1.MachineClass
	// Secret holds the merged class secrets. Read-only.
	Secret *corev1.Secret
}

// InitializeMachineResponse describes the initialized VM.
type InitializeMachineResponse struct {
	// ProviderID identifies the VM.
	ProviderID string
	// NodeName is the name the VM's Node will register with.
	NodeName string
	// Addresses of the VM.
	Addresses []corev1.NodeAddress
}

// DeleteMachineRequest asks to delete a machine's VM.
type DeleteMachineRequest struct {
	// Machine whose VM to delete. Read-only. If spec.providerID is set,
	// it names the one VM to delete; if not, the driver deletes the VM it
	// created for the machine, found by the machine's name, as
	// CreateMachine finds one to return. The machine controller sends the
	// provider ID only when it owns that VM (see package machine).
	Machine *v1alpha1.Machine
	// MachineClass the machine refers to. Read-only.
	MachineClass *v1alpha1.MachineClass
	// Secret holds the merged class secrets. Read-only.
	Secret *corev1.Secret
}

// DeleteMachineResponse reports a deletion.
type DeleteMachineResponse struct {
	// LastKnownState is opaque driver state that the controller stores in
	// the Machine's status.lastKnownState.
	LastKnownState string
}

// GetMachineStatusRequest asks which VM backs a machine.
type GetMachineStatusRequest struct {
	// Machine to look up. Read-only. With spec.providerID empty, the driver
	// finds the VM it created for the machine by the machine's name: the
	// machine controller asks that way whenever the provider ID is only a
	// claim, so that the answer vouches for the machine's own VM.
	Machine *v1alpha1.Machine
	// MachineClass the machine refers to. Read-only.
	MachineClass *v1alpha1.MachineClass
	// Secret holds the merged class secrets. Read-only.
	Secret *corev1.Secret
}

// GetMachineStatusResponse describes the VM that backs a machine. It is also
// returned, filled in, together with an Uninitialized error.
type GetMachineStatusResponse struct {
	// ProviderID identifies the VM.
	ProviderID string
	// NodeName is the name the VM's Node registers with.
	NodeName string
	// Addresses of the VM.
	Addresses []corev1.NodeAddress
}

// ListMachinesRequest asks for the VMs of a machine class.
type ListMachinesRequest struct {
	// MachineClass whose VMs to list: those the driver created with it,
	// identified by what the class puts on its VMs (the cluster and role
	// tags of its providerSpec, say), not every VM the credentials can
	// see. Read-only.
	MachineClass *v1alpha1.MachineClass
	// Secret holds the merged class secrets. Read-only.
	Secret *corev1.Secret
}

// ListMachinesResponse lists the VMs of a machine class.
type ListMachinesResponse struct {
	// Machines maps the provider ID of every VM of the class (orphans and
	// duplicates included, VMs of other classes, namespaces or clusters
	// never) to the name of the machine it was created for. The safety
	// controller deletes the VMs in it that no Machine claims.
	Machines map[string]string
}

// GetVolumeIDsRequest asks for the cloud IDs of persistent volumes.
type GetVolumeIDsRequest struct {
	// PVSpecs are the specs of the volumes. Read-only.
	PVSpecs []*corev1.PersistentVolumeSpec
}

// GetVolumeIDsResponse lists volume IDs.
type GetVolumeIDsResponse struct {
	// VolumeIDs of the volumes that belong to this cloud, in request order.
	// Volumes of other kinds (NFS, another cloud's CSI driver) are left out.
	VolumeIDs []string
}

// UnimplementedOptional implements the optional operations InitializeMachine,
// ListMachines and GetVolumeIDs by returning an Unimplemented error. Embed it
// in a driver that does not support them, and implement the other three:
//
//	type Driver struct {
//		driver.UnimplementedOptional
//		api *cloud.Client
//	}
//
// Operations added to Driver in later versions will be optional and get an
// Unimplemented default here, so drivers that embed UnimplementedOptional
// keep compiling.
type UnimplementedOptional struct{}

// InitializeMachine returns Unimplemented: the controller skips the step.
func (UnimplementedOptional) InitializeMachine(context.Context, *InitializeMachineRequest) (*InitializeMachineResponse, error) {
	return nil, unimplemented(OperationInitializeMachine)
}

// ListMachines returns Unimplemented: the driver cannot list its VMs.
func (UnimplementedOptional) ListMachines(context.Context, *ListMachinesRequest) (*ListMachinesResponse, error) {
	return nil, unimplemented(OperationListMachines)
}

// GetVolumeIDs returns Unimplemented: a drain cannot tell the cloud's
// volumes from others and waits for all of the node's volumes to detach.
func (UnimplementedOptional) GetVolumeIDs(context.Context, *GetVolumeIDsRequest) (*GetVolumeIDsResponse, error) {
	return nil, unimplemented(OperationGetVolumeIDs)
}

func unimplemented(op Operation) error {
	return &Error{Code: Unimplemented, Message: string(op) + " is not supported by this driver"}
}

// Operation names a Driver method. The names are the values of the
// "operation" label of the metrics that Instrument records.
type Operation string

// The operations of Driver.
const (
	OperationCreateMachine     Operation = "CreateMachine"
	OperationInitializeMachine Operation = "InitializeMachine"
	OperationDeleteMachine     Operation = "DeleteMachine"
	OperationGetMachineStatus  Operation = "GetMachineStatus"
	OperationListMachines      Operation = "ListMachines"
	OperationGetVolumeIDs      Operation = "GetVolumeIDs"
)

// Operations returns every operation of Driver, in interface order.
func Operations() []Operation {
	return []Operation{
		OperationCreateMachine, OperationInitializeMachine, OperationDeleteMachine,
		OperationGetMachineStatus, OperationListMachines, OperationGetVolumeIDs,
	}
}
