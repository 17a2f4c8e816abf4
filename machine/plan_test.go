package machine

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/api/machine/v1alpha1/validation"
	"github.com/mcmkit/mcm/driver"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func testOptions(t *testing.T) *Options {
	t.Helper()
	o, err := Options{}.complete()
	if err != nil {
		t.Fatal(err)
	}
	return &o
}

func baseMachine() *v1alpha1.Machine {
	return &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "ns", UID: "uid-m1", Finalizers: []string{v1alpha1.MachineFinalizer},
			CreationTimestamp: metav1.NewTime(t0.Add(-time.Minute))},
		Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Name: "c"}},
	}
}

func withPhase(m *v1alpha1.Machine, phase v1alpha1.MachinePhase, providerID string) *v1alpha1.Machine {
	m.Status.CurrentStatus.Phase = phase
	m.Spec.ProviderID = providerID
	if providerID != "" {
		m.Labels = map[string]string{v1alpha1.NodeLabelKey: "n1"}
	}
	return m
}

func readyClass() *v1alpha1.MachineClass {
	return &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Finalizers: []string{v1alpha1.MachineFinalizer}}}
}

// node is node n1 of VM p1, bound to baseMachine.
func node(conds ...corev1.NodeCondition) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{v1alpha1.MachineUIDAnnotation: "uid-m1"}},
		Spec:       corev1.NodeSpec{ProviderID: "p1"},
		Status:     corev1.NodeStatus{Conditions: conds},
	}
}

func cond(t corev1.NodeConditionType, s corev1.ConditionStatus) corev1.NodeCondition {
	return corev1.NodeCondition{Type: t, Status: s, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}
}

// obsFor observes m as the controller that created its VM does: the
// driver vouched for its provider ID.
func obsFor(m *v1alpha1.Machine) observation {
	return observation{
		Now: t0, Machine: m, HasTarget: true,
		Config:  v1alpha1.EffectiveMachineConfiguration(m, nil),
		Class:   readyClass(),
		Vouch:   vouch{ProviderID: m.Spec.ProviderID},
		Vouched: m.Spec.ProviderID != "",
	}
}

// TestPlanMachineKinds covers each branch of planMachine's dispatch.
func TestPlanMachineKinds(t *testing.T) {
	o := testOptions(t)
	tests := []struct {
		name      string
		obs       func() observation
		wantKind  planKind
		wantRetry retryClass
		wantEvent string
		wantDesc  string
	}{
		{"no finalizer: stored with the creation start", func() observation {
			m := baseMachine()
			m.Finalizers = nil
			return obsFor(m)
		}, planCreate, retryNone, "", ""},
		{"invalid machine", func() observation {
			o := obsFor(baseMachine())
			o.ValidationErrors = field.ErrorList{field.Required(field.NewPath("spec", "class", "name"), "")}
			return o
		}, planBadInput, retryMedium, ReasonInvalidMachine, "Machine validation failed: spec.class.name: Required value"},
		{"frozen", func() observation {
			o := obsFor(baseMachine())
			o.Frozen = true
			return o
		}, planFrozen, retryNone, "", ""},
		{"class missing", func() observation {
			o := obsFor(baseMachine())
			o.Class = nil
			return o
		}, planBadInput, retryMedium, ReasonClassNotFound, `MachineClass "c" not found in namespace "ns"`},
		{"class being deleted", func() observation {
			o := obsFor(baseMachine())
			o.Class.DeletionTimestamp = &metav1.Time{Time: o.Now}
			return o
		}, planBadInput, retryMedium, ReasonClassDeleting,
			`MachineClass "c" is being deleted: no VM is created from it; point the machine at another class or delete the machine`},
		{"name too long for a label value", func() observation {
			m := baseMachine()
			m.Name = strings.Repeat("m", 64)
			o := obsFor(m)
			o.ValidationErrors = validation.ValidateMachine(m)
			return o
		}, planBadInput, retryMedium, ReasonInvalidMachine,
			"Machine validation failed: metadata.name: Invalid value: \"" + strings.Repeat("m", 64) +
				"\": metadata.name must be at most 63 characters: a machine's name is used as a label value and as its host name"},
		{"class invalid", func() observation {
			o := obsFor(baseMachine())
			o.ClassErrors = field.ErrorList{field.Required(field.NewPath("providerSpec"), "")}
			return o
		}, planBadInput, retryMedium, ReasonInvalidClass, `MachineClass "c" is invalid: providerSpec: Required value`},
		{"secret problem", func() observation {
			o := obsFor(baseMachine())
			o.SecretProblem, o.SecretReason = "no userData", ReasonSecretInvalid
			return o
		}, planBadInput, retryMedium, ReasonSecretInvalid, "no userData"},
		{"class without finalizer", func() observation {
			o := obsFor(baseMachine())
			o.Class.Finalizers = nil
			return o
		}, planWaitForClass, retryNone, "", ""},
		{"create", func() observation { return obsFor(baseMachine()) }, planCreate, retryNone, "", ""},
		{"crashloop retries create", func() observation {
			return obsFor(withPhase(baseMachine(), v1alpha1.MachineCrashLoopBackOff, ""))
		}, planCreate, retryNone, "", ""},
		{"failed machine is not created again", func() observation {
			return obsFor(withPhase(baseMachine(), v1alpha1.MachineFailed, ""))
		}, planUpdate, retryNone, "", ""},
		{"no target: available stays", func() observation {
			o := obsFor(withPhase(baseMachine(), v1alpha1.MachineAvailable, "p1"))
			o.HasTarget = false
			return o
		}, planUpdate, retryNone, "", ""},
		{"running machine needs no class", func() observation {
			o := obsFor(withPhase(baseMachine(), v1alpha1.MachineRunning, "p1"))
			o.Class = nil
			o.Node = node(cond(corev1.NodeReady, corev1.ConditionTrue))
			return o
		}, planUpdate, retryNone, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := tc.obs()
			before := obs.Machine.DeepCopy()
			p := planMachine(obs, o)
			if diff := cmp.Diff(before, obs.Machine); diff != "" {
				t.Errorf("planMachine modified its input (-before +after):\n%s", diff)
			}
			got := struct {
				Kind  planKind
				Retry retryClass
				Event string
				Desc  string
			}{p.Kind, p.Retry, "", ""}
			if p.Event != nil {
				got.Event = p.Event.Reason
			}
			if p.Kind == planBadInput {
				got.Desc = p.Machine.Status.LastOperation.Description
				if p.Machine.Status.LastOperation.State != v1alpha1.MachineStateFailed {
					t.Errorf("bad input state %q", p.Machine.Status.LastOperation.State)
				}
			}
			want := struct {
				Kind  planKind
				Retry retryClass
				Event string
				Desc  string
			}{tc.wantKind, tc.wantRetry, tc.wantEvent, tc.wantDesc}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if p.Kind == planCreate && p.Machine.Annotations[CreationStartedAnnotation] != formatTime(t0) {
				t.Errorf("creation start not recorded: %v", p.Machine.Annotations)
			}
			if !slices.Contains(p.Machine.Finalizers, v1alpha1.MachineFinalizer) {
				t.Errorf("finalizers %v", p.Machine.Finalizers)
			}
		})
	}
}

