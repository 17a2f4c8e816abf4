package mcmdriver

import (
	"context"

	mcm "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"

	"github.com/mcmkit/mcm/driver"
)

// New returns a driver.Driver that serves every call with d, a driver
// written for MCM's interface (the driver a machine-controller-manager-
// provider-* project builds into MCM's provider binary). See the package
// documentation for what is converted and how.
//
// New starts nothing and keeps only d. The result is as safe for
// concurrent use as d is; MCM's controller, like ours, never calls a
// driver concurrently for one machine.
func New(d mcm.Driver) driver.Driver {
	return &adapter{mcm: d}
}

// adapter is our driver in front of an MCM driver.
type adapter struct {
	mcm mcm.Driver
}

// CreateMachine converts the request, calls the MCM driver and keeps the
// whole response: provider ID, node name, addresses and last known state.
func (a *adapter) CreateMachine(ctx context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	if err := driver.ContextError(ctx); err != nil {
		return nil, err
	}
	o, err := toMCM(req.Machine, req.MachineClass, req.Secret)
	if err != nil {
		return nil, err
	}
	resp, err := a.mcm.CreateMachine(ctx, &mcm.CreateMachineRequest{Machine: o.machine, MachineClass: o.class, Secret: o.secret})
	if resp == nil {
		return nil, failure(driver.OperationCreateMachine, err)
	}
	return &driver.CreateMachineResponse{
		ProviderID: resp.ProviderID, NodeName: resp.NodeName,
		Addresses: copyAddresses(resp.Addresses), LastKnownState: resp.LastKnownState,
	}, ErrorFromMCM(err)
}

// InitializeMachine passes MCM's answers on as ours mean the same:
// Unimplemented skips the step and NotFound records a failure after which
// the machine starts over, as MCM's controller treats them.
func (a *adapter) InitializeMachine(ctx context.Context, req *driver.InitializeMachineRequest) (*driver.InitializeMachineResponse, error) {
	if err := driver.ContextError(ctx); err != nil {
		return nil, err
	}
	o, err := toMCM(req.Machine, req.MachineClass, req.Secret)
	if err != nil {
		return nil, err
	}
	resp, err := a.mcm.InitializeMachine(ctx, &mcm.InitializeMachineRequest{Machine: o.machine, MachineClass: o.class, Secret: o.secret})
	if err != nil {
		// MCM's fake driver, for one, answers Unimplemented with a filled-in
		// response; the response of a failed call means nothing.
		return nil, ErrorFromMCM(err)
	}
	if resp == nil {
		return nil, noResponse(driver.OperationInitializeMachine)
	}
	return &driver.InitializeMachineResponse{
		ProviderID: resp.ProviderID, NodeName: resp.NodeName, Addresses: copyAddresses(resp.Addresses),
	}, nil
}

// DeleteMachine keeps the response's last known state, also beside an
// error, since a partial deletion may have changed it.
func (a *adapter) DeleteMachine(ctx context.Context, req *driver.DeleteMachineRequest) (*driver.DeleteMachineResponse, error) {
	if err := driver.ContextError(ctx); err != nil {
		return nil, err
	}
	o, err := toMCM(req.Machine, req.MachineClass, req.Secret)
	if err != nil {
		return nil, err
	}
	resp, err := a.mcm.DeleteMachine(ctx, &mcm.DeleteMachineRequest{Machine: o.machine, MachineClass: o.class, Secret: o.secret})
	if resp == nil {
		return nil, failure(driver.OperationDeleteMachine, err)
	}
	return &driver.DeleteMachineResponse{LastKnownState: resp.LastKnownState}, ErrorFromMCM(err)
}

// GetMachineStatus keeps the response beside an error: with Uninitialized
// it names the VM that InitializeMachine is to finish.
func (a *adapter) GetMachineStatus(ctx context.Context, req *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	if err := driver.ContextError(ctx); err != nil {
		return nil, err
	}
	o, err := toMCM(req.Machine, req.MachineClass, req.Secret)
	if err != nil {
		return nil, err
	}
	resp, err := a.mcm.GetMachineStatus(ctx, &mcm.GetMachineStatusRequest{Machine: o.machine, MachineClass: o.class, Secret: o.secret})
	if resp == nil {
		return nil, failure(driver.OperationGetMachineStatus, err)
	}
	return &driver.GetMachineStatusResponse{
		ProviderID: resp.ProviderID, NodeName: resp.NodeName, Addresses: copyAddresses(resp.Addresses),
	}, ErrorFromMCM(err)
}

// ListMachines returns a copy of the MCM driver's provider ID to machine
// name map; MCM's fake driver, for one, hands out its own state.
func (a *adapter) ListMachines(ctx context.Context, req *driver.ListMachinesRequest) (*driver.ListMachinesResponse, error) {
	if err := driver.ContextError(ctx); err != nil {
		return nil, err
	}
	o, err := toMCM(nil, req.MachineClass, req.Secret)
	if err != nil {
		return nil, err
	}
	resp, err := a.mcm.ListMachines(ctx, &mcm.ListMachinesRequest{MachineClass: o.class, Secret: o.secret})
	if err != nil {
		return nil, ErrorFromMCM(err)
	}
	if resp == nil {
		return nil, noResponse(driver.OperationListMachines)
	}
	return &driver.ListMachinesResponse{Machines: copyMachineList(resp.MachineList)}, nil
}

// GetVolumeIDs hands the MCM driver copies of the specs, which come from
// the informer cache.
func (a *adapter) GetVolumeIDs(ctx context.Context, req *driver.GetVolumeIDsRequest) (*driver.GetVolumeIDsResponse, error) {
	if err := driver.ContextError(ctx); err != nil {
		return nil, err
	}
	resp, err := a.mcm.GetVolumeIDs(ctx, &mcm.GetVolumeIDsRequest{PVSpecs: copyPVSpecs(req.PVSpecs)})
	if err != nil {
		return nil, ErrorFromMCM(err)
	}
	if resp == nil {
		return nil, noResponse(driver.OperationGetVolumeIDs)
	}
	return &driver.GetVolumeIDsResponse{VolumeIDs: append([]string(nil), resp.VolumeIDs...)}, nil
}

// failure is the error of a call that returned no response: the driver's
// error converted, or, if it returned none either, noResponse.
func failure(op driver.Operation, err error) error {
	if err == nil {
		return noResponse(op)
	}
	return ErrorFromMCM(err)
}
