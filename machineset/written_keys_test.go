package machineset

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/testsupport/fakeapi"
)

// TestControllerWrittenKeysAreRefused: a set stored (past admission) with a
// selector on node, a label the machine controller writes, is invalid: it
// says so once with a Warning event, creates nothing, and neither adopts
// nor deletes the standalone bound machine it matches.
func TestControllerWrittenKeysAreRefused(t *testing.T) {
	node := v1alpha1.NodeLabelKey
	cases := []struct {
		name     string
		selector *metav1.LabelSelector
		labels   map[string]string
	}{
		{"node in selector and template", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db", node: "n1"}}, map[string]string{"app": "db", node: "n1"}},
		{"node Exists", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: node, Operator: metav1.LabelSelectorOpExists},
		}}, map[string]string{node: "x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := testSet(2)
			set.Spec.Selector = tc.selector
			set.Spec.Template.Labels = tc.labels
			standalone := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "db1",
				Labels: map[string]string{"app": "db", node: "n1"}}}
			rec := &fakeapi.Events{}
			h := newHarness(t, Options{Recorder: rec}, set, standalone)
			got := h.failUntilReported(t)
			if c := conditionOf(&got.Status, v1alpha1.MachineSetReplicaFailure); c == nil || !strings.Contains(c.Message, "must not use the label keys node") {
				t.Errorf("ReplicaFailure condition %+v, want one about the label keys the controllers write", c)
			}
			if n := rec.Count(ReasonInvalid); n != 1 {
				t.Errorf("%d %s events, want 1", n, ReasonInvalid)
			}
			m, err := h.client.MachineV1alpha1().Machines("ns").Get(context.Background(), "db", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(m.OwnerReferences) > 0 || m.DeletionTimestamp != nil {
				t.Errorf("standalone machine touched: owners %v, deletion %v", m.OwnerReferences, m.DeletionTimestamp)
			}
			if n := h.creates.Load(); n != 0 {
				t.Errorf("invalid set created %d machines", n)
			}
		})
	}
}
