package machine

import (
	"cmp"
	"context"
	"strings"
	"unicode/utf8"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/internal/nodebinding"
)

// createPhase applies a planCreate plan p up to its one write: the
// write-ahead, when p has one; the creation flow against the driver
// (create); a read of the node the driver named; and the one plan of the
// machine from there (planCreation). It returns the machine as stored,
// the plan to write, and the node that plan's node sync starts from.
func (c *Controller) createPhase(ctx context.Context, obs observation, secret *corev1.Secret, p machinePlan) (*v1alpha1.Machine, machinePlan, *corev1.Node, error) {
	cur, m := obs.Machine, p.Machine
	if p.WriteAhead != nil {
		written, err := c.writeMachine(ctx, cur, p.WriteAhead)
		if err != nil {
			return cur, p, nil, err
		}
		cur, m = written, written
	}
	out := c.create(ctx, m, obs.Class, secret)
	if out.FailedOp == "" && out.Taken == "" {
		logr.FromContextOrDiscard(ctx).Info("VM created or adopted", "providerID", out.ProviderID, "node", out.NodeName)
	}
	obs.Machine = m
	after := c.observeCreated(obs, out)
	return cur, planCreation(obs, out, after, &c.opts), after.Node, nil
}

// create runs the creation flow: the machine's bootstrap token first, when
// its user data asks for one (see issueBootstrapToken), so that every
// driver call sees the same user data, as in MCM; GetMachineStatus next, so
// that a VM that exists (from an earlier attempt whose result was lost) is
// adopted, never created twice; CreateMachine only on NotFound;
// InitializeMachine when the VM needs it. An answer that names another
// machine's VM is refused (see takenVM and refuseVM); a VM of its own
// whose node name is another machine's node is deleted again (see
// takenNode).
func (c *Controller) create(ctx context.Context, m *v1alpha1.Machine, class *v1alpha1.MachineClass, secret *corev1.Secret) createOutcome {
	secret, err := c.withBootstrapToken(ctx, m, secret)
	if err != nil {
		return createOutcome{FailedOp: operationIssueBootstrapToken, Err: err}
	}
	out, needInit := c.findOrCreateVM(ctx, m, class, secret)
	if out.FailedOp != "" {
		return out
	}
	// The driver's answer is checked before any call carries its
	// provider ID, InitializeMachine's included, and again after it.
	if why := c.takenVM(m, out.ProviderID, out.NodeName); why != "" {
		return c.refuseVM(ctx, m, out, why)
	}
	if needInit {
		if out = c.initializeVM(ctx, m, class, secret, out); out.FailedOp != "" {
			return out
		}
		if why := c.takenVM(m, out.ProviderID, out.NodeName); why != "" {
			return c.refuseVM(ctx, m, out, why)
		}
	}
	if err := checkCreated(out, c.target != nil); err != nil {
		// The VM is there and is the machine's: the next attempt adopts
		// it by name, and so does a deletion.
		c.vouches.set(m, vouch{ProviderID: out.ProviderID})
		return createOutcome{FailedOp: driver.OperationCreateMachine, Err: err}
	}
	if owner := c.takenNode(m, out.NodeName); owner != "" {
		// A node of that name belongs to another machine: the new VM
		// would take it over. Delete the VM; the machine is Failed and
		// will be replaced. The provider ID is no other machine's (takenVM
		// said so): the driver named it for this machine.
		vm := m.DeepCopy()
		vm.Spec.ProviderID = out.ProviderID
		if _, err := c.driver.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: vm, MachineClass: class, Secret: secret}); err != nil {
			return createOutcome{FailedOp: driver.OperationDeleteMachine, Err: err}
		}
		out.StaleNodeOwner = owner
		return out
	}
	c.vouches.set(m, vouch{ProviderID: out.ProviderID})
	return out
}

