package cli_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/simcluster"
)

// TestIntegrationDrainAndWhy: drain --dry-run shows each pod's decision
// and leaves the node alone; drain empties it of all but its DaemonSet
// pod; why explains a running machine.
func TestIntegrationDrainAndWhy(t *testing.T) {
	s := simstack.Start(t, simstack.Options{Deployments: true})
	p := newPlugin(t, s)
	w := s.Cluster.MixedNode(t, s.NS, "mix")
	ctx := context.Background()

	plan := p.ok(t, "drain", w.Node, "--dry-run")
	for _, want := range []string{"Node " + w.Node, w.DaemonSet + "-", "Skip", "Evict", w.Bare} {
		if !strings.Contains(plan, want) {
			t.Errorf("drain --dry-run does not show %q:\n%s", want, plan)
		}
	}
	if n, err := s.Core.CoreV1().Nodes().Get(ctx, w.Node, metav1.GetOptions{}); err != nil || n.Spec.Unschedulable {
		t.Fatalf("drain --dry-run cordoned the node (err %v)", err)
	}
	if err := setSchedulable(ctx, s, w.Spare); err != nil {
		t.Fatal(err)
	}
	out := p.ok(t, "drain", w.Node, "--timeout", "2m")
	if !strings.Contains(out, "node/"+w.Node+" drained (") || strings.Contains(out, "drained (0 evicted") || !strings.Contains(out, "EvictionStarted") {
		t.Errorf("drain printed:\n%s", out)
	}
	if left, err := simcluster.PodsOnNode(ctx, s.Core, w.Node); err != nil || left != 1 {
		t.Errorf("pods left on the drained node: %d (err %v), want its DaemonSet pod only", left, err)
	}

	create(t, s, rollingDeployment(s.NS, "web", s.Class, 1))
	p.ok(t, "rollout", "status", "web", "--timeout", settle.String())
	name := machineNames(t, s)[0]
	why := p.ok(t, "why", name)
	for _, want := range []string{"Machine " + s.NS + "/" + name, "Phase:", "Running for", "Node:", name + " Ready", "Provider ID:"} {
		if !strings.Contains(why, want) {
			t.Errorf("why does not say %q:\n%s", want, why)
		}
	}
	p.fails(t, "not found", "why", "nope")
}

func setSchedulable(ctx context.Context, s *simstack.Stack, node string) error {
	_, err := s.Core.CoreV1().Nodes().Patch(ctx, node, "application/merge-patch+json", []byte(`{"spec":{"unschedulable":false}}`), metav1.PatchOptions{})
	return err
}
