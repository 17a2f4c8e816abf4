package driver_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
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
# HELP mcm_cloud_api_driver_requests_failed_total Number of failed driver operations, by provider, operation and driver error code.
# TYPE mcm_cloud_api_driver_requests_failed_total counter
mcm_cloud_api_driver_requests_failed_total{error_code="ResourceExhausted",operation="CreateMachine",provider="unknown"} 2
mcm_cloud_api_driver_requests_failed_total{error_code="Uninitialized",operation="GetMachineStatus",provider="unknown"} 1
mcm_cloud_api_driver_requests_failed_total{error_code="Unknown",operation="DeleteMachine",provider="unknown"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcm_cloud_api_driver_requests_failed_total"); err != nil {
		t.Error(err)
	}

	// Durations vary; the number of observations per operation does not.
	got := histogramCounts(t, reg)
	wantCounts := map[string]uint64{"CreateMachine": 2, "DeleteMachine": 1, "GetMachineStatus": 1, "ListMachines": 1}
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
# HELP mcm_cloud_api_driver_requests_failed_total Number of failed driver operations, by provider, operation and driver error code.
# TYPE mcm_cloud_api_driver_requests_failed_total counter
mcm_cloud_api_driver_requests_failed_total{error_code="Unavailable",operation="ListMachines",provider="unknown"} 2
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

// named is a scripted driver that names its provider.
type named struct {
	scripted
	name string
}

func (n named) ProviderName() string { return n.name }

// TestInstrumentProviderLabel: the class's provider field labels a call;
// without one, the name the driver gives; without either, "unknown". A
// driver that names itself gets its duration series before any call.
func TestInstrumentProviderLabel(t *testing.T) {
	notFound := map[driver.Operation]error{driver.OperationGetMachineStatus: driver.NewError(driver.NotFound, "no VM")}
	ctx := context.Background()
	calls := func(d driver.Driver) {
		_, _ = d.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{MachineClass: &v1alpha1.MachineClass{Provider: "AWS"}})
		_, _ = d.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{MachineClass: &v1alpha1.MachineClass{}})
		_, _ = d.GetVolumeIDs(ctx, &driver.GetVolumeIDsRequest{})
	}

	reg := prometheus.NewPedanticRegistry()
	d, err := driver.Instrument(named{scripted{errs: notFound}, "aws"}, reg)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := d.(driver.ProviderNamer); !ok || n.ProviderName() != "aws" {
		t.Errorf("the instrumented driver does not name the provider the driver names")
	}
	if got, want := len(seriesOf(t, reg, "mcm_cloud_api_driver_request_duration_seconds")), len(driver.Operations()); got != want {
		t.Errorf("%d duration series before any call, want one per operation (%d)", got, want)
	}
	calls(d)
	want := `
# HELP mcm_cloud_api_driver_requests_failed_total Number of failed driver operations, by provider, operation and driver error code.
# TYPE mcm_cloud_api_driver_requests_failed_total counter
mcm_cloud_api_driver_requests_failed_total{error_code="NotFound",operation="GetMachineStatus",provider="AWS"} 1
mcm_cloud_api_driver_requests_failed_total{error_code="NotFound",operation="GetMachineStatus",provider="aws"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcm_cloud_api_driver_requests_failed_total"); err != nil {
		t.Error(err)
	}
	wantSeries := []string{
		"provider=AWS,operation=GetMachineStatus",
		"provider=aws,operation=CreateMachine", "provider=aws,operation=DeleteMachine", "provider=aws,operation=GetMachineStatus",
		"provider=aws,operation=GetVolumeIDs", "provider=aws,operation=InitializeMachine", "provider=aws,operation=ListMachines",
	}
	if diff := cmp.Diff(wantSeries, seriesOf(t, reg, "mcm_cloud_api_driver_request_duration_seconds")); diff != "" {
		t.Errorf("duration series (-want +got):\n%s", diff)
	}

	// A driver that does not name itself: "unknown", and no series made up
	// before the calls.
	reg = prometheus.NewPedanticRegistry()
	if d, err = driver.Instrument(scripted{errs: notFound}, reg); err != nil {
		t.Fatal(err)
	}
	if n := len(seriesOf(t, reg, "mcm_cloud_api_driver_request_duration_seconds")); n != 0 {
		t.Errorf("%d duration series before any call of an unnamed driver, want none", n)
	}
	calls(d)
	wantSeries = []string{"provider=AWS,operation=GetMachineStatus", "provider=unknown,operation=GetMachineStatus", "provider=unknown,operation=GetVolumeIDs"}
	if diff := cmp.Diff(wantSeries, seriesOf(t, reg, "mcm_cloud_api_driver_request_duration_seconds")); diff != "" {
		t.Errorf("duration series of an unnamed driver (-want +got):\n%s", diff)
	}
}

// seriesOf returns the label sets of the family name, "l1=v1,l2=v2" in the
// order of the metric's labels as exported (sorted by name, provider
// moved first for reading), sorted.
func seriesOf(t *testing.T, reg prometheus.Gatherer, name string) []string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var out []string
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var provider string
			var rest []string
			for _, l := range m.GetLabel() {
				if l.GetName() == "provider" {
					provider = "provider=" + l.GetValue()
				} else {
					rest = append(rest, l.GetName()+"="+l.GetValue())
				}
			}
			out = append(out, strings.Join(append([]string{provider}, rest...), ","))
		}
	}
	slices.Sort(out)
	return out
}

// TestCloudAPI: a driver's own cloud calls are counted per provider and
// service, failures apart, and only successful calls are timed.
func TestCloudAPI(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	api, err := driver.NewCloudAPI(reg, "aws")
	if err != nil {
		t.Fatal(err)
	}
	ec2, err := api.Service("ec2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Service("elb"); err != nil { // exported at zero
		t.Fatal(err)
	}
	ec2.Record(200*time.Millisecond, false)
	ec2.Record(time.Second, true)
	ec2.Record(300*time.Millisecond, false)

	// A second recorder on the registry (a re-created driver) continues
	// the series.
	again, err := driver.NewCloudAPI(reg, "aws")
	if err != nil {
		t.Fatalf("second NewCloudAPI on one registry: %v", err)
	}
	ec2Again, err := again.Service("ec2")
	if err != nil {
		t.Fatal(err)
	}
	ec2Again.Record(time.Millisecond, true)

	want := `
