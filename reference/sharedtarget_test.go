package main

import (
	"context"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// TestTwoManagersShareATarget runs two managers, for two namespaces of the
// control cluster, on one target cluster (the same cluster here), with 10
// machines each and one node no machine of either has. Each sees the
// other's nodes as claimed by none of its machines. Once every node is
// older than the creation timeout, so that each manager has judged every
// node, the two write nothing to any node for a minute: no request of
// either to a node (their own REST client metrics, which count every
// request their clients send, no-ops included), and no change of any of
// the machines' nodes' metadata or spec, by anyone (a watch on the API
// server). The machines' nodes stay unmarked and the stray node marked.
func TestTwoManagersShareATarget(t *testing.T) {
	t.Parallel()
	env := testenv.GetOwn(t) // its managers judge every node of the cluster
	mc := versioned.NewForConfigOrDie(env.Config())
	ctx := context.Background()
	suffix := randomSuffix(t) // node names are cluster-wide
	const (
		machines        = 10
		creationTimeout = 30 * time.Second
		window          = time.Minute
	)

	// A node nobody manages: registered by hand, no kubelet, no machine.
	stray := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "stray-" + suffix}}
	if _, err := env.Client().CoreV1().Nodes().Create(ctx, stray, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := env.Client().CoreV1().Nodes().Delete(context.Background(), stray.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting node %s: %v", stray.Name, err)
		}
	})

	bin := binary(t)
	type managed struct {
		ns, set string
		in      *instance
	}
	var managers []managed
	for _, name := range []string{"a", "b"} {
		m := managed{ns: env.Namespace(t), set: name + "-" + suffix}
		createMachineObjects(t, env, mc, m.ns)
		m.in = start(t, bin, name, "--control-kubeconfig", env.Kubeconfig(), "--target-kubeconfig", env.Kubeconfig(),
			"--namespace", m.ns, "--driver", "sim", "--machine-creation-timeout", creationTimeout.String(), "-v", "1")
		createMachineSet(t, mc, m.ns, m.set, machines)
		managers = append(managers, m)
	}
	var nodes []string
	for _, m := range managers {
		waitSetRunning(t, mc, m.ns, m.set, machines)
		list, err := mc.MachineV1alpha1().Machines(m.ns).List(ctx, metav1.ListOptions{LabelSelector: "set=" + m.set})
		if err != nil {
			t.Fatal(err)
		}
		for _, machine := range list.Items {
			nodes = append(nodes, machine.Labels[v1alpha1.NodeLabelKey])
		}
	}

	// Steady state: every node is older than the creation timeout, so
	// each manager has judged each one (a node's check comes due at that
	// age), with a margin for the checks' writes and what they set off.
	youngest := time.Time{}
	for _, name := range append(slices.Clone(nodes), stray.Name) {
		n, err := env.Client().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node of a running machine: %v", err)
		}
		if n.CreationTimestamp.After(youngest) {
			youngest = n.CreationTimestamp.Time
		}
	}
	time.Sleep(time.Until(youngest.Add(creationTimeout + 10*time.Second)))

	before := make([]int, len(managers))
	for i, m := range managers {
		before[i] = nodeWrites(t, m.in)
	}
	changes := watchNodeChanges(t, env, nodes, window)
	for i, m := range managers {
		if n := nodeWrites(t, m.in) - before[i]; n != 0 {
			t.Errorf("manager %s sent %d node writes in %v at steady state, want 0", m.in.name, n, window)
		}
	}
	if len(changes) > 0 {
		t.Errorf("%d changes of the machines' nodes in %v at steady state, want 0; the first:\n%s",
			len(changes), window, strings.Join(changes[:min(len(changes), 10)], "\n"))
	}

	for _, name := range append(nodes, stray.Name) {
		n, err := env.Client().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, marked := n.Annotations[v1alpha1.NotManagedByMCMAnnotation]
		if want := name == stray.Name; marked != want {
			t.Errorf("node %s marked not-managed-by-mcm: %v, want %v", name, marked, want)
		}
	}
}

