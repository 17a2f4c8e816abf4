package driver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

// fakeCloud is a Driver that records its calls ("Operation subject") and
// behaves as behave says (nil: returns at once, successfully).
type fakeCloud struct {
	mu     sync.Mutex
	calls  []string
	behave func(ctx context.Context, op driver.Operation, subject string) error
}

func (f *fakeCloud) call(ctx context.Context, op driver.Operation, subject string) error {
	f.mu.Lock()
	f.calls = append(f.calls, string(op)+" "+subject)
	behave := f.behave
	f.mu.Unlock()
	if behave == nil {
		return nil
	}
	return behave(ctx, op, subject)
}

func (f *fakeCloud) callsSoFar() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func machineOf(m *v1alpha1.Machine) string { return m.Namespace + "/" + m.Name }

func (f *fakeCloud) CreateMachine(ctx context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	if err := f.call(ctx, driver.OperationCreateMachine, machineOf(req.Machine)); err != nil {
		return nil, err
	}
	return &driver.CreateMachineResponse{ProviderID: "sim:///" + req.Machine.Name, NodeName: req.Machine.Name}, nil
}

func (f *fakeCloud) InitializeMachine(ctx context.Context, req *driver.InitializeMachineRequest) (*driver.InitializeMachineResponse, error) {
	return &driver.InitializeMachineResponse{}, f.call(ctx, driver.OperationInitializeMachine, machineOf(req.Machine))
}

func (f *fakeCloud) DeleteMachine(ctx context.Context, req *driver.DeleteMachineRequest) (*driver.DeleteMachineResponse, error) {
	return &driver.DeleteMachineResponse{LastKnownState: "gone"}, f.call(ctx, driver.OperationDeleteMachine, machineOf(req.Machine))
}

// GetMachineStatus returns its response even with an error, as a driver
// does with Uninitialized.
func (f *fakeCloud) GetMachineStatus(ctx context.Context, req *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	err := f.call(ctx, driver.OperationGetMachineStatus, machineOf(req.Machine))
	return &driver.GetMachineStatusResponse{ProviderID: "sim:///" + req.Machine.Name}, err
}

func (f *fakeCloud) ListMachines(ctx context.Context, req *driver.ListMachinesRequest) (*driver.ListMachinesResponse, error) {
	if err := f.call(ctx, driver.OperationListMachines, req.MachineClass.Namespace+"/"+req.MachineClass.Name); err != nil {
		return nil, err
	}
	return &driver.ListMachinesResponse{Machines: map[string]string{"sim:///a": "a"}}, nil
}

func (f *fakeCloud) GetVolumeIDs(ctx context.Context, _ *driver.GetVolumeIDsRequest) (*driver.GetVolumeIDsResponse, error) {
	return &driver.GetVolumeIDsResponse{VolumeIDs: []string{"vol-1"}}, f.call(ctx, driver.OperationGetVolumeIDs, "")
}

func (f *fakeCloud) ProviderName() string { return "fake" }

func testMachine(name string) *v1alpha1.Machine {
	return &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
}

func testClass(name string) *v1alpha1.MachineClass {
	return &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
}

// invoke calls op on d for a machine (or, for ListMachines, a class) of
// that name, and returns the response (nil when none) and the error.
func invoke(ctx context.Context, d driver.Driver, op driver.Operation, name string) (any, error) {
	m := testMachine(name)
	switch op {
	case driver.OperationCreateMachine:
		r, err := d.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: m})
		return nilIfNil(r), err
	case driver.OperationInitializeMachine:
		r, err := d.InitializeMachine(ctx, &driver.InitializeMachineRequest{Machine: m})
		return nilIfNil(r), err
	case driver.OperationDeleteMachine:
		r, err := d.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: m})
		return nilIfNil(r), err
	case driver.OperationGetMachineStatus:
		r, err := d.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: m})
		return nilIfNil(r), err
	case driver.OperationListMachines:
		r, err := d.ListMachines(ctx, &driver.ListMachinesRequest{MachineClass: testClass(name)})
		return nilIfNil(r), err
	default:
		r, err := d.GetVolumeIDs(ctx, &driver.GetVolumeIDsRequest{})
		return nilIfNil(r), err
	}
}

