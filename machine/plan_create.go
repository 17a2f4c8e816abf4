package machine

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// createOutcome is what the creation flow learned from the driver.
type createOutcome struct {
	// FailedOp is the operation that failed; empty on success.
	FailedOp driver.Operation
	Err      error
	// Of the VM created or adopted.
	ProviderID, NodeName string
	Addresses            []corev1.NodeAddress
	LastKnownState       string
	// StaleNodeOwner is set when a node named NodeName exists that belongs
	// to this other machine; the new VM was deleted.
	StaleNodeOwner string
	// Taken says why the VM the driver named (ProviderID, NodeName) is
	// another machine's; the answer was refused.
	Taken string
}

// planCreation plans the write of a sync that ran the creation flow, once
// the driver answered: obs is what the sync observed before (its Machine
// the one the driver was asked about), out what the driver said, and
// after what was observed right after — the node the driver named (with
// drivers that wait for the node to register, it is in the cache by now),
// and the claims on it and on the VM. It is pure.
//
// A VM created with a target cluster gets its provider ID, node label and
// the machine's defaults written at once. Its status is decided here: a
// node that is there and Ready takes the machine straight to Running, its
// node synced in the same sync; otherwise a first creation leaves the
// status alone for Options.PendingDelay, in which the node's arrival takes
// the machine to Running with one status write instead of two, and a
// creation after a failed one says Pending at once, so that the failure
// does not stay on the machine.
func planCreation(obs observation, out createOutcome, after observation, o *Options) machinePlan {
	created := planCreateOutcome(obs, out, o)
	m := created.Machine
	if !obs.HasTarget || created.Retry != retryNone || m.Status.CurrentStatus.Phase != v1alpha1.MachinePending {
		return created
	}
	if obs.Machine.Status.CurrentStatus.Phase == "" {
		m.Status = *obs.Machine.Status.DeepCopy()
	}
	if after.Node == nil && m.Status.CurrentStatus.Phase != "" {
		return created
	}
	after.Machine = m
	joined := planMachine(after, o)
	if joined.Kind != planUpdate {
		return created // the node is not the machine's: the next sync tells
	}
	// The claims the creation settled are reported with its outcome; a
	// contest over the new node is the next sync's to report.
	joined.Claim = created.Claim
	return joined
}

// planCreateOutcome turns the result of the creation flow into the machine
// to write. It is pure.
func planCreateOutcome(obs observation, out createOutcome, o *Options) machinePlan {
	m := obs.Machine.DeepCopy()
	p := machinePlan{Machine: m}
	if out.LastKnownState != "" {
		m.Status.LastKnownState = out.LastKnownState
	}
	switch {
	case out.StaleNodeOwner != "":
		msg := fmt.Sprintf("VM using old node obj: node %q of the new VM belongs to machine %q; the VM was deleted", out.NodeName, out.StaleNodeOwner)
		p.Event = report(m, obs.Now, transition{
			Phase: v1alpha1.MachineFailed, TimeoutActive: m.Status.CurrentStatus.TimeoutActive,
			Op:     v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationCreate},
			Reason: ReasonStaleNode, Warning: true,
		})
		p.Retry = retryShort
		p.Err = fmt.Errorf("creating VM: %s", msg)
		return p
	case out.Taken != "":
		planTakenVM(&p, obs, out)
		return p
	case out.FailedOp != "":
		planCreateFailure(&p, obs, out)
		return p
	}
	if claimed := m.Spec.ProviderID; claimed != "" && claimed != out.ProviderID {
		p.Claim = &event{Type: corev1.EventTypeWarning, Reason: ReasonForeignClaim,
			Message: fmt.Sprintf("Replacing the machine's provider ID %q: the driver names VM %s (node %q) for it", claimed, out.ProviderID, out.NodeName)}
	}
	m.Spec.ProviderID = out.ProviderID
	// With the provider ID, as MCM's controller writes the default
	// priority; a machine born with its defaults has them already.
	machinestate.SetDefaults(m)
	created := pendingTransition
	p.RequeueAfter = o.HealthCheckPeriod
	if obs.HasTarget {
		setLabel(m, v1alpha1.NodeLabelKey, out.NodeName)
	} else {
		// Without a target cluster there is no node to wait for.
		created.Phase, created.TimeoutActive = v1alpha1.MachineAvailable, false
		created.Op.Description, created.Op.State = "Created machine on cloud provider", v1alpha1.MachineStateSuccessful
		m.Status.Addresses = slices.Clone(out.Addresses)
		p.RequeueAfter = o.LongRetry
	}
	p.Event = report(m, obs.Now, created)
	return p
}

// planCreateFailure plans a creation flow that failed at out.FailedOp:
// CrashLoopBackOff, retried by the driver code's class no later than the
// creation timeout, or Failed once that passed.
func planCreateFailure(p *machinePlan, obs observation, out createOutcome) {
	m := p.Machine
	timedOut := obs.Now.Sub(creationStart(m, obs.Now)) > obs.Config.MachineCreationTimeout.Duration
	failPhase := v1alpha1.MachineCrashLoopBackOff
	if timedOut {
		failPhase = v1alpha1.MachineFailed
	}
	code := driver.CodeOf(out.Err)
	var msg string
	switch out.FailedOp {
	case driver.OperationInitializeMachine:
		msg = fmt.Sprintf("Provider error: %v. Initialize VM Instance", out.Err)
	case operationIssueBootstrapToken:
		// Not the cloud's doing: the target cluster refused the token.
		msg = fmt.Sprintf("Issuing the bootstrap token in the target cluster failed: %v", out.Err)
	default:
		msg = fmt.Sprintf("Cloud provider message - %s failed: %v", out.FailedOp, out.Err)
	}
	p.Event = report(m, obs.Now, transition{
		Phase: failPhase, TimeoutActive: !timedOut,
		Op: v1alpha1.LastOperation{
			Description: msg, ErrorCode: code.String(),
			State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationCreate,
		},
		Reason: ReasonCreateFailed, Warning: true,
	})
	p.Retry = retryClassOf(code)
	if !timedOut {
		p.TimeoutIn = creationStart(m, obs.Now).Add(obs.Config.MachineCreationTimeout.Duration).Sub(obs.Now) + time.Millisecond
	}
	p.Err = fmt.Errorf("%s: %w", out.FailedOp, out.Err)
}

// planTakenVM plans the refusal of a driver's answer that named another
// machine's VM: the machine is Failed (for its set to replace) with the
// driver's fault (Internal) on lastOperation and a Warning event, and
// loses the provider ID and node label it may hold, so that nothing
// claims that VM or its node on its behalf (no drain, no deletion, no
// node deletion that deletes it) and no later sync creates again for a
// claim it cannot have.
func planTakenVM(p *machinePlan, obs observation, out createOutcome) {
	m := p.Machine
	msg := fmt.Sprintf("Refused the driver's answer for machine %s: it names VM %s (node %q), and %s. No call is made for that VM; a VM of the machine's own, if any, is deleted with the machine, by its name",
		m.Name, out.ProviderID, out.NodeName, out.Taken)
	m.Spec.ProviderID = ""
	delete(m.Labels, v1alpha1.NodeLabelKey)
	p.Event = report(m, obs.Now, transition{
		Phase: v1alpha1.MachineFailed,
		Op: v1alpha1.LastOperation{Description: msg, ErrorCode: driver.Internal.String(),
			State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationCreate},
		Reason: ReasonForeignVM, Warning: true,
	})
	p.Retry = retryShort
	p.Err = fmt.Errorf("creating VM: %s", msg)
}
