package machine_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// nodeBarrier holds the first write of each of two controllers to one
// node (a PATCH of the node, not of its status) until both have sent
// theirs, so that both decide on the node as it was before either wrote:
// the race of two managers binding one node, run deterministically. The
// test then lets them through in the order it chooses, one after the
// other.
type nodeBarrier struct {
	path    string
	mu      sync.Mutex
	held    map[string]chan struct{} // by controller: closed to let its write through
	done    map[string]chan struct{} // by controller: closed once its write was answered
	arrived chan string
}

func newNodeBarrier(node string) *nodeBarrier {
	return &nodeBarrier{path: "/api/v1/nodes/" + node, held: map[string]chan struct{}{}, done: map[string]chan struct{}{}, arrived: make(chan string, 2)}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// wrap is the transport wrapper of controller who.
func (b *nodeBarrier) wrap(who string) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method != http.MethodPatch || r.URL.Path != b.path {
				return rt.RoundTrip(r)
			}
			b.mu.Lock()
			release, seen := b.held[who]
			if !seen {
				release = make(chan struct{})
				b.held[who], b.done[who] = release, make(chan struct{})
			}
			done := b.done[who]
			b.mu.Unlock()
			if seen {
				return rt.RoundTrip(r) // only the first write waits
			}
			b.arrived <- who
			select {
			case <-release:
			case <-r.Context().Done():
				close(done)
				return nil, r.Context().Err()
			}
			defer close(done)
			return rt.RoundTrip(r)
		})
	}
}

// release lets who's write through and waits until it was answered.
func (b *nodeBarrier) release(t *testing.T, who string) {
	t.Helper()
	b.mu.Lock()
	release, done := b.held[who], b.done[who]
	b.mu.Unlock()
	close(release)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the held write of %s was not answered", who)
	}
}

// TestIntegrationTwoManagersRaceForOneNode: two controllers, each with its
// own namespace, cloud and kubelet, share one target cluster and create
// machines of the same name at the same time. Their clouds name both VMs
// alike (same provider ID, same node name): one kubelet registers the
// node, and both controllers find it showing their VM, unbound, and bind
// it at once (held at a barrier until both have sent the write, then let
// through one after the other, the registering kubelet's controller
// first). Exactly one binds the node: the registering kubelet's. The
// other fails cleanly — Failed, reported (ForeignVM), without a claim on
// the node or VM, and deleting no VM (the one its driver names runs the
// node bound to the other machine) — and the winner keeps its VM, node
// and machine. When the winner's machine is deleted, taking its node
// along, the loser's machine is not deleted for it.
func TestIntegrationTwoManagersRaceForOneNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	recs := map[string]*eventLog{"a": {}, "b": {}}
	name := "race-" + rand.String(6) // node names are cluster-wide
	barrier := newNodeBarrier(name)
	worlds := map[string]*world{}
	for _, who := range []string{"a", "b"} {
		worlds[who] = integration(t, worldOptions{ctrl: machine.Options{Recorder: recs[who]}, wrap: barrier.wrap(who)})
		createClass(t, worlds[who].mc, worlds[who].core, worlds[who].ns, true)
	}
	t.Cleanup(func() {
		err := worlds["a"].core.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting node %s: %v", name, err)
		}
	})
	for _, who := range []string{"a", "b"} {
		createMachine(t, worlds[who].mc, newMachine(worlds[who].ns, name, "sim", nil))
	}

	var arrived []string
	for len(arrived) < 2 {
		select {
		case who := <-barrier.arrived:
			arrived = append(arrived, who)
		case <-time.After(2 * time.Minute):
			t.Fatalf("the race did not run: only %v wrote node %s", arrived, name)
		}
	}
	node, err := worlds["a"].core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	winner, loser := "a", "b"
	if node.Annotations[sim.AnnotationSimulated] == worlds["b"].kubelet.Identity() {
		winner, loser = "b", "a"
	}
	w, l := worlds[winner], worlds[loser]
	won, err := getMachine(ctx, w.mc, w.ns, name)
	if err != nil {
		t.Fatal(err)
	}
	// The held writes were decided on the node as it was; the kubelet
	// may have written it since, and a write that then conflicts is
	// tried again. The loser's goes once the winner's has landed.
	barrier.release(t, winner)
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		n, err := w.core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		owner := n.Annotations[v1alpha1.MachineUIDAnnotation]
		return owner != "", "node bound to " + owner
	})
	barrier.release(t, loser)
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		lost, err := getMachine(ctx, l.mc, l.ns, name)
		if err != nil {
			return false, "loser: " + err.Error()
		}
		if lost.Status.CurrentStatus.Phase != v1alpha1.MachineFailed || len(recs[loser].of(name, machine.ReasonForeignVM)) == 0 {
			return false, fmt.Sprintf("loser: phase %q, lastOperation %+v", lost.Status.CurrentStatus.Phase, lost.Status.LastOperation)
		}
		return true, ""
	})
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		m, err := getMachine(ctx, w.mc, w.ns, name)
		if err != nil {
			return false, "winner: " + err.Error()
		}
		n, err := w.core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "node: " + err.Error()
		}
		owner := n.Annotations[v1alpha1.MachineUIDAnnotation]
		return m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning && owner == string(won.UID) && n.DeletionTimestamp == nil,
			fmt.Sprintf("winner: phase %q, lastOperation %+v; node bound to %q (winner %s), deleted %v",
				m.Status.CurrentStatus.Phase, m.Status.LastOperation, owner, won.UID, n.DeletionTimestamp)
	})
	won, err = getMachine(ctx, w.mc, w.ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if vm, ok := w.cloud.VM(won.Spec.ProviderID); !ok || vm.State == sim.VMTerminating {
		t.Errorf("the winner's VM %s: %+v, found %v", won.Spec.ProviderID, vm, ok)
	}
	lost, err := getMachine(ctx, l.mc, l.ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if op := lost.Status.LastOperation; op.State != v1alpha1.MachineStateFailed || op.ErrorCode == "" {
		t.Errorf("loser: lastOperation %+v, want Failed with a code", op)
	}
	if lost.Spec.ProviderID != "" || lost.Labels[v1alpha1.NodeLabelKey] != "" {
		t.Errorf("loser: claims provider ID %q, node %q", lost.Spec.ProviderID, lost.Labels[v1alpha1.NodeLabelKey])
	}
	if got := recs[winner].of(name, machine.ReasonForeignVM, machine.ReasonForeignClaim, machine.ReasonStaleNode); len(got) > 0 {
		t.Errorf("the winner was disturbed: %+v", got)
	}

	// The winner's machine goes, and its node with it: the loser's
	// machine stays. (The loser's VM, which its machine no longer
	// claims, registers a node of that name once the winner's is gone.)
	wonNode, err := w.core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.mc.MachineV1alpha1().Machines(w.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, machineGone(w.mc, w.ns, name))
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		n, err := w.core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && n.UID != wonNode.UID), fmt.Sprintf("node %s: %v", name, err)
	})
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		m, err := getMachine(ctx, l.mc, l.ns, name)
		if err != nil || m.DeletionTimestamp != nil {
			t.Fatalf("the loser's machine was deleted with the winner's node: %v, err %v", m, err)
		}
	}
	for _, e := range recs[loser].all() {
		if e.Type == corev1.EventTypeWarning && e.Reason == machine.ReasonNodeNotOwned {
			t.Errorf("the loser acted on the winner's node: %+v", e)
		}
	}
	// The loser goes too, and its VM with it (asked for by its name).
	if err := l.mc.MachineV1alpha1().Machines(l.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, machineGone(l.mc, l.ns, name))
}
