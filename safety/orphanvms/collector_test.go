package orphanvms

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/registrationstest"
)

// TestNewPutsTheDriverUnderDeadlines: the collection's driver calls have
// deadlines, the collector's own or those of a *driver.Deadlines it
// shares.
func TestNewPutsTheDriverUnderDeadlines(t *testing.T) {
	cloud, err := sim.New(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	build := func(d driver.Driver, o Options) (*Collector, error) {
		client := fake.NewSimpleClientset()
		f := externalversions.NewSharedInformerFactory(client, 0)
		kf := informers.NewSharedInformerFactory(k8sfake.NewSimpleClientset(), 0)
		return New(client, d, Informers{
			Machines: f.Machine().V1alpha1().Machines(),
			Classes:  f.Machine().V1alpha1().MachineClasses(),
			Secrets:  kf.Core().V1().Secrets(),
		}, o)
	}
	c, err := build(cloud.Driver(), Options{DriverTimeouts: driver.Timeouts{ListMachines: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.driver.(*driver.Deadlines); !ok {
		t.Errorf("driver %T, want it under deadlines", c.driver)
	}
	shared, err := driver.WithDeadlines(cloud.Driver(), driver.Timeouts{})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := build(shared, Options{}); err != nil || c.driver != driver.Driver(shared) {
		t.Errorf("shared deadlines: error %v; want the shared driver", err)
	}
	if _, err := build(shared, Options{DriverTimeouts: driver.Timeouts{ListMachines: time.Minute}}); err == nil {
		t.Error("timeouts on top of a shared *driver.Deadlines: no error")
	}
	if _, err := build(nil, Options{}); err == nil {
		t.Error("no driver: no error")
	}
	if _, err := build(cloud.Driver(), Options{OrphanVMsPeriod: -time.Second}); err == nil {
		t.Error("a negative period: no error")
	}
}

// TestRunRemovesHandlers: the informers may outlive the collector (a
// manager shares them between controllers that stop at different times):
// once Run returned, none of its handlers is left on them.
func TestRunRemovesHandlers(t *testing.T) {
	cloud, err := sim.New(sim.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	client, core := fake.NewSimpleClientset(), k8sfake.NewSimpleClientset()
	inf := registrationstest.New(externalversions.NewSharedInformerFactory(client, 0), informers.NewSharedInformerFactory(core, 0))
	c, err := New(client, cloud.Driver(), Informers{Machines: inf.Machines, Classes: inf.Classes, Secrets: inf.Secrets}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	registrationstest.CheckRunRemovesHandlers(t, inf, 3, func(ctx context.Context, _ int) error { return c.Run(ctx) })
}

// TestListingFailureTakesTheQueuesPath: a pass whose VM listing fails is
// a failed reconcile of the collection's queue: counted in the workqueue
// metrics on the caller's Registerer, and retried with the queue's
// backoff, not only at the next period, until it succeeds.
func TestListingFailureTakesTheQueuesPath(t *testing.T) {
	cloud, err := sim.New(sim.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Every listing fails until the fault is spent: two failed passes.
	if _, err := cloud.InjectFault(sim.Fault{Operation: driver.OperationListMachines, Code: driver.Unavailable, Times: 2}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"},
		Data: map[string][]byte{"userData": []byte("x"), sim.CredentialsKey: []byte("t")}}
	client := fake.NewSimpleClientset(simClass("c", ""))
	f := externalversions.NewSharedInformerFactory(client, 0)
	kf := informers.NewSharedInformerFactory(k8sfake.NewSimpleClientset(secret), 0)
	reg := prometheus.NewRegistry()
	// A period far longer than the test: only the backoff can bring the
	// failed pass back.
	c, err := New(client, cloud.Driver(), Informers{
		Machines: f.Machine().V1alpha1().Machines(),
		Classes:  f.Machine().V1alpha1().MachineClasses(),
		Secrets:  kf.Core().V1().Secrets(),
	}, Options{Registerer: reg, OrphanVMsPeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logr.Discard()))
	f.Start(ctx.Done())
	kf.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait(); f.Shutdown(); kf.Shutdown() })

	reconciles := func(result string) float64 { return counter(t, reg, "mcm_workqueue_reconcile_total", result) }
	for deadline := time.Now().Add(10 * time.Second); reconciles("requeue") < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no successful pass after the failures: %v errors, %v successes", reconciles("error"), reconciles("requeue"))
		}
	}
	if got := reconciles("error"); got != 2 {
		t.Errorf("mcm_workqueue_reconcile_total{name=%q,result=\"error\"} = %v, want 2 (one per failed listing)", queueName, got)
	}
	// client-go counts every delayed add as a retry: the two backoffs,
	// and the next period's requeue after the pass that worked.
	if got := counter(t, reg, "mcm_workqueue_retries_total", ""); got < 2 {
		t.Errorf("mcm_workqueue_retries_total{name=%q} = %v, want at least 2 (each failure retried with backoff)", queueName, got)
	}
	if got := cloud.Calls(driver.OperationListMachines); got != 3 {
		t.Errorf("%d ListMachines calls, want 3: two that failed and the retry that worked", got)
	}
}

// counter is the value of the counter metric of the collection's queue
// with the given result label ("" for a metric without one) in reg; 0
// when reg has no such series.
func counter(t *testing.T, reg prometheus.Gatherer, metric, result string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"name": queueName}
	if result != "" {
		want["result"] = result
	}
	for _, fam := range families {
		if fam.GetName() != metric {
			continue
		}
		for _, m := range fam.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			if maps.Equal(have, want) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
