package sim_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

func TestFaultForNextNCalls(t *testing.T) {
	w := newWorld(t, sim.Options{})
	id, err := w.cloud.InjectFault(sim.Fault{Operation: driver.OperationCreateMachine, Code: driver.Unavailable, Times: 2})
	mustSucceed(t, err)
	var codes []driver.Code
	for range 3 {
		_, err := w.create("m1")
		codes = append(codes, driver.CodeOf(err))
	}
	if diff := cmp.Diff([]driver.Code{driver.Unavailable, driver.Unavailable, driver.OK}, codes); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if w.cloud.RemoveFault(id) {
		t.Error("a spent fault is still removable")
	}
	if got := w.cloud.Calls(driver.OperationCreateMachine); got != 3 {
		t.Errorf("Calls(CreateMachine) = %d, want 3", got)
	}
	if n := len(w.cloud.VMs()); n != 1 {
		t.Errorf("%d VMs, want 1: failed creates leave nothing behind", n)
	}
}

func TestFaultFiltersByOperationAndMachine(t *testing.T) {
	w := newWorld(t, sim.Options{})
	_, err := w.cloud.InjectFault(sim.Fault{MachineName: "m2", Code: driver.PermissionDenied})
	mustSucceed(t, err)
	got := map[string]driver.Code{}
	_, err = w.create("m1")
	got["create m1"] = driver.CodeOf(err)
	_, err = w.create("m2")
	got["create m2"] = driver.CodeOf(err)
	_, err = w.status("m2")
	got["status m2"] = driver.CodeOf(err)
	_, err = w.list()
	got["list"] = driver.CodeOf(err)
	want := map[string]driver.Code{
		"create m1": driver.OK, "create m2": driver.PermissionDenied,
		"status m2": driver.PermissionDenied, "list": driver.OK,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	w.cloud.ClearFaults()
	if _, err := w.create("m2"); err != nil {
		t.Errorf("create after ClearFaults: %v", err)
	}
}

// TestProbabilisticFaultsRepeatWithTheSeed checks that a seed reproduces
// the exact sequence of hits, and that the rate is roughly right.
func TestProbabilisticFaultsRepeatWithTheSeed(t *testing.T) {
	run := func(seed uint64) []bool {
		w := newWorld(t, sim.Options{Seed: seed})
		_, err := w.cloud.InjectFault(sim.Fault{Operation: driver.OperationGetMachineStatus, Code: driver.Internal, Probability: 0.3})
		mustSucceed(t, err)
		var hits []bool
		for range 200 {
			_, err := w.status("ghost")
			hits = append(hits, driver.CodeOf(err) == driver.Internal)
		}
		return hits
	}
	first, again := run(7), run(7)
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("same seed, different hits (-first +again):\n%s", diff)
	}
	n := 0
	for _, h := range first {
		if h {
			n++
		}
	}
	if n < 30 || n > 90 {
		t.Errorf("%d of 200 calls hit with probability 0.3", n)
	}
}

func TestAfterEffectFaults(t *testing.T) {
	w := newWorld(t, sim.Options{})
	_, err := w.cloud.InjectFault(sim.Fault{Operation: driver.OperationCreateMachine, Code: driver.DeadlineExceeded, Times: 1, AfterEffect: true})
	mustSucceed(t, err)
	if _, err := w.create("m1"); driver.CodeOf(err) != driver.DeadlineExceeded {
		t.Fatalf("create with lost response: %v, want DeadlineExceeded", err)
	}
	if n := len(w.cloud.VMs()); n != 1 {
		t.Fatalf("%d VMs after a create whose response was lost, want 1", n)
	}
	// The retry adopts the VM instead of creating another.
	id := w.mustCreate("m1")
	if n := len(w.cloud.VMs()); n != 1 {
		t.Errorf("%d VMs after the retry, want 1", n)
	}

	_, err = w.cloud.InjectFault(sim.Fault{Operation: driver.OperationDeleteMachine, Code: driver.Unavailable, Times: 1, AfterEffect: true})
	mustSucceed(t, err)
	if err := w.delete(machine("m1")); driver.CodeOf(err) != driver.Unavailable {
		t.Fatalf("delete with lost response: %v", err)
	}
	if _, ok := w.cloud.VM(id); ok {
		t.Error("VM still exists after a delete whose response was lost")
	}
	mustSucceed(t, w.delete(machine("m1")))
}

func TestLatencyFaultWaitsForTheClock(t *testing.T) {
	w := newWorld(t, sim.Options{})
	_, err := w.cloud.InjectFault(sim.Fault{Operation: driver.OperationCreateMachine, Latency: time.Minute, Times: 1})
	mustSucceed(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := w.create("m1")
		done <- err
	}()
	waitForWaiter(t, w)
	select {
	case err := <-done:
		t.Fatalf("create returned before the latency passed: %v", err)
	default:
	}
	w.clock.Step(time.Minute)
	if err := <-done; err != nil {
		t.Errorf("create after the latency: %v", err)
	}
}

