package mcmdriver

import (
	"context"

	mcm "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"

	"github.com/mcmkit/mcm/driver"
)

// ToMCM returns d behind MCM's driver interface: the way back, for a
// driver written for this module that is to run under MCM's provider
// binary, or for tests that drive one of our drivers through New as if it
// were an MCM provider. Errors become *status.Status (ErrorToMCM);
// requests and responses are converted as New converts them.
func ToMCM(d driver.Driver) mcm.Driver {
	return &reverse{ours: d}
}

// reverse is an MCM driver in front of ours.
type reverse struct {
	ours driver.Driver
}

func (r *reverse) CreateMachine(ctx context.Context, req *mcm.CreateMachineRequest) (*mcm.CreateMachineResponse, error) {
	o, err := fromMCM(req.Machine, req.MachineClass, req.Secret)
	if err != nil {
		return nil, ErrorToMCM(err)
	}
	resp, err := r.ours.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: o.machine, MachineClass: o.class, Secret: o.secret})
	if resp == nil {
		return nil, reverseFailure(driver.OperationCreateMachine, err)
	}
	return &mcm.CreateMachineResponse{
		ProviderID: resp.ProviderID, NodeName: resp.NodeName,
		Addresses: copyAddresses(resp.Addresses), LastKnownState: resp.LastKnownState,
	}, ErrorToMCM(err)
}

func (r *reverse) InitializeMachine(ctx context.Context, req *mcm.InitializeMachineRequest) (*mcm.InitializeMachineResponse, error) {
	o, err := fromMCM(req.Machine, req.MachineClass, req.Secret)
	if err != nil {
		return nil, ErrorToMCM(err)
	}
	resp, err := r.ours.InitializeMachine(ctx, &driver.InitializeMachineRequest{Machine: o.machine, MachineClass: o.class, Secret: o.secret})
	if err != nil || resp == nil {
		return nil, reverseFailure(driver.OperationInitializeMachine, err)
	}
	return &mcm.InitializeMachineResponse{
		ProviderID: resp.ProviderID, NodeName: resp.NodeName, Addresses: copyAddresses(resp.Addresses),
	}, nil
}

func (r *reverse) DeleteMachine(ctx context.Context, req *mcm.DeleteMachineRequest) (*mcm.DeleteMachineResponse, error) {
	o, err := fromMCM(req.Machine, req.MachineClass, req.Secret)
	if err != nil {
		return nil, ErrorToMCM(err)
	}
	resp, err := r.ours.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: o.machine, MachineClass: o.class, Secret: o.secret})
	if resp == nil {
		return nil, reverseFailure(driver.OperationDeleteMachine, err)
	}
	return &mcm.DeleteMachineResponse{LastKnownState: resp.LastKnownState}, ErrorToMCM(err)
}

func (r *reverse) GetMachineStatus(ctx context.Context, req *mcm.GetMachineStatusRequest) (*mcm.GetMachineStatusResponse, error) {
	o, err := fromMCM(req.Machine, req.MachineClass, req.Secret)
	if err != nil {
		return nil, ErrorToMCM(err)
	}
	resp, err := r.ours.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: o.machine, MachineClass: o.class, Secret: o.secret})
	if resp == nil {
		return nil, reverseFailure(driver.OperationGetMachineStatus, err)
	}
	return &mcm.GetMachineStatusResponse{
		ProviderID: resp.ProviderID, NodeName: resp.NodeName, Addresses: copyAddresses(resp.Addresses),
	}, ErrorToMCM(err)
}

func (r *reverse) ListMachines(ctx context.Context, req *mcm.ListMachinesRequest) (*mcm.ListMachinesResponse, error) {
	o, err := fromMCM(nil, req.MachineClass, req.Secret)
	if err != nil {
		return nil, ErrorToMCM(err)
	}
	resp, err := r.ours.ListMachines(ctx, &driver.ListMachinesRequest{MachineClass: o.class, Secret: o.secret})
	if err != nil || resp == nil {
		return nil, reverseFailure(driver.OperationListMachines, err)
	}
	return &mcm.ListMachinesResponse{MachineList: copyMachineList(resp.Machines)}, nil
}

func (r *reverse) GetVolumeIDs(ctx context.Context, req *mcm.GetVolumeIDsRequest) (*mcm.GetVolumeIDsResponse, error) {
	resp, err := r.ours.GetVolumeIDs(ctx, &driver.GetVolumeIDsRequest{PVSpecs: copyPVSpecs(req.PVSpecs)})
	if err != nil || resp == nil {
		return nil, reverseFailure(driver.OperationGetVolumeIDs, err)
	}
	return &mcm.GetVolumeIDsResponse{VolumeIDs: append([]string(nil), resp.VolumeIDs...)}, nil
}

// reverseFailure is the MCM error of a call of ours that returned no
// response: its error, or noResponse if it returned none either.
func reverseFailure(op driver.Operation, err error) error {
	if err == nil {
		err = noResponse(op)
	}
	return ErrorToMCM(err)
}
