package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	corev1 "k8s.io/api/core/v1"
)

// The wire format of the simulated cloud's socket, the same as
// bench/internal/simwire's (the two sides are in different modules, with
// different Kubernetes versions, so they share the format, not code): one
// POST per operation to /<operation name>, a JSON request and a JSON
// response that carries the driver error's code and message, if any.
// Machines, classes and secrets travel as their API JSON: MCM's types and
// mcm's are wire-compatible.
type wireRequest struct {
	Machine      *v1alpha1.Machine              `json:"machine,omitempty"`
	MachineClass *v1alpha1.MachineClass         `json:"machineClass,omitempty"`
	Secret       *corev1.Secret                 `json:"secret,omitempty"`
	PVSpecs      []*corev1.PersistentVolumeSpec `json:"pvSpecs,omitempty"`
}

type wireResponse struct {
	ProviderID     string               `json:"providerID,omitempty"`
	NodeName       string               `json:"nodeName,omitempty"`
	LastKnownState string               `json:"lastKnownState,omitempty"`
	Addresses      []corev1.NodeAddress `json:"addresses,omitempty"`
	Machines       map[string]string    `json:"machines,omitempty"`
	VolumeIDs      []string             `json:"volumeIDs,omitempty"`
	// Code is the driver error's code (MCM's machine codes, the same
	// numbers as mcm's driver codes); zero when the operation succeeded.
	Code    uint32 `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// remoteDriver is MCM's driver.Driver, each operation a request to the
// simulated cloud.
type remoteDriver struct {
	client *http.Client
}

func newRemoteDriver(socket string) *remoteDriver {
	dialer := &net.Dialer{}
	return &remoteDriver{client: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socket)
		},
		// The machine controller calls the driver from up to
		// --concurrent-syncs workers at once; keep a connection for each
		// rather than dial per call.
		MaxIdleConnsPerHost: 256,
	}}}
}

// call sends one operation. The response is returned also with a driver
// error, as GetMachineStatus returns one with Uninitialized.
func (d *remoteDriver) call(ctx context.Context, op string, req wireRequest) (*wireResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, status.Error(codes.Internal, fmt.Sprintf("encoding the %s request: %v", op, err))
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://simcloud/"+op, bytes.NewReader(body))
	if err != nil {
		return nil, status.Error(codes.Internal, fmt.Sprintf("%s request: %v", op, err))
	}
	httpResp, err := d.client.Do(httpReq)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return nil, status.Error(codes.DeadlineExceeded, fmt.Sprintf("%s: %v", op, err))
		}
		return nil, status.Error(codes.Unavailable, fmt.Sprintf("simulated cloud unreachable for %s: %v", op, err))
	}
	defer httpResp.Body.Close()
	raw, err := io.ReadAll(httpResp.Body)
	if err != nil {
		return nil, status.Error(codes.Unavailable, fmt.Sprintf("reading the %s response: %v", op, err))
	}
	if httpResp.StatusCode != http.StatusOK {
		return nil, status.Error(codes.Internal, fmt.Sprintf("%s: simulated cloud answered %s: %s", op, httpResp.Status, raw))
	}
	var resp wireResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, status.Error(codes.Internal, fmt.Sprintf("decoding the %s response: %v", op, err))
	}
	if resp.Code != 0 {
		return &resp, status.Error(codes.Code(resp.Code), resp.Message)
	}
	return &resp, nil
}

func (d *remoteDriver) CreateMachine(ctx context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	resp, err := d.call(ctx, "CreateMachine", wireRequest{Machine: req.Machine, MachineClass: req.MachineClass, Secret: req.Secret})
	if resp == nil {
		return nil, err
	}
	return &driver.CreateMachineResponse{
		ProviderID: resp.ProviderID, NodeName: resp.NodeName, LastKnownState: resp.LastKnownState, Addresses: resp.Addresses,
	}, err
}

func (d *remoteDriver) InitializeMachine(ctx context.Context, req *driver.InitializeMachineRequest) (*driver.InitializeMachineResponse, error) {
	resp, err := d.call(ctx, "InitializeMachine", wireRequest{Machine: req.Machine, MachineClass: req.MachineClass, Secret: req.Secret})
	if resp == nil {
		return nil, err
	}
	return &driver.InitializeMachineResponse{ProviderID: resp.ProviderID, NodeName: resp.NodeName, Addresses: resp.Addresses}, err
}

func (d *remoteDriver) DeleteMachine(ctx context.Context, req *driver.DeleteMachineRequest) (*driver.DeleteMachineResponse, error) {
	resp, err := d.call(ctx, "DeleteMachine", wireRequest{Machine: req.Machine, MachineClass: req.MachineClass, Secret: req.Secret})
	if resp == nil {
		return nil, err
	}
	return &driver.DeleteMachineResponse{LastKnownState: resp.LastKnownState}, err
}

func (d *remoteDriver) GetMachineStatus(ctx context.Context, req *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	resp, err := d.call(ctx, "GetMachineStatus", wireRequest{Machine: req.Machine, MachineClass: req.MachineClass, Secret: req.Secret})
	if resp == nil {
		return nil, err
	}
	return &driver.GetMachineStatusResponse{ProviderID: resp.ProviderID, NodeName: resp.NodeName, Addresses: resp.Addresses}, err
}

func (d *remoteDriver) ListMachines(ctx context.Context, req *driver.ListMachinesRequest) (*driver.ListMachinesResponse, error) {
	resp, err := d.call(ctx, "ListMachines", wireRequest{MachineClass: req.MachineClass, Secret: req.Secret})
	if resp == nil {
		return nil, err
	}
	return &driver.ListMachinesResponse{MachineList: resp.Machines}, err
}

func (d *remoteDriver) GetVolumeIDs(ctx context.Context, req *driver.GetVolumeIDsRequest) (*driver.GetVolumeIDsResponse, error) {
	resp, err := d.call(ctx, "GetVolumeIDs", wireRequest{PVSpecs: req.PVSpecs})
	if resp == nil {
		return nil, err
	}
	return &driver.GetVolumeIDsResponse{VolumeIDs: resp.VolumeIDs}, err
}
