// The cloud's side of an in-place update: what the node agent changes in
// its record of a VM.

package sim

import (
	"fmt"
	"maps"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/mcmkit/mcm/driver"
)

// updateRefusedError is an in-place update the VM cannot take: the new
// class asks for what only a new VM has. The agent reports it as the
// update's failure, as gardener-node-agent reports an update it cannot
// apply.
type updateRefusedError struct{ reason string }

func (e *updateRefusedError) Error() string { return e.reason }

// updateInPlace makes the VM providerID one of class to, whose
// providerSpec (checked, capacity defaulted) is spec: its kubelet
// reports spec's version from now on, and it carries spec's labels and
// agent block. The VM keeps its provider ID, address, zone, instance
// type and its class tags, by which ListMachines and so orphan collection
// go (the machine keeps naming its old class too). A class of another
// zone, instance type or capacity is refused with *updateRefusedError:
// those take a new VM. The change is saved to the state file; an error
// saving it is returned, and the change is made nevertheless (the
// agent's retry saves it).
func (c *Cloud) updateInPlace(providerID string, to ClassTags, spec ProviderSpec) (VM, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	v, err := c.mutableVMLocked(now, providerID)
	if err != nil {
		return VM{}, err
	}
	if v.stopped {
		return VM{}, driver.Errorf(driver.FailedPrecondition, "sim: VM %s is stopped: no agent runs on it", providerID)
	}
	if reason := immutableChanges(v, spec); reason != "" {
		return VM{}, &updateRefusedError{reason: fmt.Sprintf("an in-place update cannot change %s; the class %s/%s needs a new VM", reason, to.Namespace, to.Name)}
	}
	// Replaced, never modified: the kubelet's snapshots share them.
	v.kubeletVersion = spec.KubeletVersion
	v.labels = maps.Clone(spec.Labels)
	v.inPlace = spec.InPlaceUpdate.deepCopy()
	v.updatedTo, v.updatedAt = to, now
	c.notifyLocked()
	return v.snapshot(now), c.saveLocked()
}

// immutableChanges names what spec would change of v that a VM cannot
// change in place, or returns "" if nothing.
func immutableChanges(v *vm, spec ProviderSpec) string {
	var changes []string
	if v.zone != spec.Zone {
		changes = append(changes, fmt.Sprintf("the zone (%s to %s)", v.zone, spec.Zone))
	}
	if v.instanceType != spec.InstanceType {
		changes = append(changes, fmt.Sprintf("the instance type (%s to %s)", v.instanceType, spec.InstanceType))
	}
	if !apiequality.Semantic.DeepEqual(v.capacity, spec.Capacity) {
		changes = append(changes, "the capacity")
	}
	return strings.Join(changes, ", ")
}
