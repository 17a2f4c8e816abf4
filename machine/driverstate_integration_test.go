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
// a lastKnownState of 2 MB (as big as a request etcd takes); it records
// when each driver call of the creation flow was made.
type hugeStateCreates struct {
	driver.Driver

	mu    sync.Mutex
	calls []timedCall
}

// timedCall is a driver call and when it was made.
type timedCall struct {
	Op driver.Operation
	At time.Time
}

func (d *hugeStateCreates) record(op driver.Operation) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, timedCall{op, time.Now()})
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
	d.record(driver.OperationCreateMachine)
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
// name and runs.
func TestIntegrationHugeDriverStateIsRefused(t *testing.T) {
	drv := &hugeStateCreates{}
	logs := &failedWrites{}
	recorder, stopRecording := apiRecorder(t)
	t.Cleanup(stopRecording)
	opts := machine.Options{MediumRetry: 2 * time.Second, ShortRetry: 2 * time.Second, MaxRetryDelay: 10 * time.Second,
		Recorder: recorder, Logger: logs.logger(t)}
	w := integration(t, worldOptions{ctrl: opts, drv: func(d driver.Driver) driver.Driver { drv.Driver = d; return drv }})
	createClass(t, w.mc, w.core, w.ns, true)
	m := newMachine(w.ns, w.name(0), "sim", nil)
	versions := watchMachine(t, w, m.Name)
	createMachine(t, w.mc, m)

	testenv.Eventually(t, 60*time.Second, phaseIs(w.mc, w.ns, m.Name, v1alpha1.MachineRunning))

	var refused bool
	for _, v := range versions() {
		op := v.Status.LastOperation
		if v.Status.CurrentStatus.Phase == v1alpha1.MachineCrashLoopBackOff && op.State == v1alpha1.MachineStateFailed &&
			op.Type == v1alpha1.MachineOperationCreate && op.ErrorCode == driver.Internal.String() &&
			strings.Contains(op.Description, "driver returned a lastKnownState of 2097152 bytes; the controller stores at most 65536") {
			refused = true
		}
		if v.Status.LastKnownState != "" {
			t.Errorf("version %s stores a lastKnownState of %d bytes", v.ResourceVersion, len(v.Status.LastKnownState))
		}
	}
	if !refused {
		var seen []string
		for _, v := range versions() {
			seen = append(seen, fmt.Sprintf("%s %q %s/%s/%s %.120q", v.ResourceVersion, v.Status.CurrentStatus.Phase,
				v.Status.LastOperation.Type, v.Status.LastOperation.State, v.Status.LastOperation.ErrorCode, v.Status.LastOperation.Description))
		}
		t.Errorf("no version of the machine says the driver's answer was refused (CrashLoopBackOff, Create Failed, Internal); versions:\n%s", strings.Join(seen, "\n"))
	}
	if failed := logs.all(); len(failed) > 0 {
		t.Errorf("%d status writes failed, the first: %s", len(failed), failed[0])
	}

	// The driver: one CreateMachine, and the next call of the flow (the
	// GetMachineStatus that adopts the VM) after the backoff.
	calls := drv.recorded()
	create := slices.IndexFunc(calls, func(c timedCall) bool { return c.Op == driver.OperationCreateMachine })
	if create < 0 {
		t.Fatalf("CreateMachine never called: %v", calls)
	}
	next := slices.IndexFunc(calls[create+1:], func(c timedCall) bool { return c.Op != driver.OperationInitializeMachine })
	if next < 0 {
		t.Fatalf("the driver was not called again after CreateMachine, yet the machine runs: %v", calls)
	}
	again := calls[create+1+next]
	if gap, want := again.At.Sub(calls[create].At), opts.RetryDelay(driver.Internal, 1); again.Op != driver.OperationGetMachineStatus || gap < want {
		t.Errorf("after the refused CreateMachine, %s came %v later; want GetMachineStatus after the backoff, %v (calls %v)", again.Op, gap, want, calls)
	}
	if n := len(slices.DeleteFunc(calls, func(c timedCall) bool { return c.Op != driver.OperationCreateMachine })); n != 1 {
		t.Errorf("CreateMachine called %d times, want once: the VM is adopted by name", n)
	}

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
}
