package safety

import (
	"testing"
	"time"

	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

// TestNewControllerPutsTheDriverUnderDeadlines: the orphan collection's
// driver calls have deadlines, the controller's own or those of a
// *driver.Deadlines it shares.
func TestNewControllerPutsTheDriverUnderDeadlines(t *testing.T) {
	cloud, err := sim.New(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	build := func(d driver.Driver, o Options) (*Controller, error) {
		client := fake.NewSimpleClientset()
		f := externalversions.NewSharedInformerFactory(client, 0)
		kf := informers.NewSharedInformerFactory(k8sfake.NewSimpleClientset(), 0)
		return NewController(client, nil, Informers{
			MachineSets: f.Machine().V1alpha1().MachineSets(),
			Deployments: f.Machine().V1alpha1().MachineDeployments(),
			Machines:    f.Machine().V1alpha1().Machines(),
			Classes:     f.Machine().V1alpha1().MachineClasses(),
			Secrets:     kf.Core().V1().Secrets(),
		}, d, o)
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
		t.Errorf("shared deadlines: driver %T, error %v; want the shared one", c.driver, err)
	}
	if _, err := build(shared, Options{DriverTimeouts: driver.Timeouts{ListMachines: time.Minute}}); err == nil {
		t.Error("timeouts on top of a shared *driver.Deadlines: no error")
	}
}
