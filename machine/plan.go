package machine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
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
	// and that nothing refutes (see bindingOf).
	Vouch   vouch
	Vouched bool
	Rivals  []string
	// ReplacementDenied is the replacement gate's reason for not letting
	// the health timeout mark the machine Failed now; "" when it was not
	// asked or agreed. The gate is asked only when a plan wants to mark
	// the machine Failed, and then the machine is planned again.
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
	// planCreate: run the creation flow against the driver.
	planCreate
	// planVerify: ask the driver which VM backs the machine, which
	// claims a VM or a node that nobody vouched for (see bindingOf), and
	// plan again.
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
	// Node is the desired node, nil if it needs no change.
	Node  *corev1.Node
	Event *event
	// Claim reports claims of the machine that are ignored (a node or VM
	// that is not its own); nil if none.
	Claim *event
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
	// Joined is how long the machine took to join, when it just did.
	Joined time.Duration
	// FailedJoin is set when the creation timeout ran out before a join.
	FailedJoin bool
}

// planMachine decides what a sync of a machine that is not being deleted
// does. It is pure: everything it needs is in obs.
func planMachine(obs observation, o *Options) machinePlan {
	m := obs.Machine.DeepCopy()
	p := machinePlan{Machine: m}
	if !slices.Contains(m.Finalizers, v1alpha1.MachineFinalizer) {
		// Stored with whatever else this sync writes first — before a
		// VM is created, the creation start — rather than in a write of
		// its own.
		m.Finalizers = append(m.Finalizers, v1alpha1.MachineFinalizer)
	}
	if len(obs.ValidationErrors) > 0 {
		return badInput(p, obs.Now, ReasonInvalidMachine,
			"Machine validation failed: "+obs.ValidationErrors.ToAggregate().Error())
	}
	if obs.Frozen {
		p.Kind = planFrozen
		p.RequeueAfter = o.HealthCheckPeriod
		return p
	}
	b := bindingOf(m, obs.Node, obs.Vouch, obs.Vouched, obs.Rivals)
	if b.Kind == bindForeign {
		// Ignored: the creation flow asks the driver for the machine's
		// own VM by its name, adopts it or creates one, and writes its
		// provider ID and node over the claim.
		p.Claim = &event{Type: corev1.EventTypeWarning, Reason: ReasonForeignClaim,
			Message: fmt.Sprintf("Ignoring the machine's node label %q and provider ID %q: %s", nodeNameOf(m), m.Spec.ProviderID, b.Why)}
	}
	if create, verify := needsCreate(m) || b.Kind == bindForeign, b.Kind == bindUnverified; create || verify {
		switch {
		case obs.Class == nil:
			return badInput(p, obs.Now, ReasonClassNotFound,
				fmt.Sprintf("MachineClass %q not found in namespace %q", m.Spec.Class.Name, m.Namespace))
		case obs.Class.DeletionTimestamp != nil:
			// Its deletion waits for the machines that use it; a new VM
			// would be one more, and one its owner means to be rid of.
			return badInput(p, obs.Now, ReasonClassDeleting,
				fmt.Sprintf("MachineClass %q is being deleted: no VM is created from it; point the machine at another class or delete the machine", obs.Class.Name))
		case len(obs.ClassErrors) > 0:
			return badInput(p, obs.Now, ReasonInvalidClass,
				fmt.Sprintf("MachineClass %q is invalid: %v", obs.Class.Name, obs.ClassErrors.ToAggregate()))
		case obs.SecretProblem != "":
			return badInput(p, obs.Now, obs.SecretReason, obs.SecretProblem)
		case !create:
			p.Kind = planVerify
			return p
		case !slices.Contains(obs.Class.Finalizers, v1alpha1.MachineFinalizer):
			p.Kind = planWaitForClass
			p.RequeueAfter = time.Second
			return p
		}
		if _, ok := m.Annotations[CreationStartedAnnotation]; !ok {
			setAnnotation(m, CreationStartedAnnotation, formatTime(obs.Now))
		}
		if timeout := obs.Config.MachineCreationTimeout.Duration; m.Status.CurrentStatus.Phase == v1alpha1.MachineCrashLoopBackOff &&
			obs.Now.Sub(creationStart(m)) > timeout {
			// The creation timeout falls due between two attempts (the
			// retry after a failure is capped at it): Failed, without
			// another call to the driver, for the MachineSet to replace.
			msg := fmt.Sprintf("Machine %s failed to join the cluster in %v; the last creation attempt failed: %s",
				m.Name, timeout, m.Status.LastOperation.Description)
			p.Event = report(m, obs.Now, transition{
				Phase:  v1alpha1.MachineFailed,
				Op:     v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationCreate, ErrorCode: m.Status.LastOperation.ErrorCode},
				Reason: ReasonJoinTimeout, Warning: true,
			})
			p.FailedJoin = true
			p.RequeueAfter = o.LongRetry
			return p
		}
		p.Kind = planCreate
		return p
	}
	if !obs.HasTarget {
		p.RequeueAfter = o.LongRetry
		return p
	}
	if b.Kind == bindContested {
		// Neither claimant acts on the node or VM until the other's
		// claim is refuted (the driver is asked about each) or gone.
		p.Claim = &event{Type: corev1.EventTypeWarning, Reason: ReasonContestedClaim,
			Message: fmt.Sprintf("Not acting on node %q or VM %q: %s", nodeNameOf(m), m.Spec.ProviderID, b.Why)}
		p.RequeueAfter = o.HealthCheckPeriod
		return p
	}
	if !b.ownsNode() {
		// Not the machine's node (yet): its health says nothing about
		// the machine, and it is not synced.
		obs.Node = nil
	}
	planHealth(&p, obs, o)
	if obs.Node != nil && !obs.NodeStale {
		p.Node = planNodeSync(obs.Node, m, obs.Class)
	}
	return p
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
}

