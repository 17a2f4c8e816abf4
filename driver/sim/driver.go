package sim

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

// cloudDriver is the driver.Driver of a Cloud. It is a separate type so
// that the test handle's methods do not mix with the driver's.
type cloudDriver struct {
	cloud *Cloud
}

var _ driver.Driver = (*cloudDriver)(nil)

// ProviderName names the provider in the driver's metrics (see
// driver.ProviderNamer).
func (d *cloudDriver) ProviderName() string { return ProviderName }

// machineName returns the name of the request's machine, "" if it has none.
func machineName(m *v1alpha1.Machine) string {
	if m == nil {
		return ""
	}
	return m.Name
}

// requireName reports a request without a machine name.
func requireName(name string) error {
	if name == "" {
		return driver.NewError(driver.InvalidArgument, "request has no machine name")
	}
	return nil
}

// admitted is what every operation establishes before it touches VMs.
type admitted struct {
	fate     call
	spec     ProviderSpec
	tags     ClassTags // of the request's class
	userData []byte
}

// admit starts a call of op for the named machine (an empty name for
// ListMachines, which needs none) and checks its inputs in the order a
// cloud API would: faults and the context first, then the machine name,
// the providerSpec and the credentials (and user data if needUserData).
func (c *Cloud) admit(ctx context.Context, op driver.Operation, name string, needName bool, class *v1alpha1.MachineClass, secret *corev1.Secret, needUserData bool) (admitted, error) {
	fate, err := c.begin(ctx, op, name)
	if err != nil {
		return admitted{}, err
	}
	if needName {
		if err := requireName(name); err != nil {
			return admitted{}, err
		}
	}
	spec, err := c.classSpec(class)
	if err != nil {
		return admitted{}, err
	}
	userData, err := c.checkCredentials(secret, needUserData)
	if err != nil {
		return admitted{}, err
	}
	return admitted{fate: fate, spec: spec, tags: tagsOf(class, spec), userData: userData}, nil
}

func (d *cloudDriver) CreateMachine(ctx context.Context, req *driver.CreateMachineRequest) (_ *driver.CreateMachineResponse, err error) {
	defer d.cloud.recordAPICall(d.cloud.clock.Now(), &err)
	name := machineName(req.Machine)
	c := d.cloud
	a, err := c.admit(ctx, driver.OperationCreateMachine, name, true, req.MachineClass, req.Secret, true)
	if err != nil {
		return nil, err
	}
	resp, err := c.create(ctx, name, a.spec, a.tags, a.userData)
	return finish(a.fate, resp, err)
}

func (c *Cloud) create(ctx context.Context, name string, spec ProviderSpec, tags ClassTags, userData []byte) (*driver.CreateMachineResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.pruneLocked(now)

	switch live := c.liveVMsLocked(name); len(live) {
	case 0: // no VM yet: create it below
	case 1:
		v := live[0]
		if v.zone != spec.Zone || v.instanceType != spec.InstanceType {
			return nil, driver.Errorf(driver.AlreadyExists,
				"machine %s already has VM %s (zone %s, instance type %s), which does not match zone %s, instance type %s",
				name, v.id, v.zone, v.instanceType, spec.Zone, spec.InstanceType)
		}
		return savedLocked(c, createResponse(v)) // idempotent: the machine's VM exists
	default:
		return nil, outOfRange(name, live)
	}

	if err := c.checkQuotaLocked(spec.Zone, spec.Capacity); err != nil {
		return nil, err
	}
	v := c.newVMLocked(now, name, spec.Zone, spec.InstanceType, tags)
	v.capacity = spec.Capacity.DeepCopy()
	v.labels = spec.Labels
	v.userData = slices.Clone(userData)
	v.requireInit = spec.RequireInitialization
	v.kubeletVersion = spec.KubeletVersion
	v.inPlace = spec.InPlaceUpdate.deepCopy()
	v.deleteDelay = durationOr(spec.DeleteDelay, c.opts.DeleteDelay)
	v.bootStartedAt = now
	v.bootedAt = now.Add(c.delayLocked(durationOr(spec.BootDelay, c.opts.BootDelay), durationOr(spec.BootJitter, c.opts.BootJitter)))
	c.notifyLocked()
	logr.FromContextOrDiscard(ctx).V(4).Info("sim: created VM", "machine", name, "providerID", v.id, "class", tags, "bootsAt", v.bootedAt)
	return savedLocked(c, createResponse(v))
}

