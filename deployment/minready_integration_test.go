package deployment_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/deployment"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// TestIntegrationMinReadySecondsAsInMCM gives a deployment of 4 machines
// minReadySeconds 500, as Gardener's worker actuator does, and rolls it with
// maxSurge 2 and maxUnavailable 1: as in MCM, machines count as available
// once Running, so it comes up and rolls out in far less than 500 s, and
// its sets report every Running machine available. Opting in with
// mcmkit.io/min-ready-seconds: apply then reaches both sets, the old one
// too, and the machines, Running for less than 500 s, no longer count as
// available, on the sets nor on the deployment; dropping the annotation
// makes them available again.
func TestIntegrationMinReadySecondsAsInMCM(t *testing.T) {
	t.Parallel()
	w := startRolloutWorld(t)
	w.addClass("sim2", func(*sim.ProviderSpec) {})
	w.createDeployment("gardener", 4, rolling(2, 1))
	w.patch("gardener", `{"spec":{"minReadySeconds":500}}`)
	start := time.Now()
	w.complete("gardener", 4, w.Class)
	w.patch("gardener", `{"spec":{"template":{"spec":{"class":{"name":"sim2"}}}}}`)
	w.complete("gardener", 4, "sim2")
	if took := time.Since(start); took >= 500*time.Second {
		t.Fatalf("coming up and rolling out took %v, want far less than minReadySeconds", took)
	}
	w.setsAvailable(t, "", 4)

	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		v1alpha1.MinReadySecondsAnnotation: v1alpha1.MinReadySecondsApply}}})
	w.patch("gardener", string(patch))
	w.setsAvailable(t, v1alpha1.MinReadySecondsApply, 0)
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		st := w.get("gardener").Status
		return st.AvailableReplicas == 0 && st.Replicas == 4, fmt.Sprintf("status replicas %d, available %d", st.Replicas, st.AvailableReplicas)
	})

	w.patch("gardener", fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, v1alpha1.MinReadySecondsAnnotation))
	w.setsAvailable(t, "", 4)
	w.complete("gardener", 4, "sim2")

	// An unknown value is MCM's behaviour, and the deployment says so.
	w.patch("gardener", fmt.Sprintf(`{"metadata":{"annotations":{%q:"yes"}}}`, v1alpha1.MinReadySecondsAnnotation))
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		d := w.get("gardener")
		for _, c := range d.Status.Conditions {
			if c.Type == deployment.ConditionInvalidAnnotation {
				return c.Status == v1alpha1.ConditionTrue && d.Status.AvailableReplicas == 4, fmt.Sprintf("condition %+v, available %d", c, d.Status.AvailableReplicas)
			}
		}
		return false, fmt.Sprintf("no %s condition in %+v", deployment.ConditionInvalidAnnotation, d.Status.Conditions)
	})
}

// setsAvailable waits until the deployment's two sets carry policy as their
// min-ready-seconds annotation ("" for none) and the new set reports
// available machines in its status.
func (w *rolloutWorld) setsAvailable(t *testing.T, policy string, available int32) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		list, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ok := len(list.Items) == 2
		var seen []string
		for _, s := range list.Items {
			got := s.Annotations[v1alpha1.MinReadySecondsAnnotation]
			ok = ok && got == policy
			if s.Spec.Replicas > 0 {
				ok = ok && s.Status.AvailableReplicas == available && s.Status.ObservedGeneration == s.Generation
			}
			seen = append(seen, fmt.Sprintf("%s: policy %q, replicas %d, available %d", s.Name, got, s.Spec.Replicas, s.Status.AvailableReplicas))
		}
		return ok, fmt.Sprintf("sets %v, want 2 with policy %q, the active one with %d available", seen, policy, available)
	})
}
