package machine

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// observation is everything one sync of a (not deleted) machine looks at.
// observe fills it; planMachine reads it and does no I/O.
type observation struct {
	Now     time.Time
	Machine *v1alpha1.Machine // read-only
	// Config is the machine's effective configuration.
	Config    v1alpha1.MachineConfiguration
	HasTarget bool
	Frozen    bool
	// OutageEnded is when the safety gate's last outage ended (zero: none);
	// machines Unknown since before then get a new health timeout.
	OutageEnded time.Time
	// ValidationErrors of the machine itself.
	ValidationErrors field.ErrorList
	// Class is nil when it does not exist; ClassErrors are its validation errors.
	Class       *v1alpha1.MachineClass
	ClassErrors field.ErrorList
	// SecretProblem describes why no usable secret was found ("" if fine),
	// SecretReason is the event reason for it.
	SecretProblem, SecretReason string
	// Node is the machine's node in the target cluster, nil if absent.
	Node *corev1.Node
	// NodeStale is set when the cached node does not show the
	// controller's last write to it yet: it is not synced from that copy
	// (its update event brings the machine back).
	NodeStale bool
	// Vouch is the driver's word on which VM backs the machine, when
	// Vouched; Rivals are the other machines that claim its node or VM
	// and that nothing refutes (see bindingOf). observe asks the driver
	// when the sync takes stepVerify.
	Vouch   vouch
	Vouched bool
	Rivals  []string
	// ReplacementDenied is the replacement gate's reason for not letting
	// the health timeout mark the machine Failed now; "" when it was not
	// asked or agreed. observe asks the gate only when the health timeout
	// would mark the machine Failed (replacementDue).
	ReplacementDenied string
}

// planKind is what a sync of a (not deleted) machine must do beyond writing
// the planned machine.
type planKind int

const (
	// planUpdate: write the planned metadata and status (often nothing).
	planUpdate planKind = iota
	// planBadInput: report a problem a person must fix; retry with backoff.
	planBadInput
	// planWaitForClass: the class has no finalizer yet; its reconciler is
	// asked to add it.
	planWaitForClass
	// planFrozen: the safety gate is closed.
	planFrozen
	// planCreate: run the creation flow against the driver, and write
	// what planCreation makes of its outcome.
	planCreate
	// planVerify: the machine claims a VM or a node that nobody vouched
	// for (see bindingOf) and the driver's word is still missing.
	planVerify
)

var planKindNames = [...]string{"Update", "BadInput", "WaitForClass", "Frozen", "Create", "Verify"}

func (k planKind) String() string { return planKindNames[k] }

// machinePlan is the outcome of planning: the machine as it should be
// written, and what else to do.
type machinePlan struct {
	Kind planKind
	// Machine is the desired machine: metadata, spec.providerID and status.
	Machine *v1alpha1.Machine
	// WriteAhead, with planCreate, is the machine to store before the
	// driver may create a VM (see writeAhead); nil when the stored
	// machine needs nothing first.
	WriteAhead *v1alpha1.Machine
	// Node is the desired node, nil if it needs no change.
	Node  *corev1.Node
	Event *event
	// Claim reports claims of the machine that are ignored (a node or VM
	// that is not its own); nil if none.
	Claim *event
	// Clamped reports the timestamps in the future the plan set to now
	// (see clampFutureTimes); nil if none.
	Clamped *event
	// Retry is the backoff class when the plan reports a failure; with
	// retryNone the key is requeued after RequeueAfter (0: not at all).
	Retry        retryClass
	RequeueAfter time.Duration
	// TimeoutIn caps the retry delay of a failed creation: the creation
	// timeout falls due then.
	TimeoutIn time.Duration
	// Err is the failure the worker reports (a driver call that failed);
	// nil for problems reported on the machine only, like bad input.
	Err error
	// MarkedFailed is set when the health timeout marks the machine Failed
	// (it takes a slot of the replacement gate).
	MarkedFailed bool
	// Joined is set when the machine just joined, JoinTook to how long it
	// took (zero when the node was there in the creation's own sync).
	Joined   bool
	JoinTook time.Duration
	// FailedJoin is set when the creation timeout ran out before a join.
	FailedJoin bool
	// NodeCondition is the node's Preserved condition to write, nil if
	// it needs no change; PreserveDrain the drain pass of a preserved
	// Failed machine's node to run; PreserveEvents report the
	// preservation's changes (see planPreservation).
	NodeCondition  *corev1.NodeCondition
	PreserveDrain  *preserveDrain
	PreserveEvents []*event
	// InPlaceCondition is the node's InPlaceUpdate condition to write,
	// nil if it needs no change; InPlaceDrain the drain pass of a node
	// selected for an in-place update to run; InPlaceEvents report the
	// update's changes, InPlaceOutcome counts them (see planInPlace).
	InPlaceCondition *corev1.NodeCondition
	InPlaceDrain     *drainRules
	InPlaceEvents    []*event
	InPlaceOutcome   inPlaceOutcome
}

// step is the branch a sync of a machine that is not being deleted takes.
type step int

