package deployment

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// TestReplicasAboveTheCeiling: a deployment asking for 2147483647 machines
// runs at the ceiling, never above, says so in a condition and in one
// Warning event, and loses both once its replicas are within the ceiling.
func TestReplicasAboveTheCeiling(t *testing.T) {
	w := startFakeWorld(t, Options{MaxReplicas: 4}, testDeployment(math.MaxInt32))
	w.eventually(func() (bool, string) {
		d := w.deployment()
		c, ok := conditionOf(d.Status.Conditions, ConditionReplicasCapped)
		return ok && len(w.machines()) == 4 && d.Status.AvailableReplicas == 4,
			fmt.Sprintf("%d machines, condition %+v", len(w.machines()), c)
	})
	c, _ := conditionOf(w.deployment().Status.Conditions, ConditionReplicasCapped)
	want := "spec.replicas asks for 2147483647 machines, more than the ceiling of 4 per machine deployment; the deployment keeps 4"
	if c.Status != v1alpha1.ConditionTrue || c.Reason != ReasonTooManyReplicas || c.Message != want {
		t.Errorf("condition %+v, want True %s %q", c, ReasonTooManyReplicas, want)
	}
	for _, s := range w.sets() {
		if s.Spec.Replicas > 4 || s.Annotations[v1alpha1.DesiredReplicasAnnotation] != "4" {
			t.Errorf("set %s sized %d, desired %s; want at most 4, desired 4", s.Name, s.Spec.Replicas, s.Annotations[v1alpha1.DesiredReplicasAnnotation])
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(w.machines()); n != 4 {
		t.Errorf("%d machines, want the ceiling's 4", n)
	}
	if n := w.events.Count(ReasonTooManyReplicas); n != 1 {
		t.Errorf("%d %s events, want 1", n, ReasonTooManyReplicas)
	}

	w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.Replicas = 3 })
	w.eventually(w.settled(3))
	w.eventually(func() (bool, string) {
		c, ok := conditionOf(w.deployment().Status.Conditions, ConditionReplicasCapped)
		return !ok, fmt.Sprintf("condition left: %+v", c)
	})
}

func TestWithinCeiling(t *testing.T) {
	d := testDeployment(7)
	if got, msg := withinCeiling(d, 7); got != d || msg != "" {
		t.Errorf("at the ceiling: %p %q, want the deployment itself and no message", got, msg)
	}
	got, msg := withinCeiling(d, 5)
	if got.Spec.Replicas != 5 || d.Spec.Replicas != 7 || msg == "" {
		t.Errorf("above: replicas %d (original %d), message %q", got.Spec.Replicas, d.Spec.Replicas, msg)
	}
	now := time.Unix(100, 0)
	conds := withCapped(nil, msg, now)
	later := withCapped(conds, "another message", now.Add(time.Minute))
	if diff := cmp.Diff(conds[0].LastTransitionTime, later[0].LastTransitionTime); diff != "" || later[0].Message != "another message" {
		t.Errorf("a new message: %+v from %+v", later, conds)
	}
	if got := withCapped(later, "", now); len(got) != 0 {
		t.Errorf("no message left %+v", got)
	}
}
