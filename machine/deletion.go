package machine

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
)

// DeletionStep is a step of the deletion flow. The current step of a
// machine being deleted is recorded in its status, in the
// DeletionCondition; each step is idempotent, and the record only moves on
// after the step's work is done, so a crash between any two API writes
// repeats at most the steps done since the last one.
type DeletionStep string

// The deletion steps, in order.
const (
	// StepWaitPreDrainHooks waits until the machine has no annotation with
	// PreDrainHookPrefix.
	StepWaitPreDrainHooks DeletionStep = "WaitForPreDrainHooks"
	// StepDrain cordons and drains the node in non-blocking passes of the
	// drain engine, until its pods are gone and their volumes detached; by
	// force after the drain timeout or with the force-deletion label. The
	// drain also forces on a node NotReady for long (see
	// drain.UnreachableOptions.ForceAfter), and there deletes the node's
	// VolumeAttachments, as MCM's force path does.
	StepDrain DeletionStep = "DrainNode"
	// StepWaitPreTerminateHooks waits until the machine has no annotation
	// with PreTerminateHookPrefix.
	StepWaitPreTerminateHooks DeletionStep = "WaitForPreTerminateHooks"
	// StepDeleteVM calls the driver's DeleteMachine.
	StepDeleteVM DeletionStep = "DeleteVM"
	// StepDeleteNode deletes the Node object.
	StepDeleteNode DeletionStep = "DeleteNode"
	// StepRemoveFinalizer removes the machine's finalizer.
	StepRemoveFinalizer DeletionStep = "RemoveFinalizer"
)

// deletionSteps lists the steps in order.
var deletionSteps = []DeletionStep{
	StepWaitPreDrainHooks, StepDrain, StepWaitPreTerminateHooks,
	StepDeleteVM, StepDeleteNode, StepRemoveFinalizer,
}

// DeletionSteps returns the deletion steps in order.
func DeletionSteps() []DeletionStep { return slices.Clone(deletionSteps) }

// CurrentDeletionStep returns the step the controller recorded for the
// machine (its DeletionCondition; never DeletionStepAnnotation, which is
// anyone's to write who may patch the machine). A machine without a
// record starts at the first step: every step is idempotent, so starting
// over is always safe.
func CurrentDeletionStep(m *v1alpha1.Machine) DeletionStep {
	if rec, ok := deletionRecordOf(m); ok {
		return rec.Step
	}
	return StepWaitPreDrainHooks
}

// next returns the step after s.
func (s DeletionStep) next() DeletionStep {
	i := slices.Index(deletionSteps, s)
	if i < 0 || i+1 >= len(deletionSteps) {
		return StepRemoveFinalizer
	}
	return deletionSteps[i+1]
}

// deletionAction is what the current step needs done.
type deletionAction int

const (
	// delAdvance: nothing to do, move on to the next step.
	delAdvance deletionAction = iota
	// delWait: wait (hooks, blocked by missing input); requeue.
	delWait
	delDrain
	delDeleteVM
	delDeleteNode
	delRemoveFinalizer
)

// deletionInput is what deciding a deletion step looks at.
type deletionInput struct {
	Now       time.Time
	Machine   *v1alpha1.Machine
	Config    v1alpha1.MachineConfiguration
	HasTarget bool
	// NodeName is the machine's node ("" if it has none); Node is the node
	// object if it exists. NodeOwned: the binding lets the machine act on
	// the node (see bindingOf); NotOwnedWhy says why not.
	NodeName    string
	Node        *corev1.Node
	NodeOwned   bool
	NotOwnedWhy string
	// VMOwned: the machine's spec.providerID names its own VM; otherwise
	// DeleteMachine is asked for the machine's VM by its name.
	VMOwned bool
	// ClassFound reports whether class and secret could be resolved
	// (DeleteMachine needs them); ClassProblem says why not. Both are only
	// observed in StepDeleteVM, the one step that reads them.
	ClassFound   bool
	ClassProblem string
}

