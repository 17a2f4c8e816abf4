package machine

import (
	"context"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// inPlaceDrainPass runs the drain pass p.InPlaceDrain plans, one
// non-blocking pass as the deletion's drain runs, with the deletion's
// drainer (which cordons the node, as MCM's in-place drain does), and
// returns p with its outcome folded in (planInPlaceDrainOutcome).
func (c *Controller) inPlaceDrainPass(ctx context.Context, obs observation, p machinePlan) machinePlan {
	res, err := c.drainPass(ctx, c.drainer, p.Machine, InPlaceDrainStateAnnotation, *p.InPlaceDrain)
	return planInPlaceDrainOutcome(p, obs.Node, obs.Config, res, err, c.opts.Clock.Now())
}

// recordInPlace counts what a written plan did to the machine's in-place
// update: mcm_machine_inplace_updates_total, the update's duration, and
// the drain's in MCM's drain metrics.
func (c *Controller) recordInPlace(m *v1alpha1.Machine, out inPlaceOutcome) {
	if out.Result == "" {
		return
	}
	c.metrics.inPlaceUpdates.WithLabelValues(m.Namespace, out.Result).Inc()
	if out.Result != inPlaceStarted && out.Took > 0 {
		c.metrics.inPlaceDuration.WithLabelValues(m.Namespace, out.Result).Observe(out.Took.Seconds())
	}
	if out.DrainTook > 0 {
		c.metrics.drain.WithLabelValues(c.metricLabels(m)...).Observe(out.DrainTook.Seconds())
	}
}
