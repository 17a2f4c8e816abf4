package machine

import (
	"testing"

	"k8s.io/client-go/informers"

	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/internal/testsupport/registrationstest"
)

// TestRunRemovesHandlers: the informers may outlive the controller (a
// manager shares them between controllers that stop at different times):
// once Run returned, none of its handlers is left on them.
func TestRunRemovesHandlers(t *testing.T) {
	f := newFakeCluster(t)
	inf := registrationstest.New(externalversions.NewSharedInformerFactory(f.mc, 0), informers.NewSharedInformerFactory(f.core, 0))
	ctrl, err := NewController(f.mc, f.core, f.core, Informers{Machines: inf.Machines, Classes: inf.Classes, Secrets: inf.Secrets, Nodes: inf.Nodes}, f.driver, Options{})
	if err != nil {
		t.Fatal(err)
	}
	registrationstest.CheckRunRemovesHandlers(t, inf, 4, ctrl.Run)
}
