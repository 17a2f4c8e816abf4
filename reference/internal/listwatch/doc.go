// Package listwatch watches the lists and watches of the manager's
// informers and retries those an API server refuses.
//
// client-go's reflectors back off up to 30s after each failed list, and
// the shared informer factories offer no way to shorten that: after an
// outage of a minute, the caches would follow the cluster again only up to
// half a minute after it is back. A client configuration wrapped by
// Transport retries a refused list or watch every RetryPeriod instead, so
// the caches follow the cluster again within a second. With a Health, it
// also remembers, per cluster and resource, the last list or watch that
// failed until one succeeds: /readyz names them, since an informer that
// cannot list or watch serves a cache that no longer follows its cluster.
//
// # Usage
//
//	health := listwatch.NewHealth()
//	cfg = listwatch.Transport(cfg, health, "control") // the informers' clients
//	driverCfg = listwatch.Transport(cfg, nil, "")     // retried, not observed
//	...
//	for _, f := range health.Failures() { // "machines (control): <error> since 15:04:05"
//		...
//	}
package listwatch
