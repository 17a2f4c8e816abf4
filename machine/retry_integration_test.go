package machine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

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

// cutLogger logs to t with long values cut, so that a 2 MB error stays
// out of the test's output.
func cutLogger(t *testing.T) logr.Logger {
	return funcr.New(func(prefix, args string) {
		if len(args) > 2000 {
			args = strings.ToValidUTF8(args[:2000], "") + "..."
		}
		t.Log(prefix, args)
	}, funcr.Options{Verbosity: 1})
}

// apiRecorder records events to the API server, as the reference binary
// does; stop ends it.
func apiRecorder(t *testing.T) (record.EventRecorder, func()) {
	t.Helper()
	evScheme := runtime.NewScheme()
	if err := scheme.AddToScheme(evScheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(evScheme); err != nil {
		t.Fatal(err)
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: testenv.Get(t).Client().CoreV1().Events("")})
	return broadcaster.NewRecorder(evScheme, corev1.EventSource{Component: "machine-test"}), broadcaster.Shutdown
}

// TestIntegrationHugeDriverErrorIsTruncated: a driver whose CreateMachine
// fails with a 2 MB message (as big as a request etcd takes) cannot make
// the machine's status writes fail: the machine is CrashLoopBackOff with a
// lastOperation whose description is cut to a bounded size and says so, a
// Warning event with a bounded message reaches the API server, and the
// driver is called again on the backoff only.
func TestIntegrationHugeDriverErrorIsTruncated(t *testing.T) {
	t.Parallel()
	// Multi-byte characters, so that a cut at a byte count would split one.
	huge := "instance limit exceeded: " + strings.Repeat("ü€", 2<<20/5)
	drv := &failingCreates{code: driver.Internal, message: func(int) string { return huge }}
	recorder, stopRecording := apiRecorder(t)
	t.Cleanup(stopRecording)
	opts := machine.Options{MediumRetry: 500 * time.Millisecond, MaxRetryDelay: 10 * time.Second,
		ShortRetry: 500 * time.Millisecond, Recorder: recorder, Logger: cutLogger(t)}
	w := integration(t, worldOptions{ctrl: opts, drv: func(d driver.Driver) driver.Driver { drv.Driver = d; return drv }})
	createClass(t, w.mc, w.core, w.ns, true)
	m := newMachine(w.ns, w.name(0), "sim", nil)
	createMachine(t, w.mc, m)

	testenv.Eventually(t, 30*time.Second, drv.callsAtLeast(3))
	checkBackoff(t, drv.callTimes(), opts, driver.Internal)

	testenv.Eventually(t, 20*time.Second, func(ctx context.Context) (bool, string) {
		got, err := getMachine(ctx, w.mc, w.ns, m.Name)
		if err != nil {
			return false, err.Error()
		}
		op := got.Status.LastOperation
		d := op.Description
		return got.Status.CurrentStatus.Phase == v1alpha1.MachineCrashLoopBackOff && op.State == v1alpha1.MachineStateFailed &&
				op.Type == v1alpha1.MachineOperationCreate && op.ErrorCode == driver.Internal.String() &&
				strings.Contains(d, "instance limit exceeded: ü€ü€") && strings.HasSuffix(d, " bytes truncated]") &&
				len(d) <= 4096 && utf8.ValidString(d),
			fmt.Sprintf("phase %q, lastOperation %s/%s/%s, description of %d bytes ending %q",
				got.Status.CurrentStatus.Phase, op.Type, op.State, op.ErrorCode, len(d), d[max(len(d)-60, 0):])
	})
	testenv.Eventually(t, 20*time.Second, func(ctx context.Context) (bool, string) {
		events, err := w.core.CoreV1().Events(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == m.Name && e.Type == corev1.EventTypeWarning && e.Reason == machine.ReasonCreateFailed {
				ok := len(e.Message) <= 1024 && strings.HasSuffix(e.Message, " bytes truncated]") && utf8.ValidString(e.Message)
				return ok, fmt.Sprintf("event message of %d bytes: %q", len(e.Message), e.Message[:min(len(e.Message), 200)])
			}
		}
		return false, fmt.Sprintf("no Warning %s event among %d", machine.ReasonCreateFailed, len(events.Items))
	})
}

// TestIntegrationFailingCreateRetriesOnItsBackoff: a CreateMachine that
// always fails is called again on the controller's backoff (ShortRetry,
// then twice as long each time), never sooner because of the
// controller's own writes: the write-ahead of the finalizer, the
// CrashLoopBackOff status, and the new description of each failure.
func TestIntegrationFailingCreateRetriesOnItsBackoff(t *testing.T) {
	t.Parallel()
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
