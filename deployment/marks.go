package deployment

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

// markForAutoscaler carries out the cluster-autoscaler's request in the
// trigger-deletion-by-mcm annotation (planTriggerDeletion): the machines it
// names get priority 1 and their marked-for-deletion-time, and the
// annotation is pruned. It returns the deployment as written and whether
// machines were marked now: then the sync must not scale in the same pass,
// or a MachineSet could see the lower replicas before the marks and remove
// other machines than the named ones.
func (c *Controller) markForAutoscaler(ctx context.Context, d *v1alpha1.MachineDeployment, obs observed, now time.Time) (*v1alpha1.MachineDeployment, bool, error) {
	if _, asked := d.Annotations[v1alpha1.TriggerDeletionByMCMAnnotation]; !asked {
		return d, false, nil // the usual case: no need to index every machine by name
	}
	machines := map[string]*v1alpha1.Machine{}
	for _, ms := range obs.machines {
		for _, m := range ms {
			machines[m.Name] = m
		}
	}
	plan := planTriggerDeletion(d, machines, now)
	var errs []error
	for _, mk := range plan.Mark {
		errs = append(errs, c.markMachine(ctx, machines[mk.Machine], mk.At))
	}
	if plan.Changed {
		var value any = plan.Annotation
		if plan.Annotation == "" {
			value = nil
		}
		data, err := patch.Diff(patch.Fields{"metadata": patch.Fields{"annotations": d.Annotations}},
			patch.Fields{"metadata": patch.Fields{"annotations": patch.Fields{v1alpha1.TriggerDeletionByMCMAnnotation: value}}}, d.ResourceVersion)
		if err == nil && data != nil {
			var updated *v1alpha1.MachineDeployment
			updated, err = patch.Send(ctx, c.client.MachineV1alpha1().MachineDeployments(d.Namespace).Patch, d.Name, data, c.opts.FieldManager)
			if err == nil {
				c.writes.Wrote(workqueue.KeyOf(updated), updated.ResourceVersion)
				d = updated
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("pruning %s of machine deployment %s: %w", v1alpha1.TriggerDeletionByMCMAnnotation, d.Name, err))
		}
	}
	return d, len(plan.Mark) > 0, errors.Join(errs...)
}

// markMachine gives a machine the autoscaler named priority 1 and its
// marked-for-deletion-time.
func (c *Controller) markMachine(ctx context.Context, m *v1alpha1.Machine, at time.Time) error {
	data, err := patch.Diff(patch.Fields{"metadata": patch.Fields{"annotations": m.Annotations}},
		patch.Fields{"metadata": patch.Fields{"annotations": withEntries(m.Annotations, map[string]string{
			v1alpha1.MachinePriorityAnnotation:       v1alpha1.MachinePriorityDeleteFirst,
			v1alpha1.MarkedForDeletionTimeAnnotation: at.UTC().Format(time.RFC3339),
		})}}, m.ResourceVersion)
	if err != nil || data == nil {
		return err
	}
	_, err = patch.Send(ctx, c.client.MachineV1alpha1().Machines(m.Namespace).Patch, m.Name, data, c.opts.FieldManager)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("marking machine %s for deletion: %w", m.Name, err)
	}
	return nil
}

// markNodes writes the rollout's marks on the deployment's nodes
// (planNodeMarks): the PreferNoSchedule taint on old sets' nodes and the
// autoscaler's scale-down-disabled annotation on all, removed again when
// the rollout is complete. Without a target cluster it does nothing.
func (c *Controller) markNodes(ctx context.Context, d *v1alpha1.MachineDeployment, obs observed) error {
	if c.nodes == nil {
		return nil
	}
	var newMachines, oldMachines []*v1alpha1.Machine
	if obs.newSet != nil {
		newMachines = obs.machines[obs.newSet.Name]
	}
	for _, s := range obs.old {
		oldMachines = append(oldMachines, obs.machines[s.Name]...)
	}
	nodes := map[string]*corev1.Node{}
	for _, m := range append(append([]*v1alpha1.Machine(nil), newMachines...), oldMachines...) {
		name := m.Labels[v1alpha1.NodeLabelKey]
		if name == "" {
			continue
		}
		if n, err := c.nodes.Get(name); err == nil {
			nodes[name] = n
		}
	}
	rolling := isRollingUpdate(d) && len(oldMachines) > 0
	complete := obs.newSet != nil && len(oldMachines) == 0
	changes := planNodeMarks(rolling, complete, !c.opts.SkipAutoscalerAnnotationDuringRollout,
		nodesOf(newMachines, nodes), nodesOf(oldMachines, nodes))
	var errs []error
	for _, ch := range changes {
		data, err := nodeMarkPatch(nodes[ch.Node], ch)
		if err == nil && data != nil {
			_, err = patch.Send(ctx, c.target.CoreV1().Nodes().Patch, ch.Node, data, c.opts.FieldManager)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("marking node %s for the rollout: %w", ch.Node, err))
		}
	}
	return errors.Join(errs...)
}
