// The Cloud's VMs seen from outside the driver: snapshots (for tests and
// the simulated kubelet), the leaked ones, and VMs added, removed, stopped
// and started behind the driver's back, as a cloud's console would.

package sim

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

// VMs returns a snapshot of every VM, including Terminating ones, ordered
// by creation time and then provider ID.
func (c *Cloud) VMs() []VM {
	out := c.snapshots((*vm).snapshot)
	slices.SortFunc(out, func(a, b VM) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ProviderID, b.ProviderID))
	})
	return out
}

// sharedVMs is VMs for this package's Kubelet: the VMs' maps and slices
// are the cloud's own instead of copies (a VM's never change once it
// exists), UserData is left out and the order is any. Copying thousands of
// VMs would be most of the cost of a kubelet sync while machines come and
// go. Callers must not modify what it returns.
func (c *Cloud) sharedVMs() []VM { return c.snapshots((*vm).sharedSnapshot) }

// snapshots takes snap of every VM, in any order.
func (c *Cloud) snapshots(snap func(*vm, time.Time) VM) []VM {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.pruneLocked(now)
	out := make([]VM, 0, len(c.vms))
	for _, v := range c.vms {
		out = append(out, snap(v, now))
	}
	return out
}

// VM returns a snapshot of the VM with the provider ID.
func (c *Cloud) VM(providerID string) (VM, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.pruneLocked(now)
	v, ok := c.vms[providerID]
	if !ok {
		return VM{}, false
	}
	return v.snapshot(now), true
}

// LeakedVMs returns the VMs that no machine accounts for, given the machines
// that exist. A VM that is not Terminating is leaked if
//
//   - no machine has the VM's MachineName, or
//   - that machine's spec.providerID is set and names another VM.
//
// This is the orphan definition of MCM's orphan collection: a leaked VM of
// a class is one it would delete, given that class's ListMachines. A
// machine without a provider ID yet (still being created) accounts for
// every VM tagged with its name. Machines are matched by name only, and
// VMs of every class count: a VM of a class or cluster that the machines
// do not belong to is leaked here, although orphan collection of their
// classes never sees it; filter by VM.Class to leave such VMs out.
func (c *Cloud) LeakedVMs(machines []*v1alpha1.Machine) []VM {
	byName := make(map[string]*v1alpha1.Machine, len(machines))
	for _, m := range machines {
		byName[m.Name] = m
	}
	var leaked []VM
	for _, v := range c.VMs() {
		if v.State == VMTerminating {
			continue
		}
		m, ok := byName[v.MachineName]
		if !ok || (m.Spec.ProviderID != "" && m.Spec.ProviderID != v.ProviderID) {
			leaked = append(leaked, v)
		}
	}
	return leaked
}

// AddVM creates a Running VM behind the driver's back, ignoring quotas, as
// if someone had created it in the cloud's console or an earlier create had
// been lost: an orphan if no machine has spec.MachineName, a duplicate if
// one already has a VM. Only a VM with the class's tags (spec.Class; see
// VMSpecFor) is listed by that class's ListMachines. With a state file, an
// error saving it is returned, and the VM exists nevertheless.
func (c *Cloud) AddVM(spec VMSpec) (VM, error) {
	if spec.MachineName == "" || spec.Zone == "" || spec.InstanceType == "" {
		return VM{}, fmt.Errorf("sim: AddVM needs MachineName, Zone and InstanceType, got %+v", spec)
	}
	capacity := spec.Capacity.DeepCopy()
	if len(capacity) == 0 {
		capacity = c.opts.InstanceTypes[spec.InstanceType].DeepCopy()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.pruneLocked(now)
	v := c.newVMLocked(now, spec.MachineName, spec.Zone, spec.InstanceType, spec.Class)
	v.capacity = capacity
	v.labels = maps.Clone(spec.Labels)
	v.bootStartedAt, v.bootedAt = now, now
	v.deleteDelay = c.opts.DeleteDelay
	v.injected = true
	c.notifyLocked()
	return v.snapshot(now), c.saveLocked()
}

// RemoveVM makes a VM disappear at once, without Terminating, as if it had
// been deleted in the console or lost by the cloud. It reports whether the
// VM existed. With a state file, a failure to save it is not reported: the
// next change saves the removal along with its own.
func (c *Cloud) RemoveVM(providerID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pruneLocked(c.clock.Now())
	if _, ok := c.vms[providerID]; !ok {
		return false
	}
	delete(c.vms, providerID)
	c.notifyLocked()
	_ = c.saveLocked() // best effort: RemoveVM has no error to return
	return true
}

// StopVM powers a VM off, as a crash would: it stays Stopped, and known to
// the driver, until StartVM. Stopping a Stopped VM does nothing. With a
// state file, an error saving it is returned, and the VM is stopped
// nevertheless.
func (c *Cloud) StopVM(providerID string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	v, err := c.mutableVMLocked(now, providerID)
	if err != nil || v.stopped {
		return err
	}
	v.stopped, v.stoppedAt = true, now
	c.notifyLocked()
	return c.saveLocked()
}

// StartVM powers a Stopped VM on: it boots again (Provisioning for the boot
// delay, then Running). Starting a VM that is not Stopped does nothing.
// With a state file, an error saving it is returned, and the VM boots
// nevertheless.
func (c *Cloud) StartVM(providerID string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	v, err := c.mutableVMLocked(now, providerID)
	if err != nil || !v.stopped {
		return err
	}
	v.stopped = false
	v.bootStartedAt = now
	v.bootedAt = now.Add(c.delayLocked(c.opts.BootDelay, c.opts.BootJitter))
	c.notifyLocked()
	return c.saveLocked()
}

func (c *Cloud) mutableVMLocked(now time.Time, providerID string) (*vm, error) {
	c.pruneLocked(now)
	v, ok := c.vms[providerID]
	switch {
	case !ok:
		return nil, driver.Errorf(driver.NotFound, "sim: no VM %s", providerID)
	case v.deleting:
		return nil, driver.Errorf(driver.FailedPrecondition, "sim: VM %s is terminating", providerID)
	}
	return v, nil
}
