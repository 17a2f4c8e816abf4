package machine

import (
	"cmp"
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/internal/nodebinding"
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
	// By the machine's name: a provider ID it claims is not its own until
	// the driver names it (see bindingOf).
	status, err := c.driver.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: byName(m), MachineClass: class, Secret: secret})
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
		resp, err := c.driver.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: byName(m), MachineClass: class, Secret: secret})
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
		vm := m.DeepCopy()
		vm.Spec.ProviderID = out.ProviderID
		resp, err := c.driver.InitializeMachine(ctx, &driver.InitializeMachineRequest{Machine: vm, MachineClass: class, Secret: secret})
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
	if err := checkCreated(out, c.target != nil); err != nil {
		// The VM is there and is the machine's: the next attempt adopts
		// it by name, and so does a deletion.
		c.vouches.set(m, vouch{ProviderID: out.ProviderID})
		return createOutcome{FailedOp: driver.OperationCreateMachine, Err: err}
	}
	if c.nodes != nil {
		if n, err := c.nodes.Get(out.NodeName); err == nil {
			owner := n.Labels[v1alpha1.MachineNameLabelKey]
			if bound := nodebinding.Owner(n); bound != "" && bound != m.UID {
				owner = cmp.Or(owner, string(bound))
			} else if owner == m.Name {
				owner = ""
			}
			if owner != "" {
				// A node of that name belongs to another machine: the new VM
				// would take it over. Delete the VM; the machine is Failed
				// and will be replaced.
				vm := m.DeepCopy()
				vm.Spec.ProviderID = out.ProviderID
				if _, err := c.driver.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: vm, MachineClass: class, Secret: secret}); err != nil {
					return createOutcome{FailedOp: driver.OperationDeleteMachine, Err: err}
				}
				out.StaleNodeOwner = owner
				return out
			}
		}
	}
	c.vouches.set(m, vouch{ProviderID: out.ProviderID})
	return out
}

// checkCreated checks what the driver said about a VM it created or
// found before any of it is written: a provider ID, and (with a target
// cluster) a node name that can be a Node's name and the value of the
// machine's node label. A driver that breaks this is at fault
// (Internal), and the machine says so.
func checkCreated(out createOutcome, hasTarget bool) error {
	switch {
	case out.ProviderID == "":
		return driver.NewError(driver.Internal, "driver returned no provider ID")
	case !hasTarget:
		return nil
	case out.NodeName == "":
		return driver.NewError(driver.Internal, "driver returned no node name")
	}
	problems := validation.IsDNS1123Subdomain(out.NodeName)
	problems = append(problems, validation.IsValidLabelValue(out.NodeName)...)
	if len(problems) > 0 {
		return driver.Errorf(driver.Internal, "driver returned node name %q for VM %s, which cannot name a Node in the machine's %q label: %s",
			out.NodeName, out.ProviderID, v1alpha1.NodeLabelKey, strings.Join(problems, "; "))
	}
	return nil
}