// nodeWrites is the number of requests in's clients sent that write a
// Node (create, update, patch, delete; not its status), from in's REST
// client metrics.
func nodeWrites(t *testing.T, in *instance) int {
	t.Helper()
	_, body := in.get("/metrics")
	families, err := parseExposition(body)
	if err != nil {
		t.Fatalf("%s /metrics: %v", in.name, err)
	}
	f := families["rest_client_request_latency_seconds"]
	if f == nil {
		t.Fatalf("%s /metrics lacks rest_client_request_latency_seconds", in.name)
	}
	total := 0
	for _, s := range f.samples {
		if !strings.HasSuffix(s.name, "_count") || !slices.Contains([]string{"POST", "PUT", "PATCH", "DELETE"}, s.labels["verb"]) {
			continue
		}
		u, err := url.Parse(s.labels["url"])
		if err != nil {
			t.Fatalf("%s: URL template %q: %v", in.name, s.labels["url"], err)
		}
		if u.Path != "/api/v1/nodes" && u.Path != "/api/v1/nodes/{name}" {
			continue
		}
		n, err := strconv.ParseFloat(s.value, 64)
		if err != nil {
			t.Fatalf("%s: sample %s: %v", in.name, s.value, err)
		}
		total += int(n)
	}
	return total
}

// watchNodeChanges watches the nodes names for d and returns, one line
// each, the changes of their metadata or spec (not status: the kubelets'
// reports) that the API server committed meanwhile, by anyone, with the
// field managers that wrote them.
func watchNodeChanges(t *testing.T, env *testenv.Env, names []string, d time.Duration) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	list, err := env.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]*corev1.Node{}
	for i := range list.Items {
		if n := &list.Items[i]; slices.Contains(names, n.Name) {
			last[n.Name] = n
		}
	}
	w, err := env.Client().CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var changes []string
	for {
		select {
		case <-ctx.Done():
			return changes
		case ev, ok := <-w.ResultChan():
			if !ok {
				if ctx.Err() == nil {
					t.Fatalf("the watch of nodes ended %v early", time.Until(deadlineOf(ctx)))
				}
				return changes
			}
			if ev.Type == watch.Error {
				t.Fatalf("watching nodes: %v", apierrors.FromObject(ev.Object))
			}
			n, ok := ev.Object.(*corev1.Node)
			if !ok || !slices.Contains(names, n.Name) {
				continue
			}
			if prev := last[n.Name]; ev.Type != watch.Modified || prev == nil || changedBeyondStatus(prev, n) {
				changes = append(changes, fmt.Sprintf("%s %s, written by %s", ev.Type, n.Name, writers(prev, n)))
			}
			last[n.Name] = n
		}
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// changedBeyondStatus tells whether n differs from prev in more than its
// status and the bookkeeping of every write.
func changedBeyondStatus(prev, n *corev1.Node) bool {
	strip := func(n *corev1.Node) *corev1.Node {
		n = n.DeepCopy()
		n.ResourceVersion, n.ManagedFields, n.Status = "", nil, corev1.NodeStatus{}
		return n
	}
	return !reflect.DeepEqual(strip(prev), strip(n))
}

// writers names the field managers whose entries in n's managed fields
// are new, changed or gone since prev.
func writers(prev, n *corev1.Node) string {
	var out []string
	in := func(e metav1.ManagedFieldsEntry, entries []metav1.ManagedFieldsEntry) bool {
		return slices.ContainsFunc(entries, func(p metav1.ManagedFieldsEntry) bool { return reflect.DeepEqual(p, e) })
	}
	for _, e := range n.ManagedFields {
		if prev == nil || !in(e, prev.ManagedFields) {
			out = append(out, fmt.Sprintf("%s (%s %s)", e.Manager, e.Operation, e.Subresource))
		}
	}
	if prev != nil {
		for _, e := range prev.ManagedFields {
			if !slices.ContainsFunc(n.ManagedFields, func(f metav1.ManagedFieldsEntry) bool {
				return f.Manager == e.Manager && f.Operation == e.Operation && f.Subresource == e.Subresource
			}) {
				out = append(out, fmt.Sprintf("%s (%s %s, its last field removed)", e.Manager, e.Operation, e.Subresource))
			}
		}
	}
	if len(out) == 0 {
		return "a field manager whose entry did not change (a write within the same second)"
	}
	return strings.Join(out, ", ")
}
