package machine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/driver"
)

func deletingMachine(step DeletionStep) *v1alpha1.Machine {
	m := withPhase(baseMachine(), v1alpha1.MachineTerminating, "p1")
	m.DeletionTimestamp = &metav1.Time{Time: t0.Add(-time.Minute)}
	m.Annotations = map[string]string{}
	if step != "" {
		recordStep(m, step, t0.Add(-time.Minute), defaultDrain)
	}
	return m
}

// defaultDrain is the drain parameters of a machine with the default
// configuration.
var defaultDrain = drainParams{DrainTimeout: metav1.Duration{Duration: v1alpha1.DefaultMachineDrainTimeout}, MaxEvictRetries: v1alpha1.DefaultMaxEvictRetries}

// recordStep records on m, as the controller does, a deletion flow at step
// since then, with the drain parameters p.
func recordStep(m *v1alpha1.Machine, step DeletionStep, since time.Time, p drainParams) {
	setDeletionRecord(m, deletionRecord{Step: step, Since: metav1.NewTime(since), Drain: p})
}

func TestPlanDeletionWrite(t *testing.T) {
	// The state of a pass that budgets held back.
	var state drain.State
	if err := json.Unmarshal([]byte(`{"start":"`+formatTime(t0.Add(-time.Minute))+`","blockedBy":["ns/db","ns/web"]}`), &state); err != nil {
		t.Fatal(err)
	}
	rawState, _ := json.Marshal(state)
	// Step, Since and Drain are the record's (DeletionCondition), which
	// the annotations mirror.
	type result struct {
		Step, Since    string
		Drain          drainParams
		DrainState     string
		BlockedBy      string // the budgets the drain waits on, for the index
		Phase          v1alpha1.MachinePhase
		Op             v1alpha1.LastOperation
		LastKnownState string
	}
	earlier := formatTime(t0.Add(-time.Minute))
	short := drainParams{DrainTimeout: metav1.Duration{Duration: time.Second}, MaxEvictRetries: 1}
	tests := []struct {
		name   string
		stored DeletionStep // "" for a machine the flow has not touched yet
		drain  string       // stored drain state
		forged string       // a DeletionStepAnnotation someone else wrote
		d      deletionDecision
		out    stepOutcome
		want   result
	}{
		{name: "first step is recorded with its start and the drain parameters", d: deletionDecision{Step: StepWaitPreDrainHooks, Description: "Waiting for pre-drain hooks: x", Drain: short},
			out: stepOutcome{RequeueAfter: time.Minute},
			want: result{Step: string(StepWaitPreDrainHooks), Since: formatTime(t0), Drain: short, Phase: v1alpha1.MachineTerminating,
				Op: v1alpha1.LastOperation{Description: "Waiting for pre-drain hooks: x", State: v1alpha1.MachineStateProcessing, Type: v1alpha1.MachineOperationDelete}}},
		{name: "a waiting step keeps its start", stored: StepDrain, d: deletionDecision{Step: StepDrain, Description: "Initiate node drain", Drain: defaultDrain},
			out: stepOutcome{Description: "Draining node: 2 pods remaining", DrainState: &state},
			want: result{Step: string(StepDrain), Since: earlier, Drain: defaultDrain, DrainState: string(rawState), BlockedBy: "ns/db,ns/web", Phase: v1alpha1.MachineTerminating,
				Op: v1alpha1.LastOperation{Description: "Draining node: 2 pods remaining", State: v1alpha1.MachineStateProcessing, Type: v1alpha1.MachineOperationDelete}}},
		{name: "a finished drain moves on and drops its state", stored: StepDrain, drain: string(rawState),
			d:   deletionDecision{Step: StepDrain, Description: "Initiate node drain", Drain: defaultDrain},
			out: stepOutcome{Done: true, Description: "Drain successful. Initiate VM deletion", DrainState: &state},
			want: result{Step: string(StepDrain.next()), Since: formatTime(t0), Drain: defaultDrain, Phase: v1alpha1.MachineTerminating,
				Op: v1alpha1.LastOperation{Description: "Drain successful. Initiate VM deletion", State: v1alpha1.MachineStateProcessing, Type: v1alpha1.MachineOperationDelete}}},
		{name: "a failed driver call keeps the step and its code", stored: StepDeleteVM, d: deletionDecision{Step: StepDeleteVM, Description: "Initiate VM deletion", Drain: defaultDrain},
			out: stepOutcome{Failed: true, ErrorCode: "Unavailable", Description: "Cloud provider message - DeleteMachine failed"},
			want: result{Step: string(StepDeleteVM), Since: earlier, Drain: defaultDrain, Phase: v1alpha1.MachineTerminating,
				Op: v1alpha1.LastOperation{Description: "Cloud provider message - DeleteMachine failed", State: v1alpha1.MachineStateFailed,
					Type: v1alpha1.MachineOperationDelete, ErrorCode: "Unavailable"}}},
		{name: "the driver's last known state is kept", stored: StepDeleteVM, d: deletionDecision{Step: StepDeleteVM, Description: "Initiate VM deletion", Drain: defaultDrain},
			out: stepOutcome{Done: true, LastKnownState: "vm-gone"},
			want: result{Step: string(StepDeleteNode), Since: formatTime(t0), Drain: defaultDrain, Phase: v1alpha1.MachineTerminating, LastKnownState: "vm-gone",
				Op: v1alpha1.LastOperation{Description: "Initiate VM deletion", State: v1alpha1.MachineStateProcessing, Type: v1alpha1.MachineOperationDelete}}},
		{name: "a forged step annotation is set back to the record", stored: StepDrain, forged: string(StepRemoveFinalizer),
			d:   deletionDecision{Step: StepDrain, Description: "Initiate node drain", Drain: defaultDrain},
			out: stepOutcome{Description: "Draining node: 2 pods remaining"},
			want: result{Step: string(StepDrain), Since: earlier, Drain: defaultDrain, Phase: v1alpha1.MachineTerminating,
				Op: v1alpha1.LastOperation{Description: "Draining node: 2 pods remaining", State: v1alpha1.MachineStateProcessing, Type: v1alpha1.MachineOperationDelete}}},
		{name: "a step keeps the drain parameters recorded when the deletion began", stored: StepDrain,
			d:   deletionDecision{Step: StepDrain, Description: "Initiate node drain", Drain: defaultDrain},
			out: stepOutcome{Done: true, Description: "Drain successful. Initiate VM deletion"},
			want: result{Step: string(StepWaitPreTerminateHooks), Since: formatTime(t0), Drain: defaultDrain, Phase: v1alpha1.MachineTerminating,
				Op: v1alpha1.LastOperation{Description: "Drain successful. Initiate VM deletion", State: v1alpha1.MachineStateProcessing, Type: v1alpha1.MachineOperationDelete}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cur := deletingMachine(tc.stored)
			if tc.stored == "" {
				cur.Annotations = nil
				cur.Status.CurrentStatus.Phase = v1alpha1.MachineRunning
			}
			if tc.forged != "" {
				cur.Annotations[DeletionStepAnnotation] = tc.forged
			}
			if tc.drain != "" {
				cur.Annotations[DrainStateAnnotation] = tc.drain
				cur.Annotations[drainBlockedByAnnotation] = "ns/web"
			}
			before := cur.DeepCopy()
			m := planDeletionWrite(cur, t0, tc.d, tc.out)
			op := m.Status.LastOperation
			op.LastUpdateTime = metav1.Time{}
			rec, ok := deletionRecordOf(m)
			if !ok {
				t.Fatalf("no deletion record in conditions %+v", m.Status.Conditions)
			}
			if step, since := m.Annotations[DeletionStepAnnotation], m.Annotations[DeletionStepSinceAnnotation]; step != string(rec.Step) || since != formatTime(rec.Since.Time) {
				t.Errorf("annotations say step %q since %s, the record %q since %s", step, since, rec.Step, formatTime(rec.Since.Time))
			}
			got := result{Step: string(rec.Step), Since: formatTime(rec.Since.Time), Drain: rec.Drain,
				DrainState: m.Annotations[DrainStateAnnotation], BlockedBy: m.Annotations[drainBlockedByAnnotation],
				Phase: m.Status.CurrentStatus.Phase, Op: op, LastKnownState: m.Status.LastKnownState}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("written machine (-want +got):\n%s", diff)
			}
			if m.Status.CurrentStatus.TimeoutActive {
				t.Error("a timeout runs during deletion")
			}
			if diff := cmp.Diff(before, cur); diff != "" {
				t.Errorf("input machine modified:\n%s", diff)
			}
		})
	}
}

