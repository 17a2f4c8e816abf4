package deployment

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

// applyMarks gives the machines the autoscaler named priority 1 and their
// marked-for-deletion-time, then writes the deployment's pruned request
// and the scaler's time.
func (c *Controller) applyMarks(ctx context.Context, done *applied, p syncPlan) error {
	var errs []error
	for _, mk := range p.marks {
		errs = append(errs, c.markMachine(ctx, mk.Machine, mk.At))
	}
	if p.annotations == nil {
		return errors.Join(errs...)
	}
	d := done.d
	data, err := patch.Diff(triggerFields, d.Annotations, p.annotations, d.ResourceVersion)
	if err == nil && data != nil {
		var updated *v1alpha1.MachineDeployment
		updated, err = patch.Send(ctx, c.client.MachineV1alpha1().MachineDeployments(d.Namespace).Patch, d.Name, data, c.opts.FieldManager)
		if err == nil {
			c.writes.Wrote(workqueue.KeyOf(updated), updated.ResourceVersion)
			done.d = updated
		}
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("writing %s and %s of machine deployment %s: %w", v1alpha1.TriggerDeletionByMCMAnnotation, v1alpha1.LastReplicaChangeByScalerAnnotation, d.Name, err))
	}
	return errors.Join(errs...)
}

// markMachine gives a machine the autoscaler named priority 1 and its
// marked-for-deletion-time.
func (c *Controller) markMachine(ctx context.Context, m *v1alpha1.Machine, at time.Time) error {
	data, err := patch.Diff(machineMarkFields, m.Annotations, withEntries(m.Annotations, map[string]string{
		v1alpha1.MachinePriorityAnnotation:       v1alpha1.MachinePriorityDeleteFirst,
		v1alpha1.MarkedForDeletionTimeAnnotation: at.UTC().Format(time.RFC3339),
	}), m.ResourceVersion)
	if err != nil || data == nil {
		return err
	}
	_, err = patch.Send(ctx, c.client.MachineV1alpha1().Machines(m.Namespace).Patch, m.Name, data, c.opts.FieldManager)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("marking machine %s for deletion: %w", m.Name, err)
	}
	return nil
}

// triggerAnnotations are the deployment's annotations after plan, nil when
// the plan writes none of them; have is not modified.
func triggerAnnotations(have map[string]string, plan triggerPlan) map[string]string {
	if !plan.Changed && plan.ScalerTime == "" {
		return nil
	}
	want := maps.Clone(have)
	if want == nil {
		want = map[string]string{}
	}
	if plan.Changed {
		if plan.Annotation == "" {
			delete(want, v1alpha1.TriggerDeletionByMCMAnnotation)
		} else {
			want[v1alpha1.TriggerDeletionByMCMAnnotation] = plan.Annotation
		}
	}
	if plan.ScalerTime != "" {
		want[v1alpha1.LastReplicaChangeByScalerAnnotation] = plan.ScalerTime
	}
	return want
}

// triggerFields: of a deployment's annotations, marking writes the
// autoscaler's request and the scaler's time, nothing else. The others are
// anyone's: kubectl's last-applied configuration, the autoscaler's
// per-pool options, the revision.
func triggerFields(annotations map[string]string) patch.Fields {
	return patch.Fields{"metadata": patch.Fields{"annotations": patch.Keys(annotations,
		v1alpha1.TriggerDeletionByMCMAnnotation, v1alpha1.LastReplicaChangeByScalerAnnotation)}}
}

// machineMarkFields: of a machine's annotations, marking writes its
// priority and marked-for-deletion-time.
func machineMarkFields(annotations map[string]string) patch.Fields {
	return patch.Fields{"metadata": patch.Fields{"annotations": patch.Keys(annotations,
		v1alpha1.MachinePriorityAnnotation, v1alpha1.MarkedForDeletionTimeAnnotation)}}
}
