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
	"github.com/mcmkit/mcm/internal/fakeapi"
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

func TestUnmanagedChange(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	node := func(age time.Duration, marked, deleting bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		if marked {
			n.Annotations = map[string]string{v1alpha1.NotManagedByMCMAnnotation: "1"}
		}
		if deleting {
			n.DeletionTimestamp = &metav1.Time{Time: now}
		}
		return n
	}
	tests := []struct {
		name    string
		n       *corev1.Node
		claimed bool
		change  int
		recheck time.Duration
	}{
		{"claimed", node(time.Hour, false, false), true, 0, 0},
		{"young without a machine: look again when old enough", node(5*time.Minute, false, false), false, 0, 15 * time.Minute},
		{"old without a machine: marked", node(time.Hour, false, false), false, 1, 0},
		{"marked and still without a machine", node(time.Hour, true, false), false, 0, 0},
		{"marked, then claimed: unmarked", node(time.Hour, true, false), true, -1, 0},
		{"being deleted: left alone", node(time.Hour, false, true), false, 0, 0},
	}
	for _, tt := range tests {
		change, recheck := unmanagedChange(tt.n, tt.claimed, now, 20*time.Minute)
		if change != tt.change || recheck != tt.recheck {
			t.Errorf("%s: change %d, recheck %v; want %d, %v", tt.name, change, recheck, tt.change, tt.recheck)
		}
	}
}

// TestUnmanagedNodesAreMarked runs the node check on fake clusters: an old
// node without a machine is marked; once a machine claims it, unmarked.
func TestUnmanagedNodesAreMarked(t *testing.T) {
	old := metav1.NewTime(time.Now().Add(-time.Hour))
	core := k8sfake.NewSimpleClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "stray", CreationTimestamp: old}})
	client := fake.NewSimpleClientset()
	fakeapi.VersionWrites(&client.Fake, client.Tracker())
	f := externalversions.NewSharedInformerFactory(client, 0)
	kf := informers.NewSharedInformerFactory(core, 0)
	c, err := NewController(client, core, Informers{
		MachineSets: f.Machine().V1alpha1().MachineSets(),
		Deployments: f.Machine().V1alpha1().MachineDeployments(),
		Machines:    f.Machine().V1alpha1().Machines(),
		Nodes:       kf.Core().V1().Nodes(),
	}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logr.Discard()))
	f.Start(ctx.Done())
	kf.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx, 1) })
	t.Cleanup(func() { cancel(); wg.Wait(); f.Shutdown(); kf.Shutdown() })

	marked := func(want bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			n, _ := core.CoreV1().Nodes().Get(ctx, "stray", metav1.GetOptions{})
			if _, ok := n.Annotations[v1alpha1.NotManagedByMCMAnnotation]; ok == want {
				return
			}
		}
		t.Fatalf("node marked not-managed: want %v", want)
	}
	marked(true)
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Labels: map[string]string{v1alpha1.NodeLabelKey: "stray"}}}
	if _, err := client.MachineV1alpha1().Machines("ns").Create(ctx, m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	marked(false)
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
