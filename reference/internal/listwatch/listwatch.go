package listwatch

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// failureMemory is how long a failed list or watch counts without being
// repeated. Informers retry a failed list or watch within 30 seconds (the
// reflector's longest backoff), so a failure older than this was either
// followed by a success or made by something that does not retry.
const failureMemory = 90 * time.Second

// RetryPeriod is how often a list or watch whose connection is refused is
// tried again before its informer hears of the failure.
const RetryPeriod = time.Second

// Health remembers, per cluster and resource, the last list or watch of
// the clients it observes (see Transport) that failed, until one succeeds.
// The zero value is not usable: call NewHealth.
type Health struct {
	now func() time.Time

	mu      sync.Mutex
	failing map[string]failure // "resource (cluster)"
}

type failure struct {
	err         string
	since, last time.Time
}

// NewHealth returns a Health that knows of no failure.
func NewHealth() *Health {
	return &Health{now: time.Now, failing: map[string]failure{}}
}

// Transport returns a copy of cfg whose list and watch requests are
// retried every RetryPeriod while the API server refuses connections and,
// with h, whose outcomes h observes as cluster's. cfg is not changed.
func Transport(cfg *rest.Config, h *Health, cluster string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resource := collectionOf(req)
			for {
				resp, err := rt.RoundTrip(req)
				if resource == "" || req.Context().Err() != nil {
					return resp, err
				}
				if h != nil {
					h.observe(resource+" ("+cluster+")", resp, err)
				}
				if !utilnet.IsConnectionRefused(err) {
					return resp, err
				}
				select {
				case <-req.Context().Done():
					return resp, err
				case <-time.After(RetryPeriod):
				}
			}
		})
	})
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// observe records the outcome of a list or watch of key. 410 Gone (a watch
// from a compacted resource version, answered by listing again) and 429
// (throttled, retried as told) are part of normal work.
func (h *Health) observe(key string, resp *http.Response, err error) {
	var problem string
	switch {
	case err != nil:
		problem = err.Error()
	case resp.StatusCode >= 400 && resp.StatusCode != http.StatusGone && resp.StatusCode != http.StatusTooManyRequests:
		problem = resp.Status
	}
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if problem == "" {
		delete(h.failing, key)
		return
	}
	f, ok := h.failing[key]
	if !ok {
		f.since = now
	}
	f.err, f.last = problem, now
	h.failing[key] = f
}

// Failures describes the lists and watches failing now, sorted, one per
// resource: "machines (control): <error> since 15:04:05". A failure not
// repeated for 90s is forgotten.
func (h *Health) Failures() []string {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for key, f := range h.failing {
		if now.Sub(f.last) > failureMemory {
			delete(h.failing, key)
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s since %s", key, strings.Join(strings.Fields(f.err), " "), f.since.UTC().Format(time.TimeOnly)))
	}
	slices.Sort(out)
	return out
}

// collectionOf returns the resource a GET lists or watches, or "" for any
// other request. The paths are the API server's:
// /api/v1[/namespaces/NS]/RESOURCE and /apis/GROUP/VERSION[/namespaces/NS]/RESOURCE;
// a further segment names one object.
func collectionOf(req *http.Request) string {
	if req.Method != http.MethodGet {
		return ""
	}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return ""
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		if len(parts) == 2 {
			return "" // one namespace
		}
		parts = parts[2:]
	}
	if len(parts) != 1 {
		return ""
	}
	return parts[0]
}
