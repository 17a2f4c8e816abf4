package machine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// The harness runs 8 machine workers: 7 creation slots by default.
const harnessCreationSlots = 7

// hungCloud starts a world whose driver is wrapped in deadlines with
// timeouts, runs two machines (the first one to be deleted, the second to
// fall sick later), and then makes every CreateMachine hang, deaf to its
// context, until the test ends.
func hungCloud(t *testing.T, timeouts driver.Timeouts, opts machine.Options) (*world, *driver.Deadlines) {
	t.Helper()
	var dl *driver.Deadlines
	w := integration(t, worldOptions{ctrl: opts, drv: func(d driver.Driver) driver.Driver {
		var err error
		if dl, err = driver.WithDeadlines(d, timeouts); err != nil {
			t.Fatal(err)
		}
		return dl
	}})
	createClass(t, w.mc, w.core, w.ns, true)
	for i := range 2 {
		createMachine(t, w.mc, newMachine(w.ns, w.name(i), "sim", nil))
	}
	for i := range 2 {
		testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, w.name(i), v1alpha1.MachineRunning))
	}
	if _, err := w.cloud.InjectFault(sim.Fault{Operation: driver.OperationCreateMachine, Hang: true}); err != nil {
		t.Fatal(err)
	}
	// Registered after the controller's stop, so run before it: the hung
	// calls return and no goroutine outlives the test.
	t.Cleanup(w.cloud.ClearFaults)
	return w, dl
}

// othersGoOn deletes the first running machine and makes the second one's
// node NotReady, and waits for the deletion to complete and the machine to
// turn Unknown.
func othersGoOn(t *testing.T, w *world, within time.Duration) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	if err := w.mc.MachineV1alpha1().Machines(w.ns).Delete(ctx, w.name(0), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.kubelet.SetCondition(w.name(1), corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"})
	testenv.Eventually(t, within, machineGone(w.mc, w.ns, w.name(0)))
	gone := time.Since(start)
	testenv.Eventually(t, within, phaseIs(w.mc, w.ns, w.name(1), v1alpha1.MachineUnknown))
	// For the record, not asserted: the bound above is what must hold.
	t.Logf("with every creation hung: deletion done after %v, machine Unknown after %v", gone.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// TestIntegrationHungCreationsLeaveWorkersFree: with every CreateMachine
// hanging (well within its deadline) and more machines to create than
// there are workers, a deletion and a health transition of other machines
// still complete: creations hold only their slots, never every worker.
func TestIntegrationHungCreationsLeaveWorkersFree(t *testing.T) {
	t.Parallel()
	w, dl := hungCloud(t, driver.Timeouts{CreateMachine: time.Hour}, machine.Options{})
	const n = 12 // more than the 8 workers
	for i := range n {
		createMachine(t, w.mc, newMachine(w.ns, w.name(10+i), "sim", nil))
	}
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		got := w.cloud.Calls(driver.OperationCreateMachine)
		return got >= 2+harnessCreationSlots, fmt.Sprintf("%d CreateMachine calls", got)
	})
	othersGoOn(t, w, time.Minute)
	if got := w.cloud.Calls(driver.OperationCreateMachine); got != 2+harnessCreationSlots {
		t.Errorf("%d CreateMachine calls, want the 2 that succeeded and one per creation slot (%d)", got, harnessCreationSlots)
	}
	if s := dl.Stuck(); len(s) != 0 {
		t.Errorf("calls within their deadline reported stuck: %v", s)
	}
}

// TestIntegrationHungCreationsTimeOut: every CreateMachine hangs, deaf to
// its context. Each is cut off at its deadline and fails its machine (a
// retryable DeadlineExceeded on lastOperation and in an event), the stuck
// calls are named, no machine gets a second CreateMachine while its first
// hangs, a deletion and a health transition of other machines complete,
// and when the cloud recovers every machine runs on the one VM its hung
// call made.
func TestIntegrationHungCreationsTimeOut(t *testing.T) {
	t.Parallel()
	events := &eventLog{}
	const deadline = 2 * time.Second
	w, dl := hungCloud(t, driver.Timeouts{CreateMachine: deadline},
		machine.Options{Recorder: events, ShortRetry: time.Second, MaxRetryDelay: 4 * time.Second})
	const n = 10 // more than the 8 workers
	var names []string
	for i := range n {
		names = append(names, w.name(10+i))
		createMachine(t, w.mc, newMachine(w.ns, w.name(10+i), "sim", nil))
	}

	// The deletion and the health transition need a worker: within the
	// deadline (and a sync or two) one is free.
	othersGoOn(t, w, deadline+30*time.Second)

	// Every creation is cut off at its deadline and recorded; its retries
	// are refused while its first call hangs.
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		for _, name := range names {
			m, err := getMachine(ctx, w.mc, w.ns, name)
			if err != nil {
				return false, err.Error()
			}
			op := m.Status.LastOperation
			if op.ErrorCode != driver.DeadlineExceeded.String() || op.Type != v1alpha1.MachineOperationCreate ||
				op.State != v1alpha1.MachineStateFailed || !strings.Contains(op.Description, "outlived its deadline") ||
				m.Status.CurrentStatus.Phase != v1alpha1.MachineCrashLoopBackOff {
				return false, fmt.Sprintf("machine %s: phase %q, lastOperation %+v", name, m.Status.CurrentStatus.Phase, op)
			}
		}
		return true, ""
	})
	var stuck []string
	for _, s := range dl.Stuck() {
		if s.Operation != driver.OperationCreateMachine || s.Timeout != deadline || s.Started.IsZero() {
			t.Errorf("stuck call %v, want a CreateMachine with the deadline", s)
		}
		stuck = append(stuck, strings.TrimPrefix(s.Machine, w.ns+"/"))
	}
	slices.Sort(stuck)
	if !slices.Equal(stuck, names) {
		t.Errorf("stuck calls name machines %v, want %v", stuck, names)
	}
	if got := w.cloud.Calls(driver.OperationCreateMachine); got != 2+n {
		t.Errorf("%d CreateMachine calls, want one per machine (%d): a hung call must not be followed by another", got, 2+n)
	}
	timedOut := slices.ContainsFunc(events.all(), func(e recordedEvent) bool {
		return e.Type == corev1.EventTypeWarning && e.Reason == machine.ReasonCreateFailed && strings.Contains(e.Message, "did not return within its deadline of 2s")
	})
	if !timedOut {
		t.Errorf("no %s event names the deadline: %v", machine.ReasonCreateFailed, events.all())
	}

	// The cloud recovers: the hung calls return (each made its VM), and
	// the machines adopt those VMs.
	w.cloud.ClearFaults()
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		s := dl.Stuck()
		return len(s) == 0, fmt.Sprintf("still stuck: %v", s)
	})
	for _, name := range names {
		testenv.Eventually(t, 2*time.Minute, phaseIs(w.mc, w.ns, name, v1alpha1.MachineRunning))
	}
	if got := w.cloud.Calls(driver.OperationCreateMachine); got != 2+n {
		t.Errorf("%d CreateMachine calls after the recovery, want still %d", got, 2+n)
	}
	perMachine := map[string]int{}
	for _, vm := range w.cloud.VMs() {
		perMachine[vm.MachineName]++
	}
	for _, name := range names {
		if perMachine[name] != 1 {
			t.Errorf("machine %s has %d VMs, want 1", name, perMachine[name])
		}
	}
}
