package mcmdriver_test

import (
	"context"
	"testing"

	mcm "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/codes"
	"github.com/gardener/machine-controller-manager/pkg/util/provider/machinecodes/status"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/mcmdriver"
)

func machineNamed(name string) *v1alpha1.Machine {
	return &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "test"}}
}

// TestCloudFailuresKeepTheirCodes drives memCloud through the adapter into
// its quota, an outage, a VM that needs initializing and one that is gone,
// and checks the code and message of each answer.
func TestCloudFailuresKeepTheirCodes(t *testing.T) {
	ctx := t.Context()
	cloud := newMemCloud()
	d := mcmdriver.New(cloud)
	class := testClass("small", 1)
	create := func(name string) error {
		_, err := d.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: machineNamed(name), MachineClass: class, Secret: testSecret()})
		return err
	}
	status := func(name string) (*driver.GetMachineStatusResponse, error) {
		return d.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: machineNamed(name), MachineClass: class, Secret: testSecret()})
	}
	initialize := func(name string) error {
		_, err := d.InitializeMachine(ctx, &driver.InitializeMachineRequest{Machine: machineNamed(name), MachineClass: class, Secret: testSecret()})
		return err
	}
	type answer struct {
		Code    driver.Code
		Message string
	}
	of := func(err error) answer {
		if e, ok := err.(*driver.Error); ok {
			return answer{e.Code, e.Message}
		}
		return answer{driver.CodeOf(err), ""}
	}

	var got []answer
	got = append(got, of(create("m-1")), of(create("m-2")))
	resp, err := status("m-1")
	got = append(got, of(err))
	if resp == nil || resp.ProviderID != "memcloud:///zone-a/vm-1" {
		t.Errorf("GetMachineStatus with Uninitialized returned %+v, want the VM's response", resp)
	}
	got = append(got, of(initialize("m-1")))
	_, err = status("m-1")
	got = append(got, of(err), of(initialize("m-2")))
	cloud.down.Store(true)
	_, err = status("m-1")
	got = append(got, of(err))

	want := []answer{
		{driver.OK, ""},
		{driver.ResourceExhausted, "zone zone-a has no capacity left for class test/small"},
		{driver.Uninitialized, "VM memcloud:///zone-a/vm-1 is not initialized"},
		{driver.OK, ""},
		{driver.OK, ""},
		{driver.NotFound, "no VM to initialize for m-2"},
		{driver.Unavailable, "memcloud API unreachable"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
}

// scripted is an MCM driver that counts its calls and answers each with
// err, with or without a response.
type scripted struct {
	calls      int
	err        error
	noResponse bool
}

func (s *scripted) CreateMachine(context.Context, *mcm.CreateMachineRequest) (*mcm.CreateMachineResponse, error) {
	s.calls++
	if s.noResponse {
		return nil, s.err
	}
	return &mcm.CreateMachineResponse{ProviderID: "p"}, s.err
}

func (s *scripted) InitializeMachine(context.Context, *mcm.InitializeMachineRequest) (*mcm.InitializeMachineResponse, error) {
	s.calls++
	// MCM's fake answers Unimplemented with a filled-in response.
	return &mcm.InitializeMachineResponse{ProviderID: "p"}, s.err
}

func (s *scripted) DeleteMachine(context.Context, *mcm.DeleteMachineRequest) (*mcm.DeleteMachineResponse, error) {
	s.calls++
	return nil, s.err
}

func (s *scripted) GetMachineStatus(context.Context, *mcm.GetMachineStatusRequest) (*mcm.GetMachineStatusResponse, error) {
	s.calls++
	return nil, s.err
}

func (s *scripted) ListMachines(context.Context, *mcm.ListMachinesRequest) (*mcm.ListMachinesResponse, error) {
	s.calls++
	return nil, s.err
}

func (s *scripted) GetVolumeIDs(context.Context, *mcm.GetVolumeIDsRequest) (*mcm.GetVolumeIDsResponse, error) {
	s.calls++
	return nil, s.err
}

// TestAdapterEdges covers InitializeMachine's Unimplemented and NotFound,
// a driver that returns nothing at all, and a call with an ended context,
// which never reaches the driver.
func TestAdapterEdges(t *testing.T) {
	req := &driver.InitializeMachineRequest{Machine: machineNamed("m"), MachineClass: testClass("c", 0), Secret: testSecret()}
	for _, tc := range []struct {
		name      string
		driver    *scripted
		call      func(context.Context, driver.Driver) (bool, error)
		canceled  bool
		wantCode  driver.Code
		wantResp  bool
		wantCalls int
	}{
		{"InitializeMachine Unimplemented: the step is skipped", &scripted{err: status.Error(codes.Unimplemented, "no init")},
			func(ctx context.Context, d driver.Driver) (bool, error) {
				r, err := d.InitializeMachine(ctx, req)
				return r != nil, err
			},
			false, driver.Unimplemented, false, 1},
		{"InitializeMachine NotFound: the VM is gone", &scripted{err: status.Error(codes.NotFound, "gone")},
			func(ctx context.Context, d driver.Driver) (bool, error) {
				r, err := d.InitializeMachine(ctx, req)
				return r != nil, err
			},
			false, driver.NotFound, false, 1},
		{"neither response nor error", &scripted{noResponse: true},
			func(ctx context.Context, d driver.Driver) (bool, error) {
				r, err := d.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: req.Machine, MachineClass: req.MachineClass, Secret: req.Secret})
				return r != nil, err
			},
			false, driver.Internal, false, 1},
		{"ListMachines without response", &scripted{},
			func(ctx context.Context, d driver.Driver) (bool, error) {
				r, err := d.ListMachines(ctx, &driver.ListMachinesRequest{MachineClass: req.MachineClass, Secret: req.Secret})
				return r != nil, err
			},
			false, driver.Internal, false, 1},
		{"canceled context", &scripted{},
			func(ctx context.Context, d driver.Driver) (bool, error) {
				r, err := d.InitializeMachine(ctx, req)
				return r != nil, err
			},
			true, driver.Canceled, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.canceled {
				cancel()
			}
			gotResp, err := tc.call(ctx, mcmdriver.New(tc.driver))
			if code := driver.CodeOf(err); code != tc.wantCode || gotResp != tc.wantResp || tc.driver.calls != tc.wantCalls {
				t.Errorf("code %s (%v), response %t, %d driver calls; want %s, %t, %d", code, err, gotResp, tc.driver.calls, tc.wantCode, tc.wantResp, tc.wantCalls)
			}
		})
	}
}