func TestPlanMachineBadInputIsQuietWhenUnchanged(t *testing.T) {
	o := testOptions(t)
	obs := obsFor(baseMachine())
	obs.Class = nil
	first := planMachine(obs, o)
	obs.Machine = first.Machine
	obs.Now = t0.Add(time.Minute)
	second := planMachine(obs, o)
	if second.Event != nil {
		t.Errorf("repeated bad input recorded another event: %+v", second.Event)
	}
	if diff := cmp.Diff(first.Machine.Status, second.Machine.Status); diff != "" {
		t.Errorf("status changed although nothing did (-first +second):\n%s", diff)
	}
}

func TestKeepsCreationStartAcrossRetries(t *testing.T) {
	o := testOptions(t)
	m := baseMachine()
	m.Annotations = map[string]string{CreationStartedAnnotation: formatTime(t0.Add(-time.Hour))}
	m.CreationTimestamp = metav1.NewTime(t0.Add(-2 * time.Hour))
	p := planMachine(obsFor(m), o)
	if got := p.Machine.Annotations[CreationStartedAnnotation]; got != formatTime(t0.Add(-time.Hour)) {
		t.Errorf("creation start moved to %s", got)
	}
}

func TestPlanCreateOutcome(t *testing.T) {
	o := testOptions(t)
	type result struct {
		Phase      v1alpha1.MachinePhase
		State      v1alpha1.MachineState
		ErrorCode  string
		ProviderID string
		NodeLabel  string
		Priority   string
		Retry      retryClass
		Addresses  int
	}
	addr := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
	tests := []struct {
		name     string
		target   bool
		started  time.Duration // before t0
		out      createOutcome
		want     result
		wantDesc string
	}{
		{"created with target", true, time.Minute, createOutcome{ProviderID: "p1", NodeName: "n1"},
			result{v1alpha1.MachinePending, v1alpha1.MachineStateProcessing, "", "p1", "n1", "3", retryNone, 0}, "Creating machine on cloud provider"},
		{"created without target", false, time.Minute, createOutcome{ProviderID: "p1", NodeName: "n1", Addresses: addr},
			result{v1alpha1.MachineAvailable, v1alpha1.MachineStateSuccessful, "", "p1", "", "3", retryNone, 1}, "Created machine on cloud provider"},
		{"resource exhausted", true, time.Minute, createOutcome{FailedOp: driver.OperationCreateMachine, Err: driver.NewError(driver.ResourceExhausted, "quota")},
			result{v1alpha1.MachineCrashLoopBackOff, v1alpha1.MachineStateFailed, "ResourceExhausted", "", "", "", retryExhausted, 0}, ""},
		{"unavailable retries fast", true, time.Minute, createOutcome{FailedOp: driver.OperationCreateMachine, Err: driver.NewError(driver.Unavailable, "down")},
			result{v1alpha1.MachineCrashLoopBackOff, v1alpha1.MachineStateFailed, "Unavailable", "", "", "", retryShort, 0}, ""},
		{"invalid argument retries medium", true, time.Minute, createOutcome{FailedOp: driver.OperationCreateMachine, Err: driver.NewError(driver.InvalidArgument, "bad spec")},
			result{v1alpha1.MachineCrashLoopBackOff, v1alpha1.MachineStateFailed, "InvalidArgument", "", "", "", retryMedium, 0}, ""},
		{"failure after the creation timeout", true, time.Hour, createOutcome{FailedOp: driver.OperationCreateMachine, Err: driver.NewError(driver.ResourceExhausted, "quota")},
			result{v1alpha1.MachineFailed, v1alpha1.MachineStateFailed, "ResourceExhausted", "", "", "", retryExhausted, 0}, ""},
		{"initialize failed", true, time.Minute, createOutcome{FailedOp: driver.OperationInitializeMachine, Err: driver.NewError(driver.Internal, "nic")},
			result{v1alpha1.MachineCrashLoopBackOff, v1alpha1.MachineStateFailed, "Internal", "", "", "", retryMedium, 0}, ""},
		{"plain error counts as Unknown", true, time.Minute, createOutcome{FailedOp: driver.OperationGetMachineStatus, Err: errors.New("boom")},
			result{v1alpha1.MachineCrashLoopBackOff, v1alpha1.MachineStateFailed, "Unknown", "", "", "", retryShort, 0}, ""},
		{"stale node", true, time.Minute, createOutcome{ProviderID: "p1", NodeName: "n1", StaleNodeOwner: "other"},
			result{v1alpha1.MachineFailed, v1alpha1.MachineStateFailed, "", "", "", "", retryShort, 0}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := baseMachine()
			m.Annotations = map[string]string{CreationStartedAnnotation: formatTime(t0.Add(-tc.started))}
			m.CreationTimestamp = metav1.NewTime(t0.Add(-tc.started - time.Second))
			obs := obsFor(m)
			obs.HasTarget = tc.target
			p := planCreateOutcome(obs, tc.out, o)
			pm := p.Machine
			got := result{pm.Status.CurrentStatus.Phase, pm.Status.LastOperation.State, pm.Status.LastOperation.ErrorCode,
				pm.Spec.ProviderID, pm.Labels[v1alpha1.NodeLabelKey], pm.Annotations[v1alpha1.MachinePriorityAnnotation], p.Retry, len(pm.Status.Addresses)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			if tc.wantDesc != "" && pm.Status.LastOperation.Description != tc.wantDesc {
				t.Errorf("description %q, want %q", pm.Status.LastOperation.Description, tc.wantDesc)
			}
			if pm.Status.LastOperation.Type != v1alpha1.MachineOperationCreate {
				t.Errorf("type %q", pm.Status.LastOperation.Type)
			}
			// Failures are told by an event; a VM created is not.
			if failed := pm.Status.LastOperation.State == v1alpha1.MachineStateFailed; failed != (p.Event != nil) {
				t.Errorf("failed %v, event %+v", failed, p.Event)
			}
		})
	}
}

