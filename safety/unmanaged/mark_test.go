package unmanaged

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/internal/testsupport/fakeapi"
)

func TestDecideMark(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const timeout = 20 * time.Minute
	old, young := now.Add(-time.Hour), now.Add(-5*time.Minute)
	type decision struct {
		Change  markChange
		Recheck time.Duration
	}
	tests := []struct {
		name  string
		facts nodeFacts
		want  decision
	}{
		// MCM's behaviour for the nodes of one manager.
		{"old, no machine, nobody adopted it: marked",
			nodeFacts{Registered: old}, decision{addMark, 0}},
		{"young, no machine: look again when old enough",
			nodeFacts{Registered: young}, decision{keepMark, 15 * time.Minute}},
		{"exactly as old as the timeout: marked",
			nodeFacts{Registered: now.Add(-timeout)}, decision{addMark, 0}},
		{"registered in the future (clock skew): looked at again after the timeout",
			nodeFacts{Registered: now.Add(time.Minute)}, decision{keepMark, 21 * time.Minute}},
		{"marked and still nobody's: kept",
			nodeFacts{Marked: true, Registered: old}, decision{keepMark, 0}},
		{"my machine's node: left alone",
			nodeFacts{Claimed: true, Adopted: true, Registered: old}, decision{keepMark, 0}},
		{"marked, then my machine took it: unmarked",
			nodeFacts{Marked: true, Claimed: true, Adopted: true, Registered: old}, decision{removeMark, 0}},
		{"being deleted: left alone",
			nodeFacts{Deleting: true, Registered: old}, decision{keepMark, 0}},
		{"marked and being deleted: left alone",
			nodeFacts{Marked: true, Claimed: true, Adopted: true, Deleting: true, Registered: old}, decision{keepMark, 0}},

		// Another manager's nodes on the same target.
		{"another manager's machine holds it: never marked",
			nodeFacts{Adopted: true, Registered: old}, decision{keepMark, 0}},
		{"another manager's node, marked by someone: not this manager's mark to remove",
			nodeFacts{Marked: true, Adopted: true, Registered: old}, decision{keepMark, 0}},

		// My machine claims the node, but no machine controller adopted it
		// yet: the adoption decides, so that no other manager can want the
		// opposite write meanwhile.
		{"claimed, not adopted yet: not marked",
			nodeFacts{Claimed: true, Registered: old}, decision{keepMark, 0}},
		{"marked, claimed, not adopted yet: the mark waits for the adoption",
			nodeFacts{Marked: true, Claimed: true, Registered: old}, decision{keepMark, 0}},
	}
	for _, tt := range tests {
		change, recheck := decideMark(tt.facts, now, timeout)
		if diff := cmp.Diff(tt.want, decision{change, recheck}); diff != "" {
			t.Errorf("%s: decision (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestFactsOf(t *testing.T) {
	registered := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	tests := []struct {
		name    string
		node    corev1.Node
		claimed bool
		want    nodeFacts
	}{
		{"bare", corev1.Node{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: registered}}, false,
			nodeFacts{Registered: registered.Time}},
		{"marked with any value, adopted among other finalizers, claimed, being deleted",
			corev1.Node{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: registered, DeletionTimestamp: &registered,
				Annotations: map[string]string{v1alpha1.NotManagedByMCMAnnotation: ""},
				Finalizers:  []string{"example.com/other", v1alpha1.NodeFinalizer}}}, true,
			nodeFacts{Marked: true, Adopted: true, Claimed: true, Deleting: true, Registered: registered.Time}},
		{"another finalizer is no adoption",
			corev1.Node{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: registered, Finalizers: []string{"example.com/other"}}}, false,
			nodeFacts{Registered: registered.Time}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, factsOf(&tt.node, tt.claimed)); diff != "" {
			t.Errorf("%s: facts (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestMarkFactsChanged(t *testing.T) {
	node := func(mark string, finalizers ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Finalizers: finalizers,
			Labels: map[string]string{"unrelated": mark}}}
		if mark != "" {
			n.Annotations = map[string]string{v1alpha1.NotManagedByMCMAnnotation: mark}
		}
		return n
	}
	tests := []struct {
		name     string
		old, new *corev1.Node
		want     bool
	}{
		{"nothing the mark depends on", node(""), node(""), false},
		{"marked", node(""), node("1"), true},
		{"unmarked", node("1"), node(""), true},
		{"the mark's value alone", node("1"), node("true"), false},
		{"adopted", node(""), node("", v1alpha1.NodeFinalizer), true},
		{"no longer adopted", node("", v1alpha1.NodeFinalizer), node(""), true},
		{"another finalizer", node(""), node("", "example.com/other"), false},
	}
	for _, tt := range tests {
		if got := markFactsChanged(tt.old, tt.new); got != tt.want {
			t.Errorf("%s: markFactsChanged = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestManagersNeverFightOverTheMark runs any number of managers, each with
// its own machines, on one node of a shared target, in any order, while
// their machines claim and release the node, a machine controller adopts
// and releases it, and time passes. Whatever happens, no two managers want
// opposite writes, and between two changes of the node's facts the
// managers together write its mark at most once: no loop is possible.
// When the facts settle, every manager is content with the mark as it is.
func TestManagersNeverFightOverTheMark(t *testing.T) {
	const timeout = 20 * time.Minute
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rapid.Check(t, func(t *rapid.T) {
		managers := rapid.IntRange(1, 4).Draw(t, "managers")
		claimed := make([]bool, managers)
		node := nodeFacts{Registered: start, Marked: rapid.Bool().Draw(t, "marked"), Adopted: rapid.Bool().Draw(t, "adopted")}
		now := start
		writes := 0 // since the facts last changed
		for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
			wants := map[markChange][]int{}
			for i := range managers {
				f := node
				f.Claimed = claimed[i]
				change, _ := decideMark(f, now, timeout)
				wants[change] = append(wants[change], i)
			}
			if len(wants[addMark]) > 0 && len(wants[removeMark]) > 0 {
				t.Fatalf("step %d, node %+v, claims %v: managers %v want the mark added, %v removed",
					step, node, claimed, wants[addMark], wants[removeMark])
			}
			switch rapid.IntRange(0, 5).Draw(t, "action") {
			case 0, 1, 2: // a manager's check
				i := rapid.IntRange(0, managers-1).Draw(t, "manager")
				f := node
				f.Claimed = claimed[i]
				switch change, _ := decideMark(f, now, timeout); change {
				case addMark:
					node.Marked, writes = true, writes+1
				case removeMark:
					node.Marked, writes = false, writes+1
				}
				if writes > 1 {
					t.Fatalf("step %d: %d writes of the mark without a change of node %+v, claims %v", step, writes, node, claimed)
				}
			case 3: // a manager's machine claims the node, or lets it go
				i := rapid.IntRange(0, managers-1).Draw(t, "manager")
				claimed[i], writes = !claimed[i], 0
			case 4: // a machine controller adopts the node, or lets it go
				node.Adopted, writes = !node.Adopted, 0
			case 5:
				now = now.Add(rapid.SampledFrom([]time.Duration{time.Second, time.Minute, timeout}).Draw(t, "elapsed"))
			}
		}
		// Settled: once every manager checked, nobody wants a write.
		for i := range managers {
			f := node
			f.Claimed = claimed[i]
			if change, _ := decideMark(f, now, timeout); change != keepMark {
				// One manager may still have its single write to do.
				node.Marked = change == addMark
			}
		}
		for i := range managers {
			f := node
			f.Claimed = claimed[i]
			if change, _ := decideMark(f, now, timeout); change != keepMark {
				t.Fatalf("after every manager checked node %+v (claims %v), manager %d still wants to %v the mark", node, claimed, i, change)
			}
		}
	})
}

// TestOneManagerMarksAsMCM: for a single manager whose machine controller
// adopts the nodes its machines claim (as this module's and MCM's do), an
// old node ends up marked exactly when no machine claims it, MCM's rule.
func TestOneManagerMarksAsMCM(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, claimed := range []bool{false, true} {
		for _, marked := range []bool{false, true} {
			f := nodeFacts{Marked: marked, Claimed: claimed, Adopted: claimed, Registered: now.Add(-time.Hour)}
			change, _ := decideMark(f, now, time.Minute)
			switch change {
			case addMark:
				f.Marked = true
			case removeMark:
				f.Marked = false
			}
			if f.Marked == claimed {
				t.Errorf("claimed %v, marked %v: %v leaves it marked %v, want %v", claimed, marked, change, f.Marked, !claimed)
			}
		}
	}
}

// TestUnmanagedNodesAreMarked runs the node check on fake clusters: an old
// node without a machine is marked; a machine claiming it leaves the mark
// until its machine controller adopted the node, then the mark goes. A
// node another manager's machine controller adopted is never marked.
func TestUnmanagedNodesAreMarked(t *testing.T) {
	old := metav1.NewTime(time.Now().Add(-time.Hour))
	core := k8sfake.NewSimpleClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "stray", CreationTimestamp: old}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "theirs", CreationTimestamp: old, Finalizers: []string{v1alpha1.NodeFinalizer}}},
	)
	client := fake.NewSimpleClientset()
	fakeapi.VersionWrites(&client.Fake, client.Tracker())
	f := externalversions.NewSharedInformerFactory(client, 0)
	kf := informers.NewSharedInformerFactory(core, 0)
	c, err := New(core, Informers{
		Machines: f.Machine().V1alpha1().Machines(),
		Nodes:    kf.Core().V1().Nodes(),
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logr.Discard()))
	f.Start(ctx.Done())
	kf.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx, 1) })
	t.Cleanup(func() { cancel(); wg.Wait(); f.Shutdown(); kf.Shutdown() })

	isMarked := func(name string) bool {
		n, err := core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, ok := n.Annotations[v1alpha1.NotManagedByMCMAnnotation]
		return ok
	}
	marked := func(want bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if isMarked("stray") == want {
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
	// The machine's controller adopts the node a moment later; until then
	// the mark stays.
	time.Sleep(200 * time.Millisecond)
	if !isMarked("stray") {
		t.Fatal("the mark went before a machine controller adopted the node")
	}
	adopt := fmt.Appendf(nil, `{"metadata":{"finalizers":[%q]}}`, v1alpha1.NodeFinalizer)
	if _, err := core.CoreV1().Nodes().Patch(ctx, "stray", types.MergePatchType, adopt, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	marked(false)
	if isMarked("theirs") {
		t.Error("a node another manager's machine controller adopted was marked")
	}
}
