package deployment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
)

type nmOpt func(*corev1.Node)

// nmNode is a node at resourceVersion "7" without taints or annotations.
// nmNode is a node of VM nmVM(name), bound to no machine yet.
func nmNode(name string, opts ...nmOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "7"}, Spec: corev1.NodeSpec{ProviderID: nmVM(name)}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func nmTaint(key, value string, effect corev1.TaintEffect) nmOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

// nmBound binds the node to m, as the machine controller does, giving m
// a UID when it has none.
func nmBound(m *v1alpha1.Machine) nmOpt {
	if m.UID == "" {
		m.UID = types.UID("uid-" + m.Name)
	}
	return nmAnnotate(v1alpha1.MachineUIDAnnotation, string(m.UID))
}

// nmTainted carries the rollout taint.
func nmTainted() nmOpt {
	return nmTaint(v1alpha1.PreferNoScheduleTaintKey, "True", corev1.TaintEffectPreferNoSchedule)
}

// nmForeign carries a taint of somebody else.
func nmForeign() nmOpt { return nmTaint("dedicated", "gpu", corev1.TaintEffectNoSchedule) }

func nmAnnotate(key, value string) nmOpt {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[key] = value
	}
}

// nmOurs carries scale-down-disabled with the controller's marker.
func nmOurs() nmOpt {
	return func(n *corev1.Node) {
		nmAnnotate(v1alpha1.ScaleDownDisabledAnnotation, "true")(n)
		nmAnnotate(v1alpha1.ScaleDownDisabledByMCMAnnotation, "true")(n)
	}
}

// nmPersons carries scale-down-disabled set by a person: no marker.
func nmPersons() nmOpt { return nmAnnotate(v1alpha1.ScaleDownDisabledAnnotation, "true") }

func nmNodes(ns ...*corev1.Node) []*corev1.Node { return ns }

func nmVM(node string) string { return "sim:///zone/" + node }