// deletionDecision is what to do in the current step.
type deletionDecision struct {
	Step   DeletionStep
	Action deletionAction
	// Drain is the drain parameters in force since the deletion began:
	// the record's, else (the record is written with the step's outcome)
	// the machine's configuration now.
	Drain drainParams
	// Description for lastOperation while the step runs (or is skipped).
	Description string
	// Force is set for StepDrain on the machine's force path (label,
	// drain timeout); ForceReason says why. DrainDeadline is when remaining pods
	// are deleted without eviction.
	Force         bool
	ForceReason   string
	DrainDeadline time.Time
	// MaxEvictRetries bounds, per pod, the evictions PodDisruptionBudgets
	// may refuse before the drain deletes the pod (the machine's
	// maxEvictRetries); 0 means no bound.
	MaxEvictRetries int
	// RequeueAfter for delWait.
	RequeueAfter time.Duration
	// BadInput is set when the step cannot run until someone acts.
	BadInput bool
	// NotOwned is set when the step skips a node that is not the
	// machine's: it is reported.
	NotOwned bool
	// ByName: DeleteMachine is asked for the machine's VM by the
	// machine's name, not by the provider ID it claims.
	ByName bool
}

// decideDeletion decides the current step of a machine being deleted. It is
// pure.
func decideDeletion(in deletionInput) deletionDecision {
	m := in.Machine
	rec, ok := deletionRecordOf(m)
	if !ok {
		rec = deletionRecord{Step: StepWaitPreDrainHooks, Drain: drainParamsOf(in.Config)}
	}
	d := deletionDecision{Step: rec.Step, Drain: rec.Drain}
	switch d.Step {
	case StepWaitPreDrainHooks, StepWaitPreTerminateHooks:
		prefix := PreDrainHookPrefix
		if d.Step == StepWaitPreTerminateHooks {
			prefix = PreTerminateHookPrefix
		}
		if hooks := hooksOf(m, prefix); len(hooks) > 0 {
			d.Action = delWait
			d.Description = fmt.Sprintf("Waiting for %s hooks: %s", hookKind(d.Step), strings.Join(hooks, ", "))
			d.RequeueAfter = time.Minute
			return d
		}
		d.Action = delAdvance
		d.Description = fmt.Sprintf("No %s hooks left", hookKind(d.Step))
	case StepDrain:
		if !in.HasTarget || in.NodeName == "" || in.Node == nil {
			d.Action = delAdvance
			d.Description = "Skipping drain: the machine has no node. Initiate VM deletion"
			return d
		}
		if !in.NodeOwned {
			d.Action, d.NotOwned = delAdvance, true
			d.Description = fmt.Sprintf("Skipping drain: node %s is not this machine's (%s). Initiate VM deletion", in.NodeName, in.NotOwnedWhy)
			return d
		}
		d.Force, d.ForceReason = forceDrain(in, d.Drain.DrainTimeout.Duration)
		d.DrainDeadline = m.DeletionTimestamp.Add(d.Drain.DrainTimeout.Duration)
		d.MaxEvictRetries = int(d.Drain.MaxEvictRetries)
		if d.Force {
			d.DrainDeadline = in.Now
		}
		d.Action = delDrain
		d.Description = "Initiate node drain"
		if d.Force {
			d.Description = "Initiate force drain (" + d.ForceReason + ")"
		}
	case StepDeleteVM:
		d.ByName = !in.VMOwned
		if !in.ClassFound {
			if (m.Spec.ProviderID == "" || !in.VMOwned) && m.Annotations[CreationStartedAnnotation] == "" {
				d.Action = delAdvance
				d.Description = "No VM was ever created. Initiate node object deletion"
				return d
			}
			d.Action = delWait
			d.BadInput = true
			d.Description = "Cannot delete VM: " + in.ClassProblem
			return d
		}
		d.Action = delDeleteVM
		d.Description = "Initiate VM deletion"
	case StepDeleteNode:
		if !in.HasTarget || in.NodeName == "" || in.Node == nil {
			d.Action = delAdvance
			d.Description = "No node object to delete. Initiate machine object finalizer removal"
			return d
		}
		if !in.NodeOwned {
			d.Action, d.NotOwned = delAdvance, true
			d.Description = fmt.Sprintf("Not deleting node %s: it is not this machine's (%s). Initiate machine object finalizer removal", in.NodeName, in.NotOwnedWhy)
			return d
		}
		d.Action = delDeleteNode
		d.Description = "Initiate node object deletion"
	case StepRemoveFinalizer:
		d.Action = delRemoveFinalizer
		d.Description = "Initiate machine object finalizer removal"
	}
	return d
}

