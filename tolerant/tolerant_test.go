package tolerant_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/tolerant"
)

// machineJSON is a stored Machine; creationTimeout "99999999999h" overflows
// a Go duration, as an object stored before the CRD bounded it can.
func machineJSON(name, rv, creationTimeout string) string {
	return fmt.Sprintf(`{"apiVersion":"machine.sapcloud.io/v1alpha1","kind":"Machine",`+
		`"metadata":{"name":%q,"namespace":"ns","uid":"uid-%s","resourceVersion":%q},`+
		`"spec":{"class":{"name":"small"},"creationTimeout":%q}}`, name, name, rv, creationTimeout)
}

// fakeAPI serves one list of machines and a watch that sends what the test
// puts on events.
type fakeAPI struct {
	list   []string
	events chan string
	// noWatchList refuses watches that list, as an older API server
	// does, so the informer lists with a LIST.
	noWatchList bool
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/apis/machine.sapcloud.io/v1alpha1/namespaces/ns/machines" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Get("watch") != "true" {
		fmt.Fprintf(w, `{"apiVersion":"machine.sapcloud.io/v1alpha1","kind":"MachineList","metadata":{"resourceVersion":"10"},"items":[%s]}`,
			strings.Join(f.list, ","))
		return
	}
	if f.noWatchList && r.URL.Query().Get("sendInitialEvents") == "true" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","code":400,"message":"sendInitialEvents is not supported"}`)
		return
	}
	w.WriteHeader(http.StatusOK)
	if r.URL.Query().Get("sendInitialEvents") == "true" {
		// A watch that lists, as the API server streams it.
		for _, item := range f.list {
			fmt.Fprintln(w, event("ADDED", item))
		}
		fmt.Fprintln(w, event("BOOKMARK", `{"apiVersion":"machine.sapcloud.io/v1alpha1","kind":"Machine",`+
			`"metadata":{"resourceVersion":"10","annotations":{"k8s.io/initial-events-end":"true"}}}`))
	}
	w.(http.Flusher).Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-f.events:
			fmt.Fprintln(w, ev)
			w.(http.Flusher).Flush()
		}
	}
}

func event(typ, object string) string { return fmt.Sprintf(`{"type":%q,"object":%s}`, typ, object) }

func TestUndecodableObjectsAreLeftOutAndReported(t *testing.T) {
	for _, noWatchList := range []bool{false, true} {
		t.Run(fmt.Sprintf("noWatchList=%v", noWatchList), func(t *testing.T) {
			testUndecodable(t, noWatchList)
		})
	}
}

func testUndecodable(t *testing.T, noWatchList bool) {
	api := &fakeAPI{
		list:        []string{machineJSON("a", "1", "20m"), machineJSON("poison", "2", "99999999999h"), machineJSON("b", "3", "2h")},
		events:      make(chan string),
		noWatchList: noWatchList,
	}
	srv := httptest.NewServer(api)
	defer srv.Close()
	client, err := versioned.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	rec := record.NewFakeRecorder(10)
	factory, err := tolerant.NewSharedInformerFactory(client, "ns", 0, tolerant.Options{Recorder: rec, Registerer: reg, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	machines := factory.Machine().V1alpha1().Machines()
	informer := machines.Informer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	factory.Start(ctx.Done())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the informer did not sync although only one object is undecodable")
	}

	cached := func() []string {
		list, _ := machines.Lister().List(labels.Everything())
		var names []string
		for _, m := range list {
			names = append(names, m.Name)
		}
		return names
	}
	if diff := cmp.Diff([]string{"a", "b"}, cached(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("cached machines (-want +got):\n%s", diff)
	}
	wantEvent := func(name string) {
		t.Helper()
		select {
		case e := <-rec.Events:
			if !strings.Contains(e, "Warning "+tolerant.ReasonUndecodable+" Machine ns/"+name+" cannot be decoded") ||
				!strings.Contains(e, `invalid duration "99999999999h"`) {
				t.Errorf("event %q does not name the object and the error", e)
			}
		case <-ctx.Done():
			t.Fatalf("no event for %s", name)
		}
	}
	wantEvent("poison")
	gauge := func() float64 { return undecodableGauge(t, reg) }
	if g := gauge(); g != 1 {
		t.Errorf("mcm_undecodable_objects = %v, want 1", g)
	}

	// The watch goes on past an undecodable event: the same version is not
	// reported again, a new one is, and later events arrive.
	api.events <- event("MODIFIED", machineJSON("poison", "2", "99999999999h"))
	api.events <- event("MODIFIED", machineJSON("poison", "11", "99999999999h"))
	wantEvent("poison")
	api.events <- event("ADDED", machineJSON("c", "12", "5m"))
	waitFor(t, ctx, "machine c in the cache", func() bool { return len(cached()) == 3 })
	select {
	case e := <-rec.Events:
		t.Errorf("unexpected event %q", e)
	default:
	}
	// Fixed, it is cached and no longer counted.
	api.events <- event("MODIFIED", machineJSON("poison", "13", "20m"))
	waitFor(t, ctx, "the fixed machine in the cache", func() bool { return len(cached()) == 4 })
	if g := gauge(); g != 0 {
		t.Errorf("mcm_undecodable_objects = %v after the object was fixed, want 0", g)
	}
}

// undecodableGauge sums mcm_undecodable_objects over its series.
func undecodableGauge(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() == "mcm_undecodable_objects" {
			for _, m := range f.GetMetric() {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
