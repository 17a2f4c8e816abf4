package manager

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/driver"
)

// stuckList is a fixed list of stuck driver calls.
type stuckList []driver.StuckCall

func (l stuckList) Stuck() []driver.StuckCall { return l }

func TestReadinessNamesStuckDriverCalls(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	call := func(i int) driver.StuckCall {
		return driver.StuckCall{Operation: driver.OperationCreateMachine, Machine: fmt.Sprintf("shoot/m%02d", i), Started: at, Timeout: 10 * time.Minute}
	}
	var many stuckList
	for i := range 12 {
		many = append(many, call(i))
	}
	const because = "; %d driver calls outlived their deadline and have not returned (their machines get no other call until they do): "
	tests := []struct {
		name  string
		calls stuckCalls
		ready bool
		why   string
	}{
		{name: "no driver", ready: true, why: "running without leader election; caches synced"},
		{name: "none stuck", calls: stuckList{}, ready: true, why: "running without leader election; caches synced"},
		{name: "two stuck", ready: false,
			calls: stuckList{call(1), {Operation: driver.OperationListMachines, Class: "shoot/c", Started: at, Timeout: 5 * time.Minute}},
			why: "running without leader election" + fmt.Sprintf(because, 2) +
				"CreateMachine of machine shoot/m01 running since 2026-01-01T12:00:00Z (deadline 10m0s); " +
				"ListMachines of class shoot/c running since 2026-01-01T12:00:00Z (deadline 5m0s)"},
		{name: "many stuck: ten named, the rest counted", calls: many, ready: false,
			why: "running without leader election" + fmt.Sprintf(because, 12) + func() string {
				var names []string
				for i := range 10 {
					names = append(names, call(i).String())
				}
				return strings.Join(names, "; ") + " and 2 more"
			}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &state{synced: true, groups: []*groupState{{group: MachineControllerGroup, running: true, synced: true}}, driverCalls: tt.calls}
			ready, why := st.readiness()
			if diff := cmp.Diff(tt.why, why); ready != tt.ready || diff != "" {
				t.Errorf("readiness() = %v; want %v; reason (-want +got):\n%s", ready, tt.ready, diff)
			}
		})
	}
}

// TestReadinessOfAStandbyIgnoresStuckCalls: a standby runs no controller;
// it stays ready to take over.
func TestReadinessOfAStandbyIgnoresStuckCalls(t *testing.T) {
	st := &state{leaderElect: true, groups: []*groupState{{group: MachineControllerGroup, holder: "other"}},
		driverCalls: stuckList{{Operation: driver.OperationDeleteMachine, Machine: "shoot/m1", Timeout: time.Minute}}}
	if ready, why := st.readiness(); !ready || why != "standby; lease held by other" {
		t.Errorf("readiness() = %v, %q", ready, why)
	}
}

func TestDriverTimeoutAndCreationFlags(t *testing.T) {
	base := []string{"--control-kubeconfig=" + InCluster, "--target-kubeconfig=" + NoTarget, "--driver=sim"}
	tests := []struct {
		name        string
		args        []string
		wantErr     string
		timeouts    driver.Timeouts
		concurrency int
	}{
		{name: "defaults", timeouts: driver.Timeouts{}},
		{name: "some deadlines", args: []string{"--driver-timeouts=CreateMachine=15m,GetMachineStatus=30s", "--driver-timeouts=DeleteMachine=5m"},
			timeouts: driver.Timeouts{CreateMachine: 15 * time.Minute, GetMachineStatus: 30 * time.Second, DeleteMachine: 5 * time.Minute}},
		{name: "unknown operation", args: []string{"--driver-timeouts=Reboot=1m"}, wantErr: `unknown operation "Reboot"`},
		{name: "zero deadline", args: []string{"--driver-timeouts=CreateMachine=0s"}, wantErr: "must be positive"},
		{name: "creations below the workers", args: []string{"--concurrent-syncs=10", "--concurrent-creations=9"}, concurrency: 9},
		{name: "creations as many as the workers", args: []string{"--concurrent-syncs=10", "--concurrent-creations=10"},
			wantErr: "--concurrent-creations must be 0 or below --concurrent-syncs (10), got 10"},
		{name: "negative creations", args: []string{"--concurrent-creations=-1"}, wantErr: "--concurrent-creations must be 0 or below"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseFlags("mcm", append(append([]string{}, base...), tt.args...), DefaultControllers(), BuiltinDrivers(), io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.timeouts, c.DriverTimeouts); diff != "" {
				t.Errorf("DriverTimeouts (-want +got):\n%s", diff)
			}
			if c.ConcurrentCreations != tt.concurrency {
				t.Errorf("ConcurrentCreations %d, want %d", c.ConcurrentCreations, tt.concurrency)
			}
		})
	}
}

// failingList is a fixed list of failing lists and watches.
type failingList []string

func (l failingList) Failures() []string { return l }

// An informer that cannot list or watch makes the manager unready, named
// with its error; once none fails, it is ready again.
func TestReadinessNamesFailingListWatches(t *testing.T) {
	st := &state{leaderElect: false, synced: true, listWatch: failingList{
		"machines (control): dial tcp 127.0.0.1:6443: connect: connection refused since 12:00:00",
		"nodes (target): 403 Forbidden since 12:00:10",
	}}
	want := "running without leader election; informers cannot list or watch: " +
		"machines (control): dial tcp 127.0.0.1:6443: connect: connection refused since 12:00:00; nodes (target): 403 Forbidden since 12:00:10"
	if ok, why := st.readiness(); ok || why != want {
		t.Errorf("readiness() = %v, %q; want false, %q", ok, why, want)
	}
	st.listWatch = failingList{}
	if ok, why := st.readiness(); !ok || why != "running without leader election; caches synced" {
		t.Errorf("readiness() = %v, %q after recovery; want ready", ok, why)
	}
}