func hookKind(s DeletionStep) string {
	if s == StepWaitPreTerminateHooks {
		return "pre-terminate"
	}
	return "pre-drain"
}

// hooksOf returns the sorted annotation keys of m with the given prefix.
func hooksOf(m *v1alpha1.Machine, prefix string) []string {
	var out []string
	for k := range m.Annotations {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// forceDrain reports whether the machine asks for a forced drain, and
// why: the force-deletion label, or the drain timeout (frozen when the
// deletion began) since the deletion. Whether a NotReady node is drained
// by force is the drain's to decide.
func forceDrain(in deletionInput, timeout time.Duration) (bool, string) {
	m := in.Machine
	if v, err := strconv.ParseBool(m.Labels[v1alpha1.ForceDeletionLabelKey]); err == nil && v {
		return true, "force-deletion label"
	}
	if in.Now.Sub(m.DeletionTimestamp.Time) > timeout {
		return true, fmt.Sprintf("drain timeout %v exceeded", timeout)
	}
	return false, ""
}

// stepOutcome is what running the current deletion step did.
type stepOutcome struct {
	// Done: the step's work is finished; the machine moves on to the next
	// step.
	Done bool
	// Description of the last operation; "" means the decision's. Failed
	// marks the operation failed, with the driver's ErrorCode if any.
	Description string
	Failed      bool
	ErrorCode   string
	Event       *event
	// RequeueAfter is when to look again while the step waits or after it
	// failed.
	RequeueAfter time.Duration
	// DrainState is the drain state to store; nil keeps the stored one.
	DrainState *drain.State
	// LastKnownState is the driver's, when it returned one.
	LastKnownState string
}

// storableState returns the outcome out of a VM's deletion with a
// lastKnownState the machine cannot store (checkLastKnownState) refused:
// the VM is gone, so the deletion goes on without the state, and its
// event, a Warning, says why.
func storableState(out stepOutcome) stepOutcome {
	err := checkLastKnownState(out.LastKnownState)
	if err == nil {
		return out
	}
	e := event{Type: corev1.EventTypeWarning, Reason: ReasonDeleted}
	if out.Event != nil {
		e.Reason, e.Message = out.Event.Reason, out.Event.Message+"; "
	}
	e.Message += "refused the driver's answer: " + err.Error()
	out.LastKnownState, out.Event = "", &e
	return out
}

// planDeletionWrite returns the machine to write after running a step of d
// with outcome out: phase Terminating, the record of the (next) step, when
// it began and the frozen drain parameters (see DeletionCondition) with
// its mirror, the drain state and the last operation. It is pure.
func planDeletionWrite(cur *v1alpha1.Machine, now time.Time, d deletionDecision, out stepOutcome) *v1alpha1.Machine {
	m := cur.DeepCopy()
	setPhase(m, v1alpha1.MachineTerminating, now)
	m.Status.CurrentStatus.TimeoutActive = false
	step := d.Step
	if out.Done {
		step = d.Step.next()
	}
	setDeletionRecord(m, advanceDeletionRecord(m, step, d.Drain, now))
	switch {
	case out.Done && d.Step == StepDrain:
		clearDrainState(m) // a later drain starts afresh
	case out.DrainState != nil:
		storeDrainState(m, *out.DrainState)
	}
	if out.LastKnownState != "" {
		m.Status.LastKnownState = out.LastKnownState
	}
	op := v1alpha1.LastOperation{Description: cmp.Or(out.Description, d.Description),
		State: v1alpha1.MachineStateProcessing, Type: v1alpha1.MachineOperationDelete, ErrorCode: out.ErrorCode}
	if out.Failed {
		op.State = v1alpha1.MachineStateFailed
	}
	setLastOperation(m, op, now)
	return m
}
