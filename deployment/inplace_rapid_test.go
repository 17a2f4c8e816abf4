package deployment

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

var ipWorldActions = []string{"round", "round", "round", "round", "fail", "clear", "template", "scale", "select"}

// TestInPlaceWorld runs in-place rollouts of random deployments through
// random events (rounds of all actors, agent failures, a person clearing
// one, template changes, scaling, a person's selection in Manual) and
// checks, every round (ipWorld.round): no machine moved before its update
// succeeded, never two owners, at most maxUnavailable (+ surge) machines
// unavailable or in flight in Auto, no selection while an update of the
// current rollout has failed; after every event: no VM created or deleted
// by a rollout without surge; at the end, once failures are cleared (and
// in Manual every node selected), the rollout converges.
func TestInPlaceWorld(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		orchestration := rapid.SampledFrom([]v1alpha1.OrchestrationType{v1alpha1.OrchestrationTypeAuto, v1alpha1.OrchestrationTypeManual}).Draw(t, "orchestration")
		d := inPlaceDeployment(int32(rapid.IntRange(1, 8).Draw(t, "replicas")), orchestration,
			rapid.SampledFrom([]string{"0", "1", "25%"}).Draw(t, "maxSurge"), rapid.SampledFrom([]string{"0", "1", "2", "50%"}).Draw(t, "maxUnavailable"))
		w := newIPWorld(d, t.Fatalf)
		if rapid.Bool().Draw(t, "lagging") {
			w.lagging = w.machines[0].Name
		}
		surge, _, _ := inPlaceBounds(w.d)
		w.d.Spec.Template.Spec.Class.Name = "class-b"
		for range rapid.IntRange(0, 80).Draw(t, "events") {
			w.act(t, rapid.SampledFrom(ipWorldActions).Draw(t, "action"))
			if !w.scaled && surge == 0 && (w.created != 0 || w.deleted != 0) {
				t.Fatalf("a rollout without surge created %d and deleted %d VMs\n%s", w.created, w.deleted, w)
			}
		}
		w.failing = map[string]string{}
		for range 200 {
			for _, n := range w.nodes {
				if n.Labels[v1alpha1.UpdateResultLabel] == v1alpha1.UpdateResultFailed {
					w.clearFailure(n)
				}
			}
			if manual(w.d) {
				w.selectByHand(len(w.nodes))
			}
			w.round()
			if ok, _ := w.converged(); ok {
				return
			}
		}
		_, why := w.converged()
		t.Fatalf("no convergence: %s\n%s", why, w)
	})
}

func (w *ipWorld) act(t *rapid.T, action string) {
	names := make([]string, 0, len(w.nodes))
	for name := range w.nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	switch action {
	case "round":
		w.round()
	case "fail":
		if len(names) > 0 {
			w.failing[rapid.SampledFrom(names).Draw(t, "failNode")] = "disk full"
		}
	case "clear":
		for _, name := range names {
			if n := w.nodes[name]; n.Labels[v1alpha1.UpdateResultLabel] == v1alpha1.UpdateResultFailed {
				w.clearFailure(n)
				return
			}
		}
	case "template":
		// A new template each time: a rollback while machines are in
		// flight can leave a node on the abandoned template (doc.go).
		w.templates++
		w.d.Spec.Template.Spec.Class.Name = fmt.Sprintf("class-%d", w.templates)
	case "scale":
		w.d.Spec.Replicas = int32(rapid.IntRange(1, 8).Draw(t, "newReplicas"))
		w.scaled = true
	case "select":
		if manual(w.d) {
			w.selectByHand(rapid.IntRange(1, 3).Draw(t, "selectCount"))
		}
	}
}
