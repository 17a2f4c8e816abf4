package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func pod(name, app string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": app},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app, UID: "rs", Controller: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
}

// cluster returns a fake clientset whose evictions delete the pod at once,
// like a fast kubelet.
func cluster(objs ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objs...)
	podsGVR := corev1.SchemeGroupVersion.WithResource("pods")
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := action.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		return true, nil, client.Tracker().Delete(podsGVR, ev.Namespace, ev.Name)
	})
	return client
}

func runCLI(t *testing.T, client kubernetes.Interface, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr, func(string) (kubernetes.Interface, error) { return client, nil })
	return code, stdout.String(), stderr.String()
}

func node() *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}} }

func TestDryRun(t *testing.T) {
	client := cluster(node(), pod("web-1", "web"), pod("web-2", "web"))
	code, out, errOut := runCLI(t, client, "--dry-run", "node-1")
	if code != exitDrained {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{"Plan for node node-1", "default/web-1", "Evict", "order 0/regular", "2 pods remaining: to evict"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" {
			t.Errorf("dry run wrote: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

func TestDrains(t *testing.T) {
	client := cluster(node(), pod("web-1", "web"), pod("web-2", "web"))
	code, out, errOut := runCLI(t, client, "--poll-interval", "1ms", "node-1")
	if code != exitDrained {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"EvictionStarted    default/web-1", "PodGone            default/web-2",
		"2 pods remaining: terminating: default/web-1, default/web-2", "node node-1 is drained",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "Cordoned node") {
		t.Errorf("stderr lacks the cordon log line:\n%s", errOut)
	}
}

func TestTimeoutNamesBlockers(t *testing.T) {
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "strict"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "strict"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DesiredHealthy: 1, CurrentHealthy: 1, ExpectedPods: 1},
	}
	client := cluster(node(), pod("db-0", "strict"), pod("web-1", "web"), pdb)
	code, out, _ := runCLI(t, client, "--timeout", "100ms", "--poll-interval", "10ms", "node-1")
	if code != exitFailed {
		t.Fatalf("exit %d, want %d:\n%s", code, exitFailed, out)
	}
	for _, want := range []string{"not drained: timed out after 100ms", "default/db-0: Blocked", "default/strict (needs 1 healthy, has 1; misconfigured"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestUsage(t *testing.T) {
	code, _, errOut := runCLI(t, fake.NewClientset())
	if code != exitUsage || !strings.Contains(errOut, "usage: drain [flags] NODE") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCLI(t, fake.NewClientset(), "missing")
	if code != exitFailed || !strings.Contains(errOut, `node "missing": node not found`) {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	var stdout, stderr bytes.Buffer
	code = run(context.Background(), []string{"n"}, &stdout, &stderr, func(string) (kubernetes.Interface, error) {
		return nil, errors.New("no kubeconfig")
	})
	if code != exitFailed || !strings.Contains(stderr.String(), "no kubeconfig") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
