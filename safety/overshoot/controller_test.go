package overshoot

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/internal/testsupport/fakeapi"
	"github.com/mcmkit/mcm/internal/testsupport/registrationstest"
)

// TestOvershootFreezesAndUnfreezes runs the controller on a fake API: a set
// of a deployment with machines at its limit is frozen together with the
// deployment; when machines go, both are unfrozen.
func TestOvershootFreezesAndUnfreezes(t *testing.T) {
	d := osDeployment("d", 10, 2) // limit 14, unfrozen at 13
	d.Namespace = "ns"
	s := osSet("a", 10, d)
	s.Namespace = "ns"
	objs := []runtime.Object{d, s}
	for _, m := range osMachines(s, 14) {
		m.Namespace = "ns"
		objs = append(objs, m)
	}
	client := fake.NewSimpleClientset(objs...)
	fakeapi.VersionWrites(&client.Fake, client.Tracker())
	f := externalversions.NewSharedInformerFactory(client, 0)
	c, err := New(client, Informers{
		MachineSets: f.Machine().V1alpha1().MachineSets(),
		Deployments: f.Machine().V1alpha1().MachineDeployments(),
		Machines:    f.Machine().V1alpha1().Machines(),
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logr.Discard()))
	f.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx, 1) })
	t.Cleanup(func() { cancel(); wg.Wait(); f.Shutdown() })

	frozen := func(want bool) {
		t.Helper()
		var got string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			s, _ := client.MachineV1alpha1().MachineSets("ns").Get(ctx, "a", metav1.GetOptions{})
			d, _ := client.MachineV1alpha1().MachineDeployments("ns").Get(ctx, "d", metav1.GetOptions{})
			setFrozen, dFrozen := isFrozen(s.Labels), isFrozen(d.Labels)
			setCond, dCond := frozeForOvershoot(s), deploymentFrozeForSets(d)
			if setFrozen == want && dFrozen == want && setCond == want && dCond == want {
				return
			}
			got = fmtBools(setFrozen, setCond, dFrozen, dCond)
		}
		t.Fatalf("want frozen %v; set label/condition, deployment label/condition: %s", want, got)
	}
	frozen(true)
	for _, name := range []string{"a-0", "a-1"} {
		if err := client.MachineV1alpha1().Machines("ns").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	frozen(false)
}

func fmtBools(bs ...bool) string {
	out := ""
	for _, b := range bs {
		if b {
			out += "T"
		} else {
			out += "F"
		}
	}
	return out
}

// TestRunRemovesHandlers: the informers may outlive the controller (a
// manager shares them between controllers that stop at different times):
// once Run returned, none of its handlers is left on them.
func TestRunRemovesHandlers(t *testing.T) {
	client := fake.NewSimpleClientset()
	inf := registrationstest.New(externalversions.NewSharedInformerFactory(client, 0), informers.NewSharedInformerFactory(k8sfake.NewSimpleClientset(), 0))
	c, err := New(client, Informers{MachineSets: inf.MachineSets, Deployments: inf.Deployments, Machines: inf.Machines}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	registrationstest.CheckRunRemovesHandlers(t, inf, 3, c.Run)
	for _, o := range []Options{{SafetyUp: -1}, {OvershootPeriod: -time.Second}, {MaxUnhealthy: ptrTo(intstr.FromString("half"))}} {
		if _, err := New(client, Informers{MachineSets: inf.MachineSets, Deployments: inf.Deployments, Machines: inf.Machines}, o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
