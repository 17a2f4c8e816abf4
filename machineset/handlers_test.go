package machineset

import (
	"testing"

	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/internal/testsupport/registrationstest"
)

// TestRunRemovesHandlers: the informers may outlive the controller (a
// manager shares them between controllers that stop at different times):
// once Run returned, none of its handlers is left on them.
func TestRunRemovesHandlers(t *testing.T) {
	client := fake.NewSimpleClientset()
	inf := registrationstest.New(externalversions.NewSharedInformerFactory(client, 0), informers.NewSharedInformerFactory(k8sfake.NewSimpleClientset(), 0))
	ctrl, err := NewController(client, Informers{MachineSets: inf.MachineSets, Machines: inf.Machines, Classes: inf.Classes}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	registrationstest.CheckRunRemovesHandlers(t, inf, 3, ctrl.Run)
}
