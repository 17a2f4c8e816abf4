package drain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/drain"
)

var now = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// pod returns a ready pod of a ReplicaSet (or of the given controller kind)
// on node-1.
func pod(name, kind string, labels, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: name, UID: ktypes.UID("uid-" + name), Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: "owner", UID: "owner", Controller: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
}

// ExampleDecide shows the planner on its own: no cluster, no clock, one
// decision per pod.
func ExampleDecide() {
	web := map[string]string{"app": "web"}
	critical := pod("coredns", "ReplicaSet", nil, nil)
	critical.Spec.PriorityClassName = "system-cluster-critical"
	pods := []*corev1.Pod{
		pod("web-1", "ReplicaSet", web, nil),
		pod("web-2", "ReplicaSet", web, nil),
		pod("report", "Job", nil, map[string]string{drain.PolicyAnnotation: "wait-completed"}),
		pod("storage-agent", "StatefulSet", nil, map[string]string{drain.OrderAnnotation: "10"}),
		critical,
		pod("fluentd", "DaemonSet", nil, nil),
	}
	// The budget allows one disruption: two of its three pods are needed.
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: web}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, DesiredHealthy: 2, CurrentHealthy: 3, ExpectedPods: 3},
	}

	plan := drain.Decide(drain.Snapshot{
		Node: node("node-1"), Pods: pods, PDBs: []*policyv1.PodDisruptionBudget{pdb}, Now: now,
	}, drain.Options{})
	for _, d := range plan.Decisions {
		fmt.Printf("%-14s %-18s %-18s %s\n", d.Pod.Name, d.Action, d.Group, d.Reason)
	}
	fmt.Println(plan.Message)
	// Output:
	// coredns        WaitForGroup       order 0/critical   waits for order 0/regular
	// fluentd        Skip               order 0/regular    DaemonSet pod
	// report         WaitForCompletion  order 0/regular    waits for the pod to complete (mcmkit.io/drain=wait-completed)
	// storage-agent  WaitForGroup       order 10/regular   waits for order 0/regular
	// web-1          Evict              order 0/regular    evict
	// web-2          Blocked            order 0/regular    blocked by PodDisruptionBudget default/web (needs 2 healthy, has 3)
	// 5 pods remaining: blocked by PDB default/web (needs 2 healthy, has 3): default/web-2; to evict: default/web-1; waiting to complete: default/report; 2 pods in later groups, waiting for order 0/regular
}

// evictInstantly makes a fake clientset delete pods on eviction, as if the
// kubelet stopped them at once.
func evictInstantly(client *fake.Clientset) {
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := action.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		gvr := corev1.SchemeGroupVersion.WithResource("pods")
		return true, nil, client.Tracker().Delete(gvr, ev.Namespace, ev.Name)
	})
}

