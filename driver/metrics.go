package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/promreg"
)

// Metric names, kept from MCM so that existing dashboards and alerts work.
const (
	requestDurationName = "mcm_cloud_api_driver_request_duration_seconds"
	requestsFailedName  = "mcm_cloud_api_driver_requests_failed_total"
)

// unnamedProvider is the provider label of a call whose class names no
// provider, made through a driver that does not name its own.
const unnamedProvider = "unknown"

// ProviderNamer is implemented by a Driver that names its provider, as
// MCM's provider code does in its metrics ("aws", "sim"). Instrument
// labels a call with that name when the request's MachineClass does not
// name a provider.
type ProviderNamer interface {
	ProviderName() string
}

// Instrument returns a Driver that calls d and records, on reg:
//
//	mcm_cloud_api_driver_request_duration_seconds{provider,operation}        histogram of every call
//	mcm_cloud_api_driver_requests_failed_total{provider,operation,error_code}  counter of failed calls
//
// provider is the provider field of the request's MachineClass; for a
// request without a class (GetVolumeIDs) or whose class has no provider,
// the name d gives as a ProviderNamer, else "unknown". operation is the
// method name (see Operation) and error_code the name of CodeOf(err), as in
// status.lastOperation.errorCode. Every failure counts, including the
// expected ones (NotFound from GetMachineStatus before a create,
// Unimplemented from optional operations); filter by error_code in alerts.
// A driver that names its provider gets its duration series created up
// front, so that rates and "absent" alerts work before the first call.
//
// If reg is nil, Instrument returns d unchanged. If reg already holds these
// metrics from an earlier Instrument call, the new driver adds to them, so
// re-creating a driver (after a leader election, say) continues the series;
// two live drivers on one registry share them. Any other registration
// conflict is returned as an error. The returned driver passes responses
// and errors through untouched, including a response that comes with an
// error (GetMachineStatus with Uninitialized), and names the provider d
// names.
func Instrument(d Driver, reg prometheus.Registerer) (Driver, error) {
	if d == nil {
		return nil, errors.New("driver: Instrument needs a Driver, got nil")
	}
	if reg == nil {
		return d, nil
	}
	duration, err := registerOrReuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: requestDurationName,
		Help: "Duration of driver operations (calls to the cloud provider), by provider and operation.",
		// From 10ms to about 5.5 minutes: cloud APIs range from cached reads
		// to synchronous VM creation.
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
	}, []string{"provider", "operation"}))
	if err != nil {
		return nil, err
	}
	failed, err := registerOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: requestsFailedName,
		Help: "Number of failed driver operations, by provider, operation and driver error code.",
	}, []string{"provider", "operation", "error_code"}))
	if err != nil {
		return nil, err
	}
	w := &instrumented{next: d, duration: duration, failed: failed, provider: unnamedProvider}
	if n, ok := d.(ProviderNamer); ok && n.ProviderName() != "" {
		w.provider = n.ProviderName()
		for _, op := range Operations() {
			duration.WithLabelValues(w.provider, string(op))
		}
	}
	return w, nil
}

// registerOrReuse registers c, or returns the equal collector that reg
// already holds.
func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	c, err := promreg.Register(reg, c)
	if err != nil {
		return c, fmt.Errorf("driver: register driver metrics: %w", err)
	}
	return c, nil
}

type instrumented struct {
	next     Driver
	duration *prometheus.HistogramVec
	failed   *prometheus.CounterVec
	provider string // of calls whose class names none
}

// ProviderName is the provider the wrapped driver names, or "unknown".
func (w *instrumented) ProviderName() string { return w.provider }

// providerOf is the provider label of a call with class.
func (w *instrumented) providerOf(class *v1alpha1.MachineClass) string {
	if class != nil && class.Provider != "" {
		return class.Provider
	}
	return w.provider
}

// observe records one call of op for provider that started at start and
// returned err.
func (w *instrumented) observe(provider string, op Operation, start time.Time, err error) {
	w.duration.WithLabelValues(provider, string(op)).Observe(time.Since(start).Seconds())
	if err != nil {
		w.failed.WithLabelValues(provider, string(op), CodeOf(err).String()).Inc()
	}
}

func (w *instrumented) CreateMachine(ctx context.Context, req *CreateMachineRequest) (*CreateMachineResponse, error) {
	start := time.Now()
	resp, err := w.next.CreateMachine(ctx, req)
	w.observe(w.providerOf(req.MachineClass), OperationCreateMachine, start, err)
	return resp, err
}

func (w *instrumented) InitializeMachine(ctx context.Context, req *InitializeMachineRequest) (*InitializeMachineResponse, error) {
	start := time.Now()
	resp, err := w.next.InitializeMachine(ctx, req)
	w.observe(w.providerOf(req.MachineClass), OperationInitializeMachine, start, err)
	return resp, err
}