func nilIfNil[R any](r *R) any {
	if r == nil {
		return nil
	}
	return r
}

func TestWithDeadlinesRejectsBadInput(t *testing.T) {
	if _, err := driver.WithDeadlines(nil, driver.Timeouts{}); err == nil {
		t.Error("no error for a nil driver")
	}
	_, err := driver.WithDeadlines(&fakeCloud{}, driver.Timeouts{CreateMachine: -time.Second, ListMachines: -1})
	if msg := errString(err); !strings.Contains(msg, "CreateMachine") || !strings.Contains(msg, "ListMachines") {
		t.Errorf("error %q, want one naming both negative timeouts", msg)
	}
}

// TestDeadlinesPassThrough: within the deadline, responses and errors are
// the wrapped driver's, a response that comes with an error included.
func TestDeadlinesPassThrough(t *testing.T) {
	uninit := driver.NewError(driver.Uninitialized, "not yet")
	for _, op := range driver.Operations() {
		for _, wantErr := range []error{nil, uninit} {
			t.Run(fmt.Sprintf("%s/%v", op, wantErr), func(t *testing.T) {
				cloud := &fakeCloud{behave: func(context.Context, driver.Operation, string) error { return wantErr }}
				d, err := driver.WithDeadlines(cloud, driver.Timeouts{})
				if err != nil {
					t.Fatal(err)
				}
				want, wantCallErr := invoke(context.Background(), cloud, op, "a")
				got, gotErr := invoke(context.Background(), d, op, "a")
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("response (-want +got):\n%s", diff)
				}
				if gotErr != wantCallErr {
					t.Errorf("error %v, want %v itself", gotErr, wantCallErr)
				}
				if s := d.Stuck(); len(s) != 0 {
					t.Errorf("stuck calls %v", s)
				}
			})
		}
	}
	d, _ := driver.WithDeadlines(&fakeCloud{}, driver.Timeouts{})
	if got := d.ProviderName(); got != "fake" {
		t.Errorf("ProviderName() = %q, want the wrapped driver's", got)
	}
}

