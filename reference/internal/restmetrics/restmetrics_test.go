package restmetrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestURLTemplate(t *testing.T) {
	for in, want := range map[string]string{
		"https://h:6443/api/v1/namespaces/ns/pods/p1":                                  "https://h:6443/api/v1/namespaces/{namespace}/pods/{name}",
		"https://h/api/v1/namespaces/ns/pods/p1/eviction":                              "https://h/api/v1/namespaces/{namespace}/pods/{name}/eviction",
		"https://h/api/v1/namespaces/ns/pods?labelSelector=a%3Db&watch=true":           "https://h/api/v1/namespaces/{namespace}/pods?labelSelector={value}&watch={value}",
		"https://h/api/v1/namespaces/ns":                                               "https://h/api/v1/namespaces/{name}",
		"https://h/api/v1/namespaces":                                                  "https://h/api/v1/namespaces",
		"https://h/api/v1/nodes/n1/status":                                             "https://h/api/v1/nodes/{name}/status",
		"https://h/apis/machine.sapcloud.io/v1alpha1/namespaces/ns/machines/m1/status": "https://h/apis/machine.sapcloud.io/v1alpha1/namespaces/{namespace}/machines/{name}/status",
		"https://h/apis/machine.sapcloud.io/v1alpha1/namespaces/ns/machines":           "https://h/apis/machine.sapcloud.io/v1alpha1/namespaces/{namespace}/machines",
		"https://h/apis/machine.sapcloud.io/v1alpha1":                                  "https://h/apis/machine.sapcloud.io/v1alpha1",
		"https://h/readyz":              "https://h/readyz",
		"https://user:secret@h/version": "https://h/version",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := urlTemplate(u); got != want {
			t.Errorf("urlTemplate(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestInstrument: a client built on an instrumented configuration
// counts its requests by code, method and host and times them by verb and
// URL template; a request that gets no response counts as "<error>".
func TestInstrument(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/pods") {
			_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","items":[]}`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := New(reg); err != nil || again.requests != m.requests {
		t.Fatalf("second registration on one registry: %v; want the first one's metrics", err)
	}
	cfg := &rest.Config{Host: srv.URL}
	client, err := kubernetes.NewForConfig(m.Instrument(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.WrapTransport != nil {
		t.Error("Instrument changed the configuration it was given")
	}
	ctx := context.Background()
	for _, ns := range []string{"a", "b"} {
		if _, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = client.CoreV1().Pods("a").Get(ctx, "p1", metav1.GetOptions{})

	host := strings.TrimPrefix(srv.URL, "http://")
	srv.Close() // the next request gets no response
	_, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})

	want := `
# HELP rest_client_requests_total Number of requests to the API servers, by HTTP status code ("<error>" without a response), method and host.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="` + host + `",method="GET"} 2
rest_client_requests_total{code="404",host="` + host + `",method="GET"} 1
rest_client_requests_total{code="<error>",host="` + host + `",method="GET"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rest_client_requests_total"); err != nil {
		t.Error(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "rest_client_request_latency_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got[labels["verb"]+" "+strings.TrimPrefix(labels["url"], srv.URL)] = s.GetHistogram().GetSampleCount()
		}
	}
	wantLatency := map[string]uint64{
		"GET /api/v1/namespaces/{namespace}/pods":        2,
		"GET /api/v1/namespaces/{namespace}/pods/{name}": 1,
		"GET /api/v1/nodes/{name}":                       1,
	}
	if diff := cmp.Diff(wantLatency, got); diff != "" {
		t.Errorf("timed requests (-want +got):\n%s", diff)
	}
}

func TestInstrumentWithoutMetrics(t *testing.T) {
	cfg := &rest.Config{Host: "https://h"}
	if got := (*Metrics)(nil).Instrument(cfg); got != cfg {
		t.Error("Instrument without metrics did not return the configuration unchanged")
	}
}