// planCreateOutcome turns the result of the creation flow into the machine
// to write. It is pure.
func planCreateOutcome(obs observation, out createOutcome, o *Options) machinePlan {
	m := obs.Machine.DeepCopy()
	p := machinePlan{Machine: m}
	if out.LastKnownState != "" {
		m.Status.LastKnownState = out.LastKnownState
	}
	timedOut := obs.Now.Sub(creationStart(m)) > obs.Config.MachineCreationTimeout.Duration
	failPhase := v1alpha1.MachineCrashLoopBackOff
	if timedOut {
		failPhase = v1alpha1.MachineFailed
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
	case out.FailedOp != "":
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
			p.TimeoutIn = creationStart(m).Add(obs.Config.MachineCreationTimeout.Duration).Sub(obs.Now) + time.Millisecond
		}
		p.Err = fmt.Errorf("%s: %w", out.FailedOp, out.Err)
		return p
	}
	if claimed := m.Spec.ProviderID; claimed != "" && claimed != out.ProviderID {
		p.Claim = &event{Type: corev1.EventTypeWarning, Reason: ReasonForeignClaim,
			Message: fmt.Sprintf("Replacing the machine's provider ID %q: the driver names VM %s (node %q) for it", claimed, out.ProviderID, out.NodeName)}
	}
	m.Spec.ProviderID = out.ProviderID
	if m.Annotations[v1alpha1.MachinePriorityAnnotation] == "" {
		setAnnotation(m, v1alpha1.MachinePriorityAnnotation, v1alpha1.MachinePriorityDefault)
	}
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