const (
	// stepBadInput: the machine, its class or its secret is unusable.
	stepBadInput step = iota
	// stepFrozen: the safety gate is closed.
	stepFrozen
	// stepVerify: the driver must say which VM backs the machine.
	stepVerify
	// stepWaitForClass: the class has no finalizer yet.
	stepWaitForClass
	// stepCreate: the VM is to be created or adopted.
	stepCreate
	// stepNoTarget: the VM exists and there is no node to watch.
	stepNoTarget
	// stepContested: another machine claims the node or VM.
	stepContested
	// stepHealth: the VM exists; join and health are watched.
	stepHealth
)

// decision is the step a sync takes, and what decided it.
type decision struct {
	Step    step
	Binding binding
	// Reason and Problem describe stepBadInput: the event reason and the
	// lastOperation description.
	Reason, Problem string
}

// decide picks the sync's step. It is pure; planMachine plans the step,
// and observe uses it to know what else to read: the driver's word for
// stepVerify, the replacement gate's answer for stepHealth (see
// replacementDue).
func decide(obs observation) decision {
	if len(obs.ValidationErrors) > 0 {
		return decision{Step: stepBadInput, Reason: ReasonInvalidMachine,
			Problem: "Machine validation failed: " + obs.ValidationErrors.ToAggregate().Error()}
	}
	if obs.Frozen {
		return decision{Step: stepFrozen}
	}
	m := obs.Machine
	d := decision{Binding: bindingOf(m, obs.Node, obs.Vouch, obs.Vouched, obs.Rivals)}
	create := needsCreate(m) || d.Binding.Kind == bindForeign
	if create || d.Binding.Kind == bindUnverified {
		d.Reason, d.Problem = inputProblem(obs)
		switch {
		case d.Problem != "":
			d.Step = stepBadInput
		case !create:
			d.Step = stepVerify
		case !slices.Contains(obs.Class.Finalizers, v1alpha1.MachineFinalizer):
			d.Step = stepWaitForClass
		default:
			d.Step = stepCreate
		}
		return d
	}
	switch {
	case !obs.HasTarget:
		d.Step = stepNoTarget
	case d.Binding.Kind == bindContested:
		d.Step = stepContested
	default:
		d.Step = stepHealth
	}
	return d
}

// inputProblem is what keeps the driver from being called for the
// machine's VM: its class is missing, being deleted or invalid, or its
// secret is unusable. It returns the event reason and the description,
// "" when there is none.
func inputProblem(obs observation) (reason, problem string) {
	m := obs.Machine
	switch {
	case obs.Class == nil:
		return ReasonClassNotFound, fmt.Sprintf("MachineClass %q not found in namespace %q", m.Spec.Class.Name, m.Namespace)
	case obs.Class.DeletionTimestamp != nil:
		// Its deletion waits for the machines that use it; a new VM
		// would be one more, and one its owner means to be rid of.
		return ReasonClassDeleting, fmt.Sprintf("MachineClass %q is being deleted: no VM is created from it; point the machine at another class or delete the machine", obs.Class.Name)
	case len(obs.ClassErrors) > 0:
		return ReasonInvalidClass, fmt.Sprintf("MachineClass %q is invalid: %v", obs.Class.Name, obs.ClassErrors.ToAggregate())
	case obs.SecretProblem != "":
		return obs.SecretReason, obs.SecretProblem
	}
	return "", ""
}

// planMachine plans a sync of a machine that is not being deleted: the
// step decide picks, and every write it makes. It is pure: everything it
// needs is in obs. A creation's outcome is planned after the driver
// answered, by planCreation.
func planMachine(obs observation, o *Options) machinePlan {
	m := obs.Machine.DeepCopy()
	p := machinePlan{Machine: m}
	if !slices.Contains(m.Finalizers, v1alpha1.MachineFinalizer) {
		// The controller's claim on every machine it syncs, stored with
		// whatever else this sync writes first — before a VM is created,
		// the creation start — rather than in a write of its own.
		m.Finalizers = append(m.Finalizers, v1alpha1.MachineFinalizer)
	}
	// Stored with whatever the sync writes, so that every timeout counts
	// from now at the latest.
	p.Clamped = clampFutureTimes(m, obs.Now)
	d := decide(obs)
	if d.Binding.Kind == bindForeign {
		// Ignored: the creation flow asks the driver for the machine's
		// own VM by its name, adopts it or creates one, and writes its
		// provider ID and node over the claim.
		p.Claim = &event{Type: corev1.EventTypeWarning, Reason: ReasonForeignClaim,
			Message: fmt.Sprintf("Ignoring the machine's node label %q and provider ID %q: %s", nodeNameOf(m), m.Spec.ProviderID, d.Binding.Why)}
	}
	switch d.Step {
	case stepBadInput:
		return badInput(p, obs.Now, d.Reason, d.Problem)
	case stepFrozen:
		p.Kind, p.RequeueAfter = planFrozen, o.HealthCheckPeriod
	case stepVerify:
		p.Kind = planVerify
	case stepWaitForClass:
		p.Kind, p.RequeueAfter = planWaitForClass, time.Second
	case stepCreate:
		planCreationStart(&p, obs, o)
	case stepNoTarget:
		p.RequeueAfter = o.LongRetry
		planPreservation(&p, obs, nil, o)
	case stepContested:
		// Neither claimant acts on the node or VM until the other's
		// claim is refuted (the driver is asked about each) or gone.
		p.Claim = &event{Type: corev1.EventTypeWarning, Reason: ReasonContestedClaim,
			Message: fmt.Sprintf("Not acting on node %q or VM %q: %s", nodeNameOf(m), m.Spec.ProviderID, d.Binding.Why)}
		p.RequeueAfter = o.HealthCheckPeriod
	case stepHealth:
		if !d.Binding.ownsNode() {
			// Not the machine's node (yet): its health says nothing about
			// the machine, and it is not synced.
			obs.Node = nil
		}
		planHealth(&p, obs, o)
		if obs.Node != nil && !obs.NodeStale {
			p.Node = planNodeSync(obs.Node, m, obs.Class)
		}
		if !obs.NodeStale {
			// A stale node's update event brings the machine back; its
			// in-place update and preservation are planned from the
			// node as written.
			planInPlace(&p, obs, obs.Node)
			planPreservation(&p, obs, obs.Node, o)
		}
	}
	return p
}