// refuseVM handles a driver's answer that names another machine's VM
// (why says whose): no call is made for that VM, and nothing of the
// answer is kept; the machine is Failed (see planTakenVM). No VM is
// deleted: the VM the answer names is another machine's, and a VM the
// driver may have made for this machine is deleted with it, by its
// name (the deletion never carries a provider ID the machine does not
// own).
func (c *Controller) refuseVM(ctx context.Context, m *v1alpha1.Machine, out createOutcome, why string) createOutcome {
	logr.FromContextOrDiscard(ctx).Info("Refusing the driver's answer: it names another machine's VM", "providerID", out.ProviderID, "node", out.NodeName, "why", why)
	c.vouches.forget(m)
	return createOutcome{ProviderID: out.ProviderID, NodeName: out.NodeName, Taken: why}
}

// findOrCreateVM asks the driver for the machine's VM by the machine's
// name — a provider ID it claims is not its own until the driver names it
// (see bindingOf) — and creates one on NotFound. needInit is set when the
// VM is to be initialized.
func (c *Controller) findOrCreateVM(ctx context.Context, m *v1alpha1.Machine, class *v1alpha1.MachineClass, secret *corev1.Secret) (out createOutcome, needInit bool) {
	status, err := c.driver.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: byName(m), MachineClass: class, Secret: secret})
	switch code := driver.CodeOf(err); code {
	case driver.OK:
		return createOutcome{ProviderID: status.ProviderID, NodeName: status.NodeName, Addresses: status.Addresses}, false
	case driver.Uninitialized:
		if status != nil {
			out = createOutcome{ProviderID: status.ProviderID, NodeName: status.NodeName, Addresses: status.Addresses}
		}
		return out, true
	case driver.NotFound, driver.Unimplemented:
		resp, err := c.driver.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: byName(m), MachineClass: class, Secret: secret})
		if err != nil {
			return createOutcome{FailedOp: driver.OperationCreateMachine, Err: err}, false
		}
		c.metrics.create.WithLabelValues(c.metricLabels(m)...).Observe(c.opts.Clock.Since(m.CreationTimestamp.Time).Seconds())
		// InitializeMachine is optional: Unimplemented skips it.
		return createOutcome{ProviderID: resp.ProviderID, NodeName: resp.NodeName, Addresses: resp.Addresses, LastKnownState: resp.LastKnownState}, true
	default:
		return createOutcome{FailedOp: driver.OperationGetMachineStatus, Err: err}, false
	}
}

// initializeVM calls InitializeMachine for the VM of out, and returns out
// with what the driver corrected in it.
func (c *Controller) initializeVM(ctx context.Context, m *v1alpha1.Machine, class *v1alpha1.MachineClass, secret *corev1.Secret, out createOutcome) createOutcome {
	start := c.opts.Clock.Now()
	vm := m.DeepCopy()
	vm.Spec.ProviderID = out.ProviderID
	resp, err := c.driver.InitializeMachine(ctx, &driver.InitializeMachineRequest{Machine: vm, MachineClass: class, Secret: secret})
	switch driver.CodeOf(err) {
	case driver.OK:
		c.metrics.initialize.WithLabelValues(c.metricLabels(m)...).Observe(c.opts.Clock.Since(start).Seconds())
		out.ProviderID = cmp.Or(resp.ProviderID, out.ProviderID)
		out.NodeName = cmp.Or(resp.NodeName, out.NodeName)
		if len(resp.Addresses) > 0 {
			out.Addresses = resp.Addresses
		}
	case driver.Unimplemented:
		// The only code that skips the step, as in MCM's controller
		// (initializeMachine, v0.62). MCM's error-code document lists
		// NotFound as "skip" too, but its controller records NotFound as
		// a failed initialization, and so does this one: the retry starts
		// over with GetMachineStatus and creates the VM again if it
		// vanished, instead of leaving the machine Pending for a node
		// that cannot come.
	default:
		return createOutcome{FailedOp: driver.OperationInitializeMachine, Err: err}
	}
	return out
}

