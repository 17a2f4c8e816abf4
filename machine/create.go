package machine

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

// create runs the creation flow: the machine's bootstrap token first, when
// its user data asks for one (see issueBootstrapToken), so that every
// driver call sees the same user data, as in MCM; GetMachineStatus next, so
// that a VM that exists (from an earlier attempt whose result was lost) is
// adopted, never created twice; CreateMachine only on NotFound;
// InitializeMachine when the VM needs it.
func (c *Controller) create(ctx context.Context, m *v1alpha1.Machine, class *v1alpha1.MachineClass, secret *corev1.Secret) createOutcome {
	secret, err := c.withBootstrapToken(ctx, m, secret)
	if err != nil {
		return createOutcome{FailedOp: operationIssueBootstrapToken, Err: err}
	}
	labels := c.metricLabels(m)
	status, err := c.driver.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: m, MachineClass: class, Secret: secret})
	var out createOutcome
	needInit := false
	switch code := driver.CodeOf(err); code {
	case driver.OK:
		out.ProviderID, out.NodeName, out.Addresses = status.ProviderID, status.NodeName, status.Addresses
	case driver.Uninitialized:
		needInit = true
		if status != nil {
			out.ProviderID, out.NodeName, out.Addresses = status.ProviderID, status.NodeName, status.Addresses
		}
	case driver.NotFound, driver.Unimplemented:
		resp, err := c.driver.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: m, MachineClass: class, Secret: secret})
		if err != nil {
			return createOutcome{FailedOp: driver.OperationCreateMachine, Err: err}
		}
		c.metrics.create.WithLabelValues(labels...).Observe(c.opts.Clock.Since(m.CreationTimestamp.Time).Seconds())
		out = createOutcome{ProviderID: resp.ProviderID, NodeName: resp.NodeName, Addresses: resp.Addresses, LastKnownState: resp.LastKnownState}
		needInit = true // InitializeMachine is optional: Unimplemented skips it
	default:
		return createOutcome{FailedOp: driver.OperationGetMachineStatus, Err: err}
	}
	if needInit {
		start := c.opts.Clock.Now()
		resp, err := c.driver.InitializeMachine(ctx, &driver.InitializeMachineRequest{Machine: m, MachineClass: class, Secret: secret})
		switch driver.CodeOf(err) {
		case driver.OK:
			c.metrics.initialize.WithLabelValues(labels...).Observe(c.opts.Clock.Since(start).Seconds())
			if resp.ProviderID != "" {
				out.ProviderID = resp.ProviderID
			}
			if resp.NodeName != "" {
				out.NodeName = resp.NodeName
			}
			if len(resp.Addresses) > 0 {
				out.Addresses = resp.Addresses
			}
		case driver.Unimplemented:
			// The only code that skips the step, as in MCM's controller
			// (initializeMachine, v0.62). MCM's error-code document lists
			// NotFound as "skip" too, but its controller records NotFound
			// as a failed initialization, and so does this one: the retry
			// starts over with GetMachineStatus and creates the VM again if
			// it vanished, instead of leaving the machine Pending for a
			// node that cannot come.
		default:
			return createOutcome{FailedOp: driver.OperationInitializeMachine, Err: err}
		}
	}
	switch {
	case out.ProviderID == "":
		return createOutcome{FailedOp: driver.OperationCreateMachine, Err: driver.NewError(driver.Internal, "driver returned no provider ID")}
	case c.target != nil && out.NodeName == "":
		return createOutcome{FailedOp: driver.OperationCreateMachine, Err: driver.NewError(driver.Internal, "driver returned no node name")}
	}
	if c.nodes != nil {
		if n, err := c.nodes.Get(out.NodeName); err == nil {
			if owner := n.Labels[v1alpha1.MachineNameLabelKey]; owner != "" && owner != m.Name {
				// A node of that name belongs to another machine: the new VM
				// would take it over. Delete the VM; the machine is Failed
				// and will be replaced.
				vm := m.DeepCopy()
				vm.Spec.ProviderID = out.ProviderID
				if _, err := c.driver.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: vm, MachineClass: class, Secret: secret}); err != nil {
					return createOutcome{FailedOp: driver.OperationDeleteMachine, Err: err}
				}
				out.StaleNodeOwner = owner
			}
		}
	}
	return out
}