// ExampleDrainer_Drain drains a node and reports every pod event on the way.
func ExampleDrainer_Drain() {
	client := fake.NewClientset(node("node-1"),
		pod("web-1", "ReplicaSet", nil, nil), pod("web-2", "ReplicaSet", nil, nil), pod("fluentd", "DaemonSet", nil, nil))
	evictInstantly(client)

	d, err := drain.New(client, drain.Options{
		Timeout:             30 * time.Minute,      // force-delete whatever is left by then
		PollInterval:        10 * time.Millisecond, // a fake cluster is fast
		EvictionConcurrency: 1,                     // for a stable output order
		OnEvent:             func(e drain.Event) { fmt.Println(e) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := d.Drain(ctx, "node-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Message)
	// Output:
	// EvictionStarted default/web-1: eviction accepted
	// EvictionStarted default/web-2: eviction accepted
	// PodGone default/web-1: pod is gone from the node
	// PodGone default/web-2: pod is gone from the node
	// node node-1 is drained (1 pod left on it by policy)
}

// ExampleDrainer_Pass is the controller way: one pass per reconcile, the
// state persisted in between (here as JSON, as in an annotation).
func ExampleDrainer_Pass() {
	client := fake.NewClientset(node("node-1"), pod("web-1", "ReplicaSet", nil, nil), pod("web-2", "ReplicaSet", nil, nil))
	evictInstantly(client)
	d, err := drain.New(client, drain.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}

	persisted := []byte("{}")
	for reconcile := 1; ; reconcile++ {
		var state drain.State
		if err := json.Unmarshal(persisted, &state); err != nil {
			fmt.Println(err)
			return
		}
		res, err := d.Pass(context.Background(), "node-1", state)
		if persisted, err = json.Marshal(res.State); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("reconcile %d: %s\n", reconcile, res.Message)
		if res.Done {
			break
		}
		// A controller would requeue the key after time.Until(res.NextCheck).
	}
	// Output:
	// reconcile 1: 2 pods remaining: terminating: default/web-1, default/web-2
	// reconcile 2: node node-1 is drained
}

// ExampleDrainer_Plan is the dry run.
func ExampleDrainer_Plan() {
	client := fake.NewClientset(node("node-1"), pod("web-1", "ReplicaSet", nil, nil),
		pod("db-0", "StatefulSet", nil, map[string]string{drain.OrderAnnotation: "1"}))
	d, err := drain.New(client, drain.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	plan, err := d.Plan(context.Background(), "node-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, dec := range plan.Decisions {
		fmt.Println(dec.Pod, dec.Action, dec.Group)
	}
	// Output:
	// default/db-0 WaitForGroup order 1/regular
	// default/web-1 Evict order 0/regular
}

// ExampleListersFromFactory serves a drain's reads from informer caches:
// a pass then sends only the cordon patch and the evictions.
func ExampleListersFromFactory() {
	client := fake.NewClientset(node("node-1"), pod("web-1", "ReplicaSet", nil, nil), pod("web-2", "ReplicaSet", nil, nil))
	evictInstantly(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	listers, err := drain.ListersFromFactory(factory) // before Start
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer factory.Shutdown()
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	d, err := drain.New(client, drain.Options{Listers: listers, EvictionConcurrency: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	client.ClearActions()
	res, err := d.Pass(ctx, "node-1", drain.State{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "watch" {
			continue // an informer's, which may start just after its cache synced
		}
		what := a.GetResource().Resource
		if sub := a.GetSubresource(); sub != "" {
			what += "/" + sub
		}
		fmt.Println(a.GetVerb(), what)
	}
	fmt.Println(res.Message)
	// Output:
	// patch nodes
	// create pods/eviction
	// create pods/eviction
	// 2 pods remaining: terminating: default/web-1, default/web-2
}

// ExampleDrainer_Pass_maxEvictRetries bounds the refusals of a budget that
// never allows a disruption, as a machine's maxEvictRetries does: after
// the second refusal, the pods behind it are deleted without the eviction
// API.
func ExampleDrainer_Pass_maxEvictRetries() {
	web := map[string]string{"app": "web"}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: web}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, DesiredHealthy: 2, CurrentHealthy: 2, ExpectedPods: 3},
	}
	client := fake.NewClientset(node("node-1"), pdb, pod("web-1", "ReplicaSet", web, nil), pod("web-2", "ReplicaSet", web, nil))
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause,
			Message: "The disruption budget web needs 2 healthy pods and has 2 currently"}}
		return true, nil, err
	})
	clock := clocktesting.NewFakeClock(now)
	d, err := drain.New(client, drain.Options{
		Clock:               clock,
		EvictionConcurrency: 1, // for a stable output order
		OnEvent:             func(e drain.Event) { fmt.Println(e) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	var state drain.State
	state.SetMaxEvictRetries(2) // the caller's bound, like its deadline
	for reconcile := 1; ; reconcile++ {
		res, err := d.Pass(context.Background(), "node-1", state)
		if err != nil {
			fmt.Println(err)
			return
		}
		state = res.State
		fmt.Printf("after %v: %s\n", clock.Since(now), res.Message)
		if res.Done {
			break
		}
		clock.SetTime(res.NextCheck)
	}
	// Output:
	// EvictionBlocked default/web-1: The disruption budget web needs 2 healthy pods and has 2 currently
	// after 0s: 2 pods remaining: blocked by PDB default/web (needs 2 healthy, has 2): default/web-1, default/web-2
	// EvictionBlocked default/web-1: The disruption budget web needs 2 healthy pods and has 2 currently
	// after 1s: 2 pods remaining: blocked by PDB default/web (needs 2 healthy, has 2): default/web-1, default/web-2
	// EvictRetriesExhausted default/web-1: deleted with 30s grace: eviction refused 2 times by PodDisruptionBudgets (MaxEvictRetries)
	// EvictRetriesExhausted default/web-2: deleted with 30s grace: eviction refused 2 times by PodDisruptionBudgets (MaxEvictRetries)
	// after 3s: 2 pods remaining: terminating: default/web-1, default/web-2
	// PodGone default/web-1: pod is gone from the node
	// PodGone default/web-2: pod is gone from the node
	// after 8s: node node-1 is drained
}
