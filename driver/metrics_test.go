package driver_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcmkit/mcm/driver"
)

// scripted is a Driver whose operations return the errors in errs (nil when
// absent) and, for GetMachineStatus, a response even with an error.
type scripted struct {
	errs map[driver.Operation]error
}

func (s scripted) CreateMachine(context.Context, *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	return &driver.CreateMachineResponse{ProviderID: "p1"}, s.errs[driver.OperationCreateMachine]
}

func (s scripted) InitializeMachine(context.Context, *driver.InitializeMachineRequest) (*driver.InitializeMachineResponse, error) {
	return nil, s.errs[driver.OperationInitializeMachine]
}

func (s scripted) DeleteMachine(context.Context, *driver.DeleteMachineRequest) (*driver.DeleteMachineResponse, error) {
	return &driver.DeleteMachineResponse{}, s.errs[driver.OperationDeleteMachine]
}

func (s scripted) GetMachineStatus(context.Context, *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	return &driver.GetMachineStatusResponse{ProviderID: "p1", NodeName: "n1"}, s.errs[driver.OperationGetMachineStatus]
}

func (s scripted) ListMachines(context.Context, *driver.ListMachinesRequest) (*driver.ListMachinesResponse, error) {
	return &driver.ListMachinesResponse{}, s.errs[driver.OperationListMachines]
}

func (s scripted) GetVolumeIDs(context.Context, *driver.GetVolumeIDsRequest) (*driver.GetVolumeIDsResponse, error) {
	return &driver.GetVolumeIDsResponse{}, s.errs[driver.OperationGetVolumeIDs]
}

func TestInstrumentRecordsFailuresByCode(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	d, err := driver.Instrument(scripted{errs: map[driver.Operation]error{
		driver.OperationCreateMachine:    driver.NewError(driver.ResourceExhausted, "quota"),
		driver.OperationGetMachineStatus: driver.NewError(driver.Uninitialized, "init pending"),
		driver.OperationDeleteMachine:    errors.New("untyped"),
	}}, reg)
	if err != nil {
		t.Fatalf("Instrument: %v", err)
	}
	ctx := context.Background()
	for range 2 {
		_, _ = d.CreateMachine(ctx, &driver.CreateMachineRequest{})
	}
	status, err := d.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{})
	if driver.CodeOf(err) != driver.Uninitialized || status == nil || status.NodeName != "n1" {
		t.Errorf("GetMachineStatus through the wrapper = %v, %v; want the response and Uninitialized", status, err)
	}
	_, _ = d.DeleteMachine(ctx, &driver.DeleteMachineRequest{})
	_, _ = d.ListMachines(ctx, &driver.ListMachinesRequest{})

	want := `
# HELP mcm_cloud_api_driver_requests_failed_total Number of failed driver operations, by operation and driver error code.
# TYPE mcm_cloud_api_driver_requests_failed_total counter
mcm_cloud_api_driver_requests_failed_total{error_code="ResourceExhausted",operation="CreateMachine"} 2
mcm_cloud_api_driver_requests_failed_total{error_code="Uninitialized",operation="GetMachineStatus"} 1
mcm_cloud_api_driver_requests_failed_total{error_code="Unknown",operation="DeleteMachine"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcm_cloud_api_driver_requests_failed_total"); err != nil {
		t.Error(err)
	}

	// Durations vary; the number of observations per operation does not.
	got := histogramCounts(t, reg)
	wantCounts := map[string]uint64{
		"CreateMachine": 2, "InitializeMachine": 0, "DeleteMachine": 1,
		"GetMachineStatus": 1, "ListMachines": 1, "GetVolumeIDs": 0,
	}
	if diff := cmp.Diff(wantCounts, got); diff != "" {
		t.Errorf("observations per operation (-want +got):\n%s", diff)
	}
}

func histogramCounts(t *testing.T, reg prometheus.Gatherer) map[string]uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	counts := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "mcm_cloud_api_driver_request_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" {
					counts[l.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return counts
}

func TestInstrumentWithoutRegistererReturnsDriver(t *testing.T) {
	d := scripted{}
	got, err := driver.Instrument(d, nil)
	if err != nil {
		t.Fatalf("Instrument: %v", err)
	}
	if _, same := got.(scripted); !same {
		t.Errorf("Instrument(d, nil) = %T, want d itself", got)
	}
}

func TestInstrumentTwiceOnOneRegistryContinuesSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	d := scripted{errs: map[driver.Operation]error{driver.OperationListMachines: driver.NewError(driver.Unavailable, "down")}}
	first, err := driver.Instrument(d, reg)
	if err != nil {
		t.Fatalf("first Instrument: %v", err)
	}
	second, err := driver.Instrument(d, reg)
	if err != nil {
		t.Fatalf("second Instrument on the same registry: %v", err)
	}
	_, _ = first.ListMachines(context.Background(), &driver.ListMachinesRequest{})
	_, _ = second.ListMachines(context.Background(), &driver.ListMachinesRequest{})

	want := `
# HELP mcm_cloud_api_driver_requests_failed_total Number of failed driver operations, by operation and driver error code.
# TYPE mcm_cloud_api_driver_requests_failed_total counter
mcm_cloud_api_driver_requests_failed_total{error_code="Unavailable",operation="ListMachines"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcm_cloud_api_driver_requests_failed_total"); err != nil {
		t.Error(err)
	}
}

func TestInstrumentReportsConflictingMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	// Same name, different labels: not ours, and not reusable.
	reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcm_cloud_api_driver_requests_failed_total", Help: "someone else's",
	}, []string{"provider"}))
	if _, err := driver.Instrument(scripted{}, reg); err == nil {
		t.Error("Instrument on a registry with a conflicting metric succeeded, want an error")
	}
}

func TestInstrumentRejectsNilDriver(t *testing.T) {
	if _, err := driver.Instrument(nil, prometheus.NewRegistry()); err == nil {
		t.Error("Instrument(nil, reg) succeeded, want an error")
	}
}
