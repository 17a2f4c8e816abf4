package simwire

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"

	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

// Driver is an mcm driver.Driver whose operations are requests to the
// simulated cloud's socket.
type Driver struct {
	client *http.Client
}

// Dial returns the Driver of the cloud serving socket. It connects on the
// first operation, and again whenever a connection broke.
func Dial(socket string) *Driver {
	dialer := &net.Dialer{}
	return &Driver{client: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socket)
		},
		// The machine controller calls the driver from up to
		// --concurrent-syncs workers at once; keep a connection for each
		// rather than dial per call.
		MaxIdleConnsPerHost: 256,
	}}}
}

// ProviderName names the provider in the driver's metrics, as the
// in-process sim driver does.
func (d *Driver) ProviderName() string { return sim.ProviderName }

// call sends one operation. The response is returned also with a driver
// error, as GetMachineStatus returns one with Uninitialized.
func (d *Driver) call(ctx context.Context, op driver.Operation, req Request) (*Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, driver.Errorf(driver.Internal, "encoding the %s request: %w", op, err)
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://simcloud/"+string(op), bytes.NewReader(body))
	if err != nil {
		return nil, driver.Errorf(driver.Internal, "%s request: %w", op, err)
	}
	httpResp, err := d.client.Do(httpReq)
	if err != nil {
		if cerr := driver.ContextError(ctx); cerr != nil {
			return nil, cerr // the caller gave up
		}
		return nil, driver.Errorf(driver.Unavailable, "simulated cloud unreachable for %s: %w", op, err)
	}
	defer httpResp.Body.Close()
	raw, err := io.ReadAll(httpResp.Body)
	if err != nil {
		return nil, driver.Errorf(driver.Unavailable, "reading the %s response: %w", op, err)
	}
	if httpResp.StatusCode != http.StatusOK {
		return nil, driver.Errorf(driver.Internal, "%s: simulated cloud answered %s: %s", op, httpResp.Status, raw)
	}
	var resp Response
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, driver.Errorf(driver.Internal, "decoding the %s response: %w", op, err)
	}
	if resp.Code != driver.OK {
		return &resp, driver.NewError(resp.Code, resp.Message)
	}
	return &resp, nil
}

func (d *Driver) CreateMachine(ctx context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	resp, err := d.call(ctx, driver.OperationCreateMachine, Request{Machine: req.Machine, MachineClass: req.MachineClass, Secret: req.Secret})
	if resp == nil {
		return nil, err
	}
	return &driver.CreateMachineResponse{
		ProviderID: resp.ProviderID, NodeName: resp.NodeName, LastKnownState: resp.LastKnownState, Addresses: resp.Addresses,
	}, err
}

func (d *Driver) InitializeMachine(ctx context.Context, req *driver.InitializeMachineRequest) (*driver.InitializeMachineResponse, error) {
	resp, err := d.call(ctx, driver.OperationInitializeMachine, Request{Machine: req.Machine, MachineClass: req.MachineClass, Secret: req.Secret})
	if resp == nil {
		return nil, err
	}
	return &driver.InitializeMachineResponse{ProviderID: resp.ProviderID, NodeName: resp.NodeName, Addresses: resp.Addresses}, err
}

func (d *Driver) DeleteMachine(ctx context.Context, req *driver.DeleteMachineRequest) (*driver.DeleteMachineResponse, error) {
	resp, err := d.call(ctx, driver.OperationDeleteMachine, Request{Machine: req.Machine, MachineClass: req.MachineClass, Secret: req.Secret})
	if resp == nil {
		return nil, err
	}
	return &driver.DeleteMachineResponse{LastKnownState: resp.LastKnownState}, err
}

func (d *Driver) GetMachineStatus(ctx context.Context, req *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	resp, err := d.call(ctx, driver.OperationGetMachineStatus, Request{Machine: req.Machine, MachineClass: req.MachineClass, Secret: req.Secret})
	if resp == nil {
		return nil, err
	}
	return &driver.GetMachineStatusResponse{ProviderID: resp.ProviderID, NodeName: resp.NodeName, Addresses: resp.Addresses}, err
}

func (d *Driver) ListMachines(ctx context.Context, req *driver.ListMachinesRequest) (*driver.ListMachinesResponse, error) {
	resp, err := d.call(ctx, driver.OperationListMachines, Request{MachineClass: req.MachineClass, Secret: req.Secret})
	if resp == nil {
		return nil, err
	}
	return &driver.ListMachinesResponse{Machines: resp.Machines}, err
}

func (d *Driver) GetVolumeIDs(ctx context.Context, req *driver.GetVolumeIDsRequest) (*driver.GetVolumeIDsResponse, error) {
	resp, err := d.call(ctx, driver.OperationGetVolumeIDs, Request{PVSpecs: req.PVSpecs})
	if resp == nil {
		return nil, err
	}
	return &driver.GetVolumeIDsResponse{VolumeIDs: resp.VolumeIDs}, err
}
