package machine

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/workqueue"
)

// claimants are the other machines that claim m's node or VM, from the
// indexes.
func (c *Controller) claimants(m *v1alpha1.Machine) []*v1alpha1.Machine {
	var out []*v1alpha1.Machine
	seen := map[string]bool{}
	add := func(index, value string) {
		if value == "" {
			return
		}
		objs, _ := c.machineIdx.ByIndex(index, value)
		for _, o := range objs {
			r, ok := o.(*v1alpha1.Machine)
			if !ok || r.UID == m.UID || seen[string(r.UID)] {
				continue
			}
			seen[string(r.UID)] = true
			out = append(out, r)
		}
	}
	add(machinestate.ByNodeIndex, nodeNameOf(m))
	add(machinestate.ByProviderIDIndex, m.Spec.ProviderID)
	return out
}

// rivalsOf names ("namespace/name") the other machines that claim m's
// node or VM and whose claim nothing refutes.
func (c *Controller) rivalsOf(m *v1alpha1.Machine) []string {
	var out []string
	for _, r := range c.claimants(m) {
		node, _ := c.cachedNode(nodeNameOf(r))
		v, ok := c.vouches.get(r)
		if !refuted(r, node, v, ok) {
			out = append(out, workqueue.KeyOf(r))
		}
	}
	return out
}

// enqueueRivals syncs the machines that claim m's node or VM: m's claim
// may have been what held them back.
func (c *Controller) enqueueRivals(m *v1alpha1.Machine) {
	for _, r := range c.claimants(m) {
		c.machineQueue.Add(workqueue.KeyOf(r))
	}
}

// verify asks the driver which VM backs m — by the machine's name, never
// by the provider ID it claims, which would vouch for any VM named there
// — and keeps the answer (see vouches). Machines that claim the same node
// or VM are synced again, since the answer may settle their contest.
func (c *Controller) verify(ctx context.Context, m *v1alpha1.Machine, class *v1alpha1.MachineClass, secret *corev1.Secret) error {
	status, err := c.driver.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: byName(m), MachineClass: class, Secret: secret})
	switch driver.CodeOf(err) {
	case driver.OK, driver.Uninitialized:
		if status == nil || status.ProviderID == "" {
			return fmt.Errorf("verifying the VM of machine %s: driver returned no provider ID", m.Name)
		}
		c.vouches.set(m, vouch{ProviderID: status.ProviderID})
	case driver.NotFound:
		c.vouches.set(m, vouch{None: true})
	default:
		return fmt.Errorf("verifying the VM of machine %s: %w", m.Name, err)
	}
	c.enqueueRivals(m)
	return nil
}

// byName is m without the provider ID it claims, for driver calls that
// must find the machine's own VM by its name.
func byName(m *v1alpha1.Machine) *v1alpha1.Machine {
	if m.Spec.ProviderID == "" {
		return m
	}
	out := m.DeepCopy()
	out.Spec.ProviderID = ""
	return out
}

// reportClaim logs and records a plan's report of claims it ignores; nil
// reports nothing.
func (c *Controller) reportClaim(ctx context.Context, m *v1alpha1.Machine, e *event) {
	if e == nil {
		return
	}
	logr.FromContextOrDiscard(ctx).Info("Ignoring claims of the machine", "reason", e.Reason, "message", e.Message)
	c.recordEvent(m, e)
}