// planHealth plans join and health transitions of a machine whose VM exists.
func planHealth(p *machinePlan, obs observation, o *Options) {
	m := p.Machine
	now := obs.Now
	node := obs.Node
	healthy, why := nodeHealth(node, conditionTypes(obs.Config.NodeConditions))
	joined := healthy && !hasTaint(node, v1alpha1.CriticalComponentsNotReadyTaintKey)
	if m.Status.CurrentStatus.Phase == "" && !joined {
		// The VM was created and its status not written yet
		// (Options.PendingDelay).
		if wait := o.PendingDelay - now.Sub(creationStart(m)); wait > 0 {
			p.RequeueAfter = wait
			return
		}
		report(m, now, pendingTransition)
	}
	if node != nil && !conditionsEquivalent(m.Status.Conditions, node.Status.Conditions) {
		m.Status.Conditions = nil
		for _, c := range node.Status.Conditions {
			m.Status.Conditions = append(m.Status.Conditions, *c.DeepCopy())
		}
	}
	period := o.HealthCheckPeriod
	switch m.Status.CurrentStatus.Phase {
	case "", v1alpha1.MachinePending, v1alpha1.MachineAvailable:
		if joined {
			// The join duration is the lastOperation's and the join
			// metric's; MCM's machine-join-duration annotation would cost
			// a write of its own.
			joined := now.Sub(creationStart(m)).Round(time.Millisecond)
			markRunning(p, now, v1alpha1.MachineOperationCreate, "",
				fmt.Sprintf("Machine %s successfully joined the cluster in %v", m.Name, joined), o)
			p.Joined = joined
			return
		}
		timeout := obs.Config.MachineCreationTimeout.Duration
		elapsed := now.Sub(creationStart(m))
		if elapsed > timeout {
			msg := fmt.Sprintf("Machine %s failed to join the cluster in %v", m.Name, timeout)
			p.Event = report(m, now, transition{
				Phase:  v1alpha1.MachineFailed,
				Op:     v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationCreate},
				Reason: ReasonJoinTimeout, Warning: true,
			})
			p.FailedJoin = true
			p.RequeueAfter = o.LongRetry
			return
		}
		p.RequeueAfter = min(period, timeout-elapsed+time.Millisecond)
	case v1alpha1.MachineRunning:
		if healthy {
			p.RequeueAfter = o.LongRetry
			return
		}
		msg := fmt.Sprintf("Machine %s is unhealthy - changing MachineState to Unknown. %s", m.Name, why)
		setAnnotation(m, UnhealthySinceAnnotation, formatTime(now))
		p.Event = report(m, now, transition{
			Phase: v1alpha1.MachineUnknown, TimeoutActive: true,
			Op:     v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateProcessing, Type: v1alpha1.MachineOperationHealthCheck},
			Reason: ReasonUnhealthy, Warning: true,
		})
		p.RequeueAfter = min(period, obs.Config.MachineHealthTimeout.Duration+time.Millisecond)
	case v1alpha1.MachineUnknown:
		if healthy {
			markRunning(p, now, v1alpha1.MachineOperationHealthCheck, ReasonRecovered,
				fmt.Sprintf("Machine %s successfully re-joined the cluster", m.Name), o)
			return
		}
		since, ok := parseTime(m.Annotations[UnhealthySinceAnnotation])
		if !ok {
			// Unknown without the timestamp (set by another controller,
			// or a crash between the two writes): the timer starts now.
			since = now
			setAnnotation(m, UnhealthySinceAnnotation, formatTime(now))
		}
		if !obs.OutageEnded.IsZero() && since.Before(obs.OutageEnded) {
			// Unhealthy across an outage, when nothing could be seen: back
			// to Running, as MCM does; the next health check starts a new
			// timeout if the node is still unhealthy.
			markRunning(p, now, v1alpha1.MachineOperationHealthCheck, ReasonHealthTimerReset,
				"Machine Health Timeout was reset due to APIServer being unreachable", o)
			p.RequeueAfter = period
			return
		}
		if *obs.Config.DisableHealthTimeout {
			p.RequeueAfter = period
			return
		}
		timeout := obs.Config.MachineHealthTimeout.Duration
		elapsed := now.Sub(since)
		if elapsed <= timeout {
			p.RequeueAfter = min(period, timeout-elapsed+time.Millisecond)
			return
		}
		if obs.ReplacementDenied != "" {
			// The gate is polled again after period: it needs no event to
			// free a slot.
			msg := fmt.Sprintf("Machine %s is unhealthy for more than %v, but %s; waiting", m.Name, timeout, obs.ReplacementDenied)
			p.Event = report(m, now, transition{
				Op:     v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateProcessing, Type: v1alpha1.MachineOperationHealthCheck},
				Reason: ReasonReplacementLimited, Warning: true,
			})
			p.RequeueAfter = period
			return
		}
		msg := fmt.Sprintf("Machine %s health checks failed for %v (%s) - changing MachineState to Failed", m.Name, timeout, why)
		p.Event = report(m, now, transition{
			Phase:  v1alpha1.MachineFailed,
			Op:     v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationHealthCheck},
			Reason: ReasonHealthTimeout, Warning: true,
		})
		p.MarkedFailed = true
		p.RequeueAfter = o.LongRetry
	default: // Failed, CrashLoopBackOff: left to the MachineSet or the creation flow.
		p.RequeueAfter = o.LongRetry
	}
}

// markRunning moves a machine that joined (or re-joined) to Running: the
// timeout stops, the unhealthy-since mark goes, and a successful operation
// of the given type is reported with a Normal event.
func markRunning(p *machinePlan, now time.Time, opType v1alpha1.MachineOperationType, reason, msg string, o *Options) {
	deleteAnnotation(p.Machine, UnhealthySinceAnnotation)
	p.Event = report(p.Machine, now, transition{
		Phase:  v1alpha1.MachineRunning,
		Op:     v1alpha1.LastOperation{Description: msg, State: v1alpha1.MachineStateSuccessful, Type: opType},
		Reason: reason,
	})
	p.RequeueAfter = o.LongRetry
}

// nodeHealth reports whether node is healthy: Ready is True and none of
// the given condition types is True. why explains an unhealthy verdict.
func nodeHealth(node *corev1.Node, bad []corev1.NodeConditionType) (healthy bool, why string) {
	if node == nil {
		return false, "Node object went missing"
	}
	ready := false
	var problems []string
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
			if !ready {
				problems = append(problems, fmt.Sprintf("Ready=%s", c.Status))
			}
		} else if c.Status == corev1.ConditionTrue && slices.Contains(bad, c.Type) {
			problems = append(problems, fmt.Sprintf("%s=True", c.Type))
		}
	}
	if !ready && len(problems) == 0 {
		problems = append(problems, "Ready condition missing")
	}
	if len(problems) > 0 {
		return false, "Node conditions: " + strings.Join(problems, ", ")
	}
	return true, ""
}

// conditionTypes splits the comma-separated nodeConditions setting.
func conditionTypes(list *string) []corev1.NodeConditionType {
	if list == nil {
		return nil
	}
	var out []corev1.NodeConditionType
	for s := range strings.SplitSeq(*list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, corev1.NodeConditionType(s))
		}
	}
	return out
}

// conditionsEquivalent compares conditions ignoring heartbeat times, which
// the kubelet bumps all the time.
func conditionsEquivalent(a, b []corev1.NodeCondition) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.NodeCondition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason &&
			x.Message == y.Message && x.LastTransitionTime.Equal(&y.LastTransitionTime)
	})
}

func hasTaint(node *corev1.Node, key string) bool {
	return node != nil && slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}