// TestDeadlinesFastCallsAreNeverLate: a call that returns well within its
// deadline is never taken for one that outlived it, however the wrapper's
// goroutines interleave.
func TestDeadlinesFastCallsAreNeverLate(t *testing.T) {
	d, err := driver.WithDeadlines(&fakeCloud{}, driver.Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if _, err := invoke(context.Background(), d, driver.OperationCreateMachine, "a"); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if s := d.Stuck(); len(s) != 0 {
		t.Errorf("stuck calls %v", s)
	}
}

// TestDeadlinesEndAHonouringCall: a driver that honours its context
// returns at the deadline; the error says which deadline.
func TestDeadlinesEndAHonouringCall(t *testing.T) {
	cloud := &fakeCloud{behave: func(ctx context.Context, _ driver.Operation, _ string) error {
		<-ctx.Done()
		return driver.ContextError(ctx)
	}}
	d, err := driver.WithDeadlines(cloud, driver.Timeouts{DeleteMachine: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = invoke(context.Background(), d, driver.OperationDeleteMachine, "a")
	if code := driver.CodeOf(err); code != driver.DeadlineExceeded || !strings.Contains(err.Error(), "deadline of 20ms") {
		t.Errorf("error %v (code %v), want DeadlineExceeded naming the deadline", err, code)
	}
	// The driver returned: whether the wrapper saw that before or after
	// the deadline, nothing stays stuck.
	waitUntil(t, func() bool { return len(d.Stuck()) == 0 }, "the call to leave the stuck calls")
}

// TestDeadlinesAbandonACallThatIgnoresItsContext: the caller is answered
// at the deadline; the call is stuck until the driver returns, and while it
// is, no other call for its machine (class, for ListMachines; any
// GetVolumeIDs) reaches the driver.
func TestDeadlinesAbandonACallThatIgnoresItsContext(t *testing.T) {
	type call struct {
		op   driver.Operation
		name string
	}
	tests := []struct {
		name  string
		stuck call
		// then are the calls made while it is stuck, and whether each
		// reaches the driver.
		then      []call
		reach     []bool
		wantStuck driver.StuckCall
	}{{
		name:  "CreateMachine",
		stuck: call{driver.OperationCreateMachine, "a"},
		then: []call{{driver.OperationCreateMachine, "a"}, {driver.OperationGetMachineStatus, "a"}, {driver.OperationDeleteMachine, "a"},
			{driver.OperationInitializeMachine, "a"}, {driver.OperationCreateMachine, "b"}, {driver.OperationDeleteMachine, "b"},
			{driver.OperationListMachines, "a"}, {driver.OperationGetVolumeIDs, ""}},
		reach:     []bool{false, false, false, false, true, true, true, true},
		wantStuck: driver.StuckCall{Operation: driver.OperationCreateMachine, Machine: "ns/a", Timeout: 10 * time.Millisecond},
	}, {
		name:      "DeleteMachine",
		stuck:     call{driver.OperationDeleteMachine, "a"},
		then:      []call{{driver.OperationDeleteMachine, "a"}, {driver.OperationCreateMachine, "a"}, {driver.OperationDeleteMachine, "b"}},
		reach:     []bool{false, false, true},
		wantStuck: driver.StuckCall{Operation: driver.OperationDeleteMachine, Machine: "ns/a", Timeout: 10 * time.Millisecond},
	}, {
		name:      "ListMachines",
		stuck:     call{driver.OperationListMachines, "c1"},
		then:      []call{{driver.OperationListMachines, "c1"}, {driver.OperationListMachines, "c2"}, {driver.OperationCreateMachine, "c1"}},
		reach:     []bool{false, true, true},
		wantStuck: driver.StuckCall{Operation: driver.OperationListMachines, Class: "ns/c1", Timeout: 10 * time.Millisecond},
	}, {
		name:      "GetVolumeIDs",
		stuck:     call{driver.OperationGetVolumeIDs, ""},
		then:      []call{{driver.OperationGetVolumeIDs, ""}, {driver.OperationDeleteMachine, "a"}},
		reach:     []bool{false, true},
		wantStuck: driver.StuckCall{Operation: driver.OperationGetVolumeIDs, Timeout: 10 * time.Millisecond},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			var once sync.Once
			t.Cleanup(func() { once.Do(func() { close(release) }) })
			hung := make(chan struct{})
			cloud := &fakeCloud{}
			cloud.behave = func(ctx context.Context, op driver.Operation, _ string) error {
				if len(cloud.callsSoFar()) == 1 {
					close(hung)
					<-release // ignores ctx
				}
				return nil
			}
			d, err := driver.WithDeadlines(cloud, driver.Timeouts{
				CreateMachine: 10 * time.Millisecond, DeleteMachine: 10 * time.Millisecond, ListMachines: 10 * time.Millisecond,
				GetVolumeIDs: 10 * time.Millisecond, GetMachineStatus: time.Hour, InitializeMachine: time.Hour,
			})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := invoke(context.Background(), d, tt.stuck.op, tt.stuck.name)
			<-hung
			if code := driver.CodeOf(err); code != driver.DeadlineExceeded || resp != nil || !strings.Contains(err.Error(), "abandoned") {
				t.Fatalf("stuck call: response %v, error %v (code %v); want none and DeadlineExceeded", resp, err, code)
			}
			if diff := cmp.Diff([]driver.StuckCall{tt.wantStuck}, d.Stuck(), cmpopts.IgnoreFields(driver.StuckCall{}, "Started")); diff != "" {
				t.Errorf("Stuck() (-want +got):\n%s", diff)
			}
			var gotReach []bool
			for _, c := range tt.then {
				before := len(cloud.callsSoFar())
				_, err := invoke(context.Background(), d, c.op, c.name)
				reached := len(cloud.callsSoFar()) > before
				gotReach = append(gotReach, reached)
				if !reached && (driver.CodeOf(err) != driver.DeadlineExceeded || !strings.Contains(err.Error(), "outlived its deadline")) {
					t.Errorf("%s %s refused with %v, want DeadlineExceeded naming the stuck call", c.op, c.name, err)
				}
			}
			if diff := cmp.Diff(tt.reach, gotReach); diff != "" {
				t.Errorf("which calls reached the driver (-want +got):\n%s", diff)
			}
			once.Do(func() { close(release) })
			waitUntil(t, func() bool { return len(d.Stuck()) == 0 }, "the released call to leave the stuck calls")
			before := len(cloud.callsSoFar())
			if _, err := invoke(context.Background(), d, tt.stuck.op, tt.stuck.name); err != nil || len(cloud.callsSoFar()) != before+1 {
				t.Errorf("after the stuck call returned: error %v, driver calls %d → %d", err, before, len(cloud.callsSoFar()))
			}
		})
	}
}

// TestDeadlinesCallerGivesUp: a call whose caller's context ends is
// answered with the caller's code, and stays stuck until the driver
// returns.
func TestDeadlinesCallerGivesUp(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	cloud := &fakeCloud{behave: func(context.Context, driver.Operation, string) error { <-release; return nil }}
	d, err := driver.WithDeadlines(cloud, driver.Timeouts{CreateMachine: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = invoke(ctx, d, driver.OperationCreateMachine, "a")
	if code := driver.CodeOf(err); code != driver.Canceled || !errors.Is(err, context.Canceled) {
		t.Errorf("error %v (code %v), want Canceled", err, code)
	}
	if diff := cmp.Diff([]driver.StuckCall{{Operation: driver.OperationCreateMachine, Machine: "ns/a", Timeout: time.Hour}}, d.Stuck(),
		cmpopts.IgnoreFields(driver.StuckCall{}, "Started")); diff != "" {
		t.Errorf("Stuck() (-want +got):\n%s", diff)
	}
}

// TestDeadlinesConcurrentCalls runs many calls at once, some hanging past
// their deadline, for the race detector, and checks that every machine got
// exactly one driver call.
func TestDeadlinesConcurrentCalls(t *testing.T) {
	release := make(chan struct{})
	cloud := &fakeCloud{behave: func(_ context.Context, _ driver.Operation, subject string) error {
		if strings.HasSuffix(subject, "-hang") {
			<-release
		}
		return nil
	}}
	d, err := driver.WithDeadlines(cloud, driver.Timeouts{CreateMachine: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	const n = 20
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		if i%2 == 0 {
			name += "-hang"
		}
		wg.Go(func() { _, _ = invoke(context.Background(), d, driver.OperationCreateMachine, name) })
		wg.Go(func() { _ = d.Stuck() })
	}
	wg.Wait()
	// A second round: the hung machines are refused, the others called.
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		if i%2 == 0 {
			name += "-hang"
		}
		wg.Go(func() { _, _ = invoke(context.Background(), d, driver.OperationCreateMachine, name) })
	}
	wg.Wait()
	if got := len(d.Stuck()); got != n/2 {
		t.Errorf("%d stuck calls, want %d", got, n/2)
	}
	close(release)
	waitUntil(t, func() bool { return len(d.Stuck()) == 0 }, "every stuck call to return")
	perMachine := map[string]int{}
	for _, c := range cloud.callsSoFar() {
		perMachine[c]++
	}
	for c, k := range perMachine {
		if strings.HasSuffix(c, "-hang") && k != 1 {
			t.Errorf("%s: %d driver calls, want 1", c, k)
		}
	}
}

// waitUntil polls cond: what it waits for happens in a goroutine of the
// wrapper right after the driver returns. The bound is generous, not a
// measure of speed.
func waitUntil(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}
