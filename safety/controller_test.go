package safety

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/internal/testsupport/fakeapi"
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
	c, err := NewController(client, nil, Informers{
		MachineSets: f.Machine().V1alpha1().MachineSets(),
		Deployments: f.Machine().V1alpha1().MachineDeployments(),
		Machines:    f.Machine().V1alpha1().Machines(),
	}, nil, Options{})
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

// TestChecksSplitTheWork runs a controller of each kind of Checks on the
// same world — a set over its limit and a node no machine claims — and
// each does its own part only. Both checks run as soon as the caches
// synced, so once one kind's work shows, the other kind's would have too.
func TestChecksSplitTheWork(t *testing.T) {
	for _, checks := range []Checks{CheckOvershoot, CheckMachines} {
		t.Run(fmtBools(checks == CheckOvershoot), func(t *testing.T) {
			d := osDeployment("d", 10, 2)
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
			old := metav1.NewTime(time.Now().Add(-time.Hour))
			core := k8sfake.NewSimpleClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "stray", CreationTimestamp: old}})
			f := externalversions.NewSharedInformerFactory(client, 0)
			kf := informers.NewSharedInformerFactory(core, 0)
			c, err := NewController(client, core, Informers{
				MachineSets: f.Machine().V1alpha1().MachineSets(),
				Deployments: f.Machine().V1alpha1().MachineDeployments(),
				Machines:    f.Machine().V1alpha1().Machines(),
				Nodes:       kf.Core().V1().Nodes(),
			}, nil, Options{Checks: checks})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logr.Discard()))
			f.Start(ctx.Done())
			kf.Start(ctx.Done())
			var wg sync.WaitGroup
			wg.Go(func() { _ = c.Run(ctx, 1) })
			t.Cleanup(func() { cancel(); wg.Wait(); f.Shutdown(); kf.Shutdown() })

			state := func() (setFrozen, nodeMarked bool) {
				s, _ := client.MachineV1alpha1().MachineSets("ns").Get(ctx, "a", metav1.GetOptions{})
				n, _ := core.CoreV1().Nodes().Get(ctx, "stray", metav1.GetOptions{})
				_, nodeMarked = n.Annotations[v1alpha1.NotManagedByMCMAnnotation]
				return isFrozen(s.Labels), nodeMarked
			}
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if frozen, marked := state(); frozen || marked {
					break
				}
			}
			// A moment for the other check's write, had it run.
			time.Sleep(200 * time.Millisecond)
			frozen, marked := state()
			if want := checks == CheckOvershoot; frozen != want || marked == want {
				t.Errorf("checks %#x: set frozen %v, node marked %v", checks, frozen, marked)
			}
		})
	}
	if _, err := (Options{Checks: 8}).complete(); err == nil {
		t.Error("unknown checks accepted")
	}
}