# HELP mcm_cloud_api_requests_failed_total Number of requests a driver made to its cloud's API that failed, by provider and service.
# TYPE mcm_cloud_api_requests_failed_total counter
mcm_cloud_api_requests_failed_total{provider="aws",service="ec2"} 2
mcm_cloud_api_requests_failed_total{provider="aws",service="elb"} 0
# HELP mcm_cloud_api_requests_total Number of requests a driver made to its cloud's API, by provider and service.
# TYPE mcm_cloud_api_requests_total counter
mcm_cloud_api_requests_total{provider="aws",service="ec2"} 4
mcm_cloud_api_requests_total{provider="aws",service="elb"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcm_cloud_api_requests_total", "mcm_cloud_api_requests_failed_total"); err != nil {
		t.Error(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	timed := map[string]uint64{}
	for _, f := range families {
		if f.GetName() == "mcm_cloud_api_api_request_duration_seconds" {
			for _, m := range f.GetMetric() {
				timed[m.GetLabel()[1].GetValue()] = m.GetHistogram().GetSampleCount()
			}
		}
	}
	if diff := cmp.Diff(map[string]uint64{"ec2": 2, "elb": 0}, timed); diff != "" {
		t.Errorf("timed calls per service (-want +got):\n%s", diff)
	}
}

// TestCloudAPIWithoutRegistry: no registry, no metrics, and a driver can
// record unconditionally.
func TestCloudAPIWithoutRegistry(t *testing.T) {
	api, err := driver.NewCloudAPI(nil, "aws")
	if err != nil || api != nil {
		t.Fatalf("NewCloudAPI(nil, ...) = %v, %v; want nil, nil", api, err)
	}
	svc, err := api.Service("ec2")
	if err != nil || svc != nil {
		t.Fatalf("Service of a nil CloudAPI = %v, %v; want nil, nil", svc, err)
	}
	svc.Record(time.Second, false) // must not panic
}

func TestCloudAPIRejectsEmptyNames(t *testing.T) {
	if _, err := driver.NewCloudAPI(prometheus.NewRegistry(), ""); err == nil {
		t.Error("NewCloudAPI without a provider succeeded")
	}
	api, err := driver.NewCloudAPI(prometheus.NewRegistry(), "aws")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Service(""); err == nil {
		t.Error("Service without a name succeeded")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "mcm_cloud_api_requests_total", Help: "someone else's"}))
	if _, err := driver.NewCloudAPI(reg, "aws"); err == nil {
		t.Error("NewCloudAPI on a registry with a conflicting metric succeeded")
	}
}
