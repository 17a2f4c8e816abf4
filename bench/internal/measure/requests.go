// Package measure holds what the benchmarks of this module measure alike:
// the API server's request counters (apiserver_request_total) by verb and
// resource, the requests a client of the benchmark itself made, counted
// under the same keys so that they can be subtracted, and the memory and
// CPU time of processes from /proc.
package measure

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Requests are request counts by Key: the API server's
// apiserver_request_total summed over its other labels, or the requests of
// a Counter.
type Requests map[string]float64

// Key is the key of a request in Requests: the API server's verb label
// (POST, PUT, PATCH, APPLY, DELETE, DELETECOLLECTION, GET, LIST, WATCH),
// the resource with its subresource if any, and the status code when the
// request failed, so that a retry loop shows: "PATCH machines/status",
// "DELETE nodes (404)".
func Key(verb, resource, subresource string, code int) string {
	k := verb + " " + resource
	if subresource != "" {
		k += "/" + subresource
	}
	if code < 200 || code > 299 {
		k += " (" + strconv.Itoa(code) + ")"
	}
	return k
}

// writeVerbs are the verbs of apiserver_request_total that change state.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// IsWrite tells whether the request of a key changes state.
func IsWrite(key string) bool {
	verb, _, _ := strings.Cut(key, " ")
	return writeVerbs[verb]
}

// ScrapeRequests reads the API server's request counters from its /metrics.
func ScrapeRequests(ctx context.Context, client kubernetes.Interface) (Requests, error) {
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return ParseRequests(string(raw)), nil
}

// ParseRequests reads apiserver_request_total from the API server's
// metrics in the Prometheus text format; other lines are ignored.
func ParseRequests(text string) Requests {
	counts := Requests{}
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		labelText, valueText, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		value, err := strconv.ParseFloat(strings.TrimSpace(valueText), 64)
		if err != nil {
			continue
		}
		labels := map[string]string{}
		for kv := range strings.SplitSeq(labelText, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(v, `"`)
			}
		}
		code, err := strconv.Atoi(labels["code"])
		if err != nil {
			code = 0 // shown as failed: an unknown code is not a success
		}
		counts[Key(labels["verb"], labels["resource"], labels["subresource"], code)] += value
	}
	return counts
}

// Minus returns the counts of c beyond those of before; keys that did not
// grow are left out.
func (c Requests) Minus(before Requests) Requests {
	out := Requests{}
	for k, v := range c {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// Writes returns the counts of the requests that change state.
func (c Requests) Writes() Requests {
	out := Requests{}
	for k, v := range c {
		if IsWrite(k) {
			out[k] = v
		}
	}
	return out
}

// Total is the sum of all counts.
func (c Requests) Total() int {
	var sum float64
	for _, v := range c {
		sum += v
	}
	return int(sum)
}

// Sorted returns the keys, largest count first (then by key, so that the
// order is stable).
func (c Requests) Sorted() []string {
	return slices.SortedFunc(maps.Keys(c), func(a, b string) int {
		return cmp.Or(cmp.Compare(c[b], c[a]), cmp.Compare(a, b))
	})
}

// Top lists the n largest counts, one per line.
func (c Requests) Top(n int) string {
	var b strings.Builder
	keys := c.Sorted()
	for _, k := range keys[:min(n, len(keys))] {
		fmt.Fprintf(&b, "  %8.0f %s\n", c[k], k)
	}
	return b.String()
}

// Counter counts the requests a client sends, under the keys
// ScrapeRequests uses, so that a benchmark can subtract its own requests
// from the API server's counts. Install it with Wrap.
type Counter struct {
	mu     sync.Mutex
	counts Requests
}

// NewCounter returns a Counter that has counted nothing.
func NewCounter() *Counter { return &Counter{counts: Requests{}} }

// Wrap returns a copy of cfg whose requests c counts.
func (c *Counter) Wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, counter: c} })
	return out
}

// Requests returns a copy of the counts so far.
func (c *Counter) Requests() Requests {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

func (c *Counter) add(key string) {
	c.mu.Lock()
	c.counts[key]++
	c.mu.Unlock()
}

type countingTransport struct {
	next    http.RoundTripper
	counter *Counter
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		// The API server never answered, so it counted nothing either, or
		// it did and the answer was lost: the count is then off by one,
		// which a benchmark's summary shows as a stray request.
		return resp, err
	}
	verb, resource, subresource := RequestInfo(req.Method, req.Header.Get("Content-Type"), req.URL.Path, req.URL.Query().Get("watch") == "true")
	t.counter.add(Key(verb, resource, subresource, resp.StatusCode))
	return resp, nil
}

// RequestInfo says how the API server labels a request in
// apiserver_request_total: its verb, resource and subresource, from the
// method, the content type of its body and the URL path.
func RequestInfo(method, contentType, path string, watch bool) (verb, resource, subresource string) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		segs = segs[2:] // api, version
	case len(segs) >= 3 && segs[0] == "apis":
		segs = segs[3:] // apis, group, version
	default:
		return strings.ToUpper(method), "", ""
	}
	// namespaces/<ns>/<resource>... is a namespaced resource; namespaces,
	// namespaces/<name> and a namespace's subresources (status, finalize:
	// no resource has these names) the namespaces themselves.
	if len(segs) >= 3 && segs[0] == "namespaces" && !(len(segs) == 3 && (segs[2] == "status" || segs[2] == "finalize")) {
		segs = segs[2:]
	}
	var name string
	if len(segs) > 0 {
		resource = segs[0]
	}
	if len(segs) > 1 {
		name = segs[1]
	}
	if len(segs) > 2 {
		subresource = segs[2]
	}
	switch method {
	case http.MethodGet:
		switch {
		case watch:
			verb = "WATCH"
		case name == "":
			verb = "LIST"
		default:
			verb = "GET"
		}
	case http.MethodPost:
		verb = "POST"
	case http.MethodPut:
		verb = "PUT"
	case http.MethodPatch:
		verb = "PATCH"
		if strings.HasPrefix(contentType, "application/apply-patch") {
			verb = "APPLY"
		}
	case http.MethodDelete:
		verb = "DELETE"
		if name == "" {
			verb = "DELETECOLLECTION"
		}
	default:
		verb = strings.ToUpper(method)
	}
	return verb, resource, subresource
}