func (w *instrumented) DeleteMachine(ctx context.Context, req *DeleteMachineRequest) (*DeleteMachineResponse, error) {
	start := time.Now()
	resp, err := w.next.DeleteMachine(ctx, req)
	w.observe(w.providerOf(req.MachineClass), OperationDeleteMachine, start, err)
	return resp, err
}

func (w *instrumented) GetMachineStatus(ctx context.Context, req *GetMachineStatusRequest) (*GetMachineStatusResponse, error) {
	start := time.Now()
	resp, err := w.next.GetMachineStatus(ctx, req)
	w.observe(w.providerOf(req.MachineClass), OperationGetMachineStatus, start, err)
	return resp, err
}

func (w *instrumented) ListMachines(ctx context.Context, req *ListMachinesRequest) (*ListMachinesResponse, error) {
	start := time.Now()
	resp, err := w.next.ListMachines(ctx, req)
	w.observe(w.providerOf(req.MachineClass), OperationListMachines, start, err)
	return resp, err
}

func (w *instrumented) GetVolumeIDs(ctx context.Context, req *GetVolumeIDsRequest) (*GetVolumeIDsResponse, error) {
	start := time.Now()
	resp, err := w.next.GetVolumeIDs(ctx, req)
	w.observe(w.provider, OperationGetVolumeIDs, start, err)
	return resp, err
}

// CloudAPI records a provider's own calls to its cloud's API, under MCM's
// names, partitioned by provider and service (the cloud's API: "ec2",
// "compute"):
//
//	mcm_cloud_api_requests_total{provider,service}                 counter of every call
//	mcm_cloud_api_requests_failed_total{provider,service}          counter of failed calls
//	mcm_cloud_api_api_request_duration_seconds{provider,service}   histogram of successful calls
//
// A driver makes it once with NewCloudAPI, takes a CloudAPIService per
// service it calls, and records each call there. Where a call counts as
// failed is the driver's to say: a lookup that finds nothing is usually an
// answer, not a failure. A nil *CloudAPI (no registry) hands out nil
// services, which record nothing, so a driver need not check.
type CloudAPI struct {
	provider         string
	requests, failed *prometheus.CounterVec
	duration         *prometheus.HistogramVec
}

// NewCloudAPI registers the cloud API metrics on reg for provider, the
// provider label of every call recorded. It returns nil, and no error,
// when reg is nil. Several CloudAPIs on one registry (several drivers, or
// one re-created) share the metrics; a conflicting metric on reg is an
// error.
func NewCloudAPI(reg prometheus.Registerer, provider string) (*CloudAPI, error) {
	if provider == "" {
		return nil, errors.New("driver: NewCloudAPI needs a provider name")
	}
	if reg == nil {
		return nil, nil
	}
	requests, err := registerOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcm_cloud_api_requests_total",
		Help: "Number of requests a driver made to its cloud's API, by provider and service.",
	}, []string{"provider", "service"}))
	if err != nil {
		return nil, err
	}
	failed, err := registerOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcm_cloud_api_requests_failed_total",
		Help: "Number of requests a driver made to its cloud's API that failed, by provider and service.",
	}, []string{"provider", "service"}))
	if err != nil {
		return nil, err
	}
	duration, err := registerOrReuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "mcm_cloud_api_api_request_duration_seconds",
		Help: "Duration of successful requests a driver made to its cloud's API, by provider and service.",
		// From 5ms to about 2.7 minutes: one API request, not a whole
		// operation.
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
	}, []string{"provider", "service"}))
	if err != nil {
		return nil, err
	}
	return &CloudAPI{provider: provider, requests: requests, failed: failed, duration: duration}, nil
}

// Service returns the recorder of calls to service, whose series it creates
// (at zero) so that rates and alerts work before the first call. It is nil
// for a nil CloudAPI.
func (a *CloudAPI) Service(service string) (*CloudAPIService, error) {
	if service == "" {
		return nil, errors.New("driver: a cloud API service needs a name")
	}
	if a == nil {
		return nil, nil
	}
	return &CloudAPIService{
		requests: a.requests.WithLabelValues(a.provider, service),
		failed:   a.failed.WithLabelValues(a.provider, service),
		duration: a.duration.WithLabelValues(a.provider, service),
	}, nil
}

// CloudAPIService records the calls to one service of a cloud's API.
type CloudAPIService struct {
	requests, failed prometheus.Counter
	duration         prometheus.Observer
}

// Record records one call that took took and failed if failed. A nil
// service records nothing.
func (s *CloudAPIService) Record(took time.Duration, failed bool) {
	if s == nil {
		return
	}
	s.requests.Inc()
	if failed {
		s.failed.Inc()
		return
	}
	s.duration.Observe(took.Seconds())
}
