package replacement

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// Remediation is how unhealthy a deployment's machines are, against
// MaxUnhealthy.
type Remediation struct {
	Unhealthy, Total, Limit int
}

// Blocked: more machines are unhealthy than the limit. Then the cause is
// likelier outside them (a zone, the network, the API server) than in
// each, and replacing them would only add churn to the outage.
func (r Remediation) Blocked() bool { return r.Unhealthy > r.Limit }

// Message says what the short-circuit holds back and what it does not,
// for the condition, the events and the machines it holds. It gates the
// health timeout only (Unknown to Failed, through the budget): a machine
// whose node does not join within the creation timeout is marked Failed
// all the same, as in MCM, and a Failed machine is replaced by its set
// whatever caused it. Saying "none is replaced" would claim a
// short-circuit that does not happen. of names the group, as
// DeploymentNoun does.
func (r Remediation) Message(of string) string {
	if r.Blocked() {
		return fmt.Sprintf("%d of %d machines of %s are unhealthy, more than the %d allowed: an outage of a zone or the network is likelier than broken machines, so no health timeout marks a machine Failed until at most %d are (a machine that does not join within its creation timeout is still marked Failed, as in MCM, and Failed machines are replaced)",
			r.Unhealthy, r.Total, of, r.Limit, r.Limit)
	}
	return fmt.Sprintf("%d of %d machines of %s are unhealthy, at most %d may be for health timeouts to mark machines Failed",
		r.Unhealthy, r.Total, of, r.Limit)
}

// DeploymentNoun names a deployment in messages, as the budget names its
// groups: deployment "name".
func DeploymentNoun(name string) string {
	return replacementGroup{Kind: machineDeploymentGVK.Kind, Name: name}.String()
}

// Assess counts the unhealthy machines among a deployment's: Unknown
// (failing health checks) or Failed, and not being deleted (those are on
// their way out already), and whose preservation does not hold at now
// (machinestate.Preserved: a machine kept for diagnosis is no sign of an
// outage). maxUnhealthy is a number or a percentage of the machines,
// rounded down; its owner validated it (ValidMaxUnhealthy).
func Assess(machines []*v1alpha1.Machine, maxUnhealthy intstr.IntOrString, now time.Time) Remediation {
	r := Remediation{Total: len(machines)}
	for _, m := range machines {
		phase := m.Status.CurrentStatus.Phase
		if m.DeletionTimestamp == nil && (phase == v1alpha1.MachineUnknown || phase == v1alpha1.MachineFailed) && !machinestate.Preserved(m, now) {
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

// ValidMaxUnhealthy checks a MaxUnhealthy option; nil is valid (off).
func ValidMaxUnhealthy(v *intstr.IntOrString) error {
	if v == nil {
		return nil
	}
	if _, err := scaledIntOrPercent(*v, 100); err != nil {
		return fmt.Errorf("MaxUnhealthy: %w", err)
	}
	return nil
}
