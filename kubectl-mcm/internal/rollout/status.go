package rollout

import (
	"fmt"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/deployment"
)

// ErrDeadlineExceeded and ErrInPlaceUpdateFailed are the rollouts that
// will not finish by themselves: rollout status ends on them, non-zero.
var (
	ErrDeadlineExceeded    = fmt.Errorf("exceeded its progress deadline")
	ErrInPlaceUpdateFailed = fmt.Errorf("an in-place update failed")
)

// Status tells, from a MachineDeployment as stored, what its rollout is
// at, in kubectl rollout status's words: a line for people, whether the
// rollout is complete, and an error (wrapping ErrDeadlineExceeded or
// ErrInPlaceUpdateFailed) when it stopped for good. A status computed for
// an older generation says nothing yet: the controller has not seen the
// latest spec.
func Status(d *v1alpha1.MachineDeployment) (message string, done bool, err error) {
	if d.Generation > d.Status.ObservedGeneration {
		return "Waiting for machinedeployment spec update to be observed...\n", false, nil
	}
	if c := progressing(d); c != nil && c.Status == v1alpha1.ConditionFalse {
		switch c.Reason {
		case v1alpha1.ProgressDeadlineExceededReason:
			return "", false, fmt.Errorf("machinedeployment %q %w", d.Name, ErrDeadlineExceeded)
		case deployment.ReasonInPlaceUpdateFailed:
			return "", false, fmt.Errorf("machinedeployment %q: %w: %s", d.Name, ErrInPlaceUpdateFailed, c.Message)
		}
	}
	st := d.Status
	switch {
	case st.UpdatedReplicas < d.Spec.Replicas:
		return fmt.Sprintf("Waiting for machinedeployment %q rollout to finish: %d out of %d new replicas have been updated...\n",
			d.Name, st.UpdatedReplicas, d.Spec.Replicas), false, nil
	case st.Replicas > st.UpdatedReplicas:
		return fmt.Sprintf("Waiting for machinedeployment %q rollout to finish: %d old replicas are pending termination...\n",
			d.Name, st.Replicas-st.UpdatedReplicas), false, nil
	case st.AvailableReplicas < st.UpdatedReplicas:
		return fmt.Sprintf("Waiting for machinedeployment %q rollout to finish: %d of %d updated replicas are available...\n",
			d.Name, st.AvailableReplicas, st.UpdatedReplicas), false, nil
	}
	return fmt.Sprintf("machinedeployment %q successfully rolled out\n", d.Name), true, nil
}

func progressing(d *v1alpha1.MachineDeployment) *v1alpha1.MachineDeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == v1alpha1.MachineDeploymentProgressing {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}
