package machine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// TestBindingOf pins what a machine's node label and provider ID let the
// controller do: only a binding the driver vouched for and the node
// confirms reaches the node; everything else is verified, ignored or held.
func TestBindingOf(t *testing.T) {
	machine := func(pid, node string) *v1alpha1.Machine {
		m := baseMachine()
		m.Spec.ProviderID = pid
		if node != "" {
			m.Labels = map[string]string{v1alpha1.NodeLabelKey: node}
		}
		return m
	}
	nodeOf := func(pid, owner string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{v1alpha1.MachineNameLabelKey: "victim"}},
			Spec: corev1.NodeSpec{ProviderID: pid}}
		if owner != "" {
			n.Annotations = map[string]string{v1alpha1.MachineUIDAnnotation: owner}
		}
		return n
	}
	mine := vouch{ProviderID: "p1"}
	for _, tc := range []struct {
		name     string
		m        *v1alpha1.Machine
		node     *corev1.Node
		v        *vouch
		rivals   []string
		want     bindingKind
		ownsNode bool
		ownsVM   bool
		wantsWhy bool
	}{
		{name: "no claims", m: machine("", ""), want: bindNone},
		{name: "bound", m: machine("p1", "n1"), node: nodeOf("p1", "uid-m1"), want: bindBound, ownsNode: true, ownsVM: true},
		{name: "bound, whatever others claim", m: machine("p1", "n1"), node: nodeOf("p1", "uid-m1"), rivals: []string{"ns/forged"},
			want: bindBound, ownsNode: true, ownsVM: true},
		{name: "vouched, node not there yet", m: machine("p1", "n1"), v: &mine, want: bindVouched, ownsVM: true},
		{name: "vouched, node confirms", m: machine("p1", "n1"), node: nodeOf("p1", ""), v: &mine, want: bindVouched, ownsNode: true, ownsVM: true},
		{name: "vouched, node shows no provider ID yet", m: machine("p1", "n1"), node: nodeOf("", ""), v: &mine, want: bindVouched, ownsVM: true},
		{name: "nobody vouched", m: machine("p1", "n1"), node: nodeOf("p1", ""), want: bindUnverified},
		{name: "nobody vouched, no node", m: machine("p1", ""), want: bindUnverified},
		{name: "node label only, node bound elsewhere", m: machine("", "n1"), node: nodeOf("p9", "uid-victim"), want: bindForeign, wantsWhy: true},
		{name: "node label only, node of another VM", m: machine("", "n1"), node: nodeOf("p9", ""), want: bindForeign, wantsWhy: true},
		{name: "copied provider ID and node", m: machine("p9", "n1"), node: nodeOf("p9", "uid-victim"), want: bindForeign, wantsWhy: true},
		{name: "provider ID of another VM", m: machine("p9", ""), v: &mine, want: bindForeign, wantsWhy: true},
		{name: "the driver knows no VM", m: machine("p9", "n1"), v: &vouch{None: true}, want: bindForeign, wantsWhy: true},
		{name: "contested", m: machine("p1", "n1"), node: nodeOf("p1", ""), v: &mine, rivals: []string{"ns/other"}, want: bindContested, wantsWhy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v vouch
			if tc.v != nil {
				v = *tc.v
			}
			got := bindingOf(tc.m, tc.node, v, tc.v != nil, tc.rivals)
			if diff := cmp.Diff([]any{tc.want, tc.ownsNode, tc.ownsVM, tc.wantsWhy},
				[]any{got.Kind, got.ownsNode(), got.ownsVM(), got.Why != ""}); diff != "" {
				t.Errorf("kind, owns node, owns VM, explained (-want +got):\n%s\nwhy: %s", diff, got.Why)
			}
		})
	}
}

// TestPlanMachineClaims: what a sync plans for each verdict.
func TestPlanMachineClaims(t *testing.T) {
	o := testOptions(t)
	running := func() *v1alpha1.Machine { return withPhase(baseMachine(), v1alpha1.MachineRunning, "p1") }
	ready := cond(corev1.NodeReady, corev1.ConditionTrue)
	foreignNode := node(ready)
	foreignNode.Annotations[v1alpha1.MachineUIDAnnotation] = "uid-victim"
	unbound := node(ready)
	delete(unbound.Annotations, v1alpha1.MachineUIDAnnotation)
	for _, tc := range []struct {
		name      string
		obs       func() observation
		want      planKind
		wantClaim string
		wantSync  bool
	}{
		{"bound node is synced", func() observation { o := obsFor(running()); o.Node = node(ready); return o }, planUpdate, "", false},
		{"vouched node gets bound", func() observation { o := obsFor(running()); o.Node = unbound; return o }, planUpdate, "", true},
		{"unverified claim asks the driver", func() observation {
			o := obsFor(running())
			o.Node, o.Vouched = unbound, false
			return o
		}, planVerify, "", false},
		{"foreign node: the machine gets its own VM", func() observation {
			o := obsFor(running())
			o.Node, o.Vouched = foreignNode, false
			return o
		}, planCreate, ReasonForeignClaim, false},
		{"contested: nothing is done", func() observation {
			o := obsFor(running())
			o.Node, o.Rivals = unbound, []string{"ns/other"}
			return o
		}, planUpdate, ReasonContestedClaim, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planMachine(tc.obs(), o)
			var claim string
			if p.Claim != nil {
				claim = p.Claim.Reason
			}
			if diff := cmp.Diff([]any{tc.want, tc.wantClaim}, []any{p.Kind, claim}); diff != "" {
				t.Errorf("plan, claim report (-want +got):\n%s", diff)
			}
			if tc.wantSync && (p.Node == nil || p.Node.Annotations[v1alpha1.MachineUIDAnnotation] != "uid-m1") {
				t.Errorf("node sync %v does not bind the node", p.Node)
			}
			if tc.want == planUpdate && tc.wantClaim != "" && (p.Node != nil || p.Machine.Status.CurrentStatus.Phase != v1alpha1.MachineRunning) {
				t.Errorf("a contested machine acted: node %v, phase %s", p.Node, p.Machine.Status.CurrentStatus.Phase)
			}
		})
	}
}
