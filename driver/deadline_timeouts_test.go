package driver_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/driver"
)

func TestTimeoutsOf(t *testing.T) {
	tests := []struct {
		name string
		t    driver.Timeouts
		want map[driver.Operation]time.Duration
	}{
		{name: "zero value: the defaults", want: map[driver.Operation]time.Duration{
			driver.OperationCreateMachine: 10 * time.Minute, driver.OperationInitializeMachine: 10 * time.Minute,
			driver.OperationDeleteMachine: 10 * time.Minute, driver.OperationGetMachineStatus: 2 * time.Minute,
			driver.OperationListMachines: 5 * time.Minute, driver.OperationGetVolumeIDs: time.Minute,
		}},
		{name: "set fields win, the others keep their defaults",
			t: driver.Timeouts{CreateMachine: time.Hour, GetVolumeIDs: time.Second},
			want: map[driver.Operation]time.Duration{
				driver.OperationCreateMachine: time.Hour, driver.OperationInitializeMachine: 10 * time.Minute,
				driver.OperationDeleteMachine: 10 * time.Minute, driver.OperationGetMachineStatus: 2 * time.Minute,
				driver.OperationListMachines: 5 * time.Minute, driver.OperationGetVolumeIDs: time.Second,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[driver.Operation]time.Duration{}
			for _, op := range driver.Operations() {
				got[op] = tt.t.Of(op)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Of (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTimeoutsSet(t *testing.T) {
	start := driver.Timeouts{DeleteMachine: time.Minute}
	tests := []struct {
		in      string
		want    driver.Timeouts
		wantErr string
	}{
		{in: "", want: start},
		{in: "CreateMachine=15m", want: driver.Timeouts{CreateMachine: 15 * time.Minute, DeleteMachine: time.Minute}},
		{in: " GetMachineStatus = 30s , ListMachines=1h,", want: driver.Timeouts{GetMachineStatus: 30 * time.Second, ListMachines: time.Hour, DeleteMachine: time.Minute}},
		{in: "DeleteMachine=2m", want: driver.Timeouts{DeleteMachine: 2 * time.Minute}},
		{in: "createmachine=1m", want: start, wantErr: `unknown operation "createmachine"`},
		{in: "CreateMachine", want: start, wantErr: "is not Operation=duration"},
		{in: "CreateMachine=soon", want: start, wantErr: "invalid duration"},
		{in: "CreateMachine=0s", want: start, wantErr: "must be positive"},
		{in: "CreateMachine=1m,GetVolumeIDs=-1s", want: start, wantErr: "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := start
			err := got.Set(tt.in)
			if msg := errString(err); !strings.Contains(msg, tt.wantErr) || (tt.wantErr == "") != (err == nil) {
				t.Errorf("Set(%q) error %q, want one with %q", tt.in, msg, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Set(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestTimeoutsStringRoundTrips(t *testing.T) {
	in := driver.Timeouts{CreateMachine: 15 * time.Minute, GetVolumeIDs: 5 * time.Second}
	want := "CreateMachine=15m0s,InitializeMachine=10m0s,DeleteMachine=10m0s,GetMachineStatus=2m0s,ListMachines=5m0s,GetVolumeIDs=5s"
	if got := in.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	var back driver.Timeouts
	if err := back.Set(in.String()); err != nil {
		t.Fatal(err)
	}
	for _, op := range driver.Operations() {
		if back.Of(op) != in.Of(op) {
			t.Errorf("%s: %v after the round trip, want %v", op, back.Of(op), in.Of(op))
		}
	}
}

func TestStuckCallString(t *testing.T) {
	at := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in   driver.StuckCall
		want string
	}{
		{driver.StuckCall{Operation: driver.OperationCreateMachine, Machine: "ns/m1", Started: at, Timeout: 10 * time.Minute},
			"CreateMachine of machine ns/m1 running since 2025-06-01T10:00:00Z (deadline 10m0s)"},
		{driver.StuckCall{Operation: driver.OperationListMachines, Class: "ns/c", Started: at, Timeout: time.Minute},
			"ListMachines of class ns/c running since 2025-06-01T10:00:00Z (deadline 1m0s)"},
		{driver.StuckCall{Operation: driver.OperationGetVolumeIDs, Started: at, Timeout: time.Minute},
			"GetVolumeIDs running since 2025-06-01T10:00:00Z (deadline 1m0s)"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}
