package overshoot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/internal/replacement"
)

// ConditionRemediationAllowed is the MachineDeployment condition the
// controller writes when Options.MaxUnhealthy is set: False
// (reason ReasonTooManyUnhealthy) while more of the deployment's machines
// are unhealthy than MaxUnhealthy allows, so that no health timeout marks
// one of them Failed; True otherwise. The type is qualified: MCM has no
// such condition.
const ConditionRemediationAllowed v1alpha1.MachineDeploymentConditionType = "mcmkit.io/RemediationAllowed"

// Reasons of ConditionRemediationAllowed, and of the events on its changes.
const (
	ReasonTooManyUnhealthy   = "TooManyUnhealthy"
	ReasonWithinMaxUnhealthy = "WithinMaxUnhealthy"
	ReasonRemediationHeld    = "RemediationShortCircuited"
	ReasonRemediationResumed = "RemediationResumed"
)

// remediationCondition returns the deployment's conditions with
// ConditionRemediationAllowed for r; the transition time moves only when
// the status does.
func remediationCondition(conds []v1alpha1.MachineDeploymentCondition, deployment string, r replacement.Remediation, now time.Time) []v1alpha1.MachineDeploymentCondition {
	want := v1alpha1.MachineDeploymentCondition{Type: ConditionRemediationAllowed, Status: v1alpha1.ConditionTrue,
		Reason: ReasonWithinMaxUnhealthy, Message: r.Message(replacement.DeploymentNoun(deployment)),
		LastUpdateTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
	if r.Blocked() {
		want.Status, want.Reason = v1alpha1.ConditionFalse, ReasonTooManyUnhealthy
	}
	out := slices.Clone(conds)
	i := slices.IndexFunc(out, func(c v1alpha1.MachineDeploymentCondition) bool { return c.Type == ConditionRemediationAllowed })
	if i < 0 {
		return append(out, want)
	}
	old := out[i]
	if old.Status == want.Status && old.Reason == want.Reason && old.Message == want.Message {
		return out // unchanged: nothing to write
	}
	if old.Status == want.Status {
		want.LastTransitionTime = old.LastTransitionTime
	}
	out[i] = want
	return out
}

// checkRemediation writes ConditionRemediationAllowed on every deployment
// of the namespace, from the sets and machines the overshoot check read,
// and an event when a deployment's short-circuit starts or ends. A
// deployment's machines are those of the sets it controls, as the budget
// counts them (replacement.GroupByDeployment): a machine labelled with its
// name counts for nothing.
func (c *Controller) checkRemediation(ctx context.Context, namespace string, sets []*v1alpha1.MachineSet,
	deployments []*v1alpha1.MachineDeployment, machines []*v1alpha1.Machine) error {
	if c.opts.MaxUnhealthy == nil {
		return nil
	}
	byDeployment := replacement.GroupByDeployment(sets, machines)
	var errs []error
	now := c.opts.Clock.Now()
	for _, d := range deployments {
		r := replacement.Assess(byDeployment[d.UID], *c.opts.MaxUnhealthy, now)
		if slices.Equal(remediationCondition(d.Status.Conditions, d.Name, r, now), d.Status.Conditions) {
			continue
		}
		// The status before is the fresh read's: the cache may not show
		// the last write yet, and the event must be told once.
		before, wrote, err := c.writeRemediation(ctx, namespace, d.Name, r)
		switch {
		case apierrors.IsNotFound(err):
			continue // gone since
		case err != nil:
			errs = append(errs, err)
			continue
		case !wrote:
			continue
		}
		switch {
		case c.opts.Recorder == nil:
		case r.Blocked() && before != v1alpha1.ConditionFalse:
			c.opts.Recorder.Eventf(d, corev1.EventTypeWarning, ReasonRemediationHeld, "%s", r.Message(replacement.DeploymentNoun(d.Name)))
		case !r.Blocked() && before == v1alpha1.ConditionFalse:
			c.opts.Recorder.Eventf(d, corev1.EventTypeNormal, ReasonRemediationResumed, "%s", r.Message(replacement.DeploymentNoun(d.Name)))
		}
	}
	return errors.Join(errs...)
}

func conditionStatus(conds []v1alpha1.MachineDeploymentCondition) v1alpha1.ConditionStatus {
	for _, c := range conds {
		if c.Type == ConditionRemediationAllowed {
			return c.Status
		}
	}
	return ""
}

// writeRemediation writes the condition against a fresh read, again on a
// conflict: the conditions are a list the patch replaces whole, and the
// deployment controller writes its own at the same time. It returns the
// condition's status before the write, and whether it wrote.
func (c *Controller) writeRemediation(ctx context.Context, namespace, name string, r replacement.Remediation) (v1alpha1.ConditionStatus, bool, error) {
	client := c.client.MachineV1alpha1().MachineDeployments(namespace)
	var before v1alpha1.ConditionStatus
	var wrote bool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		before, wrote = conditionStatus(d.Status.Conditions), false
		want := remediationCondition(d.Status.Conditions, name, r, c.opts.Clock.Now())
		data, err := patch.Diff(deploymentConditionFields, d.Status.Conditions, want, d.ResourceVersion)
		if err != nil || data == nil {
			return err
		}
		_, err = patch.Send(ctx, client.Patch, name, data, c.opts.FieldManager, "status")
		wrote = err == nil
		return err
	})
	if err != nil {
		return before, false, fmt.Errorf("writing %s of machine deployment %s: %w", ConditionRemediationAllowed, name, err)
	}
	return before, wrote, nil
}
