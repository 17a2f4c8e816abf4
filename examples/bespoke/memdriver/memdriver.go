// Package memdriver is a tiny in-memory cloud behind driver.Driver, written
// for the bespoke-manager example: the smallest driver that keeps the whole
// contract of package driver, and passes drivertest.Run.
//
// A VM is a map entry keyed by machine name, which is what makes
// CreateMachine idempotent (a real provider tags its VMs with the machine
// name for the same reason). Provider IDs are memory:///<machine>/<serial>
// and never reused, so a VM recreated under the same machine name is
// recognisably another VM. Each VM is also tagged with the namespace and
// name of its MachineClass, and ListMachines of a class returns the VMs
// with its tag only: orphan collection deletes what a class lists and no
// Machine claims, so another class's VMs must not be among them. A
// MachineClass's providerSpec is
//
//	{"flavor": "small"}
//
// decoded strictly: a missing flavor, an unknown field or a value of the
// wrong type is InvalidArgument. VMs have no kubelet, so no Node ever
// joins: run the machine controller without a target cluster, where a
// created machine goes straight to Available.
package memdriver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

// ProviderName is the MachineClass provider the driver serves; an empty
// provider is accepted too.
const ProviderName = "memory"

// ProviderSpec is the schema of a memory MachineClass's providerSpec.
type ProviderSpec struct {
	// Flavor is the size of the VMs. Required.
	Flavor string `json:"flavor"`
}

// Options configure a Driver. The zero value is an instant cloud without
// quota.
type Options struct {
	// Latency delays every operation, as a cloud API round trip would. An
	// operation whose context ends while it waits returns Canceled or
	// DeadlineExceeded and changes nothing.
	Latency time.Duration
	// MaxVMs limits how many VMs exist at once; CreateMachine beyond it is
	// ResourceExhausted. Zero means no limit.
	MaxVMs int
}

// VM is a snapshot of one in-memory VM.
type VM struct {
	MachineName string
	// Class is the namespace/name of the MachineClass the VM was created
	// with: the tag ListMachines goes by.
	Class      string
	ProviderID string
	Flavor     string
	Address    string
	UserData   []byte
	Created    time.Time
}

// Driver is the in-memory cloud and its driver. It is safe for concurrent
// use.
type Driver struct {
	// The optional operations (InitializeMachine, ListMachines,
	// GetVolumeIDs) return Unimplemented unless overridden; this driver
	// overrides ListMachines only.
	driver.UnimplementedOptional

	opts Options

	mu     sync.Mutex
	vms    map[string]*VM // by machine name
	serial int            // last provider ID serial handed out
}

var _ driver.Driver = (*Driver)(nil)

// New returns an empty in-memory cloud.
func New(opts Options) *Driver {
	return &Driver{opts: opts, vms: map[string]*VM{}}
}

// VMs returns a snapshot of the VMs, sorted by machine name.
func (d *Driver) VMs() []VM {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]VM, 0, len(d.vms))
	for _, vm := range d.vms {
		c := *vm
		c.UserData = slices.Clone(vm.UserData)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b VM) int { return strings.Compare(a.MachineName, b.MachineName) })
	return out
}

