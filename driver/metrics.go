package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcmkit/mcm/internal/promreg"
)

// Metric names, kept from MCM so that existing dashboards and alerts work.
const (
	requestDurationName = "mcm_cloud_api_driver_request_duration_seconds"
	requestsFailedName  = "mcm_cloud_api_driver_requests_failed_total"
)

// Instrument returns a Driver that calls d and records, on reg:
//
//	mcm_cloud_api_driver_request_duration_seconds{operation}      histogram of every call
//	mcm_cloud_api_driver_requests_failed_total{operation,error_code}  counter of failed calls
//
// operation is the method name (see Operation) and error_code the name of
// CodeOf(err), as in status.lastOperation.errorCode. Every failure counts,
// including the expected ones (NotFound from GetMachineStatus before a
// create, Unimplemented from optional operations); filter by error_code in
// alerts.
//
// If reg is nil, Instrument returns d unchanged. If reg already holds these
// metrics from an earlier Instrument call, the new driver adds to them, so
// re-creating a driver (after a leader election, say) continues the series;
// two live drivers on one registry share them. Any other registration
// conflict is returned as an error. The returned driver passes responses
// and errors through untouched, including a response that comes with an
// error (GetMachineStatus with Uninitialized).
func Instrument(d Driver, reg prometheus.Registerer) (Driver, error) {
	if d == nil {
		return nil, errors.New("driver: Instrument needs a Driver, got nil")
	}
	if reg == nil {
		return d, nil
	}
	duration, err := registerOrReuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: requestDurationName,
		Help: "Duration of driver operations (calls to the cloud provider), by operation.",
		// From 10ms to about 5.5 minutes: cloud APIs range from cached reads
		// to synchronous VM creation.
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
	}, []string{"operation"}))
	if err != nil {
		return nil, err
	}
	failed, err := registerOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: requestsFailedName,
		Help: "Number of failed driver operations, by operation and driver error code.",
	}, []string{"operation", "error_code"}))
	if err != nil {
		return nil, err
	}
	// Create the histogram series up front, so that rates and "absent"
	// alerts work before the first call of an operation.
	for _, op := range Operations() {
		duration.WithLabelValues(string(op))
	}
	return &instrumented{next: d, duration: duration, failed: failed}, nil
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
}

// observe records one call of op that started at start and returned err.
func (w *instrumented) observe(op Operation, start time.Time, err error) {
	w.duration.WithLabelValues(string(op)).Observe(time.Since(start).Seconds())
	if err != nil {
		w.failed.WithLabelValues(string(op), CodeOf(err).String()).Inc()
	}
}

func (w *instrumented) CreateMachine(ctx context.Context, req *CreateMachineRequest) (*CreateMachineResponse, error) {
	start := time.Now()
	resp, err := w.next.CreateMachine(ctx, req)
	w.observe(OperationCreateMachine, start, err)
	return resp, err
}

func (w *instrumented) InitializeMachine(ctx context.Context, req *InitializeMachineRequest) (*InitializeMachineResponse, error) {
	start := time.Now()
	resp, err := w.next.InitializeMachine(ctx, req)
	w.observe(OperationInitializeMachine, start, err)
	return resp, err
}

func (w *instrumented) DeleteMachine(ctx context.Context, req *DeleteMachineRequest) (*DeleteMachineResponse, error) {
	start := time.Now()
	resp, err := w.next.DeleteMachine(ctx, req)
	w.observe(OperationDeleteMachine, start, err)
	return resp, err
}

func (w *instrumented) GetMachineStatus(ctx context.Context, req *GetMachineStatusRequest) (*GetMachineStatusResponse, error) {
	start := time.Now()
	resp, err := w.next.GetMachineStatus(ctx, req)
	w.observe(OperationGetMachineStatus, start, err)
	return resp, err
}

func (w *instrumented) ListMachines(ctx context.Context, req *ListMachinesRequest) (*ListMachinesResponse, error) {
	start := time.Now()
	resp, err := w.next.ListMachines(ctx, req)
	w.observe(OperationListMachines, start, err)
	return resp, err
}

func (w *instrumented) GetVolumeIDs(ctx context.Context, req *GetVolumeIDsRequest) (*GetVolumeIDsResponse, error) {
	start := time.Now()
	resp, err := w.next.GetVolumeIDs(ctx, req)
	w.observe(OperationGetVolumeIDs, start, err)
	return resp, err
}
