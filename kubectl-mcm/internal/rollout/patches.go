package rollout

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/deployment"
)

// RestartedAtAnnotation on a deployment's machine template records when
// kubectl mcm rollout restart asked for new machines: a change of the
// template, so of its hash, which makes the controller replace every
// machine under the deployment's strategy (kubectl's
// kubectl.kubernetes.io/restartedAt on a pod template, in our prefix).
const RestartedAtAnnotation = "mcmkit.io/restartedAt"

// PausePatch is the JSON merge patch that pauses (or resumes) d; an error
// when d already is (or is not) paused, as kubectl rollout pause says.
func PausePatch(d *v1alpha1.MachineDeployment, pause bool) ([]byte, error) {
	switch {
	case pause && d.Spec.Paused:
		return nil, fmt.Errorf("machinedeployment %q is already paused", d.Name)
	case !pause && !d.Spec.Paused:
		return nil, fmt.Errorf("machinedeployment %q is not paused", d.Name)
	}
	return mergePatch(d, map[string]any{"spec": map[string]any{"paused": pause}})
}

// RestartPatch is the JSON merge patch that restarts d's machines at now.
// A paused deployment cannot restart: it would not roll.
func RestartPatch(d *v1alpha1.MachineDeployment, now time.Time) ([]byte, error) {
	if d.Spec.Paused {
		return nil, fmt.Errorf("can't restart paused machinedeployment %q (run rollout resume first)", d.Name)
	}
	return mergePatch(d, map[string]any{"spec": map[string]any{"template": map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{RestartedAtAnnotation: now.UTC().Format(time.RFC3339Nano)}}}}})
}

// UndoPatch is the JSON merge patch that asks the controller to roll d
// back to revision (0: the previous one) through spec.rollbackTo, as MCM's
// clients do. skip is set, with no patch, when the revision's template is
// d's already (told by the controller's own rules, deployment.PreviewChange).
func UndoPatch(d *v1alpha1.MachineDeployment, sets []*v1alpha1.MachineSet, revision int64) (patch []byte, to Revision, skip bool, err error) {
	if d.Spec.Paused {
		return nil, to, false, fmt.Errorf("you cannot rollback a paused machinedeployment; resume it first with 'kubectl mcm rollout resume' and try again")
	}
	if to, err = Find(History(d, sets), revision); err != nil {
		return nil, to, false, err
	}
	proposed := d.DeepCopy()
	proposed.Spec.Template = *to.Template.DeepCopy()
	delete(proposed.Spec.Template.Labels, v1alpha1.MachineTemplateHashLabelKey)
	preview, err := deployment.PreviewChange(d, proposed, Owned(d, sets))
	if err != nil {
		return nil, to, false, fmt.Errorf("comparing with revision %d: %w", to.Revision, err)
	}
	if preview.Change == deployment.ChangeNone {
		return nil, to, true, nil
	}
	patch, err = mergePatch(d, map[string]any{"spec": map[string]any{"rollbackTo": map[string]int64{"revision": to.Revision}}})
	return patch, to, false, err
}

// mergePatch adds d's resourceVersion to patch, so that a patch decided on
// a deployment that changed since fails (409) instead of applying to
// something else.
func mergePatch(d *v1alpha1.MachineDeployment, patch map[string]any) ([]byte, error) {
	patch["metadata"] = map[string]any{"resourceVersion": d.ResourceVersion}
	raw, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("encoding the patch: %w", err)
	}
	return raw, nil
}