// takenNode returns the machine that the node named name belongs to, if
// that is not m: the one its machine-name label names, or, bound to
// another machine, its binding's UID. "" when there is no such node (or
// no target cluster) or it is m's.
func (c *Controller) takenNode(m *v1alpha1.Machine, name string) string {
	if c.nodes == nil {
		return ""
	}
	n, err := c.nodes.Get(name)
	if err != nil {
		return ""
	}
	owner := n.Labels[v1alpha1.MachineNameLabelKey]
	if bound := nodebinding.Owner(n); bound != "" && bound != m.UID {
		owner = cmp.Or(owner, string(bound))
	} else if owner == m.Name {
		owner = ""
	}
	return owner
}

// Bounds of what a driver's answer may make the controller store. An
// answer over them is the driver's fault (Internal) and refused whole:
// unlike a message, opaque state or an address cut short would be wrong,
// not shorter, and one of any size would make every status write fail
// (etcd refuses the request).
const (
	// maxLastKnownState bounds status.lastKnownState: ample for the
	// state a driver keeps between its calls, far below etcd's request
	// limit (1.5 MiB by default).
	maxLastKnownState = 64 << 10
	// maxProviderID bounds spec.providerID: clouds' IDs (Azure's, the
	// longest, included) are a few hundred bytes at most.
	maxProviderID = 1024
	// maxAddresses and maxAddress bound status.addresses, stored when
	// there is no target cluster: a VM has a few addresses, each an IP or
	// a DNS name (at most 253 bytes), of a type such as InternalIP.
	maxAddresses = 32
	maxAddress   = 253
)

// checkCreated checks what the driver said about a VM it created or
// found before any of it is written: a provider ID of bounded size, a
// lastKnownState of bounded size (checkLastKnownState), and with a
// target cluster a node name that can be a Node's name and the value of
// the machine's node label, or without one a bounded list of bounded
// addresses. A driver that breaks this is at fault (Internal), and the
// machine says so.
func checkCreated(out createOutcome, hasTarget bool) error {
	switch {
	case out.ProviderID == "":
		return driver.NewError(driver.Internal, "driver returned no provider ID")
	case len(out.ProviderID) > maxProviderID || !utf8.ValidString(out.ProviderID):
		return driver.Errorf(driver.Internal, "driver returned a provider ID of %d bytes starting %.64q; the controller stores one of at most %d bytes of valid UTF-8",
			len(out.ProviderID), out.ProviderID, maxProviderID)
	}
	if err := checkLastKnownState(out.LastKnownState); err != nil {
		return err
	}
	if !hasTarget {
		return checkAddresses(out.Addresses)
	}
	if out.NodeName == "" {
		return driver.NewError(driver.Internal, "driver returned no node name")
	}
	problems := validation.IsDNS1123Subdomain(out.NodeName)
	problems = append(problems, validation.IsValidLabelValue(out.NodeName)...)
	if len(problems) > 0 {
		return driver.Errorf(driver.Internal, "driver returned node name %.64q for VM %s, which cannot name a Node in the machine's %q label: %s",
			out.NodeName, out.ProviderID, v1alpha1.NodeLabelKey, strings.Join(problems, "; "))
	}
	return nil
}

// checkLastKnownState refuses a driver's lastKnownState over
// maxLastKnownState: the driver reads it back, so it is stored whole or
// not at all.
func checkLastKnownState(state string) error {
	if len(state) > maxLastKnownState {
		return driver.Errorf(driver.Internal, "driver returned a lastKnownState of %d bytes; the controller stores at most %d", len(state), maxLastKnownState)
	}
	return nil
}

// checkAddresses refuses more than maxAddresses addresses, or an address
// or type over maxAddress bytes.
func checkAddresses(addrs []corev1.NodeAddress) error {
	if len(addrs) > maxAddresses {
		return driver.Errorf(driver.Internal, "driver returned %d addresses; the controller stores at most %d", len(addrs), maxAddresses)
	}
	for _, a := range addrs {
		if len(a.Address) > maxAddress || len(a.Type) > maxAddress {
			return driver.Errorf(driver.Internal, "driver returned an address of %d bytes and type of %d bytes, starting %.64q; the controller stores addresses and types of at most %d bytes",
				len(a.Address), len(a.Type), a.Address, maxAddress)
		}
	}
	return nil
}
