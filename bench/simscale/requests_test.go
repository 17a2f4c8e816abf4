package simscale

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// requestCounts are the API server's apiserver_request_total, summed by
// verb and resource (with subresource), failed requests by code apart.
type requestCounts map[string]float64

// scrapeRequests reads the API server's request counters from its /metrics.
func scrapeRequests(ctx context.Context, client kubernetes.Interface) (requestCounts, error) {
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	counts := requestCounts{}
	for line := range strings.SplitSeq(string(raw), "\n") {
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
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		if code := labels["code"]; !strings.HasPrefix(code, "2") {
			key += " (" + code + ")" // failed requests apart: a retry loop shows
		}
		counts[key] += value
	}
	return counts, nil
}

func (c requestCounts) minus(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range c {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func (c requestCounts) total() int {
	var sum float64
	for _, v := range c {
		sum += v
	}
	return int(sum)
}

// top lists the n largest counts, one per line.
func (c requestCounts) top(n int) string {
	keys := slices.SortedFunc(maps.Keys(c), func(a, b string) int { return cmp.Compare(c[b], c[a]) })
	var b strings.Builder
	for _, k := range keys[:min(n, len(keys))] {
		fmt.Fprintf(&b, "  %8.0f %s\n", c[k], k)
	}
	return b.String()
}