// scriptedDrainer answers Pass with a fixed result.
type scriptedDrainer struct {
	res    drain.Result
	err    error
	state  drain.State // the state the last Pass got
	passes int
}

func (s *scriptedDrainer) Pass(_ context.Context, _ string, state drain.State) (drain.Result, error) {
	s.state = state
	s.passes++
	return s.res, s.err
}

// scriptedDriver answers DeleteMachine with a fixed answer.
type scriptedDriver struct {
	driver.Driver // nil: other calls panic
	resp          *driver.DeleteMachineResponse
	err           error
	// asked are the provider IDs DeleteMachine was asked for.
	asked []string
}

func (s *scriptedDriver) DeleteMachine(_ context.Context, req *driver.DeleteMachineRequest) (*driver.DeleteMachineResponse, error) {
	s.asked = append(s.asked, req.Machine.Spec.ProviderID)
	return s.resp, s.err
}

// stepController is a controller with just what the deletion steps use.
func stepController(t *testing.T, dr Drainer, drv driver.Driver, nodes ...*corev1.Node) (*Controller, *k8sfake.Clientset) {
	t.Helper()
	o := testOptions(t)
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	var objs []runtime.Object
	for _, n := range nodes {
		_ = idx.Add(n)
		objs = append(objs, n)
	}
	target := k8sfake.NewSimpleClientset(objs...)
	return &Controller{opts: *o, drainer: dr, driver: drv, target: target, nodes: corelisters.NewNodeLister(idx), metrics: m}, target
}

