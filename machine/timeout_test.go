package machine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

// TestCrashLoopBackOffTimesOutWhenDue: a failed creation is retried no
// later than its creation timeout, and a machine in CrashLoopBackOff
// whose timeout has passed is Failed by the next sync without another
// call to the driver.
func TestCrashLoopBackOffTimesOutWhenDue(t *testing.T) {
	o := testOptions(t)
	crashing := func(started time.Duration) *v1alpha1.Machine {
		m := withPhase(baseMachine(), v1alpha1.MachineCrashLoopBackOff, "")
		m.CreationTimestamp = metav1.NewTime(t0.Add(-started))
		m.Annotations = map[string]string{CreationStartedAnnotation: formatTime(t0.Add(-started))}
		m.Status.LastOperation = v1alpha1.LastOperation{Description: "Cloud provider message - CreateMachine failed: quota", ErrorCode: "ResourceExhausted"}
		return m
	}
	timeout := v1alpha1.DefaultMachineCreationTimeout

	out := createOutcome{FailedOp: driver.OperationCreateMachine, Err: driver.NewError(driver.ResourceExhausted, "quota")}
	p := planCreateOutcome(obsFor(crashing(timeout-time.Minute)), out, o)
	if diff := cmp.Diff([]any{v1alpha1.MachineCrashLoopBackOff, time.Minute + time.Millisecond},
		[]any{p.Machine.Status.CurrentStatus.Phase, p.TimeoutIn}); diff != "" {
		t.Errorf("failed creation within the timeout: phase, retry cap (-want +got):\n%s", diff)
	}

	p = planMachine(obsFor(crashing(timeout+time.Second)), o)
	got := []any{p.Kind, p.Machine.Status.CurrentStatus.Phase, p.Machine.Status.LastOperation.ErrorCode, p.FailedJoin, p.Event != nil && p.Event.Reason == ReasonJoinTimeout}
	if diff := cmp.Diff([]any{planUpdate, v1alpha1.MachineFailed, "ResourceExhausted", true, true}, got); diff != "" {
		t.Errorf("CrashLoopBackOff past its timeout: kind, phase, code, failed join, event (-want +got):\n%s", diff)
	}
	if p := planMachine(obsFor(crashing(timeout-time.Second)), o); p.Kind != planCreate {
		t.Errorf("CrashLoopBackOff within its timeout: plan %v, want Create", p.Kind)
	}

	// A creation start before the machine existed is not believed.
	early := crashing(time.Minute)
	early.Annotations[CreationStartedAnnotation] = formatTime(t0.Add(-24 * time.Hour))
	if p := planMachine(obsFor(early), o); p.Kind != planCreate {
		t.Errorf("creation start before the machine's creation: plan %v, want Create", p.Kind)
	}
}