func TestPlanHealth(t *testing.T) {
	o := testOptions(t)
	ready := cond(corev1.NodeReady, corev1.ConditionTrue)
	notReady := cond(corev1.NodeReady, corev1.ConditionFalse)
	disk := cond("DiskPressure", corev1.ConditionTrue)
	type result struct {
		Phase          v1alpha1.MachinePhase
		Type           v1alpha1.MachineOperationType
		State          v1alpha1.MachineState
		UnhealthySince string
		MarkedFailed   bool
		FailedJoin     bool
		Event          string
	}
	tests := []struct {
		name    string
		phase   v1alpha1.MachinePhase
		started time.Duration // creation started before t0
		since   string        // unhealthy-since annotation
		node    *corev1.Node
		denied  string // the replacement gate's answer
		disable bool
		want    result
	}{
		{"pending joins", v1alpha1.MachinePending, time.Minute, "", node(ready), "", false,
			result{v1alpha1.MachineRunning, v1alpha1.MachineOperationCreate, v1alpha1.MachineStateSuccessful, "", false, false, ""}},
		{"pending waits for critical components", v1alpha1.MachinePending, time.Minute, "", func() *corev1.Node {
			n := node(ready)
			n.Spec.Taints = []corev1.Taint{{Key: v1alpha1.CriticalComponentsNotReadyTaintKey, Effect: corev1.TaintEffectNoSchedule}}
			return n
		}(), "", false, result{v1alpha1.MachinePending, "", "", "", false, false, ""}},
		{"pending without node waits", v1alpha1.MachinePending, time.Minute, "", nil, "", false,
			result{v1alpha1.MachinePending, "", "", "", false, false, ""}},
		{"pending times out", v1alpha1.MachinePending, time.Hour, "", nil, "", false,
			result{v1alpha1.MachineFailed, v1alpha1.MachineOperationCreate, v1alpha1.MachineStateFailed, "", false, true, ReasonJoinTimeout}},
		{"running stays", v1alpha1.MachineRunning, time.Hour, "", node(ready), "", false,
			result{v1alpha1.MachineRunning, "", "", "", false, false, ""}},
		{"running not ready", v1alpha1.MachineRunning, time.Hour, "", node(notReady), "", false,
			result{v1alpha1.MachineUnknown, v1alpha1.MachineOperationHealthCheck, v1alpha1.MachineStateProcessing, formatTime(t0), false, false, ReasonUnhealthy}},
		{"running with a bad condition", v1alpha1.MachineRunning, time.Hour, "", node(ready, disk), "", false,
			result{v1alpha1.MachineUnknown, v1alpha1.MachineOperationHealthCheck, v1alpha1.MachineStateProcessing, formatTime(t0), false, false, ReasonUnhealthy}},
		{"running node gone", v1alpha1.MachineRunning, time.Hour, "", nil, "", false,
			result{v1alpha1.MachineUnknown, v1alpha1.MachineOperationHealthCheck, v1alpha1.MachineStateProcessing, formatTime(t0), false, false, ReasonUnhealthy}},
		{"unknown recovers", v1alpha1.MachineUnknown, time.Hour, formatTime(t0.Add(-time.Minute)), node(ready), "", false,
			result{v1alpha1.MachineRunning, v1alpha1.MachineOperationHealthCheck, v1alpha1.MachineStateSuccessful, "", false, false, ReasonRecovered}},
		{"unknown within timeout", v1alpha1.MachineUnknown, time.Hour, formatTime(t0.Add(-time.Minute)), node(notReady), "", false,
			result{v1alpha1.MachineUnknown, "", "", formatTime(t0.Add(-time.Minute)), false, false, ""}},
		{"unknown without timestamp starts the timer", v1alpha1.MachineUnknown, time.Hour, "", node(notReady), "", false,
			result{v1alpha1.MachineUnknown, "", "", formatTime(t0), false, false, ""}},
		{"unknown times out", v1alpha1.MachineUnknown, time.Hour, formatTime(t0.Add(-time.Hour)), node(notReady), "", false,
			result{v1alpha1.MachineFailed, v1alpha1.MachineOperationHealthCheck, v1alpha1.MachineStateFailed, formatTime(t0.Add(-time.Hour)), true, false, ReasonHealthTimeout}},
		{"unknown times out but budget is used", v1alpha1.MachineUnknown, time.Hour, formatTime(t0.Add(-time.Hour)), node(notReady), `1 of at most 1 machines of deployment "d" are being replaced`, false,
			result{v1alpha1.MachineUnknown, v1alpha1.MachineOperationHealthCheck, v1alpha1.MachineStateProcessing, formatTime(t0.Add(-time.Hour)), false, false, ReasonReplacementLimited}},
		{"health timeout disabled", v1alpha1.MachineUnknown, time.Hour, formatTime(t0.Add(-time.Hour)), node(notReady), "", true,
			result{v1alpha1.MachineUnknown, "", "", formatTime(t0.Add(-time.Hour)), false, false, ""}},
		{"failed is left alone", v1alpha1.MachineFailed, time.Hour, "", node(notReady), "", false,
			result{v1alpha1.MachineFailed, "", "", "", false, false, ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := withPhase(baseMachine(), tc.phase, "p1")
			m.Annotations = map[string]string{CreationStartedAnnotation: formatTime(t0.Add(-tc.started))}
			m.CreationTimestamp = metav1.NewTime(t0.Add(-tc.started - time.Second))
			if tc.since != "" {
				m.Annotations[UnhealthySinceAnnotation] = tc.since
			}
			if tc.disable {
				m.Spec.MachineConfiguration = &v1alpha1.MachineConfiguration{DisableHealthTimeout: new(true)}
			}
			obs := obsFor(m)
			obs.Node, obs.ReplacementDenied = tc.node, tc.denied
			p := machinePlan{Machine: m.DeepCopy()}
			planHealth(&p, obs, o)
			pm := p.Machine
			got := result{pm.Status.CurrentStatus.Phase, pm.Status.LastOperation.Type, pm.Status.LastOperation.State,
				pm.Annotations[UnhealthySinceAnnotation], p.MarkedFailed, p.FailedJoin, ""}
			if p.Event != nil {
				got.Event = p.Event.Reason
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("health (-want +got):\n%s", diff)
			}
			if p.RequeueAfter <= 0 {
				t.Errorf("no requeue: %v", p.RequeueAfter)
			}
			if tc.node != nil && !conditionsEquivalent(pm.Status.Conditions, tc.node.Status.Conditions) {
				t.Errorf("conditions not copied: %v", pm.Status.Conditions)
			}
		})
	}
}

