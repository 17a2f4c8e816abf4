package machine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// failingCreates is a cloud whose CreateMachine always fails, with code
// and the message of each call (a cloud's carry a request ID that changes
// from call to call); it records when CreateMachine was called.
type failingCreates struct {
	driver.Driver
	code    driver.Code
	message func(call int) string

	mu    sync.Mutex
	calls []time.Time
}

func (d *failingCreates) CreateMachine(context.Context, *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	d.mu.Lock()
	d.calls = append(d.calls, time.Now())
	n := len(d.calls)
	d.mu.Unlock()
	return nil, driver.NewError(d.code, d.message(n))
}

func (d *failingCreates) callTimes() []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.calls...)
}

// callsAtLeast is a condition for testenv.Eventually: CreateMachine was
// called n times.
func (d *failingCreates) callsAtLeast(n int) func(context.Context) (bool, string) {
	return func(context.Context) (bool, string) {
		got := len(d.callTimes())
		return got >= n, fmt.Sprintf("CreateMachine called %d times, waiting for %d", got, n)
	}
}

// checkBackoff fails t when two CreateMachine calls came closer than the
// controller's backoff allows after that many failures of code: the
// wait counts from after the failed call, so it is a lower bound for the
// time between calls.
func checkBackoff(t *testing.T, calls []time.Time, opts machine.Options, code driver.Code) {
	t.Helper()
	for i := 1; i < len(calls); i++ {
		if gap, want := calls[i].Sub(calls[i-1]), opts.RetryDelay(code, i); gap < want {
			t.Errorf("CreateMachine call %d came %v after call %d; the backoff after %d failures is %v (all calls at %v)",
				i+1, gap, i, i, want, offsets(calls))
		}
	}
}

// offsets are the times of calls from the first one.
func offsets(calls []time.Time) []time.Duration {
	out := make([]time.Duration, len(calls))
	for i, c := range calls {
		out[i] = c.Sub(calls[0]).Round(time.Millisecond)
	}
	return out
}

// TestIntegrationFailingCreateRetriesOnItsBackoff: a CreateMachine that
// always fails is called again on the controller's backoff (ShortRetry,
// then twice as long each time), never sooner because of the
// controller's own writes: the write-ahead of the finalizer, the
// CrashLoopBackOff status, and the new description of each failure.
func TestIntegrationFailingCreateRetriesOnItsBackoff(t *testing.T) {
	for _, tc := range []struct {
		name    string
		message func(call int) string
	}{
		{"same message", func(int) string { return "RequestLimitExceeded: Request limit exceeded." }},
		{"new request ID each time", func(call int) string {
			return fmt.Sprintf("RequestLimitExceeded: Request limit exceeded. status code: 503, request id: 0f6c%04d", call)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drv := &failingCreates{code: driver.Unavailable, message: tc.message}
			events := &eventLog{}
			opts := machine.Options{ShortRetry: 400 * time.Millisecond, MediumRetry: 400 * time.Millisecond,
				MaxRetryDelay: 10 * time.Second, Recorder: events}
			w := integration(t, worldOptions{ctrl: opts, drv: func(d driver.Driver) driver.Driver { drv.Driver = d; return drv }})
			createClass(t, w.mc, w.core, w.ns, true)
			m := newMachine(w.ns, w.name(0), "sim", nil)
			createMachine(t, w.mc, m)
			// Calls at 0, 0.4, 1.2 and 2.8 s on the backoff.
			testenv.Eventually(t, 30*time.Second, drv.callsAtLeast(4))
			checkBackoff(t, drv.callTimes(), opts, driver.Unavailable)
			testenv.Eventually(t, 10*time.Second, phaseIs(w.mc, w.ns, m.Name, v1alpha1.MachineCrashLoopBackOff))
			if got := events.of(m.Name, machine.ReasonCreateFailed); len(got) == 0 {
				t.Errorf("no %s event; events: %v", machine.ReasonCreateFailed, events.all())
			}
		})
	}
}
