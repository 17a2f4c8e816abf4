package overshoot

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/patch"
)

// Reasons of the events on a freeze or an unfreeze, MCM's.
const (
	ReasonFrozeSet          = "FrozeMachineSet"
	ReasonUnfrozeSet        = "UnfrozeMachineSet"
	ReasonFrozeDeployment   = "FrozeMachineDeployment"
	ReasonUnfrozeDeployment = "UnfrozeMachineDeployment"
)

// applyFreeze writes one freeze or unfreeze: the label (and the removal of
// the unfreeze annotation) on the object, then the Frozen condition on its
// status, each guarded by the resourceVersion it was computed from.
func (c *Controller) applyFreeze(ctx context.Context, namespace string, ch freezeChange) error {
	var err error
	switch ch.Kind {
	case "MachineSet":
		err = c.freezeSet(ctx, namespace, ch)
	case "MachineDeployment":
		err = c.freezeDeployment(ctx, namespace, ch)
	}
	if apierrors.IsNotFound(err) {
		return nil // gone since: nothing to freeze
	}
	return err
}

// freezeMeta is the metadata a freeze writes: one label, one annotation.
type freezeMeta struct{ Labels, Annotations map[string]string }

// freezeMetaFields: of the object's labels and annotations, a freeze owns
// the freeze label and the unfreeze annotation, nothing else.
func freezeMetaFields(m freezeMeta) patch.Fields {
	return patch.Fields{"metadata": patch.Fields{
		"labels":      patch.Keys(m.Labels, v1alpha1.FreezeLabelKey),
		"annotations": patch.Keys(m.Annotations, v1alpha1.UnfreezeAnnotation),
	}}
}

// frozenMeta is the metadata of an object after ch: the label set or
// removed, and the unfreeze annotation removed when it is to go.
func frozenMeta(ch freezeChange, have freezeMeta) freezeMeta {
	want := freezeMeta{Labels: make(map[string]string, len(have.Labels)+1), Annotations: maps.Clone(have.Annotations)}
	maps.Copy(want.Labels, have.Labels)
	if ch.Freeze {
		want.Labels[v1alpha1.FreezeLabelKey] = v1alpha1.FreezeLabelValue
	} else {
		delete(want.Labels, v1alpha1.FreezeLabelKey)
	}
	if ch.ClearUnfreeze {
		delete(want.Annotations, v1alpha1.UnfreezeAnnotation)
	}
	return want
}

func (c *Controller) freezeSet(ctx context.Context, namespace string, ch freezeChange) error {
	client := c.client.MachineV1alpha1().MachineSets(namespace)
	get := func(ctx context.Context) (*v1alpha1.MachineSet, error) {
		return client.Get(ctx, ch.Name, metav1.GetOptions{})
	}
	conditions := func(s *v1alpha1.MachineSet) ([]byte, error) {
		return patch.Diff(setConditionFields, s.Status.Conditions, setFrozenCondition(s.Status.Conditions, ch, c.opts.Clock.Now()), s.ResourceVersion)
	}
	if err := writeFreeze(ctx, c, ch, get, client.Patch, conditions); err != nil {
		return fmt.Errorf("freezing machine set %s: %w", ch.Name, err)
	}
	return nil
}

func (c *Controller) freezeDeployment(ctx context.Context, namespace string, ch freezeChange) error {
	client := c.client.MachineV1alpha1().MachineDeployments(namespace)
	get := func(ctx context.Context) (*v1alpha1.MachineDeployment, error) {
		return client.Get(ctx, ch.Name, metav1.GetOptions{})
	}
	conditions := func(d *v1alpha1.MachineDeployment) ([]byte, error) {
		return patch.Diff(deploymentConditionFields, d.Status.Conditions, setFrozenDeploymentCondition(d.Status.Conditions, ch, c.opts.Clock.Now()), d.ResourceVersion)
	}
	if err := writeFreeze(ctx, c, ch, get, client.Patch, conditions); err != nil {
		return fmt.Errorf("freezing machine deployment %s: %w", ch.Name, err)
	}
	return nil
}

// frozenObject is a MachineSet or MachineDeployment.
type frozenObject interface {
	runtime.Object
	metav1.Object
}

// writeFreeze writes one freeze or unfreeze of an object: the label (and
// the removal of the unfreeze annotation), then the Frozen condition. The
// label is one key of a merge patch and needs no guard; the conditions are
// a list the patch replaces whole, so they are written against a fresh
// read, again on a conflict: the object's own controller writes its status
// too, and a freeze whose condition was lost to a conflict would be seen,
// at the next check, as a freeze someone else made.
func writeFreeze[T frozenObject](ctx context.Context, c *Controller, ch freezeChange,
	get func(context.Context) (T, error), send patch.Func[T], conditionsPatch func(T) ([]byte, error)) error {
	obj, err := get(ctx)
	if err != nil {
		return err
	}
	have := freezeMeta{Labels: obj.GetLabels(), Annotations: obj.GetAnnotations()}
	data, err := patch.Diff(freezeMetaFields, have, frozenMeta(ch, have), "")
	if err == nil && data != nil {
		_, err = patch.Send(ctx, send, obj.GetName(), data, c.opts.FieldManager)
	}
	if err != nil {
		return err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh, err := get(ctx)
		if err != nil {
			return err
		}
		data, err := conditionsPatch(fresh)
		if err != nil || data == nil {
			return err
		}
		_, err = patch.Send(ctx, send, fresh.GetName(), data, c.opts.FieldManager, "status")
		return err
	})
	if err != nil {
		return fmt.Errorf("writing the Frozen condition: %w", err)
	}
	froze, unfroze := ReasonFrozeSet, ReasonUnfrozeSet
	if _, ok := any(obj).(*v1alpha1.MachineDeployment); ok {
		froze, unfroze = ReasonFrozeDeployment, ReasonUnfrozeDeployment
	}
	c.event(obj, ch, froze, unfroze)
	return nil
}

func (c *Controller) event(obj runtime.Object, ch freezeChange, froze, unfroze string) {
	if c.opts.Recorder == nil {
		return
	}
	if ch.Freeze {
		c.opts.Recorder.Eventf(obj, corev1.EventTypeWarning, froze, "%s", ch.Message)
		return
	}
	c.opts.Recorder.Eventf(obj, corev1.EventTypeNormal, unfroze, "%s", ch.Message)
}

// setConditionFields and deploymentConditionFields are the conditions of a
// set's and a deployment's status. A merge patch replaces the list whole,
// so their patches are built from a fresh read and guarded by its
// resourceVersion.
func setConditionFields(c []v1alpha1.MachineSetCondition) patch.Fields {
	return patch.Fields{"status": patch.Fields{"machineSetCondition": c}}
}

func deploymentConditionFields(c []v1alpha1.MachineDeploymentCondition) patch.Fields {
	return patch.Fields{"status": patch.Fields{"conditions": c}}
}
