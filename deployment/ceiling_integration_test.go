package deployment_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/deployment"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// TestIntegrationDeploymentReplicaCeiling is the repro of a deployment
// with replicas: 2147483647, which created machines at the client's rate
// with nothing to say why: it runs the ceiling's machines, Running, never
// more at any moment, and its condition says so until its replicas are
// within the ceiling.
func TestIntegrationDeploymentReplicaCeiling(t *testing.T) {
	t.Parallel()
	const ceiling = 4
	w := &rolloutWorld{t: t, Stack: simstack.Start(t, simstack.Options{Deployments: true,
		Deployment: deployment.Options{MaxReplicas: ceiling}})}
	most := 0
	mw := w.watchMachines(func(ms map[string]v1alpha1.Machine) {
		live := 0
		for _, m := range ms {
			if m.DeletionTimestamp == nil {
				live++
			}
		}
		most = max(most, live)
	})
	w.createDeployment("huge", math.MaxInt32, v1alpha1.MachineDeploymentStrategy{})
	w.complete("huge", ceiling, w.Class)
	capped := func(d *v1alpha1.MachineDeployment) *v1alpha1.MachineDeploymentCondition {
		for i, c := range d.Status.Conditions {
			if c.Type == deployment.ConditionReplicasCapped {
				return &d.Status.Conditions[i]
			}
		}
		return nil
	}
	if c := capped(w.get("huge")); c == nil || c.Status != v1alpha1.ConditionTrue || c.Reason != deployment.ReasonTooManyReplicas {
		t.Errorf("condition %+v, want True %s", c, deployment.ReasonTooManyReplicas)
	}
	sets, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets.Items {
		if s.Spec.Replicas > ceiling {
			t.Errorf("set %s sized %d, above the ceiling %d", s.Name, s.Spec.Replicas, ceiling)
		}
	}

	w.patch("huge", `{"spec":{"replicas":3}}`)
	w.complete("huge", 3, w.Class)
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		c := capped(w.get("huge"))
		return c == nil, fmt.Sprintf("condition left: %+v", c)
	})
	mw.finish(t)
	if most > ceiling {
		t.Errorf("%d machines at once, above the ceiling %d", most, ceiling)
	}
}
