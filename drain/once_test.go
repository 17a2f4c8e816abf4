package drain

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

// TestOnceSendsOnce: a request built by once is sent once, whatever
// Retry-After the answer carries (client-go's default is ten tries, each
// after the server's Retry-After); a clientset without a REST client
// (client-go's fake) gets none, and the caller uses the typed client.
func TestOnceSendsOnce(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}`))
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		Requests        int32
		TooManyRequests bool
	}
	var got []result
	for _, verb := range []string{"POST", "DELETE"} {
		requests.Store(0)
		err := once(client.PolicyV1().RESTClient(), verb).AbsPath("/api/v1").Namespace("ns").Resource("pods").Name("p").
			SubResource("eviction").Do(context.Background()).Error()
		got = append(got, result{requests.Load(), apierrors.IsTooManyRequests(err)})
	}
	if diff := cmp.Diff([]result{{1, true}, {1, true}}, got); diff != "" {
		t.Errorf("requests sent (-want +got):\n%s", diff)
	}
	if r := once(fake.NewClientset().PolicyV1().RESTClient(), "POST"); r != nil {
		t.Errorf("a fake clientset's REST client gave a request")
	}
	if r := once(nil, "POST"); r != nil {
		t.Errorf("no REST client gave a request")
	}
}
