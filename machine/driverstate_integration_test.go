package machine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// hugeStateCreates is the simulated cloud whose CreateMachine answers with
// a lastKnownState of 2 MB (as big as a request etcd takes), after failing
// once with Unavailable when failFirst is set; it records when each driver
// call of the creation flow was made.
type hugeStateCreates struct {
	driver.Driver
	failFirst bool

	mu    sync.Mutex
	calls []timedCall
}

// timedCall is a driver call and when it was made.
type timedCall struct {
	Op driver.Operation
	At time.Time
}

// record records a call of op and returns how many calls of op there were.
func (d *hugeStateCreates) record(op driver.Operation) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, timedCall{op, time.Now()})
	n := 0
	for _, c := range d.calls {
		if c.Op == op {
			n++
		}
	}
	return n
}

func (d *hugeStateCreates) recorded() []timedCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]timedCall(nil), d.calls...)
}

func (d *hugeStateCreates) GetMachineStatus(ctx context.Context, req *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	d.record(driver.OperationGetMachineStatus)
	return d.Driver.GetMachineStatus(ctx, req)
}

func (d *hugeStateCreates) CreateMachine(ctx context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	if d.record(driver.OperationCreateMachine) == 1 && d.failFirst {
		return nil, driver.NewError(driver.Unavailable, "cloud busy")
	}
	resp, err := d.Driver.CreateMachine(ctx, req)
	if resp != nil {
		resp.LastKnownState = strings.Repeat("s", 2<<20)
	}
	return resp, err
}

func (d *hugeStateCreates) InitializeMachine(ctx context.Context, req *driver.InitializeMachineRequest) (*driver.InitializeMachineResponse, error) {
	d.record(driver.OperationInitializeMachine)
	return d.Driver.InitializeMachine(ctx, req)
}

// failedWrites logs to t, with long values cut (see cutLogger), and keeps
// the log lines of failed writes of a machine's status.
type failedWrites struct {
	mu    sync.Mutex
	lines []string
}

func (f *failedWrites) logger(t *testing.T) logr.Logger {
	return funcr.New(func(prefix, args string) {
		if strings.Contains(args, "patching status of machine") {
			f.mu.Lock()
			f.lines = append(f.lines, args[:min(len(args), 300)])
			f.mu.Unlock()
		}
		if len(args) > 2000 {
			args = strings.ToValidUTF8(args[:2000], "") + "..."
		}
		t.Log(prefix, args)
	}, funcr.Options{Verbosity: 1})
}

func (f *failedWrites) all() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.lines...)
}

