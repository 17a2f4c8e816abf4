// Package restmetrics counts and times the requests of the manager's
// clients under MCM's names, as client-go's global metrics would:
//
//	rest_client_requests_total{code,method,host}          counter
//	rest_client_request_latency_seconds{verb,url}         histogram
//
// client-go's own hooks (k8s.io/client-go/tools/metrics) are process-global
// and can be set once only; these are measured by a transport wrapper on
// a caller-given registry instead, so that two managers in one process, or
// a manager built twice, each count their own.
//
// # Usage
//
//	m, err := restmetrics.New(registry) // or the ones registered there before
//	cfg = m.Instrument(cfg)             // every client built from cfg counts
package restmetrics