func TestDrainStep(t *testing.T) {
	ctx := context.Background()
	deadline := t0.Add(time.Hour)
	tests := []struct {
		name      string
		force     bool
		res       drain.Result
		err       error
		want      stepOutcome
		wantErr   bool
		wantState bool
	}{
		{name: "node gone", err: fmt.Errorf("wrapped: %w", drain.ErrNodeNotFound),
			want: stepOutcome{Done: true, Description: "Node is gone; nothing to drain. Initiate VM deletion"}},
		{name: "pass failed", err: errors.New("apiserver down"), wantErr: true, wantState: true,
			want: stepOutcome{Failed: true, Description: "Drain failed due to - apiserver down. Will retry in next sync. Initiate node drain",
				Event: &event{Type: corev1.EventTypeWarning, Reason: ReasonDrainFailed,
					Message: "Drain failed due to - apiserver down. Will retry in next sync. Initiate node drain"}}},
		{name: "pods left", res: drain.Result{Plan: drain.Plan{Message: "3 pods remaining", NextCheck: time.Now().Add(time.Hour)}}, wantState: true,
			want: stepOutcome{Description: "Draining node: 3 pods remaining"}},
		{name: "drained", res: drain.Result{Plan: drain.Plan{Done: true}},
			want: stepOutcome{Done: true, Description: "Drain successful. Initiate VM deletion",
				Event: &event{Type: corev1.EventTypeNormal, Reason: ReasonDrained, Message: "Drained node n1"}}},
		{name: "force-drained", force: true, res: drain.Result{Plan: drain.Plan{Done: true}},
			want: stepOutcome{Done: true, Description: "Force Drain successful. Initiate VM deletion",
				Event: &event{Type: corev1.EventTypeNormal, Reason: ReasonDrained, Message: "Drained node n1"}}},
		{name: "the drain forces a NotReady node itself", wantState: true,
			res:  drain.Result{Plan: drain.Plan{ForceReason: "node not Ready for more than 5m0s", Message: "1 pod remaining", NextCheck: time.Now().Add(time.Hour)}},
			want: stepOutcome{Description: "Force-draining node (node not Ready for more than 5m0s): 1 pod remaining"}},
		{name: "the drain forced a NotReady node itself", res: drain.Result{Plan: drain.Plan{Done: true, ForceReason: "node not Ready for more than 5m0s"}},
			want: stepOutcome{Done: true, Description: "Force Drain successful. Initiate VM deletion",
				Event: &event{Type: corev1.EventTypeNormal, Reason: ReasonDrained, Message: "Drained node n1"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dr := &scriptedDrainer{res: tc.res, err: tc.err}
			c, _ := stepController(t, dr, nil)
			m := deletingMachine(StepDrain)
			got, err := c.drainStep(ctx, m, deletionDecision{Step: StepDrain, Force: tc.force, DrainDeadline: deadline}, "n1")
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if !dr.state.Deadline().Equal(deadline) {
				t.Errorf("pass got deadline %v, want %v", dr.state.Deadline(), deadline)
			}
			if tc.wantState != (got.DrainState != nil) {
				t.Errorf("drain state stored: %v, want %v", got.DrainState != nil, tc.wantState)
			}
			if got.RequeueAfter > 0 != (!got.Done && !tc.wantErr) {
				t.Errorf("RequeueAfter %v for done=%v", got.RequeueAfter, got.Done)
			}
			got.DrainState, got.RequeueAfter = nil, 0
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(event{})); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeleteVMStep(t *testing.T) {
	ctx := context.Background()
	deleted := &event{Type: corev1.EventTypeNormal, Reason: ReasonDeleted, Message: "Deleted VM p1"}
	skipped := "Skipping VM deletion: the machine never recorded a VM, and the driver refuses its class: InvalidArgument: bad spec. Initiate node object deletion"
	tests := []struct {
		name         string
		resp         *driver.DeleteMachineResponse
		err          error
		byName, noVM bool
		wantAsked    []string
		want         stepOutcome
		wantErr      bool
	}{
		{name: "deleted", resp: &driver.DeleteMachineResponse{LastKnownState: "gone"},
			want: stepOutcome{Done: true, Description: "VM deletion was successful. Initiate node object deletion", Event: deleted, LastKnownState: "gone"}},
		{name: "a state the controller does not store is refused, and the deletion goes on", resp: &driver.DeleteMachineResponse{LastKnownState: strings.Repeat("s", maxLastKnownState+1)},
			want: stepOutcome{Done: true, Description: "VM deletion was successful. Initiate node object deletion",
				Event: &event{Type: corev1.EventTypeWarning, Reason: ReasonDeleted,
					Message: "Deleted VM p1; refused the driver's answer: Internal: driver returned a lastKnownState of 65537 bytes; the controller stores at most 65536"}}},
		{name: "a state of the largest size is stored", resp: &driver.DeleteMachineResponse{LastKnownState: strings.Repeat("s", maxLastKnownState)},
			want: stepOutcome{Done: true, Description: "VM deletion was successful. Initiate node object deletion", Event: deleted,
				LastKnownState: strings.Repeat("s", maxLastKnownState)}},
		{name: "already gone", err: driver.Errorf(driver.NotFound, "no such VM"),
			want: stepOutcome{Done: true, Description: "VM deletion was successful. Initiate node object deletion", Event: deleted}},
		{name: "unavailable retries short and is an error", err: driver.Errorf(driver.Unavailable, "cloud down"), wantErr: true,
			want: stepOutcome{Failed: true, ErrorCode: "Unavailable", RequeueAfter: DefaultShortRetry,
				Description: "Cloud provider message - DeleteMachine failed: Unavailable: cloud down. Initiate VM deletion"}},
		{name: "quota retries on its own period", err: driver.Errorf(driver.ResourceExhausted, "quota"), wantErr: true,
			want: stepOutcome{Failed: true, ErrorCode: "ResourceExhausted", RequeueAfter: DefaultLongRetry,
				Description: "Cloud provider message - DeleteMachine failed: ResourceExhausted: quota. Initiate VM deletion"}},
		// A provider ID that is not the machine's own is not sent: the
		// driver deletes the machine's VM, found by its name.
		{name: "by name", byName: true, wantAsked: []string{""},
			want: stepOutcome{Done: true, Description: "VM deletion was successful. Initiate node object deletion",
				Event: &event{Type: corev1.EventTypeNormal, Reason: ReasonDeleted, Message: "Deleted VM of machine m1"}}},
		{name: "a refused class holds up a machine that recorded a VM", err: driver.Errorf(driver.InvalidArgument, "bad spec"), wantErr: true,
			want: stepOutcome{Failed: true, ErrorCode: "InvalidArgument", RequeueAfter: DefaultMediumRetry,
				Description: "Cloud provider message - DeleteMachine failed: InvalidArgument: bad spec. Initiate VM deletion"}},
		{name: "a refused class does not hold up a machine that never recorded a VM", err: driver.Errorf(driver.InvalidArgument, "bad spec"),
			noVM: true, wantAsked: []string{""},
			want: stepOutcome{Done: true, Description: skipped, Event: &event{Type: corev1.EventTypeWarning, Reason: ReasonDeleteFailed, Message: skipped}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			drv := &scriptedDriver{resp: tc.resp, err: tc.err}
			c, _ := stepController(t, nil, drv)
			m := deletingMachine(StepDeleteVM)
			if tc.noVM {
				m.Spec.ProviderID = ""
			}
			got, err := c.deleteVMStep(ctx, m, deletionDecision{ByName: tc.byName}, credentials{})
			if tc.wantAsked == nil {
				tc.wantAsked = []string{"p1"}
			}
			if diff := cmp.Diff(tc.wantAsked, drv.asked); diff != "" {
				t.Errorf("DeleteMachine asked for (-want +got):\n%s", diff)
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if !errors.Is(err, tc.err) {
					t.Errorf("error %v does not wrap the driver's", err)
				}
				tc.want.Event = &event{Type: corev1.EventTypeWarning, Reason: ReasonDeleteFailed, Message: tc.want.Description}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeleteNodeStep(t *testing.T) {
	ctx := context.Background()
	d := deletionDecision{Step: StepDeleteNode, Description: "Initiate node object deletion"}
	t.Run("gone already", func(t *testing.T) {
		c, target := stepController(t, nil, nil)
		got, err := c.deleteNodeStep(ctx, d, "n1")
		if err != nil || !got.Done {
			t.Fatalf("outcome %+v, %v", got, err)
		}
		if n := len(target.Actions()); n != 0 {
			t.Errorf("%d API calls for a node that is gone", n)
		}
	})
	t.Run("finalizer removed, then deleted", func(t *testing.T) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1", ResourceVersion: "5",
			Finalizers: []string{"other", v1alpha1.NodeFinalizer}}}
		c, target := stepController(t, nil, nil, n)
		got, err := c.deleteNodeStep(ctx, d, "n1")
		if err != nil || !got.Done {
			t.Fatalf("outcome %+v, %v", got, err)
		}
		var verbs []string
		for _, a := range target.Actions() {
			verbs = append(verbs, a.GetVerb())
			if p, ok := a.(k8stesting.PatchAction); ok {
				// Only this finalizer, whatever the node's list is by now.
				want := `{"metadata":{"$deleteFromPrimitiveList/finalizers":["` + v1alpha1.NodeFinalizer + `"]}}`
				if string(p.GetPatch()) != want || p.GetPatchType() != types.StrategicMergePatchType {
					t.Errorf("patch %s %s, want %s %s", p.GetPatchType(), p.GetPatch(), types.StrategicMergePatchType, want)
				}
			}
		}
		if diff := cmp.Diff([]string{"patch", "delete"}, verbs); diff != "" {
			t.Errorf("API calls (-want +got):\n%s", diff)
		}
	})
	t.Run("a failed delete is reported and retried", func(t *testing.T) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}}
		c, target := stepController(t, nil, nil, n)
		target.PrependReactor("delete", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("etcd slow")
		})
		got, err := c.deleteNodeStep(ctx, d, "n1")
		if err == nil || got.Done || !got.Failed {
			t.Fatalf("outcome %+v, %v", got, err)
		}
		if want := "Initiate node object deletion failed: etcd slow. Will retry"; got.Description != want {
			t.Errorf("description %q, want %q", got.Description, want)
		}
	})
}

func TestWaitStep(t *testing.T) {
	c, _ := stepController(t, nil, nil)
	m := deletingMachine(StepWaitPreDrainHooks)
	if got := c.waitStep(m, deletionDecision{Action: delWait, RequeueAfter: time.Minute}); got != (stepOutcome{RequeueAfter: time.Minute}) {
		t.Errorf("hooks: %+v", got)
	}
	bad := deletionDecision{Action: delWait, BadInput: true, Description: "Cannot delete VM: MachineClass \"c\" not found"}
	first := c.waitStep(m, bad)
	second := c.waitStep(m, bad)
	if !first.Failed || first.Event == nil || first.Event.Reason != ReasonDeleteFailed {
		t.Errorf("bad input: %+v", first)
	}
	if first.RequeueAfter != DefaultMediumRetry || second.RequeueAfter != 2*DefaultMediumRetry {
		t.Errorf("bad input waits %v then %v, want %v doubling", first.RequeueAfter, second.RequeueAfter, DefaultMediumRetry)
	}
}

// TestStorableState: a VM deletion's outcome keeps a lastKnownState the
// machine can store; one over the bound is dropped and its event turns
// into a Warning that says why, the step still done.
func TestStorableState(t *testing.T) {
	big := strings.Repeat("s", maxLastKnownState+1)
	refused := "refused the driver's answer: Internal: driver returned a lastKnownState of 65537 bytes; the controller stores at most 65536"
	deleted := &event{Type: corev1.EventTypeNormal, Reason: ReasonDeleted, Message: "Deleted VM p1"}
	tests := []struct {
		name     string
		in, want stepOutcome
	}{
		{"no state", stepOutcome{Done: true, Event: deleted}, stepOutcome{Done: true, Event: deleted}},
		{"a state of the largest size", stepOutcome{Done: true, Event: deleted, LastKnownState: big[1:]},
			stepOutcome{Done: true, Event: deleted, LastKnownState: big[1:]}},
		{"a state too large", stepOutcome{Done: true, Event: deleted, LastKnownState: big},
			stepOutcome{Done: true, Event: &event{Type: corev1.EventTypeWarning, Reason: ReasonDeleted, Message: "Deleted VM p1; " + refused}}},
		{"a state too large, no event", stepOutcome{Done: true, LastKnownState: big},
			stepOutcome{Done: true, Event: &event{Type: corev1.EventTypeWarning, Reason: ReasonDeleted, Message: refused}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, storableState(tc.in), cmp.AllowUnexported(event{})); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
		})
	}
}
