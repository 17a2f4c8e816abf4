package manager

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

// listWatchHealth watches the list and watch requests of the controllers'
// clients, which are the informers' requests, and remembers per cluster
// and resource the last one that failed, until one succeeds. /readyz fails
// while any is failing: an informer that cannot list or watch serves a
// cache that no longer follows the cluster, or never filled.
type listWatchHealth struct {
	now func() time.Time

	mu      sync.Mutex
	failing map[string]listWatchFailure // "resource (cluster)"
}

type listWatchFailure struct {
	err         string
	since, last time.Time
}

func newListWatchHealth() *listWatchHealth {
	return &listWatchHealth{now: time.Now, failing: map[string]listWatchFailure{}}
}

// listWatchRetryPeriod is how often a list or watch whose connection is
// refused is tried again before its informer hears of the failure.
const listWatchRetryPeriod = time.Second

// retryRefusedListWatch returns a copy of cfg whose list and watch
// requests are retried every listWatchRetryPeriod while the API server
// refuses connections. client-go's reflectors back off up to 30s after
// each failed list, and the shared informer factories offer no way to
// shorten that: after an outage of a minute, caches would follow the
// cluster again only up to half a minute after it is back. Retried here,
// they do within a second.
func retryRefusedListWatch(cfg *rest.Config) *rest.Config {
	return listWatchTransport(cfg, nil, "")
}

// listWatchTransport returns a copy of cfg whose lists and watches are
// retried while refused (see retryRefusedListWatch) and, with h, whose
// outcomes h observes as cluster's.
func listWatchTransport(cfg *rest.Config, h *listWatchHealth, cluster string) *rest.Config {
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
				case <-time.After(listWatchRetryPeriod):
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
func (h *listWatchHealth) observe(key string, resp *http.Response, err error) {
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

// failures describes the lists and watches failing now, sorted, one per
// resource: "machines (control): <error> since 15:04:05".
func (h *listWatchHealth) failures() []string {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for key, f := range h.failing {
		if now.Sub(f.last) > failureMemory {
			delete(h.failing, key)
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s since %s", key, oneLine(f.err), f.since.UTC().Format(time.TimeOnly)))
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