// watchMachine records every version of machine name the API server
// stores from now on, until the test ends.
func watchMachine(t *testing.T, w *world, name string) func() []v1alpha1.Machine {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	watcher, err := w.mc.MachineV1alpha1().Machines(w.ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []v1alpha1.Machine
	go func() {
		for ev := range watcher.ResultChan() {
			if m, ok := ev.Object.(*v1alpha1.Machine); ok {
				mu.Lock()
				seen = append(seen, *m)
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(watcher.Stop)
	return func() []v1alpha1.Machine {
		mu.Lock()
		defer mu.Unlock()
		return append([]v1alpha1.Machine(nil), seen...)
	}
}

// TestIntegrationHugeDriverStateIsRefused: a driver whose CreateMachine
// answers with a 2 MB lastKnownState cannot make the machine's status
// writes fail: the answer is refused whole as the driver's fault — the
// machine is CrashLoopBackOff with a Failed lastOperation (Internal) and a
// Warning event, nothing of the answer is stored — and the driver is
// called again on the backoff only, when the machine adopts its VM by
// name and runs (Available without a target cluster). The answer comes
// where its status would be written whole: without a target cluster, and
// with one on a retry after a failed creation.
func TestIntegrationHugeDriverStateIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		noTarget bool
		want     v1alpha1.MachinePhase
	}{
		{name: "without a target cluster", noTarget: true, want: v1alpha1.MachineAvailable},
		{name: "with a target cluster, on a retry", want: v1alpha1.MachineRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drv := &hugeStateCreates{failFirst: !tc.noTarget}
			logs := &failedWrites{}
			recorder, stopRecording := apiRecorder(t)
			t.Cleanup(stopRecording)
			opts := machine.Options{MediumRetry: 2 * time.Second, ShortRetry: time.Second, MaxRetryDelay: 10 * time.Second,
				Recorder: recorder, Logger: logs.logger(t)}
			w := integration(t, worldOptions{noTarget: tc.noTarget, ctrl: opts, drv: func(d driver.Driver) driver.Driver { drv.Driver = d; return drv }})
			createClass(t, w.mc, w.core, w.ns, true)
			m := newMachine(w.ns, w.name(0), "sim", nil)
			versions := watchMachine(t, w, m.Name)
			createMachine(t, w.mc, m)

			testenv.Eventually(t, 60*time.Second, phaseIs(w.mc, w.ns, m.Name, tc.want))
			checkRefusedState(t, versions())
			if failed := logs.all(); len(failed) > 0 {
				t.Errorf("%d status writes failed, the first: %s", len(failed), failed[0])
			}
			checkAdoptedOnBackoff(t, drv.recorded(), opts, !tc.noTarget)
			testenv.Eventually(t, 20*time.Second, func(ctx context.Context) (bool, string) {
				events, err := w.core.CoreV1().Events(w.ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err.Error()
				}
				for _, e := range events.Items {
					if e.InvolvedObject.Name == m.Name && e.Type == corev1.EventTypeWarning && e.Reason == machine.ReasonCreateFailed &&
						strings.Contains(e.Message, "lastKnownState of 2097152 bytes") {
						return true, ""
					}
				}
				return false, fmt.Sprintf("no Warning %s event about the lastKnownState among %d", machine.ReasonCreateFailed, len(events.Items))
			})
		})
	}
}

// checkRefusedState fails t unless a version of the machine says the
// driver's answer was refused (CrashLoopBackOff, Create Failed, Internal),
// or when one stores the driver's lastKnownState.
func checkRefusedState(t *testing.T, versions []v1alpha1.Machine) {
	t.Helper()
	var refused bool
	var seen []string
	for _, v := range versions {
		op := v.Status.LastOperation
		if v.Status.CurrentStatus.Phase == v1alpha1.MachineCrashLoopBackOff && op.State == v1alpha1.MachineStateFailed &&
			op.Type == v1alpha1.MachineOperationCreate && op.ErrorCode == driver.Internal.String() &&
			strings.Contains(op.Description, "driver returned a lastKnownState of 2097152 bytes; the controller stores at most 65536") {
			refused = true
		}
		if v.Status.LastKnownState != "" {
			t.Errorf("version %s stores a lastKnownState of %d bytes", v.ResourceVersion, len(v.Status.LastKnownState))
		}
		seen = append(seen, fmt.Sprintf("%s %q %s/%s/%s %.120q", v.ResourceVersion, v.Status.CurrentStatus.Phase,
			op.Type, op.State, op.ErrorCode, op.Description))
	}
	if !refused {
		t.Errorf("no version of the machine says the driver's answer was refused; versions:\n%s", strings.Join(seen, "\n"))
	}
}

// checkAdoptedOnBackoff fails t unless the refused CreateMachine (the
// second with failedFirst) was the last, and the driver's next call, the
// GetMachineStatus that adopts the VM, came after the backoff.
func checkAdoptedOnBackoff(t *testing.T, calls []timedCall, opts machine.Options, failedFirst bool) {
	t.Helper()
	creates, want := 0, 1
	if failedFirst {
		want = 2
	}
	last := -1
	for i, c := range calls {
		if c.Op == driver.OperationCreateMachine {
			creates, last = creates+1, i
		}
	}
	if creates != want {
		t.Fatalf("CreateMachine called %d times, want %d: the VM is adopted by name (calls %v)", creates, want, calls)
	}
	next := slices.IndexFunc(calls[last+1:], func(c timedCall) bool { return c.Op != driver.OperationInitializeMachine })
	if next < 0 {
		t.Fatalf("the driver was not called again after the refused CreateMachine, yet the machine runs: %v", calls)
	}
	again := calls[last+1+next]
	if gap, backoff := again.At.Sub(calls[last].At), opts.RetryDelay(driver.Internal, want); again.Op != driver.OperationGetMachineStatus || gap < backoff {
		t.Errorf("after the refused CreateMachine, %s came %v later; want GetMachineStatus after the backoff, %v (calls %v)", again.Op, gap, backoff, calls)
	}
}