func TestPlanHealthTimeoutFromDedicatedTimestamp(t *testing.T) {
	// lastUpdateTime is recent (other writes moved it), the unhealthy-since
	// annotation is old: the machine must fail (MCM #1009).
	o := testOptions(t)
	m := withPhase(baseMachine(), v1alpha1.MachineUnknown, "p1")
	m.Status.CurrentStatus.LastUpdateTime = metav1.NewTime(t0)
	m.Status.LastOperation.LastUpdateTime = metav1.NewTime(t0)
	m.Annotations = map[string]string{UnhealthySinceAnnotation: formatTime(t0.Add(-11 * time.Minute))}
	obs := obsFor(m)
	obs.Node = node(cond(corev1.NodeReady, corev1.ConditionUnknown))
	p := machinePlan{Machine: m.DeepCopy()}
	planHealth(&p, obs, o)
	if p.Machine.Status.CurrentStatus.Phase != v1alpha1.MachineFailed {
		t.Errorf("phase %q, want Failed", p.Machine.Status.CurrentStatus.Phase)
	}
}

func TestDecideDeletion(t *testing.T) {
	deleted := metav1.NewTime(t0.Add(-time.Minute))
	type result struct {
		Step     DeletionStep
		Action   deletionAction
		Force    bool
		BadInput bool
		// Drain: the drain parameters the decision holds to (and the
		// write records).
		Drain drainParams
	}
	short := drainParams{DrainTimeout: metav1.Duration{Duration: time.Second}, MaxEvictRetries: 1}
	shorten := func(m *v1alpha1.Machine, in *deletionInput) {
		m.Spec.MachineConfiguration = &v1alpha1.MachineConfiguration{MachineDrainTimeout: &short.DrainTimeout, MaxEvictRetries: new(short.MaxEvictRetries)}
		in.Config = v1alpha1.EffectiveMachineConfiguration(m, nil)
	}
	d0 := defaultDrain
	tests := []struct {
		name string
		// step is the recorded step ("": no record; a step the flow does
		// not know: a record that cannot be read).
		step   string
		mutate func(*v1alpha1.Machine, *deletionInput)
		want   result
	}{
		{"new deletion waits for pre-drain hook", "", func(m *v1alpha1.Machine, _ *deletionInput) {
			m.Annotations[PreDrainHookPrefix+"/x"] = ""
		}, result{StepWaitPreDrainHooks, delWait, false, false, d0}},
		{"unknown step restarts", "Bogus", nil, result{StepWaitPreDrainHooks, delAdvance, false, false, d0}},
		{"no pre-drain hooks", string(StepWaitPreDrainHooks), nil, result{StepWaitPreDrainHooks, delAdvance, false, false, d0}},
		{"drain", string(StepDrain), nil, result{StepDrain, delDrain, false, false, d0}},
		{"drain without node", string(StepDrain), func(_ *v1alpha1.Machine, in *deletionInput) { in.Node = nil }, result{StepDrain, delAdvance, false, false, d0}},
		{"drain without target", string(StepDrain), func(_ *v1alpha1.Machine, in *deletionInput) { in.HasTarget = false }, result{StepDrain, delAdvance, false, false, d0}},
		{"force by label", string(StepDrain), func(m *v1alpha1.Machine, _ *deletionInput) {
			m.Labels = map[string]string{v1alpha1.ForceDeletionLabelKey: "True"}
		}, result{StepDrain, delDrain, true, false, d0}},
		{"force after drain timeout", string(StepDrain), func(m *v1alpha1.Machine, _ *deletionInput) {
			m.DeletionTimestamp = &metav1.Time{Time: t0.Add(-3 * time.Hour)}
		}, result{StepDrain, delDrain, true, false, d0}},
		// The drain forces on a node NotReady for long (its ForceAfter);
		// the machine does not decide that a second time.
		{"node not ready long is the drain's to force", string(StepDrain), func(_ *v1alpha1.Machine, in *deletionInput) {
			in.Node = node(cond(corev1.NodeReady, corev1.ConditionUnknown))
		}, result{StepDrain, delDrain, false, false, d0}},
		{"the old volume step starts over", "WaitForVolumeDetach", nil, result{StepWaitPreDrainHooks, delAdvance, false, false, d0}},
		{"pre-terminate hook", string(StepWaitPreTerminateHooks), func(m *v1alpha1.Machine, _ *deletionInput) {
			m.Annotations[PreTerminateHookPrefix+"/y"] = ""
		}, result{StepWaitPreTerminateHooks, delWait, false, false, d0}},
		{"delete VM", string(StepDeleteVM), nil, result{StepDeleteVM, delDeleteVM, false, false, d0}},
		{"delete VM without class, never created", string(StepDeleteVM), func(m *v1alpha1.Machine, in *deletionInput) {
			in.ClassFound = false
			m.Spec.ProviderID = ""
		}, result{StepDeleteVM, delAdvance, false, false, d0}},
		{"delete VM without class", string(StepDeleteVM), func(_ *v1alpha1.Machine, in *deletionInput) {
			in.ClassFound = false
		}, result{StepDeleteVM, delWait, false, true, d0}},
		{"delete node", string(StepDeleteNode), nil, result{StepDeleteNode, delDeleteNode, false, false, d0}},
		{"no node to delete", string(StepDeleteNode), func(_ *v1alpha1.Machine, in *deletionInput) { in.NodeName = "" }, result{StepDeleteNode, delAdvance, false, false, d0}},
		{"remove finalizer", string(StepRemoveFinalizer), nil, result{StepRemoveFinalizer, delRemoveFinalizer, false, false, d0}},
		// The annotation is anyone's to write who may patch the machine;
		// the flow goes by the record in its status.
		{"a step annotation ahead of the record is ignored", string(StepDrain), func(m *v1alpha1.Machine, _ *deletionInput) {
			m.Annotations[DeletionStepAnnotation] = string(StepDeleteVM)
		}, result{StepDrain, delDrain, false, false, d0}},
		{"a step annotation without a record is ignored", "", func(m *v1alpha1.Machine, _ *deletionInput) {
			m.Annotations[DeletionStepAnnotation] = string(StepRemoveFinalizer)
			m.Annotations[PreDrainHookPrefix+"/x"] = ""
		}, result{StepWaitPreDrainHooks, delWait, false, false, d0}},
		// The drain parameters are those in force when the deletion
		// began: the record's, whatever the machine says now.
		{"a drain timeout shortened during the deletion is ignored", string(StepDrain), shorten, result{StepDrain, delDrain, false, false, d0}},
		{"without a record, the drain parameters are the machine's", "", shorten, result{StepWaitPreDrainHooks, delAdvance, false, false, short}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := withPhase(baseMachine(), v1alpha1.MachineRunning, "p1")
			m.DeletionTimestamp = &deleted
			m.Annotations = map[string]string{}
			if tc.step != "" {
				recordStep(m, DeletionStep(tc.step), t0.Add(-time.Minute), defaultDrain)
			}
			in := deletionInput{Now: t0, Machine: m, Config: v1alpha1.EffectiveMachineConfiguration(m, nil), HasTarget: true,
				NodeName: "n1", Node: node(cond(corev1.NodeReady, corev1.ConditionTrue)), NodeOwned: true, VMOwned: true, ClassFound: true}
			if tc.mutate != nil {
				tc.mutate(m, &in)
			}
			d := decideDeletion(in)
			got := result{d.Step, d.Action, d.Force, d.BadInput, d.Drain}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
			if d.Description == "" {
				t.Error("no description")
			}
			if d.Action == delDrain {
				want := deleted.Add(tc.want.Drain.DrainTimeout.Duration)
				if d.Force {
					want = t0
				}
				if !d.DrainDeadline.Equal(want) {
					t.Errorf("drain deadline %v, want %v", d.DrainDeadline, want)
				}
				if d.MaxEvictRetries != int(tc.want.Drain.MaxEvictRetries) {
					t.Errorf("max evict retries %d, want %d", d.MaxEvictRetries, tc.want.Drain.MaxEvictRetries)
				}
			}
		})
	}
}

