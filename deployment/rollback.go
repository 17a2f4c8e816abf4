package deployment

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

// rollbackRequest returns the revision a rollback asks for and whether one
// is asked: spec.rollbackTo (MCM's and extensions/v1beta1's way) or
// RollbackAnnotation. Revision 0 means the one before the current.
func rollbackRequest(d *v1alpha1.MachineDeployment) (int64, bool) {
	if d.Spec.RollbackTo != nil {
		return d.Spec.RollbackTo.Revision, true
	}
	v, ok := d.Annotations[RollbackAnnotation]
	if !ok {
		return 0, false
	}
	rev, err := strconv.ParseInt(v, 10, 64)
	if err != nil || rev < 0 {
		return -1, true // planRollback reports it as not found
	}
	return rev, true
}

// rollbackPlan is what a rollback does: the template to bring back (nil
// when there is none) and the event that tells the outcome.
type rollbackPlan struct {
	Template *v1alpha1.MachineTemplateSpec
	Reason   string
	Message  string
}

// planRollback finds the template of revision rev among the sets (0: the
// highest revision below the current one) and decides the rollback. It is
// pure. Asking for the revision that is current, or one whose template is
// the deployment's, changes nothing (TemplateUnchanged); a revision no set
// has is reported (RevisionNotFound). Either way the request is cleared,
// so that it is acted on once.
func planRollback(d *v1alpha1.MachineDeployment, sets []*v1alpha1.MachineSet, rev int64) rollbackPlan {
	if rev == 0 {
		current := maxRevision(sets)
		for _, s := range sets {
			if r, err := revisionOf(s); err == nil && r < current && r > rev {
				rev = r
			}
		}
		if rev == 0 {
			return rollbackPlan{Reason: ReasonRollbackRevisionNotFound, Message: "Unable to find last revision."}
		}
	}
	for _, s := range sets {
		if r, err := revisionOf(s); err != nil || r != rev {
			continue
		}
		if sameTemplate(&s.Spec.Template, &d.Spec.Template) {
			return rollbackPlan{Reason: ReasonRollbackTemplateUnchanged,
				Message: fmt.Sprintf("The rollback revision %d has the same template as the current one; nothing to roll back.", rev)}
		}
		t := s.Spec.Template.DeepCopy()
		delete(t.Labels, v1alpha1.MachineTemplateHashLabelKey)
		return rollbackPlan{Template: t, Reason: ReasonRollbackDone, Message: fmt.Sprintf("Rolled back machine deployment %q to revision %d", d.Name, rev)}
	}
	return rollbackPlan{Reason: ReasonRollbackRevisionNotFound, Message: fmt.Sprintf("Unable to find revision %d.", rev)}
}

// rolledBack is d with the rollback request cleared and, when the plan
// brings one back, the template of the revision asked for.
func rolledBack(d *v1alpha1.MachineDeployment, r rollbackPlan) *v1alpha1.MachineDeployment {
	want := d.DeepCopy()
	want.Spec.RollbackTo = nil
	delete(want.Annotations, RollbackAnnotation)
	if r.Template != nil {
		want.Spec.Template = *r.Template
	}
	return want
}

// applyRollback writes the rollback: the template brought back and the
// request cleared, in one write; then it tells the outcome by an event.
// The write's update event syncs the deployment again, on the template it
// brought back.
func (c *Controller) applyRollback(ctx context.Context, done *applied, p syncPlan) error {
	d := done.d
	data, err := rollbackPatch(d, p.rolledBack)
	if err != nil {
		return err
	}
	updated, err := patch.Send(ctx, c.client.MachineV1alpha1().MachineDeployments(d.Namespace).Patch, d.Name, data, c.opts.FieldManager)
	if err != nil {
		return fmt.Errorf("rolling back machine deployment %s: %w", d.Name, err)
	}
	c.writes.Wrote(workqueue.KeyOf(updated), updated.ResourceVersion)
	done.d = updated
	typ := corev1.EventTypeNormal
	if p.rollback.Template == nil {
		typ = corev1.EventTypeWarning
	}
	c.event(d, typ, p.rollback.Reason, p.rollback.Message)
	return nil
}

// rollbackPatch is the merge patch from d to want, which differ in the
// template, the rollback annotation and spec.rollbackTo. patch.Diff takes
// an empty object for an absent one, but spec.rollbackTo: {} is a request
// (revision 0, the previous one), so its removal is written explicitly.
func rollbackPatch(d, want *v1alpha1.MachineDeployment) ([]byte, error) {
	fields := func(d *v1alpha1.MachineDeployment) patch.Fields {
		return patch.Fields{
			"metadata": patch.Fields{"annotations": d.Annotations},
			"spec":     patch.Fields{"template": d.Spec.Template},
		}
	}
	data, err := patch.Diff(fields, d, want, d.ResourceVersion)
	if err != nil {
		return nil, err
	}
	body := map[string]any{}
	if d.ResourceVersion != "" {
		body["metadata"] = map[string]any{"resourceVersion": d.ResourceVersion}
	}
	if data != nil {
		if err := json.Unmarshal(data, &body); err != nil {
			return nil, err
		}
	}
	if d.Spec.RollbackTo != nil {
		spec, _ := body["spec"].(map[string]any)
		if spec == nil {
			spec = map[string]any{}
		}
		spec["rollbackTo"] = nil
		body["spec"] = spec
	}
	return json.Marshal(body)
}