func TestLatencyFaultHonoursCancellation(t *testing.T) {
	w := newWorld(t, sim.Options{})
	_, err := w.cloud.InjectFault(sim.Fault{Operation: driver.OperationCreateMachine, Code: driver.Unavailable, Latency: time.Hour})
	mustSucceed(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := w.d.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: machine("m1"), MachineClass: w.class, Secret: w.secret})
		done <- err
	}()
	waitForWaiter(t, w)
	cancel()
	if err := <-done; driver.CodeOf(err) != driver.Canceled {
		t.Errorf("create canceled during a latency spike: %v, want Canceled", err)
	}
	if w.clock.HasWaiters() {
		t.Error("the canceled call left its timer on the clock")
	}
}

// waitForWaiter yields until the call started in another goroutine is
// stalled on the fake clock. It synchronizes with that goroutine; it never
// sleeps, and simulated time does not move.
func waitForWaiter(t *testing.T, w *world) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !w.clock.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("no call is waiting on the clock")
		}
		runtime.Gosched()
	}
}

func TestInvalidFaultsAreRejected(t *testing.T) {
	w := newWorld(t, sim.Options{})
	for name, f := range map[string]sim.Fault{
		"does nothing":          {Operation: driver.OperationCreateMachine},
		"probability above 1":   {Code: driver.Internal, Probability: 1.5},
		"negative probability":  {Code: driver.Internal, Probability: -0.1},
		"negative times":        {Code: driver.Internal, Times: -1},
		"negative latency":      {Code: driver.Internal, Latency: -time.Second},
		"after effect, no code": {Latency: time.Second, AfterEffect: true},
		"unknown operation":     {Operation: "Reboot", Code: driver.Internal},
		"hang with latency":     {Hang: true, Latency: time.Second},
		"hang with times":       {Hang: true, Code: driver.Internal, Times: 1},
	} {
		if _, err := w.cloud.InjectFault(f); err == nil {
			t.Errorf("%s: InjectFault(%+v) succeeded", name, f)
		}
	}
	if n := len(w.cloud.Faults()); n != 0 {
		t.Errorf("%d faults active after only invalid injections", n)
	}
}

func TestFaultsReportsRemainingHits(t *testing.T) {
	w := newWorld(t, sim.Options{})
	id, err := w.cloud.InjectFault(sim.Fault{Operation: driver.OperationListMachines, Code: driver.Unavailable, Times: 3})
	mustSucceed(t, err)
	_, _ = w.list()
	want := []sim.ActiveFault{{ID: id, Fault: sim.Fault{Operation: driver.OperationListMachines, Code: driver.Unavailable, Times: 2}, Hits: 1}}
	if diff := cmp.Diff(want, w.cloud.Faults()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestHangFaultIgnoresTheContextUntilRemoved: a hung call outlives its
// context, and once the fault is removed it does its work (a create makes
// its VM) or reports the fault's code; calls of other machines go on.
func TestHangFaultIgnoresTheContextUntilRemoved(t *testing.T) {
	for _, code := range []driver.Code{driver.OK, driver.Unavailable} {
		t.Run(code.String(), func(t *testing.T) {
			w := newWorld(t, sim.Options{})
			id, err := w.cloud.InjectFault(sim.Fault{Operation: driver.OperationCreateMachine, MachineName: "m1", Code: code, Hang: true})
			mustSucceed(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := w.d.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: machine("m1"), MachineClass: w.class, Secret: w.secret})
				done <- err
			}()
			for w.cloud.Calls(driver.OperationCreateMachine) == 0 {
				runtime.Gosched()
			}
			cancel()
			w.mustCreate("m2") // another machine's call is not held up
			select {
			case err := <-done:
				t.Fatalf("the hung call returned %v before the fault was removed", err)
			default:
			}
			if !w.cloud.RemoveFault(id) {
				t.Fatal("the hang fault was not active")
			}
			if got := driver.CodeOf(<-done); got != code {
				t.Errorf("released call: code %v, want %v (its context's end ignored)", got, code)
			}
			wantVMs := 1
			if code == driver.OK {
				wantVMs = 2
			}
			if n := len(w.cloud.VMs()); n != wantVMs {
				t.Errorf("%d VMs, want %d", n, wantVMs)
			}
		})
	}
}

// TestClearFaultsReleasesHungCalls: ClearFaults lets every hung call go.
func TestClearFaultsReleasesHungCalls(t *testing.T) {
	w := newWorld(t, sim.Options{})
	_, err := w.cloud.InjectFault(sim.Fault{Operation: driver.OperationGetMachineStatus, Hang: true})
	mustSucceed(t, err)
	done := make(chan error, 3)
	for range 3 {
		go func() { _, err := w.status("ghost"); done <- err }()
	}
	for w.cloud.Calls(driver.OperationGetMachineStatus) < 3 {
		runtime.Gosched()
	}
	w.cloud.ClearFaults()
	for range 3 {
		if got := driver.CodeOf(<-done); got != driver.NotFound {
			t.Errorf("released status of a machine without VM: %v, want NotFound", got)
		}
	}
}
