package restmetrics

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/mcmkit/mcm/internal/promreg"
)

// Metrics are MCM's REST client metrics. code is the HTTP status, or
// "<error>" when no response came; method and verb the HTTP method; url
// the request's URL with namespaces and object names replaced by
// {namespace} and {name} and query values by {value}, as client-go's own
// URL template, so that the series do not grow with the objects.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// New registers the REST client metrics on reg, or picks up the ones
// registered there before.
func New(reg prometheus.Registerer) (*Metrics, error) {
	requests, err := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total",
		Help: "Number of requests to the API servers, by HTTP status code (\"<error>\" without a response), method and host.",
	}, []string{"code", "method", "host"}))
	if err != nil {
		return nil, err
	}
	latency, err := promreg.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "rest_client_request_latency_seconds",
		Help: "Time from sending a request to an API server until its response's headers arrived, by verb and URL template.",
		// 1ms to about 16s, as MCM's.
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"verb", "url"}))
	if err != nil {
		return nil, err
	}
	return &Metrics{requests: requests, latency: latency}, nil
}

// Instrument returns a copy of cfg whose requests m records. A nil m
// returns cfg unchanged.
func (m *Metrics) Instrument(cfg *rest.Config) *rest.Config {
	if m == nil {
		return cfg
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			start := time.Now()
			resp, err := rt.RoundTrip(req)
			m.latency.WithLabelValues(req.Method, urlTemplate(req.URL)).Observe(time.Since(start).Seconds())
			code := "<error>"
			if err == nil {
				code = strconv.Itoa(resp.StatusCode)
			}
			m.requests.WithLabelValues(code, req.Method, req.URL.Host).Inc()
			return resp, err
		})
	})
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// urlTemplate is u with its namespace and object name replaced by
// {namespace} and {name}, its query values by {value} (keys sorted), and
// no user information. The paths are the API server's:
// /api/v1[/namespaces/NS]/RESOURCE[/NAME[/SUBRESOURCE]] and
// /apis/GROUP/VERSION[/namespaces/NS]/RESOURCE[/NAME[/SUBRESOURCE]];
// other paths (/readyz, discovery) are kept.
func urlTemplate(u *url.URL) string {
	segs := strings.Split(strings.Trim(u.Path, "/"), "/")
	var tail []string // after the group version
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		tail = segs[2:]
	case len(segs) >= 3 && segs[0] == "apis":
		tail = segs[3:]
	}
	if len(tail) >= 3 && tail[0] == "namespaces" {
		tail[1] = "{namespace}" // namespaces/NS/RESOURCE...
		tail = tail[2:]
	}
	if len(tail) >= 2 {
		tail[1] = "{name}" // RESOURCE/NAME, a namespace itself included
	}
	// Built by hand: url.URL would escape the braces.
	var b strings.Builder
	b.WriteString(u.Scheme + "://" + u.Host)
	if u.Path != "" {
		b.WriteString("/" + strings.Join(segs, "/"))
	}
	if q := u.Query(); len(q) > 0 {
		keys := make([]string, 0, len(q))
		for k := range q {
			keys = append(keys, url.QueryEscape(k)+"={value}")
		}
		slices.Sort(keys)
		b.WriteString("?" + strings.Join(keys, "&"))
	}
	return b.String()
}
