package safety

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/patch"
)

// ConditionRemediationAllowed is the MachineDeployment condition the
// remediation short-circuit writes when Options.MaxUnhealthy is set: False
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

// remediation is how unhealthy a deployment's machines are, against
// MaxUnhealthy.
type remediation struct {
	Unhealthy, Total, Limit int
}

// Blocked: more machines are unhealthy than the limit. Then the cause is
// likelier outside them (a zone, the network, the API server) than in
// each, and replacing them would only add churn to the outage.
func (r remediation) Blocked() bool { return r.Unhealthy > r.Limit }

// message says what the short-circuit holds back and what it does not,
// for the condition, the events and the machines it holds. It gates the
// health timeout only (Unknown to Failed, through the ReplacementGate):
// a machine whose node does not join within the creation timeout is
// marked Failed all the same, as in MCM, and a Failed machine is replaced
// by its set whatever caused it. Saying "none is replaced" would claim a
// short-circuit that does not happen. of names the group, as
// replacementGroup.String does.
func (r remediation) message(of string) string {
	if r.Blocked() {
		return fmt.Sprintf("%d of %d machines of %s are unhealthy, more than the %d allowed: an outage of a zone or the network is likelier than broken machines, so no health timeout marks a machine Failed until at most %d are (a machine that does not join within its creation timeout is still marked Failed, as in MCM, and Failed machines are replaced)",
			r.Unhealthy, r.Total, of, r.Limit, r.Limit)
	}
	return fmt.Sprintf("%d of %d machines of %s are unhealthy, at most %d may be for health timeouts to mark machines Failed",
		r.Unhealthy, r.Total, of, r.Limit)
}

// deploymentNoun names a deployment in messages, as replacementGroup.String.
func deploymentNoun(name string) string {
	return replacementGroup{Kind: machineDeploymentGVK.Kind, Name: name}.String()
}

// assessRemediation counts the unhealthy machines among a deployment's:
// Unknown (failing health checks) or Failed, and not being deleted
// (those are on their way out already). maxUnhealthy is a number or a
// percentage of the machines, rounded down.
func assessRemediation(machines []*v1alpha1.Machine, maxUnhealthy intstr.IntOrString) remediation {
	r := remediation{Total: len(machines)}
	for _, m := range machines {
		phase := m.Status.CurrentStatus.Phase
		if m.DeletionTimestamp == nil && (phase == v1alpha1.MachineUnknown || phase == v1alpha1.MachineFailed) {
			r.Unhealthy++
		}
	}
	r.Limit, _ = scaledIntOrPercent(maxUnhealthy, r.Total) // validated by its owner
	return r
}

// ParseMaxUnhealthy reads a MaxUnhealthy option written as a flag value:
// empty is nil (no short-circuit), else a non-negative number or a
// percentage such as 40%.
func ParseMaxUnhealthy(s string) (*intstr.IntOrString, error) {
	if s == "" {
		return nil, nil
	}
	v := intstr.Parse(s)
	if _, err := scaledIntOrPercent(v, 100); err != nil {
		return nil, err
	}
	return &v, nil
}

// validMaxUnhealthy checks a MaxUnhealthy option.
func validMaxUnhealthy(v *intstr.IntOrString) error {
	if v == nil {
		return nil
	}
	if _, err := scaledIntOrPercent(*v, 100); err != nil {
		return fmt.Errorf("MaxUnhealthy: %w", err)
	}
	return nil
}

// remediationCondition returns the deployment's conditions with
// ConditionRemediationAllowed for r; the transition time moves only when
// the status does.
func remediationCondition(conds []v1alpha1.MachineDeploymentCondition, deployment string, r remediation, now time.Time) []v1alpha1.MachineDeploymentCondition {
	want := v1alpha1.MachineDeploymentCondition{Type: ConditionRemediationAllowed, Status: v1alpha1.ConditionTrue,
		Reason: ReasonWithinMaxUnhealthy, Message: r.message(deploymentNoun(deployment)),
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
// of the namespace, from the machines the overshoot check listed, and an
// event when a deployment's short-circuit starts or ends. A deployment's
// machines are those of the sets it controls, as the budget counts them
// (groupByDeployment): a machine labelled with its name counts for
// nothing.
func (c *Controller) checkRemediation(ctx context.Context, namespace string, deployments []*v1alpha1.MachineDeployment, machines []*v1alpha1.Machine) error {
	if c.opts.MaxUnhealthy == nil {
		return nil
	}
	sets, err := c.sets.MachineSets(namespace).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing machine sets: %w", err)
	}
	byDeployment := groupByDeployment(sets, machines)
	var errs []error
	for _, d := range deployments {
		r := assessRemediation(byDeployment[d.UID], *c.opts.MaxUnhealthy)
		if slices.Equal(remediationCondition(d.Status.Conditions, d.Name, r, c.opts.Clock.Now()), d.Status.Conditions) {
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
			c.opts.Recorder.Eventf(d, corev1.EventTypeWarning, ReasonRemediationHeld, "%s", r.message(deploymentNoun(d.Name)))
		case !r.Blocked() && before == v1alpha1.ConditionFalse:
			c.opts.Recorder.Eventf(d, corev1.EventTypeNormal, ReasonRemediationResumed, "%s", r.message(deploymentNoun(d.Name)))
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
func (c *Controller) writeRemediation(ctx context.Context, namespace, name string, r remediation) (v1alpha1.ConditionStatus, bool, error) {
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