func TestNodesOf(t *testing.T) {
	nodes := map[string]*corev1.Node{"n-nil": nil}
	// onNode is a machine that runs on node: the node shows its VM and is
	// bound to it (the last machine placed on a node owns it).
	onNode := func(machine, node string) *v1alpha1.Machine {
		m := newMachine(machine)
		m.Labels = map[string]string{v1alpha1.NodeLabelKey: node}
		m.Spec.ProviderID = nmVM(node)
		nodes[node] = nmNode(node, nmBound(m))
		return m
	}
	// claims is a machine that names node and its VM, but which the node
	// is not bound to.
	claims := func(machine, node string) *v1alpha1.Machine {
		m := newMachine(machine)
		m.UID = types.UID("uid-" + machine)
		m.Labels = map[string]string{v1alpha1.NodeLabelKey: node}
		m.Spec.ProviderID = nmVM(node)
		return m
	}
	sorted := []*v1alpha1.Machine{onNode("m1", "n-c"), onNode("m2", "n-a")}
	skipped := []*v1alpha1.Machine{newMachine("pending"), claims("empty", ""), claims("unknown", "n-x"), claims("nil", "n-nil"), nil, onNode("m", "n-b")}
	twice := []*v1alpha1.Machine{onNode("t1", "n-t"), onNode("t2", "n-t")}
	twice[0].UID = twice[1].UID // both bound, as far as the node tells
	// A machine that claims a node it does not run on.
	forged := claims("forged", "n-b")
	forged.Spec.ProviderID = nmVM("n-z")
	owner := onNode("owner", "n-d")
	notOwner := claims("not-owner", "n-d")
	// A node no machine is bound to, showing the VM a machine claims:
	// anyone who may create a machine can claim it.
	nodes["n-free"] = nmNode("n-free")
	unbound := claims("unbound", "n-free")
	tests := []struct {
		name     string
		machines []*v1alpha1.Machine
		want     []string
	}{
		{"none", nil, nil},
		{"sorted by node name", sorted, []string{"n-a", "n-c"}},
		{"machines without a node label, with an empty one or with an unknown node are skipped", skipped, []string{"n-b"}},
		{"a node named twice is listed once", twice, []string{"n-t"}},
		{"a node that does not confirm the claim is skipped", []*v1alpha1.Machine{forged, notOwner}, nil},
		{"a node bound to the machine is listed", []*v1alpha1.Machine{owner}, []string{"n-d"}},
		{"a node bound to no machine is skipped, though it shows the VM the machine claims", []*v1alpha1.Machine{unbound}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, n := range nodesOf(tt.machines, nodes) {
				if n != nodes[n.Name] {
					t.Errorf("nodesOf returned a node %s that is not the one in the map", n.Name)
				}
				got = append(got, n.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("nodesOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanNodeMarks(t *testing.T) {
	tests := []struct {
		name                        string
		rolling, complete, annotate bool
		newNodes, oldNodes          []*corev1.Node
		want                        []nodeChange
	}{
		{
			"rolling with the option: old nodes tainted, all nodes annotated",
			true, false, true,
			nmNodes(nmNode("new-1"), nmNode("new-0")), nmNodes(nmNode("old-0")),
			[]nodeChange{{"new-0", 0, 1}, {"new-1", 0, 1}, {"old-0", 1, 1}},
		},
		{
			"rolling without the option: only old nodes, only the taint",
			true, false, false,
			nmNodes(nmNode("new-0")), nmNodes(nmNode("old-0"), nmNode("old-1")),
			[]nodeChange{{"old-0", 1, 0}, {"old-1", 1, 0}},
		},
		{
			"rolling, nodes already in the wanted state: nothing",
			true, false, true,
			nmNodes(nmNode("new-0", nmOurs())), nmNodes(nmNode("old-0", nmOurs(), nmTainted(), nmForeign())),
			nil,
		},
		{
			"rolling: a person's scale-down-disabled is neither claimed nor duplicated",
			true, false, true,
			nmNodes(nmNode("new-0", nmPersons())), nmNodes(nmNode("old-0", nmPersons())),
			[]nodeChange{{"old-0", 1, 0}},
		},
		{
			"rolling: scale-down-disabled other than true is ours to set",
			true, false, true,
			nmNodes(nmNode("new-0", nmAnnotate(v1alpha1.ScaleDownDisabledAnnotation, "false"))), nil,
			[]nodeChange{{"new-0", 0, 1}},
		},
		{
			"rolling: our key with another value or effect is rewritten",
			true, false, false,
			nil,
			nmNodes(
				nmNode("old-0", nmTaint(v1alpha1.PreferNoScheduleTaintKey, "False", corev1.TaintEffectPreferNoSchedule)),
				nmNode("old-1", nmTaint(v1alpha1.PreferNoScheduleTaintKey, "True", corev1.TaintEffectNoSchedule)),
				nmNode("old-2", nmTainted(), nmTaint(v1alpha1.PreferNoScheduleTaintKey, "True", corev1.TaintEffectNoExecute)),
			),
			[]nodeChange{{"old-0", 1, 0}, {"old-1", 1, 0}, {"old-2", 1, 0}},
		},
		{
			"rolling: foreign taints alone do not count",
			true, false, false,
			nil, nmNodes(nmNode("old-0", nmForeign())),
			[]nodeChange{{"old-0", 1, 0}},
		},
		{
			"rolling: new nodes keep a taint until the rollout completes",
			true, false, true,
			nmNodes(nmNode("new-0", nmTainted(), nmOurs())), nil,
			nil,
		},
		{
			"complete with the marker: both annotations go from every node",
			false, true, true,
			nmNodes(nmNode("new-0", nmOurs())), nmNodes(nmNode("old-0", nmOurs())),
			[]nodeChange{{"new-0", 0, -1}, {"old-0", 0, -1}},
		},
		{
			"complete without the marker: a person's annotation stays",
			false, true, true,
			nmNodes(nmNode("new-0", nmPersons()), nmNode("new-1", nmPersons(), nmAnnotate(v1alpha1.ScaleDownDisabledByMCMAnnotation, "false"))), nil,
			nil,
		},
		{
			"complete: the marker alone is removed too",
			false, true, true,
			nmNodes(nmNode("new-0", nmAnnotate(v1alpha1.ScaleDownDisabledByMCMAnnotation, "true"))), nil,
			[]nodeChange{{"new-0", 0, -1}},
		},
		{
			"complete with the option off still cleans up",
			false, true, false,
			nmNodes(nmNode("new-0", nmOurs())), nil,
			[]nodeChange{{"new-0", 0, -1}},
		},
		{
			"complete: new nodes lose the taint (a rollback made an old set new), foreign taints stay",
			false, true, true,
			nmNodes(nmNode("new-0", nmTainted(), nmForeign()), nmNode("new-1", nmForeign()), nmNode("new-2", nmTainted(), nmOurs())),
			nmNodes(nmNode("old-0", nmTainted())),
			[]nodeChange{{"new-0", -1, 0}, {"new-2", -1, -1}},
		},
		{
			"neither rolling nor complete: nothing",
			false, false, true,
			nmNodes(nmNode("new-0", nmTainted())), nmNodes(nmNode("old-0"), nmNode("old-1", nmOurs())),
			nil,
		},
		{
			"rolling and complete with the option: protection wins, new nodes lose the taint",
			true, true, true,
			nmNodes(nmNode("new-0", nmTainted(), nmOurs()), nmNode("new-1")), nmNodes(nmNode("old-0", nmOurs())),
			[]nodeChange{{"new-0", -1, 0}, {"new-1", 0, 1}, {"old-0", 1, 0}},
		},
		{
			"rolling and complete without the option: annotations go",
			true, true, false,
			nmNodes(nmNode("new-0", nmOurs())), nil,
			[]nodeChange{{"new-0", 0, -1}},
		},
		{
			"a node in both lists is an old node while rolling",
			true, false, false,
			nmNodes(nmNode("both")), nmNodes(nmNode("both")),
			[]nodeChange{{"both", 1, 0}},
		},
		{"nil nodes are skipped", true, true, true, nmNodes(nil), nmNodes(nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planNodeMarks(tt.rolling, tt.complete, tt.annotate, tt.newNodes, tt.oldNodes)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("planNodeMarks (-want +got):\n%s", diff)
			}
		})
	}
}

// nmFataler is what the helpers need of *testing.T and *rapid.T.
type nmFataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// nmDecode decodes a JSON document for comparison; nil for none.
func nmDecode(t nmFataler, doc []byte) any {
	t.Helper()
	if doc == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("decoding %s: %v", doc, err)
	}
	return v
}

func TestNodeMarkPatch(t *testing.T) {
	const (
		sdd    = `"` + v1alpha1.ScaleDownDisabledAnnotation + `"`
		byMCM  = `"` + v1alpha1.ScaleDownDisabledByMCMAnnotation + `"`
		ours   = `{"key":"` + v1alpha1.PreferNoScheduleTaintKey + `","value":"True","effect":"PreferNoSchedule"}`
		gpu    = `{"key":"dedicated","value":"gpu","effect":"NoSchedule"}`
		other  = `{"key":"zone","effect":"NoExecute"}`
		marked = `{"metadata":{"annotations":{` + sdd + `:"true",` + byMCM + `:"true"}}}`
	)
	tests := []struct {
		name string
		node *corev1.Node
		ch   nodeChange
		want string // JSON; "" for no patch
	}{
		{"no change", nmNode("n", nmForeign()), nodeChange{Node: "n"}, ""},
		{"no node", nil, nodeChange{Node: "n", Taint: 1, ScaleDown: 1}, ""},
		{
			"add the taint: full list after the foreign ones, guarded",
			nmNode("n", nmForeign(), nmTaint("zone", "", corev1.TaintEffectNoExecute)),
			nodeChange{Node: "n", Taint: 1},
			`{"metadata":{"resourceVersion":"7"},"spec":{"taints":[` + gpu + `,` + other + `,` + ours + `]}}`,
		},
		{
			"rewrite our key in its place, drop its duplicates",
			nmNode("n", nmTaint(v1alpha1.PreferNoScheduleTaintKey, "False", corev1.TaintEffectNoSchedule), nmForeign(),
				nmTaint(v1alpha1.PreferNoScheduleTaintKey, "True", corev1.TaintEffectPreferNoSchedule)),
			nodeChange{Node: "n", Taint: 1},
			`{"metadata":{"resourceVersion":"7"},"spec":{"taints":[` + ours + `,` + gpu + `]}}`,
		},
		{"add the taint where it is", nmNode("n", nmForeign(), nmTainted()), nodeChange{Node: "n", Taint: 1}, ""},
		{
			"remove the taint, foreign taints stay",
			nmNode("n", nmTainted(), nmForeign()),
			nodeChange{Node: "n", Taint: -1},
			`{"metadata":{"resourceVersion":"7"},"spec":{"taints":[` + gpu + `]}}`,
		},
		{
			"remove the only taint: the list is deleted",
			nmNode("n", nmTainted()),
			nodeChange{Node: "n", Taint: -1},
			`{"metadata":{"resourceVersion":"7"},"spec":{"taints":null}}`,
		},
		{"remove a taint that is not there", nmNode("n", nmForeign()), nodeChange{Node: "n", Taint: -1}, ""},
		{"add the annotations: no guard, no taints", nmNode("n", nmTainted()), nodeChange{Node: "n", ScaleDown: 1}, marked},
		{
			"add the annotations next to others",
			nmNode("n", nmAnnotate("team", "a"), nmAnnotate(v1alpha1.ScaleDownDisabledByMCMAnnotation, "true")),
			nodeChange{Node: "n", ScaleDown: 1},
			marked,
		},
		{"add where a person's annotation is", nmNode("n", nmPersons()), nodeChange{Node: "n", ScaleDown: 1}, ""},
		{"add where ours are", nmNode("n", nmOurs()), nodeChange{Node: "n", ScaleDown: 1}, ""},
		{
			"remove ours",
			nmNode("n", nmOurs(), nmAnnotate("team", "a")),
			nodeChange{Node: "n", ScaleDown: -1},
			`{"metadata":{"annotations":{` + sdd + `:null,` + byMCM + `:null}}}`,
		},
		{
			"remove the marker left alone",
			nmNode("n", nmAnnotate(v1alpha1.ScaleDownDisabledByMCMAnnotation, "true")),
			nodeChange{Node: "n", ScaleDown: -1},
			`{"metadata":{"annotations":{` + byMCM + `:null}}}`,
		},
		{"remove a person's", nmNode("n", nmPersons()), nodeChange{Node: "n", ScaleDown: -1}, ""},
		{
			"both at once",
			nmNode("n", nmOurs(), nmTainted()),
			nodeChange{Node: "n", Taint: -1, ScaleDown: -1},
			`{"metadata":{"resourceVersion":"7","annotations":{` + sdd + `:null,` + byMCM + `:null}},"spec":{"taints":null}}`,
		},
		{
			"a stale change is cut down to what the node still needs",
			nmNode("n", nmTainted()),
			nodeChange{Node: "n", Taint: 1, ScaleDown: 1},
			marked,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := nodeMarkPatch(tt.node, tt.ch)
			if err != nil {
				t.Fatalf("nodeMarkPatch: %v", err)
			}
			var want []byte
			if tt.want != "" {
				want = []byte(tt.want)
			}
			if diff := cmp.Diff(nmDecode(t, want), nmDecode(t, got)); diff != "" {
				t.Errorf("nodeMarkPatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeMarkPatchNeedsResourceVersion(t *testing.T) {
	n := nmNode("n")
	n.ResourceVersion = ""
	if _, err := nodeMarkPatch(n, nodeChange{Node: "n", Taint: 1}); !errors.Is(err, errNoResourceVersion) {
		t.Errorf("taint change without resourceVersion: error %v, want %v", err, errNoResourceVersion)
	}
	got, err := nodeMarkPatch(n, nodeChange{Node: "n", ScaleDown: 1})
	if err != nil || got == nil {
		t.Errorf("annotation change without resourceVersion = %s, %v; want a patch", got, err)
	}
}

// nmMerge applies a JSON merge patch (RFC 7386) to a decoded document.
func nmMerge(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	out, ok := target.(map[string]any)
	if !ok {
		out = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = nmMerge(out[k], v)
		}
	}
	return out
}

// nmApply applies a patch from nodeMarkPatch as the API server would,
// refusing one whose resourceVersion guard does not hold.
func nmApply(t nmFataler, n *corev1.Node, patch []byte) *corev1.Node {
	t.Helper()
	doc, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	p := nmDecode(t, patch)
	if rv, ok := p.(map[string]any)["metadata"].(map[string]any)["resourceVersion"]; ok && rv != n.ResourceVersion {
		t.Fatalf("patch %s guards resourceVersion %v, node has %s", patch, rv, n.ResourceVersion)
	}
	merged, err := json.Marshal(nmMerge(nmDecode(t, doc), p))
	if err != nil {
		t.Fatal(err)
	}
	var out corev1.Node
	if err := json.Unmarshal(merged, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// nmTaintPool are the taints drawn nodes carry: ours, our key with other
// values and effects, and foreign ones.
var nmTaintPool = []corev1.Taint{
	{Key: v1alpha1.PreferNoScheduleTaintKey, Value: "True", Effect: corev1.TaintEffectPreferNoSchedule},
	{Key: v1alpha1.PreferNoScheduleTaintKey, Value: "False", Effect: corev1.TaintEffectPreferNoSchedule},
	{Key: v1alpha1.PreferNoScheduleTaintKey, Value: "True", Effect: corev1.TaintEffectNoSchedule},
	{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
	{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute},
}

func nmGenNode(t *rapid.T, name string) *corev1.Node {
	n := nmNode(name)
	for i := range rapid.IntRange(0, 3).Draw(t, name+"Taints") {
		n.Spec.Taints = append(n.Spec.Taints, rapid.SampledFrom(nmTaintPool).Draw(t, fmt.Sprintf("%sTaint%d", name, i)))
	}
	for _, key := range []string{v1alpha1.ScaleDownDisabledAnnotation, v1alpha1.ScaleDownDisabledByMCMAnnotation} {
		if v := rapid.SampledFrom([]string{"", "true", "false"}).Draw(t, name+key); v != "" {
			nmAnnotate(key, v)(n)
		}
	}
	if rapid.Bool().Draw(t, name+"Other") {
		nmAnnotate("team", "a")(n)
	}
	return n
}

func nmForeignTaints(n *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, tn := range n.Spec.Taints {
		if tn.Key != v1alpha1.PreferNoScheduleTaintKey {
			out = append(out, tn)
		}
	}
	return out
}

func nmOurTaints(n *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, tn := range n.Spec.Taints {
		if tn.Key == v1alpha1.PreferNoScheduleTaintKey {
			out = append(out, tn)
		}
	}
	return out
}

func TestPlanNodeMarksProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rolling := rapid.Bool().Draw(t, "rolling")
		complete := rapid.Bool().Draw(t, "complete")
		annotate := rapid.Bool().Draw(t, "annotate")
		var newNodes, oldNodes []*corev1.Node
		before := map[string]*corev1.Node{}
		isNew, isOld := map[string]bool{}, map[string]bool{}
		for i := range rapid.IntRange(0, 5).Draw(t, "nodes") {
			n := nmGenNode(t, fmt.Sprintf("n%d", i))
			before[n.Name] = n
			switch rapid.IntRange(0, 2).Draw(t, n.Name+"Set") {
			case 0:
				newNodes, isNew[n.Name] = append(newNodes, n), true
			case 1:
				oldNodes, isOld[n.Name] = append(oldNodes, n), true
			default:
				newNodes, isNew[n.Name] = append(newNodes, n), true
				oldNodes, isOld[n.Name] = append(oldNodes, n), true
			}
		}

		changes := planNodeMarks(rolling, complete, annotate, newNodes, oldNodes)
		if !slices.IsSortedFunc(changes, func(a, b nodeChange) int { return strings.Compare(a.Node, b.Node) }) {
			t.Fatalf("changes are not sorted: %v", changes)
		}
		after := map[string]*corev1.Node{}
		for name, n := range before {
			after[name] = n
		}
		for i, ch := range changes {
			if i > 0 && changes[i-1].Node == ch.Node {
				t.Fatalf("node %s listed twice: %v", ch.Node, changes)
			}
			n := before[ch.Node]
			if n == nil || (ch.Taint == 0 && ch.ScaleDown == 0) {
				t.Fatalf("change %+v for an unknown node or without anything to do", ch)
			}
			patch, err := nodeMarkPatch(n, ch)
			if err != nil || patch == nil {
				t.Fatalf("nodeMarkPatch(%s, %+v) = %s, %v; want a patch", n.Name, ch, patch, err)
			}
			for _, part := range []nodeChange{{Node: ch.Node, Taint: ch.Taint}, {Node: ch.Node, ScaleDown: ch.ScaleDown}} {
				if p, _ := nodeMarkPatch(n, part); (p == nil) != (part.Taint == 0 && part.ScaleDown == 0) {
					t.Fatalf("change %+v has a part %+v that writes nothing or a zero part that writes %s", ch, part, p)
				}
			}
			after[ch.Node] = nmApply(t, n, patch)
		}

		var newAfter, oldAfter []*corev1.Node
		for _, n := range newNodes {
			newAfter = append(newAfter, after[n.Name])
		}
		for _, n := range oldNodes {
			oldAfter = append(oldAfter, after[n.Name])
		}
		if again := planNodeMarks(rolling, complete, annotate, newAfter, oldAfter); len(again) != 0 {
			t.Fatalf("planning again after applying gives %v", again)
		}

		for name, n := range after {
			b := before[name]
			if diff := cmp.Diff(nmForeignTaints(b), nmForeignTaints(n)); diff != "" {
				t.Fatalf("foreign taints of %s changed (-before +after):\n%s", name, diff)
			}
			if b.Annotations["team"] != n.Annotations["team"] {
				t.Fatalf("unrelated annotation of %s changed", name)
			}
			persons := b.Annotations[v1alpha1.ScaleDownDisabledAnnotation] == "true" &&
				b.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] != "true"
			if persons && (n.Annotations[v1alpha1.ScaleDownDisabledAnnotation] != "true" ||
				n.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] != b.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation]) {
				t.Fatalf("a person's scale-down-disabled on %s was touched: %v -> %v", name, b.Annotations, n.Annotations)
			}
			if rolling && isOld[name] {
				if diff := cmp.Diff([]corev1.Taint{rolloutTaint()}, nmOurTaints(n)); diff != "" {
					t.Fatalf("old node %s while rolling (-want +got):\n%s", name, diff)
				}
			}
			if complete && isNew[name] && !(rolling && isOld[name]) && len(nmOurTaints(n)) != 0 {
				t.Fatalf("new node %s keeps %v after completion", name, nmOurTaints(n))
			}
			if rolling && annotate && n.Annotations[v1alpha1.ScaleDownDisabledAnnotation] != "true" {
				t.Fatalf("node %s not protected while rolling: %v", name, n.Annotations)
			}
			if complete && !(rolling && annotate) && n.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] == "true" {
				t.Fatalf("node %s keeps the marker after completion: %v", name, n.Annotations)
			}
			if !rolling && !complete {
				if diff := cmp.Diff(b, n); diff != "" {
					t.Fatalf("node %s changed outside a rollout (-before +after):\n%s", name, diff)
				}
			}
		}
	})
}

// TestReconcileNodesMarksOnce: the node-marks queue's reconcile marks the
// nodes of a rolling deployment from the caches, old nodes tainted and
// every node's scale-down disabled, and a second pass on a node cache that
// does not show the marks yet writes nothing: it waits for the nodes'
// update events instead of marking them again (and, for a taint guarded
// by the stale resourceVersion, failing with a conflict).
func TestReconcileNodesMarksOnce(t *testing.T) {
	d := newDeployment(2)
	current := newSet("md-current", 1, 1)
	previous := newSet("md-previous", 2, 0, withClass("class-old"))
	objs := []runtime.Object{d}
	var nodes []runtime.Object
	withNode := func(m *v1alpha1.Machine, s *v1alpha1.MachineSet) *v1alpha1.Machine {
		m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(s, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))}
		m.Labels = map[string]string{"pool": "workers", v1alpha1.NodeLabelKey: "node-" + m.Name}
		m.Spec.ProviderID = nmVM("node-" + m.Name)
		nodes = append(nodes, nmNode("node-"+m.Name, nmBound(m)))
		return m
	}
	for _, s := range []*v1alpha1.MachineSet{current, previous} {
		s.OwnerReferences = []metav1.OwnerReference{controllerRef(d)}
		objs = append(objs, s)
	}
	objs = append(objs, withNode(newMachine("new-0"), current), withNode(newMachine("old-0"), previous), withNode(newMachine("old-1"), previous))
	client, core := fake.NewSimpleClientset(objs...), k8sfake.NewSimpleClientset(nodes...)
	// The fake API server keeps a node's resourceVersion as it was given:
	// this one applies the patches as the API server does, guard and new
	// resourceVersion included.
	var patches int
	core.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchAction)
		obj, err := core.Tracker().Get(pa.GetResource(), "", pa.GetName())
		if err != nil {
			return true, nil, err
		}
		n := obj.(*corev1.Node)
		var guard struct {
			Metadata struct{ ResourceVersion string } `json:"metadata"`
		}
		if err := json.Unmarshal(pa.GetPatch(), &guard); err != nil {
			return true, nil, err
		}
		if rv := guard.Metadata.ResourceVersion; rv != "" && rv != n.ResourceVersion {
			return true, nil, apierrors.NewConflict(pa.GetResource().GroupResource(), n.Name, fmt.Errorf("resourceVersion %s, not %s", n.ResourceVersion, rv))
		}
		out := nmApply(t, n, pa.GetPatch())
		rv, _ := strconv.Atoi(n.ResourceVersion)
		out.ResourceVersion = strconv.Itoa(rv + 1)
		patches++
		return true, out, core.Tracker().Update(pa.GetResource(), out, "")
	})
	mf, cf := externalversions.NewSharedInformerFactory(client, 0), informers.NewSharedInformerFactory(core, 0)
	ctrl, err := NewController(client, core, Informers{
		Deployments: mf.Machine().V1alpha1().MachineDeployments(), MachineSets: mf.Machine().V1alpha1().MachineSets(),
		Machines: mf.Machine().V1alpha1().Machines(), Nodes: cf.Core().V1().Nodes(),
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); mf.Shutdown() })
	nodesCtx, stopNodes := context.WithCancel(ctx)
	mf.Start(ctx.Done())
	cf.Start(nodesCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), ctrl.handlers.Synced()...) {
		t.Fatal("caches did not sync")
	}
	// From now on the node cache shows the nodes as they were.
	stopNodes()
	cf.Shutdown()

	for pass := range 2 {
		if _, err := ctrl.ReconcileNodes(ctx, "default/md"); err != nil {
			t.Fatalf("pass %d: %v", pass+1, err)
		}
		if patches != 3 {
			t.Errorf("after pass %d: %d node patches, want 3: one for each node, written once", pass+1, patches)
		}
	}
	got := map[string]string{}
	for _, name := range []string{"node-new-0", "node-old-0", "node-old-1"} {
		n, err := core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tainted := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == v1alpha1.PreferNoScheduleTaintKey })
		got[name] = fmt.Sprintf("tainted %v, scale-down-disabled %q", tainted, n.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation])
	}
	want := map[string]string{
		"node-new-0": `tainted false, scale-down-disabled "true"`,
		"node-old-0": `tainted true, scale-down-disabled "true"`,
		"node-old-1": `tainted true, scale-down-disabled "true"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node marks (-want +got):\n%s", diff)
	}
}
