package machine

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/expectations"
)

// TestBindNodeIsACompareAndSwap: the binding is a merge patch of the one
// annotation guarded by the resourceVersion of the node it was decided
// on; a conflict reads the node again and tries again only while it may
// still be bound, so a machine whose node another machine bound meanwhile
// loses (errBindingLost) instead of overwriting the binding.
func TestBindNodeIsACompareAndSwap(t *testing.T) {
	m := withPhase(baseMachine(), v1alpha1.MachinePending, "p1")
	cached := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"}, Spec: corev1.NodeSpec{ProviderID: "p1"}}
	for _, tc := range []struct {
		name string
		// live is the node as the API server has it at the first
		// patch; a version other than the cached one makes it conflict.
		live      *corev1.Node
		wantErr   error
		wantOwner string
		wantRVs   []string // the guards of the patches sent
		// wantSynced: the binding's write carried the node's sync; after
		// a conflict it goes alone, and the node's sync waits for the
		// next sync.
		wantSynced bool
	}{
		{"unchanged: bound at once", cached, nil, "uid-m1", []string{"1"}, true},
		{"changed by the kubelet: bound on the second try", func() *corev1.Node {
			n := cached.DeepCopy()
			n.ResourceVersion = "2"
			return n
		}(), nil, "uid-m1", []string{"1", "2"}, false},
		{"bound to another machine meanwhile: lost", func() *corev1.Node {
			n := cached.DeepCopy()
			n.ResourceVersion = "2"
			n.Annotations = map[string]string{v1alpha1.MachineUIDAnnotation: "uid-other"}
			return n
		}(), errBindingLost, "uid-other", []string{"1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.live.DeepCopy())
			var guards []string
			client.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
				p := a.(k8stesting.PatchAction)
				var body struct {
					Metadata struct {
						ResourceVersion string `json:"resourceVersion"`
					} `json:"metadata"`
				}
				if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
					t.Fatal(err)
				}
				guards = append(guards, body.Metadata.ResourceVersion)
				cur, err := client.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", p.GetName())
				if err != nil {
					return true, nil, err
				}
				if cur.(*corev1.Node).ResourceVersion != body.Metadata.ResourceVersion {
					return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, p.GetName(), errors.New("changed"))
				}
				return false, nil, nil // the tracker applies it
			})
			o := testOptions(t)
			c := &Controller{target: client, opts: *o, nodeWrites: expectations.NewWrites[string](expectations.Options{Clock: o.Clock})}
			desired := cached.DeepCopy()
			desired.Labels = map[string]string{v1alpha1.MachineNameLabelKey: m.Name}
			_, synced, err := c.bindNode(context.Background(), cached, desired, m)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if synced != tc.wantSynced {
				t.Errorf("node sync written with the binding: %v, want %v", synced, tc.wantSynced)
			}
			n, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := n.Labels[v1alpha1.MachineNameLabelKey] == m.Name; got != tc.wantSynced {
				t.Errorf("node labels %v: the node's sync written %v, want %v", n.Labels, got, tc.wantSynced)
			}
			if got := n.Annotations[v1alpha1.MachineUIDAnnotation]; got != tc.wantOwner {
				t.Errorf("node bound to %q, want %q", got, tc.wantOwner)
			}
			if diff := cmp.Diff(tc.wantRVs, guards); diff != "" {
				t.Errorf("guards (-want +got):\n%s", diff)
			}
		})
	}
}