func createResponse(v *vm) *driver.CreateMachineResponse {
	return &driver.CreateMachineResponse{ProviderID: v.id, NodeName: v.name, Addresses: slices.Clone(v.addresses)}
}

func outOfRange(name string, vms []*vm) error {
	ids := make([]string, len(vms))
	for i, v := range vms {
		ids[i] = v.id
	}
	return driver.Errorf(driver.OutOfRange, "%d VMs exist for machine %s: %s", len(vms), name, strings.Join(ids, ", "))
}

func (d *cloudDriver) InitializeMachine(ctx context.Context, req *driver.InitializeMachineRequest) (_ *driver.InitializeMachineResponse, err error) {
	defer d.cloud.recordAPICall(d.cloud.clock.Now(), &err)
	name := machineName(req.Machine)
	c := d.cloud
	a, err := c.admit(ctx, driver.OperationInitializeMachine, name, true, req.MachineClass, req.Secret, false)
	if err != nil {
		return nil, err
	}
	resp, err := c.initialize(name)
	return finish(a.fate, resp, err)
}

func (c *Cloud) initialize(name string) (*driver.InitializeMachineResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pruneLocked(c.clock.Now())
	v, err := c.onlyVMLocked(name)
	if err != nil {
		return nil, err
	}
	if v.requireInit && !v.initialized {
		v.initialized = true
		c.notifyLocked()
	}
	return savedLocked(c, &driver.InitializeMachineResponse{ProviderID: v.id, NodeName: v.name, Addresses: slices.Clone(v.addresses)})
}

// onlyVMLocked returns the machine's single VM, NotFound or OutOfRange.
func (c *Cloud) onlyVMLocked(name string) (*vm, error) {
	switch live := c.liveVMsLocked(name); len(live) {
	case 0:
		return nil, driver.Errorf(driver.NotFound, "no VM for machine %s", name)
	case 1:
		return live[0], nil
	default:
		return nil, outOfRange(name, live)
	}
}

func (d *cloudDriver) DeleteMachine(ctx context.Context, req *driver.DeleteMachineRequest) (_ *driver.DeleteMachineResponse, err error) {
	defer d.cloud.recordAPICall(d.cloud.clock.Now(), &err)
	name := machineName(req.Machine)
	c := d.cloud
	a, err := c.admit(ctx, driver.OperationDeleteMachine, name, true, req.MachineClass, req.Secret, false)
	if err != nil {
		return nil, err
	}
	resp, err := c.delete(ctx, name, req.Machine.Spec.ProviderID)
	return finish(a.fate, resp, err)
}

func (c *Cloud) delete(ctx context.Context, name, providerID string) (*driver.DeleteMachineResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.pruneLocked(now)

	var target *vm
	if providerID != "" {
		// The caller names the VM: act on that one only. Falling back to a
		// lookup by name would let orphan collection, which deletes a
		// surplus VM by provider ID, hit the machine's legitimate VM once
		// the surplus one is gone.
		v, ok := c.vms[providerID]
		switch {
		case !ok || !v.live():
			return savedLocked(c, &driver.DeleteMachineResponse{})
		case v.machineName != name:
			return nil, driver.Errorf(driver.InvalidArgument,
				"VM %s belongs to machine %s, not %s", providerID, v.machineName, name)
		}
		target = v
	} else {
		switch live := c.liveVMsLocked(name); len(live) {
		case 0:
			return savedLocked(c, &driver.DeleteMachineResponse{}) // nothing to delete is success
		case 1:
			target = live[0]
		default:
			return nil, outOfRange(name, live)
		}
	}

	target.deleting = true
	target.deleteRequestedAt = now
	target.goneAt = now.Add(c.delayLocked(target.deleteDelay, c.opts.DeleteJitter))
	c.notifyLocked()
	c.pruneLocked(now) // a zero deletion delay removes the VM right away
	logr.FromContextOrDiscard(ctx).V(4).Info("sim: deleting VM", "machine", name, "providerID", target.id, "goneAt", target.goneAt)
	return savedLocked(c, &driver.DeleteMachineResponse{})
}

