package mcmdriver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	mcmv1 "github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	mcm "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	corev1 "k8s.io/api/core/v1"
)

// memCSIDriver names the CSI driver of memCloud's volumes.
const memCSIDriver = "disk.memcloud.example"

// memSpec is memCloud's providerSpec.
type memSpec struct {
	Zone string `json:"zone"`
	// Capacity is the most VMs the class may have; 0 means no limit.
	Capacity int `json:"capacity,omitempty"`
}

// memVM is one VM of memCloud.
type memVM struct {
	providerID, machine, class string
	initialized                bool
}

// memCloud is a driver written against MCM's interface, as a provider
// project writes one, over an in-memory cloud that keeps real state: VMs
// created, found by provider ID or machine name, listed per class and
// deleted, with quota (ResourceExhausted), outages (Unavailable) and
// InitializeMachine. Errors are MCM status errors, the way providers
// return them.
type memCloud struct {
	mu     sync.Mutex
	vms    map[string]*memVM // by provider ID
	nextID int
	// down makes every call fail with Unavailable, as an unreachable API.
	down atomic.Bool
}

func newMemCloud() *memCloud { return &memCloud{vms: map[string]*memVM{}} }

var _ mcm.Driver = (*memCloud)(nil)

func classKey(c *mcmv1.MachineClass) string { return c.Namespace + "/" + c.Name }

func decodeSpec(c *mcmv1.MachineClass) (memSpec, error) {
	var spec memSpec
	dec := json.NewDecoder(bytes.NewReader(c.ProviderSpec.Raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return spec, status.Error(codes.InvalidArgument, fmt.Sprintf("providerSpec of %s: %v", classKey(c), err))
	}
	if spec.Zone == "" {
		return spec, status.Error(codes.InvalidArgument, "providerSpec of "+classKey(c)+": zone is required")
	}
	return spec, nil
}

// find returns the VMs of machine: the one named by its provider ID, or
// those created for its name.
func (c *memCloud) find(m *mcmv1.Machine, class string) []*memVM {
	if m.Spec.ProviderID != "" {
		if vm := c.vms[m.Spec.ProviderID]; vm != nil {
			return []*memVM{vm}
		}
		return nil
	}
	var found []*memVM
	for _, vm := range c.vms {
		if vm.machine == m.Name && vm.class == class {
			found = append(found, vm)
		}
	}
	return found
}

func (c *memCloud) up() error {
	if c.down.Load() {
		return status.Error(codes.Unavailable, "memcloud API unreachable")
	}
	return nil
}

func (c *memCloud) CreateMachine(_ context.Context, req *mcm.CreateMachineRequest) (*mcm.CreateMachineResponse, error) {
	if err := c.up(); err != nil {
		return nil, err
	}
	spec, err := decodeSpec(req.MachineClass)
	if err != nil {
		return nil, err
	}
	if len(req.Secret.Data["userData"]) == 0 {
		return nil, status.Error(codes.InvalidArgument, "secret has no userData")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	class := classKey(req.MachineClass)
	if vms := c.find(req.Machine, class); len(vms) > 0 {
		return &mcm.CreateMachineResponse{ProviderID: vms[0].providerID, NodeName: vms[0].machine, LastKnownState: "found"}, nil
	}
	if spec.Capacity > 0 && c.count(class) >= spec.Capacity {
		return nil, status.Error(codes.ResourceExhausted, fmt.Sprintf("zone %s has no capacity left for class %s", spec.Zone, class))
	}
	c.nextID++
	vm := &memVM{providerID: fmt.Sprintf("memcloud:///%s/vm-%d", spec.Zone, c.nextID), machine: req.Machine.Name, class: class}
	c.vms[vm.providerID] = vm
	return &mcm.CreateMachineResponse{
		ProviderID: vm.providerID, NodeName: vm.machine, LastKnownState: "created",
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.0.%d", c.nextID)}},
	}, nil
}

func (c *memCloud) count(class string) int {
	n := 0
	for _, vm := range c.vms {
		if vm.class == class {
			n++
		}
	}
	return n
}

func (c *memCloud) InitializeMachine(_ context.Context, req *mcm.InitializeMachineRequest) (*mcm.InitializeMachineResponse, error) {
	if err := c.up(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vms := c.find(req.Machine, classKey(req.MachineClass))
	if len(vms) != 1 {
		return nil, status.Error(codes.NotFound, "no VM to initialize for "+req.Machine.Name)
	}
	vms[0].initialized = true
	return &mcm.InitializeMachineResponse{ProviderID: vms[0].providerID, NodeName: vms[0].machine}, nil
}

func (c *memCloud) DeleteMachine(_ context.Context, req *mcm.DeleteMachineRequest) (*mcm.DeleteMachineResponse, error) {
	if err := c.up(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vms := c.find(req.Machine, classKey(req.MachineClass))
	if len(vms) > 1 {
		return nil, status.Error(codes.OutOfRange, fmt.Sprintf("%d VMs for machine %s", len(vms), req.Machine.Name))
	}
	for _, vm := range vms {
		delete(c.vms, vm.providerID)
	}
	return &mcm.DeleteMachineResponse{LastKnownState: "deleted"}, nil
}

func (c *memCloud) GetMachineStatus(_ context.Context, req *mcm.GetMachineStatusRequest) (*mcm.GetMachineStatusResponse, error) {
	if err := c.up(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vms := c.find(req.Machine, classKey(req.MachineClass))
	switch {
	case len(vms) == 0:
		return nil, status.Error(codes.NotFound, "no VM for machine "+req.Machine.Name)
	case len(vms) > 1:
		return nil, status.Error(codes.OutOfRange, fmt.Sprintf("%d VMs for machine %s", len(vms), req.Machine.Name))
	}
	resp := &mcm.GetMachineStatusResponse{ProviderID: vms[0].providerID, NodeName: vms[0].machine}
	if !vms[0].initialized {
		return resp, status.Error(codes.Uninitialized, "VM "+vms[0].providerID+" is not initialized")
	}
	return resp, nil
}

func (c *memCloud) ListMachines(_ context.Context, req *mcm.ListMachinesRequest) (*mcm.ListMachinesResponse, error) {
	if err := c.up(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	list := map[string]string{}
	for _, vm := range c.vms {
		if vm.class == classKey(req.MachineClass) {
			list[vm.providerID] = vm.machine
		}
	}
	return &mcm.ListMachinesResponse{MachineList: list}, nil
}

func (c *memCloud) GetVolumeIDs(_ context.Context, req *mcm.GetVolumeIDsRequest) (*mcm.GetVolumeIDsResponse, error) {
	var ids []string
	for _, spec := range req.PVSpecs {
		if spec.CSI != nil && spec.CSI.Driver == memCSIDriver {
			ids = append(ids, spec.CSI.VolumeHandle)
		}
	}
	return &mcm.GetVolumeIDsResponse{VolumeIDs: ids}, nil
}
