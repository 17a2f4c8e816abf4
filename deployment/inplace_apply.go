package deployment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/ownership"
	"github.com/mcmkit/mcm/internal/parallel"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

// applyTransfers moves the machines of the plan to the new set; the set
// sizes follow in a later sync, which counts the machines moved
// (sizeInPlace).
func (c *Controller) applyTransfers(ctx context.Context, d *v1alpha1.MachineDeployment, ip *inPlacePlan) error {
	var errs []error
	for _, t := range ip.transfers {
		data, err := transferPatch(t)
		if err == nil {
			var updated *v1alpha1.Machine
			updated, err = patch.Send(ctx, c.client.MachineV1alpha1().Machines(t.Machine.Namespace).Patch, t.Machine.Name, data, c.opts.FieldManager)
			if err == nil {
				c.machineWrites.Wrote(workqueue.KeyOf(updated), updated.ResourceVersion)
				c.event(d, corev1.EventTypeNormal, ReasonMovedMachine,
					fmt.Sprintf("Moved machine %s, updated in place, from machine set %s to %s", t.Machine.Name, t.From.Name, t.To.Name))
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("moving machine %s to machine set %s: %w", t.Machine.Name, t.To.Name, err))
		}
	}
	return errors.Join(errs...)
}

// transferPatch is the merge patch that moves t.Machine to t.To, as MCM
// moves it: the controller reference names the new set (other owner
// references stay), the labels of the old set's selector give way to the
// new set's, and update-result=successful keeps the new set from deleting
// the machine until its spec.replicas counts it. spec is left alone, the
// class included. The patch is guarded by the machine's UID and
// resourceVersion: the owner references are a list a merge patch replaces
// whole.
func transferPatch(t transfer) ([]byte, error) {
	m := t.Machine
	if m.ResourceVersion == "" {
		return nil, errors.New("machine has no resourceVersion to guard its owner references with")
	}
	refs := slices.DeleteFunc(slices.Clone(m.OwnerReferences), func(r metav1.OwnerReference) bool { return r.Controller != nil && *r.Controller })
	refs = append(refs, ownership.ControllerRef(t.To, v1alpha1.SchemeGroupVersion.WithKind("MachineSet")))
	labels := map[string]*string{}
	if sel := t.From.Spec.Selector; sel != nil {
		for k := range sel.MatchLabels {
			if _, ok := m.Labels[k]; ok {
				labels[k] = nil
			}
		}
	}
	if sel := t.To.Spec.Selector; sel != nil {
		for k, v := range sel.MatchLabels {
			labels[k] = &v
		}
	}
	labels[v1alpha1.UpdateResultLabel] = new(v1alpha1.UpdateResultSuccessful)
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": m.UID, "resourceVersion": m.ResourceVersion, "ownerReferences": refs, "labels": labels,
	}})
}

// applyInPlaceNodes writes the plan's node changes, nodeMarkParallelism at a
// time; a node that is gone needs none.
func (c *Controller) applyInPlaceNodes(ctx context.Context, ip *inPlacePlan) error {
	work := make([]func(context.Context) error, 0, len(ip.nodes))
	for _, ch := range ip.nodes {
		work = append(work, func(ctx context.Context) error {
			data, err := nodeLabelPatch(ch)
			if err == nil && data != nil {
				var updated *corev1.Node
				if updated, err = patch.Send(ctx, c.target.CoreV1().Nodes().Patch, ch.Node.Name, data, c.opts.FieldManager); err == nil {
					c.nodeWrites.Wrote(updated.Name, updated.ResourceVersion)
				}
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("writing the in-place update marks of node %s: %w", ch.Node.Name, err)
			}
			return nil
		})
	}
	return errors.Join(parallel.Run(ctx, nodeMarkParallelism, work)...)
}

// nodeLabelPatch is the merge patch of ch: its labels and annotations key
// by key (null removes one; no other key is named), spec.unschedulable
// false to uncordon, and, when a taint changes, the node's full taint list
// (an atomic list) guarded by its resourceVersion, as nodeMarkPatch does:
// the PreferNoSchedule taint removed, the critical-components-not-ready
// taint added once. nil when nothing changes.
func nodeLabelPatch(ch nodeLabelChange) ([]byte, error) {
	n := ch.Node
	metadata := map[string]any{}
	spec := map[string]any{}
	if len(ch.Labels) > 0 {
		metadata["labels"] = ch.Labels
	}
	if len(ch.Annotations) > 0 {
		metadata["annotations"] = ch.Annotations
	}
	if ch.Uncordon {
		spec["unschedulable"] = false
	}
	if ch.Untaint || ch.Critical {
		if n.ResourceVersion == "" {
			return nil, errNoResourceVersion
		}
		taints, _ := taintsAfter(n.Spec.Taints, -1)
		if ch.Critical {
			taints = append(taints, corev1.Taint{Key: v1alpha1.CriticalComponentsNotReadyTaintKey, Effect: corev1.TaintEffectNoSchedule})
		}
		metadata["resourceVersion"] = n.ResourceVersion
		spec["taints"] = taints
		if len(taints) == 0 {
			spec["taints"] = nil
		}
	}
	if len(metadata) == 0 && len(spec) == 0 {
		return nil, nil
	}
	body := map[string]any{"metadata": metadata}
	if len(spec) > 0 {
		body["spec"] = spec
	}
	return json.Marshal(body)
}

// applyUnlabel takes the update-result label off the new set's machines
// that its spec.replicas counts.
func (c *Controller) applyUnlabel(ctx context.Context, ip *inPlacePlan) error {
	var errs []error
	data := []byte(`{"metadata":{"labels":{"` + v1alpha1.UpdateResultLabel + `":null}}}`)
	for _, m := range ip.unlabel {
		updated, err := patch.Send(ctx, c.client.MachineV1alpha1().Machines(m.Namespace).Patch, m.Name, data, c.opts.FieldManager)
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing %s from machine %s: %w", v1alpha1.UpdateResultLabel, m.Name, err))
			continue
		}
		if err == nil {
			c.machineWrites.Wrote(workqueue.KeyOf(updated), updated.ResourceVersion)
		}
	}
	return errors.Join(errs...)
}
