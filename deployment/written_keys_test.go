package deployment

import (
	"strings"
	"testing"
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// TestControllerWrittenKeysAreRefused: a deployment stored (past
// admission) whose selector and template use a label key the controllers
// write is invalid: it says so once with a Warning event and creates no
// set, so no set of it can lose its machines to the machine controller's
// node label, or its sets to the deployment's own hash.
func TestControllerWrittenKeysAreRefused(t *testing.T) {
	for _, key := range []string{v1alpha1.NodeLabelKey, v1alpha1.MachineTemplateHashLabelKey} {
		t.Run(key, func(t *testing.T) {
			d := testDeployment(2)
			d.Spec.Selector.MatchLabels[key] = "x"
			d.Spec.Template.Labels[key] = "x"
			w := startFakeWorld(t, Options{}, d)
			w.eventually(func() (bool, string) {
				c, ok := conditionOf(w.deployment().Status.Conditions, v1alpha1.MachineDeploymentReplicaFailure)
				return ok && strings.Contains(c.Message, "must not use the label keys"), "no ReplicaFailure condition about the label keys: " + c.Message
			})
			time.Sleep(200 * time.Millisecond)
			if n := w.events.Count(ReasonInvalid); n != 1 {
				t.Errorf("%d %s events, want 1", n, ReasonInvalid)
			}
			if n := len(w.sets()); n != 0 {
				t.Errorf("invalid deployment created %d sets", n)
			}
		})
	}
}