func (d *cloudDriver) GetMachineStatus(ctx context.Context, req *driver.GetMachineStatusRequest) (_ *driver.GetMachineStatusResponse, err error) {
	defer d.cloud.recordAPICall(d.cloud.clock.Now(), &err)
	name := machineName(req.Machine)
	c := d.cloud
	a, err := c.admit(ctx, driver.OperationGetMachineStatus, name, true, req.MachineClass, req.Secret, false)
	if err != nil {
		return nil, err
	}
	resp, err := c.status(name)
	if a.fate.afterEffect {
		return nil, a.fate.err
	}
	return resp, err
}

func (c *Cloud) status(name string) (*driver.GetMachineStatusResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pruneLocked(c.clock.Now())
	v, err := c.onlyVMLocked(name)
	if err != nil {
		return nil, err
	}
	resp, err := savedLocked(c, &driver.GetMachineStatusResponse{ProviderID: v.id, NodeName: v.name, Addresses: slices.Clone(v.addresses)})
	if err != nil {
		return nil, err
	}
	if v.requireInit && !v.initialized {
		// The contract: the response comes with the error, so that the
		// controller can initialize without another lookup.
		return resp, driver.Errorf(driver.Uninitialized, "VM %s waits for InitializeMachine", v.id)
	}
	return resp, nil
}

func (d *cloudDriver) ListMachines(ctx context.Context, req *driver.ListMachinesRequest) (_ *driver.ListMachinesResponse, err error) {
	defer d.cloud.recordAPICall(d.cloud.clock.Now(), &err)
	c := d.cloud
	a, err := c.admit(ctx, driver.OperationListMachines, "", false, req.MachineClass, req.Secret, false)
	if err != nil {
		return nil, err
	}
	resp, err := c.list(a.tags)
	return finish(a.fate, resp, err)
}

// list returns the live VMs tagged with the class's tags, and no other:
// orphan collection deletes what it lists that no Machine claims, so a VM
// of another class, namespace or cluster listed here would be deleted.
func (c *Cloud) list(tags ClassTags) (*driver.ListMachinesResponse, error) {
	if tags.IsZero() {
		// Such a class would list the VMs added without tags, which belong
		// to no class.
		return nil, driver.NewError(driver.InvalidArgument, "MachineClass has no name: its VMs cannot be told from untagged ones")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pruneLocked(c.clock.Now())
	machines := map[string]string{}
	for id, v := range c.vms {
		if v.live() && v.class == tags {
			machines[id] = v.machineName
		}
	}
	return savedLocked(c, &driver.ListMachinesResponse{Machines: machines})
}

func (d *cloudDriver) GetVolumeIDs(ctx context.Context, req *driver.GetVolumeIDsRequest) (*driver.GetVolumeIDsResponse, error) {
	fate, err := d.cloud.begin(ctx, driver.OperationGetVolumeIDs, "")
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, pv := range req.PVSpecs {
		if pv != nil && pv.CSI != nil && pv.CSI.Driver == CSIDriverName && pv.CSI.VolumeHandle != "" {
			ids = append(ids, pv.CSI.VolumeHandle)
		}
	}
	return finish(fate, &driver.GetVolumeIDsResponse{VolumeIDs: ids}, nil)
}

func durationOr(d *metav1.Duration, fallback time.Duration) time.Duration {
	if d == nil {
		return fallback
	}
	return d.Duration
}
