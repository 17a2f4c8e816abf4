package machine

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

// initDriver has no VM for any machine, creates one on CreateMachine and
// answers InitializeMachine as told.
type initDriver struct {
	driver.Driver // nil: other calls panic
	initResp      *driver.InitializeMachineResponse
	initErr       error
	calls         []driver.Operation
}

func (d *initDriver) GetMachineStatus(context.Context, *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	d.calls = append(d.calls, driver.OperationGetMachineStatus)
	return nil, driver.NewError(driver.NotFound, "no VM")
}

func (d *initDriver) CreateMachine(context.Context, *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	d.calls = append(d.calls, driver.OperationCreateMachine)
	return &driver.CreateMachineResponse{ProviderID: "p1", NodeName: "n1"}, nil
}

func (d *initDriver) InitializeMachine(context.Context, *driver.InitializeMachineRequest) (*driver.InitializeMachineResponse, error) {
	d.calls = append(d.calls, driver.OperationInitializeMachine)
	return d.initResp, d.initErr
}

// TestCreateInitializeMachineCodes: after CreateMachine, only Unimplemented
// from InitializeMachine skips the step, as in MCM's controller; NotFound
// (the VM vanished) is a failed initialization like any other code, which
// the machine reports as MCM does and retries from GetMachineStatus.
func TestCreateInitializeMachineCodes(t *testing.T) {
	type result struct {
		FailedOp             driver.Operation
		Code                 string
		ProviderID, NodeName string
		Phase                v1alpha1.MachinePhase
		Description          string
	}
	tests := []struct {
		name string
		resp *driver.InitializeMachineResponse
		err  error
		want result
	}{
		{"Unimplemented skips the step", nil, driver.NewError(driver.Unimplemented, "no init"),
			result{"", "OK", "p1", "n1", v1alpha1.MachinePending, "Creating machine on cloud provider"}},
		{"OK may correct the provider ID", &driver.InitializeMachineResponse{ProviderID: "p2"}, nil,
			result{"", "OK", "p2", "n1", v1alpha1.MachinePending, "Creating machine on cloud provider"}},
		{"NotFound is a failure", nil, driver.NewError(driver.NotFound, "VM gone"),
			result{driver.OperationInitializeMachine, "NotFound", "", "", v1alpha1.MachineCrashLoopBackOff, "Provider error: NotFound: VM gone. Initialize VM Instance"}},
		{"Uninitialized is a failure", nil, driver.NewError(driver.Uninitialized, "not yet"),
			result{driver.OperationInitializeMachine, "Uninitialized", "", "", v1alpha1.MachineCrashLoopBackOff, "Provider error: Uninitialized: not yet. Initialize VM Instance"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t)
			metrics, err := newMetrics(nil)
			if err != nil {
				t.Fatal(err)
			}
			d := &initDriver{initResp: tc.resp, initErr: tc.err}
			c := &Controller{opts: *o, driver: d, metrics: metrics}
			m := baseMachine()
			m.Annotations = map[string]string{CreationStartedAnnotation: formatTime(t0.Add(-time.Minute))}
			secret := &corev1.Secret{Data: map[string][]byte{v1alpha1.UserDataKey: []byte("x")}}
			out := c.create(context.Background(), m, readyClass(), secret)
			p := planCreateOutcome(obsFor(m), out, o)
			got := result{out.FailedOp, driver.CodeOf(out.Err).String(), out.ProviderID, out.NodeName,
				p.Machine.Status.CurrentStatus.Phase, p.Machine.Status.LastOperation.Description}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			wantCalls := []driver.Operation{driver.OperationGetMachineStatus, driver.OperationCreateMachine, driver.OperationInitializeMachine}
			if diff := cmp.Diff(wantCalls, d.calls); diff != "" {
				t.Errorf("driver calls (-want +got):\n%s", diff)
			}
		})
	}
}
