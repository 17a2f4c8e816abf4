package patch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// sentPatches returns the bodies and subresources of the patches client
// received.
func sentPatches(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			out = append(out, p.GetSubresource()+" "+string(p.GetPatch()))
		}
	}
	return out
}

func TestSetFinalizer(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "5", Finalizers: []string{"other"}}}
	client := fake.NewClientset(ns)
	nss := client.CoreV1().Namespaces()

	added, err := SetFinalizer(ctx, nss.Patch, ns, "mine", true, "test")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"other", "mine"}, added.Finalizers); diff != "" {
		t.Errorf("finalizers after adding (-want +got):\n%s", diff)
	}
	want := []string{` {"metadata":{"finalizers":["other","mine"],"resourceVersion":"5"}}`}
	if diff := cmp.Diff(want, sentPatches(client)); diff != "" {
		t.Errorf("patches (-want +got):\n%s", diff)
	}

	client.ClearActions()
	if got, err := SetFinalizer(ctx, nss.Patch, added, "mine", true, "test"); err != nil || got != added || len(client.Actions()) > 0 {
		t.Errorf("adding a finalizer present already: %v, %v, %d calls; want the object back untouched", got, err, len(client.Actions()))
	}
	if got, err := SetFinalizer(ctx, nss.Patch, ns, "absent", false, "test"); err != nil || got != ns || len(client.Actions()) > 0 {
		t.Errorf("removing an absent finalizer: %v, %v, %d calls; want the object back untouched", got, err, len(client.Actions()))
	}

	// A removal from an object that is gone has nothing left to hold.
	gone := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone", ResourceVersion: "2", Finalizers: []string{"mine"}}}
	if got, err := SetFinalizer(ctx, nss.Patch, gone, "mine", false, "test"); err != nil || got != gone {
		t.Errorf("removing the finalizer of a gone object: %v, %v; want it back and no error", got, err)
	}
	// An addition to it fails.
	absent := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone", ResourceVersion: "2"}}
	if _, err := SetFinalizer(ctx, nss.Patch, absent, "mine", true, "test"); err == nil {
		t.Error("adding a finalizer to a gone object did not fail")
	}
	client.PrependReactor("patch", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("refused")
	})
	if got, err := SetFinalizer(ctx, nss.Patch, added, "mine", false, "test"); err == nil || got != added {
		t.Errorf("a refused removal: %v, %v; want the object back and the error", got, err)
	}
}

func TestWriteStatus(t *testing.T) {
	at := metav1.NewTime(time.Unix(1000, 0))
	ready := corev1.NamespaceCondition{Type: "Ready", Status: corev1.ConditionTrue, LastTransitionTime: at}
	conditions := func(st corev1.NamespaceStatus) any { return st.Conditions }
	stored := corev1.NamespaceStatus{Phase: corev1.NamespaceActive, Conditions: []corev1.NamespaceCondition{ready}}
	tests := []struct {
		name     string
		computed func(corev1.NamespaceStatus) corev1.NamespaceStatus
		want     []string // the patches sent
	}{
		{name: "unchanged", computed: func(st corev1.NamespaceStatus) corev1.NamespaceStatus { return st }},
		{name: "conditions unchanged: unguarded", computed: func(st corev1.NamespaceStatus) corev1.NamespaceStatus {
			st.Phase = corev1.NamespaceTerminating
			return st
		}, want: []string{`status {"status":{"phase":"Terminating"}}`}},
		{name: "the same condition at another instant of the same second is unchanged", computed: func(st corev1.NamespaceStatus) corev1.NamespaceStatus {
			st.Conditions = []corev1.NamespaceCondition{ready}
			st.Conditions[0].LastTransitionTime = metav1.NewTime(at.In(time.FixedZone("x", 3600)))
			return st
		}},
		{name: "conditions changed: guarded", computed: func(st corev1.NamespaceStatus) corev1.NamespaceStatus {
			st.Conditions = nil
			return st
		}, want: []string{`status {"metadata":{"resourceVersion":"9"},"status":{"conditions":null}}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "9"}, Status: *stored.DeepCopy()}
			client := fake.NewClientset(ns)
			computed := tt.computed(*stored.DeepCopy())
			got, err := WriteStatus(context.Background(), client.CoreV1().Namespaces().Patch, ns, ns.Status, computed, conditions, "test")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, sentPatches(client)); diff != "" {
				t.Errorf("patches (-want +got):\n%s", diff)
			}
			if (tt.want == nil) != (got == ns) {
				t.Errorf("returned the object read: %v; want it only when nothing was written", got == ns)
			}
		})
	}
}