// planCreationStart plans stepCreate: the creation start is recorded, and a
// machine in CrashLoopBackOff whose creation timeout fell due between two
// attempts (the retry after a failure is capped at it) is Failed, without
// another call to the driver, for the MachineSet to replace.
func planCreationStart(p *machinePlan, obs observation, o *Options) {
	m := p.Machine
	if _, ok := m.Annotations[CreationStartedAnnotation]; !ok {
		setAnnotation(m, CreationStartedAnnotation, formatTime(obs.Now))
	}
	if timeout := obs.Config.MachineCreationTimeout.Duration; m.Status.CurrentStatus.Phase == v1alpha1.MachineCrashLoopBackOff &&
		obs.Now.Sub(creationStart(m, obs.Now)) > timeout {
		msg := fmt.Sprintf("Machine %s failed to join the cluster in %v; the last creation attempt failed: %s",
			m.Name, timeout, m.Status.LastOperation.Description)
		p.Event = report(m, obs.Now, transition{
			Phase:  v1alpha1.MachineFailed,
			Op:     v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationCreate, ErrorCode: m.Status.LastOperation.ErrorCode},
			Reason: ReasonJoinTimeout, Warning: true,
		})
		p.FailedJoin = true
		p.RequeueAfter = o.LongRetry
		return
	}
	p.Kind = planCreate
	p.WriteAhead = writeAhead(obs.Machine, m)
}

// writeAhead is the write that must be stored before the driver may create
// a VM for the machine stored as cur, planned as m: the machine finalizer,
// so that a machine that may have a VM cannot go without the deletion
// flow, which deletes the VM, and with it what else the plan changed in
// the metadata (the creation start). nil when cur carries the finalizer —
// a machine born with it (machinestate.NewMachine), or stored with it by
// an earlier sync: the creation start then goes with the VM's provider
// ID, and a deletion until then asks the driver for a VM by the
// machine's name (see lookUpNodeName).
func writeAhead(cur, m *v1alpha1.Machine) *v1alpha1.Machine {
	if slices.Contains(cur.Finalizers, v1alpha1.MachineFinalizer) {
		return nil
	}
	ahead := m.DeepCopy()
	ahead.Status = *cur.Status.DeepCopy()
	return ahead
}

// pendingTransition is the status of a machine whose VM was created and
// whose node has not joined yet.
var pendingTransition = transition{
	Phase: v1alpha1.MachinePending, TimeoutActive: true,
	Op: v1alpha1.LastOperation{
		Description: "Creating machine on cloud provider",
		State:       v1alpha1.MachineStateProcessing, Type: v1alpha1.MachineOperationCreate,
	},
}

// needsCreate reports whether the machine still needs its VM created (or
// adopted): no provider ID yet, or creation not finished. Failed machines
// are left to their MachineSet.
func needsCreate(m *v1alpha1.Machine) bool {
	phase := m.Status.CurrentStatus.Phase
	if phase == v1alpha1.MachineFailed || phase == v1alpha1.MachineTerminating {
		return false
	}
	if m.Spec.ProviderID == "" || phase == v1alpha1.MachineCrashLoopBackOff {
		return true
	}
	// A provider ID without a phase: with a node label, the VM was
	// created and the status waits for Options.PendingDelay; without, the
	// creation stopped between its two writes, and is repeated (the
	// driver adopts the VM).
	return phase == "" && nodeNameOf(m) == ""
}

// badInput reports a problem with the machine, its class or its secret.
func badInput(p machinePlan, now time.Time, reason, message string) machinePlan {
	p.Kind = planBadInput
	p.Retry = retryMedium
	p.Event = report(p.Machine, now, transition{
		Op:     v1alpha1.LastOperation{Description: message, State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationCreate},
		Reason: reason, Warning: true,
	})
	return p
}
