package unmanaged

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
	client, core := fake.NewSimpleClientset(), k8sfake.NewSimpleClientset()
	inf := registrationstest.New(externalversions.NewSharedInformerFactory(client, 0), informers.NewSharedInformerFactory(core, 0))
	c, err := New(core, Informers{Machines: inf.Machines, Nodes: inf.Nodes}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	registrationstest.CheckRunRemovesHandlers(t, inf, 2, c.Run)
	if _, err := New(nil, Informers{Machines: inf.Machines, Nodes: inf.Nodes}, Options{}); err == nil {
		t.Error("no target client: no error")
	}
	if _, err := New(core, Informers{Machines: inf.Machines, Nodes: inf.Nodes}, Options{CreationTimeout: -1}); err == nil {
		t.Error("a negative creation timeout: no error")
	}
}
