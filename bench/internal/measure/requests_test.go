package measure

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestParseRequests(t *testing.T) {
	text := `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="machine.sapcloud.io",resource="machines",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="machine.sapcloud.io",resource="machines",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 2
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PUT",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="cluster",subresource="",verb="LIST",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="cluster",subresource="",verb="LIST",version="v1"} 1
apiserver_request_duration_seconds_bucket{le="0.1",verb="POST"} 9
apiserver_request_total{code="201",resource="nodes"} not-a-number
`
	want := Requests{
		"POST nodes":             3,
		"PATCH machines/status":  7,
		"PUT machines/status":    2,
		"PUT nodes/status (409)": 4,
		"LIST nodes":             2, // summed over the labels that are not kept
	}
	if diff := cmp.Diff(want, ParseRequests(text)); diff != "" {
		t.Errorf("ParseRequests (-want +got):\n%s", diff)
	}
}

func TestRequestsArithmetic(t *testing.T) {
	before := Requests{"POST nodes": 2, "LIST nodes": 5, "PATCH nodes": 1}
	after := Requests{"POST nodes": 5, "LIST nodes": 5, "PATCH nodes": 4, "DELETE nodes (404)": 1, "WATCH nodes": 2}
	delta := after.Minus(before)
	if diff := cmp.Diff(Requests{"POST nodes": 3, "PATCH nodes": 3, "DELETE nodes (404)": 1, "WATCH nodes": 2}, delta); diff != "" {
		t.Errorf("Minus (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Requests{"POST nodes": 3, "PATCH nodes": 3, "DELETE nodes (404)": 1}, delta.Writes()); diff != "" {
		t.Errorf("Writes (-want +got):\n%s", diff)
	}
	if got := delta.Total(); got != 9 {
		t.Errorf("Total = %d, want 9", got)
	}
	if diff := cmp.Diff([]string{"PATCH nodes", "POST nodes", "WATCH nodes", "DELETE nodes (404)"}, delta.Sorted()); diff != "" {
		t.Errorf("Sorted (-want +got):\n%s", diff)
	}
}

func TestRequestInfo(t *testing.T) {
	for _, tc := range []struct {
		method, contentType, path string
		watch                     bool
		verb, resource, sub       string
	}{
		{"POST", "application/json", "/api/v1/namespaces/ns/secrets", false, "POST", "secrets", ""},
		{"GET", "", "/api/v1/namespaces/ns/secrets/s", false, "GET", "secrets", ""},
		{"GET", "", "/api/v1/namespaces/ns/secrets", false, "LIST", "secrets", ""},
		{"GET", "", "/api/v1/nodes", true, "WATCH", "nodes", ""},
		{"PUT", "application/vnd.kubernetes.protobuf", "/api/v1/nodes/n1/status", false, "PUT", "nodes", "status"},
		{"PATCH", "application/merge-patch+json", "/apis/machine.sapcloud.io/v1alpha1/namespaces/ns/machines/m/status", false, "PATCH", "machines", "status"},
		{"PATCH", "application/apply-patch+yaml", "/apis/machine.sapcloud.io/v1alpha1/namespaces/ns/machines/m", false, "APPLY", "machines", ""},
		{"DELETE", "", "/apis/machine.sapcloud.io/v1alpha1/namespaces/ns/machines/m", false, "DELETE", "machines", ""},
		{"DELETE", "", "/apis/machine.sapcloud.io/v1alpha1/namespaces/ns/machines", false, "DELETECOLLECTION", "machines", ""},
		{"POST", "application/json", "/api/v1/namespaces", false, "POST", "namespaces", ""},
		{"GET", "", "/api/v1/namespaces/ns", false, "GET", "namespaces", ""},
		{"PUT", "application/json", "/api/v1/namespaces/ns/finalize", false, "PUT", "namespaces", "finalize"},
	} {
		verb, resource, sub := RequestInfo(tc.method, tc.contentType, tc.path, tc.watch)
		if verb != tc.verb || resource != tc.resource || sub != tc.sub {
			t.Errorf("RequestInfo(%s %s) = %q %q %q, want %q %q %q", tc.method, tc.path, verb, resource, sub, tc.verb, tc.resource, tc.sub)
		}
	}
}

// TestCounter counts what a clientset sends under the API server's keys,
// failed requests apart.
func TestCounter(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s"}}`))
		case r.Method == http.MethodPatch:
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409}`))
		default:
			_, _ = w.Write([]byte(`{"kind":"SecretList","apiVersion":"v1","items":[]}`))
		}
	}))
	defer server.Close()
	counter := NewCounter()
	client := kubernetes.NewForConfigOrDie(counter.Wrap(&rest.Config{Host: server.URL}))
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
	for range 2 {
		if _, err := client.CoreV1().Secrets("ns").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.CoreV1().Secrets("ns").Patch(ctx, "s", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}); err == nil {
		t.Fatal("the patch succeeded; want the server's conflict")
	}
	if _, err := client.CoreV1().Secrets("ns").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	want := Requests{"POST secrets": 2, "PATCH secrets (409)": 1, "LIST secrets": 1}
	if diff := cmp.Diff(want, counter.Requests()); diff != "" {
		t.Errorf("counted (-want +got):\n%s", diff)
	}
}

func TestProcessUsage(t *testing.T) {
	u, err := ProcessUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.PeakRSS < u.RSS {
		t.Errorf("RSS %d, peak %d: want a positive RSS no larger than the peak", u.RSS, u.PeakRSS)
	}
	if _, err := ProcessUsage(-1); err == nil {
		t.Error("usage of process -1: no error")
	}
}