// CreateMachine returns the machine's VM if it has one of the requested
// flavor (AlreadyExists if of another), and creates it otherwise.
func (d *Driver) CreateMachine(ctx context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	// The round trip happens before anything changes: a create whose
	// context ends in flight creates nothing.
	if err := d.roundTrip(ctx); err != nil {
		return nil, err
	}
	spec, err := decodeClass(req.MachineClass)
	if err != nil {
		return nil, err
	}
	if req.Secret == nil || len(req.Secret.Data[v1alpha1.UserDataKey]) == 0 {
		return nil, driver.Errorf(driver.InvalidArgument, "secret has no %s", v1alpha1.UserDataKey)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	name := req.Machine.Name
	if vm, ok := d.vms[name]; ok {
		if vm.Flavor != spec.Flavor {
			return nil, driver.Errorf(driver.AlreadyExists, "machine %s has VM %s of flavor %q, not %q", name, vm.ProviderID, vm.Flavor, spec.Flavor)
		}
		return createResponse(vm), nil // idempotent: the same single VM
	}
	if d.opts.MaxVMs > 0 && len(d.vms) >= d.opts.MaxVMs {
		return nil, driver.Errorf(driver.ResourceExhausted, "quota of %d VMs reached", d.opts.MaxVMs)
	}
	d.serial++
	vm := &VM{
		MachineName: name,
		Class:       classTag(req.MachineClass),
		ProviderID:  fmt.Sprintf("memory:///%s/%d", name, d.serial),
		Flavor:      spec.Flavor,
		Address:     addressOf(d.serial),
		UserData:    slices.Clone(req.Secret.Data[v1alpha1.UserDataKey]), // requests are read-only: copy
		Created:     time.Now(),
	}
	d.vms[name] = vm
	return createResponse(vm), nil
}

// GetMachineStatus reports the machine's VM, NotFound if it has none.
func (d *Driver) GetMachineStatus(ctx context.Context, req *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	if err := d.roundTrip(ctx); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	vm, ok := d.vms[req.Machine.Name]
	if !ok {
		return nil, driver.Errorf(driver.NotFound, "machine %s has no VM", req.Machine.Name)
	}
	r := createResponse(vm)
	return &driver.GetMachineStatusResponse{ProviderID: r.ProviderID, NodeName: r.NodeName, Addresses: r.Addresses}, nil
}

// DeleteMachine deletes the machine's VM; with spec.providerID set, only
// if it is that VM. No VM to delete is success.
func (d *Driver) DeleteMachine(ctx context.Context, req *driver.DeleteMachineRequest) (*driver.DeleteMachineResponse, error) {
	if err := d.roundTrip(ctx); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	vm, ok := d.vms[req.Machine.Name]
	if !ok {
		return &driver.DeleteMachineResponse{}, nil
	}
	if id := req.Machine.Spec.ProviderID; id != "" && id != vm.ProviderID {
		// That VM is gone already; the machine's current one is not ours
		// to delete.
		return &driver.DeleteMachineResponse{}, nil
	}
	delete(d.vms, req.Machine.Name)
	return &driver.DeleteMachineResponse{LastKnownState: "deleted " + vm.ProviderID}, nil
}

// ListMachines lists the VMs created with the request's class, by
// provider ID. Several classes share the cloud, and orphan collection
// deletes every VM a class lists that no Machine claims: VMs of other
// classes are not the class's to list.
func (d *Driver) ListMachines(ctx context.Context, req *driver.ListMachinesRequest) (*driver.ListMachinesResponse, error) {
	if err := d.roundTrip(ctx); err != nil {
		return nil, err
	}
	if req.MachineClass == nil {
		return nil, driver.NewError(driver.InvalidArgument, "no MachineClass")
	}
	tag := classTag(req.MachineClass)
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]string{}
	for name, vm := range d.vms {
		if vm.Class == tag {
			out[vm.ProviderID] = name
		}
	}
	return &driver.ListMachinesResponse{Machines: out}, nil
}

// classTag is what a VM carries of its class. Namespace and name, not the
// UID: a class created again under its name still finds its VMs, as with
// a real cloud's tags.
func classTag(class *v1alpha1.MachineClass) string {
	return class.Namespace + "/" + class.Name
}

// roundTrip honours the context and waits for Options.Latency.
func (d *Driver) roundTrip(ctx context.Context) error {
	if err := driver.ContextError(ctx); err != nil {
		return err
	}
	if d.opts.Latency <= 0 {
		return nil
	}
	t := time.NewTimer(d.opts.Latency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return driver.ContextError(ctx)
	case <-t.C:
		return nil
	}
}

// decodeClass checks the class's provider and decodes its providerSpec
// strictly.
func decodeClass(class *v1alpha1.MachineClass) (ProviderSpec, error) {
	var spec ProviderSpec
	if class == nil {
		return spec, driver.NewError(driver.InvalidArgument, "no MachineClass")
	}
	if class.Provider != "" && class.Provider != ProviderName {
		return spec, driver.Errorf(driver.InvalidArgument, "MachineClass %s is for provider %q, not %q", class.Name, class.Provider, ProviderName)
	}
	dec := json.NewDecoder(bytes.NewReader(class.ProviderSpec.Raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return spec, driver.Errorf(driver.InvalidArgument, "providerSpec of MachineClass %s: %w", class.Name, err)
	}
	if dec.More() {
		return spec, driver.Errorf(driver.InvalidArgument, "providerSpec of MachineClass %s: trailing data", class.Name)
	}
	if spec.Flavor == "" {
		return spec, driver.Errorf(driver.InvalidArgument, "providerSpec of MachineClass %s: flavor is required", class.Name)
	}
	return spec, nil
}

func createResponse(vm *VM) *driver.CreateMachineResponse {
	return &driver.CreateMachineResponse{
		ProviderID: vm.ProviderID,
		NodeName:   vm.MachineName,
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: vm.Address},
			{Type: corev1.NodeHostName, Address: vm.MachineName},
		},
	}
}

// addressOf gives VM number n an address in 10.0.0.0/8.
func addressOf(n int) string {
	a := netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)})
	return a.String()
}