func TestDeletionStepsOrder(t *testing.T) {
	var got []DeletionStep
	for s := StepWaitPreDrainHooks; ; s = s.next() {
		got = append(got, s)
		if s == StepRemoveFinalizer {
			break
		}
	}
	if diff := cmp.Diff(DeletionSteps(), got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}

func TestPlanNodeSync(t *testing.T) {
	m := baseMachine()
	m.Spec.NodeTemplateSpec.Labels = map[string]string{"a": "1", "b": "2"}
	m.Spec.NodeTemplateSpec.Annotations = map[string]string{"note": "x"}
	m.Spec.NodeTemplateSpec.Spec.Taints = []corev1.Taint{{Key: "t", Value: "v", Effect: corev1.TaintEffectNoSchedule}}

	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"user": "mine"}}}
	first := planNodeSync(n, m, nil)
	if first == nil {
		t.Fatal("no change planned for a fresh node")
	}
	wantLabels := map[string]string{"a": "1", "b": "2", "user": "mine", v1alpha1.MachineNameLabelKey: "m1"}
	if diff := cmp.Diff(wantLabels, first.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if planNodeSync(first, m, nil) != nil {
		t.Error("second sync is not a no-op")
	}
	// Template changes: a removed, b changed, taint value changed; the
	// user adds a taint and a label of their own meanwhile.
	first.Labels["user2"] = "also"
	first.Spec.Taints = append(first.Spec.Taints, corev1.Taint{Key: "user-taint", Effect: corev1.TaintEffectNoExecute})
	m.Spec.NodeTemplateSpec.Labels = map[string]string{"b": "3"}
	m.Spec.NodeTemplateSpec.Annotations = nil
	m.Spec.NodeTemplateSpec.Spec.Taints = []corev1.Taint{{Key: "t", Value: "w", Effect: corev1.TaintEffectNoSchedule}}
	second := planNodeSync(first, m, nil)
	wantLabels = map[string]string{"b": "3", "user": "mine", "user2": "also", v1alpha1.MachineNameLabelKey: "m1"}
	if diff := cmp.Diff(wantLabels, second.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if _, ok := second.Annotations["note"]; ok {
		t.Error("annotation removed from the template stayed")
	}
	wantTaints := []corev1.Taint{{Key: "t", Value: "w", Effect: corev1.TaintEffectNoSchedule}, {Key: "user-taint", Effect: corev1.TaintEffectNoExecute}}
	if diff := cmp.Diff(wantTaints, second.Spec.Taints); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
	if n.Labels["a"] != "" {
		t.Error("input node modified")
	}
}

func TestStatusPatchOnlyWhenChanged(t *testing.T) {
	m := withPhase(baseMachine(), v1alpha1.MachineRunning, "p1")
	m.ResourceVersion = "7"
	if p, err := machineStatusPatch(m, m.DeepCopy()); err != nil || p != nil {
		t.Fatalf("patch for an unchanged status: %s, %v", p, err)
	}
	d := m.DeepCopy()
	d.Status.LastOperation.ErrorCode = ""
	m.Status.LastOperation.ErrorCode = "ResourceExhausted"
	p, err := machineStatusPatch(m, d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"resourceVersion":"7"},"status":{"lastOperation":{"errorCode":null}}}`
	if string(p) != want {
		t.Errorf("patch %s, want %s", p, want)
	}
}

func TestRetryDelay(t *testing.T) {
	o := testOptions(t)
	tests := []struct {
		code     driver.Code
		failures int
		want     time.Duration
	}{
		{driver.Unavailable, 1, 5 * time.Second},
		{driver.DeadlineExceeded, 2, 10 * time.Second},
		{driver.Aborted, 3, 20 * time.Second},
		{driver.Unknown, 1, 5 * time.Second},
		{driver.ResourceExhausted, 1, 10 * time.Minute},
		{driver.ResourceExhausted, 2, 20 * time.Minute},
		{driver.ResourceExhausted, 5, 30 * time.Minute},
		{driver.InvalidArgument, 1, 3 * time.Minute},
		{driver.Internal, 4, 24 * time.Minute},
		{driver.PermissionDenied, 10, 30 * time.Minute},
		{driver.OK, 1, 0},
	}
	for _, tc := range tests {
		if got := o.RetryDelay(tc.code, tc.failures); got != tc.want {
			t.Errorf("RetryDelay(%v, %d) = %v, want %v", tc.code, tc.failures, got, tc.want)
		}
	}
}

func TestNodeHealth(t *testing.T) {
	bad := conditionTypes(new(v1alpha1.DefaultNodeConditions))
	tests := []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"ready", node(cond(corev1.NodeReady, corev1.ConditionTrue)), true},
		{"no conditions", node(), false},
		{"not ready", node(cond(corev1.NodeReady, corev1.ConditionFalse)), false},
		{"kernel deadlock", node(cond(corev1.NodeReady, corev1.ConditionTrue), cond("KernelDeadlock", corev1.ConditionTrue)), false},
		{"unlisted condition ignored", node(cond(corev1.NodeReady, corev1.ConditionTrue), cond("MemoryPressure", corev1.ConditionTrue)), true},
		{"missing", nil, false},
	}
	for _, tc := range tests {
		if got, why := nodeHealth(tc.node, bad); got != tc.want {
			t.Errorf("%s: healthy %v (%s), want %v", tc.name, got, why, tc.want)
		}
	}
}

func TestOptionsRejectNegative(t *testing.T) {
	if _, err := (Options{ShortRetry: -1}).complete(); err == nil {
		t.Error("negative ShortRetry accepted")
	}
	if _, err := (Options{HealthCheckPeriod: -time.Second}).complete(); err == nil {
		t.Error("negative HealthCheckPeriod accepted")
	}
	if _, err := (Options{ClassWorkers: -1}).complete(); err == nil {
		t.Error("negative ClassWorkers accepted")
	}
}

// TestPlanHealthCopiesConditionsOnlyWhenChanged: a heartbeat alone does not
// rewrite the machine's conditions; a changed condition does.
func TestPlanHealthCopiesConditionsOnlyWhenChanged(t *testing.T) {
	o := testOptions(t)
	ready := cond(corev1.NodeReady, corev1.ConditionTrue)
	m := withPhase(baseMachine(), v1alpha1.MachineRunning, "p1")
	m.Status.Conditions = []corev1.NodeCondition{ready}

	beat := ready
	beat.LastHeartbeatTime = metav1.NewTime(t0)
	obs := obsFor(m)
	obs.Node = node(beat)
	p := machinePlan{Machine: m.DeepCopy()}
	planHealth(&p, obs, o)
	if diff := cmp.Diff(m.Status, p.Machine.Status); diff != "" {
		t.Errorf("heartbeat changed the status (-before +after):\n%s", diff)
	}
	if s, err := machineStatusPatch(m, p.Machine); err != nil || s != nil {
		t.Errorf("status patch for a heartbeat: %s, %v", s, err)
	}

	disk := cond("DiskPressure", corev1.ConditionTrue)
	obs.Node = node(beat, disk)
	p = machinePlan{Machine: m.DeepCopy()}
	planHealth(&p, obs, o)
	if diff := cmp.Diff(obs.Node.Status.Conditions, p.Machine.Status.Conditions); diff != "" {
		t.Errorf("changed conditions not copied (-node +machine):\n%s", diff)
	}
}

// TestHealthTimeoutResetAfterOutage: a machine Unknown since before the
// safety gate's last outage ended goes back to Running with MCM's "reset"
// operation instead of Failed; one Unknown since after it times out as
// usual.
func TestHealthTimeoutResetAfterOutage(t *testing.T) {
	o := testOptions(t)
	notReady := cond(corev1.NodeReady, corev1.ConditionFalse)
	for _, tc := range []struct {
		name        string
		outageEnded time.Time
		want        v1alpha1.MachinePhase
		reason      string
	}{
		{"unhealthy across the outage", t0.Add(-time.Minute), v1alpha1.MachineRunning, ReasonHealthTimerReset},
		{"unhealthy since after the outage", t0.Add(-2 * time.Hour), v1alpha1.MachineFailed, ReasonHealthTimeout},
		{"no outage", time.Time{}, v1alpha1.MachineFailed, ReasonHealthTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := withPhase(baseMachine(), v1alpha1.MachineUnknown, "p1")
			m.Annotations = map[string]string{UnhealthySinceAnnotation: formatTime(t0.Add(-time.Hour))}
			obs := obsFor(m)
			obs.Node, obs.OutageEnded = node(notReady), tc.outageEnded
			p := machinePlan{Machine: m.DeepCopy()}
			planHealth(&p, obs, o)
			if got := p.Machine.Status.CurrentStatus.Phase; got != tc.want || p.Event == nil || p.Event.Reason != tc.reason {
				t.Fatalf("phase %s, event %+v; want %s with %s", got, p.Event, tc.want, tc.reason)
			}
			if tc.want == v1alpha1.MachineRunning {
				if _, ok := p.Machine.Annotations[UnhealthySinceAnnotation]; ok || p.RequeueAfter > o.HealthCheckPeriod {
					t.Errorf("reset kept the old clock or checks late: %v, requeue %v", p.Machine.Annotations, p.RequeueAfter)
				}
			}
		})
	}
}

// TestPendingDelay: a machine whose VM was created keeps its empty status
// while its node may still join within Options.PendingDelay, goes straight
// to Running when it does, and says Pending after the delay; a creation
// that never wrote its node label is repeated instead.
func TestPendingDelay(t *testing.T) {
	o := testOptions(t)
	created := func(since time.Duration) *v1alpha1.Machine {
		m := withPhase(baseMachine(), "", "p1")
		m.Annotations = map[string]string{CreationStartedAnnotation: formatTime(t0.Add(-since))}
		return m
	}
	ready := node(cond(corev1.NodeReady, corev1.ConditionTrue))
	tests := []struct {
		name        string
		m           *v1alpha1.Machine
		node        *corev1.Node
		wantPhase   v1alpha1.MachinePhase
		wantRequeue time.Duration
	}{
		{"within the delay, no node: nothing written", created(time.Second), nil, "", DefaultPendingDelay - time.Second},
		{"within the delay, node not Ready: nothing written", created(time.Second),
			node(cond(corev1.NodeReady, corev1.ConditionFalse)), "", DefaultPendingDelay - time.Second},
		{"within the delay, node Ready: Running", created(time.Second), ready, v1alpha1.MachineRunning, o.LongRetry},
		// A join within the sync that created the VM took no time, and is
		// still a join (its bootstrap token goes).
		{"node Ready in the creating sync: Running", created(0), ready, v1alpha1.MachineRunning, o.LongRetry},
		{"after the delay: Pending", created(DefaultPendingDelay), nil, v1alpha1.MachinePending, o.HealthCheckPeriod},
		{"after the delay, node Ready: Running", created(time.Minute), ready, v1alpha1.MachineRunning, o.LongRetry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := obsFor(tt.m)
			obs.Node = tt.node
			p := planMachine(obs, o)
			if p.Kind != planUpdate {
				t.Fatalf("plan %v, want Update", p.Kind)
			}
			if got := p.Machine.Status.CurrentStatus.Phase; got != tt.wantPhase {
				t.Errorf("phase %q, want %q", got, tt.wantPhase)
			}
			if want := tt.wantPhase == v1alpha1.MachineRunning; p.Joined != want {
				t.Errorf("joined %v, want %v", p.Joined, want)
			}
			if tt.wantPhase == "" && !cmp.Equal(p.Machine.Status, tt.m.Status) {
				t.Errorf("status changed: %s", cmp.Diff(tt.m.Status, p.Machine.Status))
			}
			if p.RequeueAfter != tt.wantRequeue {
				t.Errorf("requeue after %v, want %v", p.RequeueAfter, tt.wantRequeue)
			}
		})
	}

	unlabelled := created(time.Second)
	unlabelled.Labels = nil
	if p := planMachine(obsFor(unlabelled), o); p.Kind != planCreate {
		t.Errorf("a provider ID without node label or phase: plan %v, want Create", p.Kind)
	}
	noDelay, err := Options{PendingDelay: -1}.complete()
	if err != nil {
		t.Fatal(err)
	}
	if p := planMachine(obsFor(created(0)), &noDelay); p.Machine.Status.CurrentStatus.Phase != v1alpha1.MachinePending {
		t.Errorf("negative PendingDelay: phase %q, want Pending at once", p.Machine.Status.CurrentStatus.Phase)
	}
}

// TestStaleNodeIsNotSynced: a node whose cached copy does not show the
// controller's last write is not patched from that copy.
func TestStaleNodeIsNotSynced(t *testing.T) {
	o := testOptions(t)
	obs := obsFor(withPhase(baseMachine(), v1alpha1.MachineRunning, "p1"))
	obs.Node = node(cond(corev1.NodeReady, corev1.ConditionTrue))
	if p := planMachine(obs, o); p.Node == nil {
		t.Fatal("a node without the machine-name label: no node sync planned")
	}
	obs.NodeStale = true
	if p := planMachine(obs, o); p.Node != nil {
		t.Errorf("stale node: node sync planned: %+v", p.Node.ObjectMeta)
	}
}
