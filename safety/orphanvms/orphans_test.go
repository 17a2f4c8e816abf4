package orphanvms

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/driver/sim"
)

func simClass(name, cluster string) *v1alpha1.MachineClass {
	return &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Provider: sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{Zone: "z", InstanceType: "m", Cluster: cluster}.RawExtension(),
		SecretRef:    &corev1.SecretReference{Name: "s", Namespace: "ns"}}
}

// TestCollectOrphans: a VM no machine claims is deleted once it has
// looked orphaned for the grace period; a machine's VM, a machine still
// being created, and a VM of another cluster are never touched; nothing
// is collected while frozen, nor within a period after an outage ended.
func TestCollectOrphans(t *testing.T) {
	ctx := context.Background()
	cloud, err := sim.New(sim.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	class, foreign := simClass("c", ""), simClass("c", "another-cluster")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"},
		Data: map[string][]byte{"userData": []byte("x"), sim.CredentialsKey: []byte("t")}}
	vm := func(c *v1alpha1.MachineClass, name string) sim.VM {
		spec, err := sim.VMSpecFor(c, name)
		if err != nil {
			t.Fatal(err)
		}
		v, err := cloud.AddVM(spec)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	owned := vm(class, "owned")
	creating := vm(class, "creating") // its machine has no provider ID yet
	orphan := vm(class, "gone")
	other := vm(foreign, "gone-elsewhere")
	client := fake.NewSimpleClientset(class,
		&v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "owned", Namespace: "ns"}, Spec: v1alpha1.MachineSpec{ProviderID: owned.ProviderID}},
		&v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "creating", Namespace: "ns"}})
	coreClient := k8sfake.NewSimpleClientset(secret)
	f := externalversions.NewSharedInformerFactory(client, 0)
	kf := informers.NewSharedInformerFactory(coreClient, 0)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	gate := &fakeOutages{}
	c, err := New(client, cloud.Driver(), Informers{
		Machines: f.Machine().V1alpha1().Machines(),
		Classes:  f.Machine().V1alpha1().MachineClasses(),
		Secrets:  kf.Core().V1().Secrets(),
	}, Options{Clock: clk, OrphanGracePeriod: 10 * time.Minute, Outages: gate})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	f.Start(stop)
	kf.Start(stop)
	if !cache.WaitForCacheSync(stop, c.handlers.Synced()...) {
		t.Fatal("caches did not sync")
	}
	alive := func(providerID string) bool {
		v, ok := cloud.VM(providerID)
		return ok && v.State != sim.VMTerminating
	}
	collect := func() {
		t.Helper()
		if err := c.collectOrphans(ctx); err != nil {
			t.Fatal(err)
		}
	}
	collect() // first seen
	clk.Step(5 * time.Minute)
	collect()
	if !alive(orphan.ProviderID) {
		t.Fatal("an orphan was deleted before its grace period")
	}
	clk.Step(6 * time.Minute)
	gate.frozen = true
	collect()
	if !alive(orphan.ProviderID) {
		t.Fatal("an orphan was deleted while frozen")
	}
	gate.frozen, gate.lastEnd = false, clk.Now()
	collect()
	if !alive(orphan.ProviderID) {
		t.Fatal("an orphan was deleted within a period after an outage ended")
	}
	clk.Step(DefaultOrphanVMsPeriod)
	collect()
	if alive(orphan.ProviderID) {
		t.Fatal("the orphan survived its grace period")
	}
	for _, v := range []sim.VM{owned, creating, other} {
		if !alive(v.ProviderID) {
			t.Errorf("VM %s (%s) was deleted", v.ProviderID, v.MachineName)
		}
	}
	if got := testutil.ToFloat64(c.orphansDeleted); got != 1 {
		t.Errorf("orphan counter %v, want 1", got)
	}
}

// fakeOutages is an outage gate whose answers the test sets.
type fakeOutages struct {
	frozen  bool
	lastEnd time.Time
}

func (f *fakeOutages) Frozen(context.Context) bool { return f.frozen }
func (f *fakeOutages) LastOutageEnd() time.Time    { return f.lastEnd }
