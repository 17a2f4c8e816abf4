package deployment

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/ownership"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

// errCollision: the new set's name is taken by a set with another
// template. The collision count is raised in the status, whose update
// syncs the deployment again under a new name.
var errCollision = errors.New("machine set name collision")

// controllerRef is the owner reference a deployment puts on its sets.
func controllerRef(d *v1alpha1.MachineDeployment) metav1.OwnerReference {
	return ownership.ControllerRef(d, v1alpha1.SchemeGroupVersion.WithKind("MachineDeployment"))
}

// applyStep creates the new set if the step says so, and writes each set
// whose size, bookkeeping annotations or in-place template parts differ
// from what the deployment wants: one patch per set at most. It returns
// the set it created, or nil.
func (c *Controller) applyStep(ctx context.Context, d *v1alpha1.MachineDeployment, obs observed, st step) (*v1alpha1.MachineSet, error) {
	revision := maxRevision(obs.old) + 1
	var created *v1alpha1.MachineSet
	if st.Create != nil {
		var err error
		if created, err = c.createNewSet(ctx, d, obs, *st.Create, revision); err != nil {
			return nil, err
		}
	}
	var errs []error
	for _, s := range obs.all() {
		size, resized := st.Replicas[s.Name]
		if !resized {
			size = s.Spec.Replicas
		}
		want, err := wantedSet(d, s, s == obs.newSet, size, resized && (size != s.Spec.Replicas || st.Scaling), revision)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, c.patchSet(ctx, d, s, want))
	}
	return created, errors.Join(errs...)
}

// wantedSet is the set s as the deployment wants it after this step: size
// replicas; the deployment's replica annotations when it was sized now; its
// policy annotations (withSetPolicy), on every set; and, for the new set,
// the deployment's annotations, its revision, its minReadySeconds and the
// in-place parts of its template (node template, machine configuration,
// class kind), which change without a rollout. It is pure; the set is not
// modified.
func wantedSet(d *v1alpha1.MachineDeployment, s *v1alpha1.MachineSet, isNew bool, replicas int32, sized bool, revision int64) (*v1alpha1.MachineSet, error) {
	want := s.DeepCopy()
	want.Spec.Replicas = replicas
	if sized {
		ann, err := replicaAnnotations(d)
		if err != nil {
			return nil, err
		}
		want.Annotations = withEntries(want.Annotations, ann)
	}
	want.Annotations = withSetPolicy(d, want.Annotations)
	if !isNew {
		return want, nil
	}
	ann, err := newSetAnnotations(d, want.Annotations, revision, false)
	if err != nil {
		return nil, err
	}
	want.Annotations = ann
	want.Spec.MinReadySeconds = d.Spec.MinReadySeconds
	t := &want.Spec.Template.Spec
	t.NodeTemplateSpec = *d.Spec.Template.Spec.NodeTemplateSpec.DeepCopy()
	t.MachineConfiguration = d.Spec.Template.Spec.MachineConfiguration.DeepCopy()
	t.Class.Kind = d.Spec.Template.Spec.Class.Kind
	return want, nil
}

// withEntries returns a copy of have with add's entries set.
func withEntries(have, add map[string]string) map[string]string {
	out := maps.Clone(have)
	if out == nil {
		out = make(map[string]string, len(add))
	}
	maps.Copy(out, add)
	return out
}

// setFields are the fields of a set the controller writes.
func setFields(s *v1alpha1.MachineSet) patch.Fields {
	f := machinestate.InPlaceFields(&s.Spec.Template.Spec, "spec", "template", "spec")
	spec := f["spec"].(patch.Fields)
	spec["replicas"] = s.Spec.Replicas
	spec["minReadySeconds"] = s.Spec.MinReadySeconds
	f["metadata"] = patch.Fields{"annotations": s.Annotations}
	return f
}

// patchSet writes want over s when they differ. The patch carries no
// resourceVersion guard: the fields it writes are the deployment's alone,
// and a sync starts only once the cache shows the controller's last write
// to each set (observe), so a diff from the cached set loses nothing.
// Guarded, it failed with a conflict whenever the set had just written its
// status, which during a rollout is after every machine that becomes
// available, and the retries' backoff held the rollout up.
func (c *Controller) patchSet(ctx context.Context, d *v1alpha1.MachineDeployment, s, want *v1alpha1.MachineSet) error {
	data, err := patch.Diff(setFields, s, want, "")
	if err != nil || data == nil {
		return err
	}
	updated, err := patch.Send(ctx, c.client.MachineV1alpha1().MachineSets(s.Namespace).Patch, s.Name, data, c.opts.FieldManager)
	if err != nil {
		return fmt.Errorf("updating machine set %s: %w", s.Name, err)
	}
	c.writes.Wrote(workqueue.KeyOf(updated), updated.ResourceVersion)
	if want.Spec.Replicas != s.Spec.Replicas {
		c.event(d, corev1.EventTypeNormal, ReasonScaled,
			fmt.Sprintf("Scaled machine set %s from %d to %d", s.Name, s.Spec.Replicas, want.Spec.Replicas))
	}
	return nil
}

// newSetOf is the new set of a deployment for its current template: named
// <deployment>-<hash>, labelled and selected by machine-template-hash on
// top of the deployment's selector, with the deployment's annotations and
// revision and the given replicas.
func newSetOf(d *v1alpha1.MachineDeployment, replicas int32, revision int64) (*v1alpha1.MachineSet, error) {
	hash := templateHash(&d.Spec.Template, d.Status.CollisionCount)
	template := d.Spec.Template.DeepCopy()
	template.Labels = withEntries(template.Labels, map[string]string{v1alpha1.MachineTemplateHashLabelKey: hash})
	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels = withEntries(selector.MatchLabels, map[string]string{v1alpha1.MachineTemplateHashLabelKey: hash})
	ann, err := newSetAnnotations(d, nil, revision, true)
	if err != nil {
		return nil, err
	}
	return &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			Labels:          maps.Clone(template.Labels),
			Annotations:     ann,
			OwnerReferences: []metav1.OwnerReference{controllerRef(d)},
		},
		Spec: v1alpha1.MachineSetSpec{
			Replicas:        replicas,
			Selector:        selector,
			Template:        *template,
			MinReadySeconds: d.Spec.MinReadySeconds,
		},
	}, nil
}

// createNewSet creates the deployment's new set. A set of that name that
// is the deployment's and has its template (the cache had not shown it
// yet) is taken as the new set; any other raises the collision count.
func (c *Controller) createNewSet(ctx context.Context, d *v1alpha1.MachineDeployment, obs observed, replicas int32, revision int64) (*v1alpha1.MachineSet, error) {
	s, err := newSetOf(d, replicas, revision)
	if err != nil {
		return nil, err
	}
	sets := c.client.MachineV1alpha1().MachineSets(d.Namespace)
	created, err := sets.Create(ctx, s, metav1.CreateOptions{FieldManager: c.opts.FieldManager})
	if err == nil {
		c.writes.Wrote(workqueue.KeyOf(created), created.ResourceVersion)
		c.event(d, corev1.EventTypeNormal, ReasonCreatedSet, fmt.Sprintf("Created machine set %s with %d replicas", created.Name, replicas))
		return created, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		c.warn(d, ReasonCreateSetFailed, fmt.Sprintf("creating machine set %s: %v", s.Name, err))
		return nil, fmt.Errorf("creating machine set %s: %w", s.Name, err)
	}
	existing, err := sets.Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading machine set %s after a name conflict: %w", s.Name, err)
	}
	if ref := metav1.GetControllerOfNoCopy(existing); ref != nil && ref.UID == d.UID && sameTemplate(&existing.Spec.Template, &d.Spec.Template) {
		return existing, nil
	}
	st := *d.Status.DeepCopy()
	n := int32(1)
	if st.CollisionCount != nil {
		n = *st.CollisionCount + 1
	}
	st.CollisionCount = &n
	if _, err := c.writeStatus(ctx, d, st); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: %s exists with another template; collision count now %d", errCollision, s.Name, n)
}

// recordRevision sets the deployment's revision annotation to its new
// set's, as Kubernetes and MCM show it, and returns the deployment as
// written.
func (c *Controller) recordRevision(ctx context.Context, d *v1alpha1.MachineDeployment, newSet *v1alpha1.MachineSet) (*v1alpha1.MachineDeployment, error) {
	if newSet == nil {
		return d, nil
	}
	rev, ok := newSet.Annotations[v1alpha1.RevisionAnnotation]
	if !ok || d.Annotations[v1alpha1.RevisionAnnotation] == rev {
		return d, nil
	}
	if _, err := strconv.ParseInt(rev, 10, 64); err != nil {
		return d, nil // not a revision this controller wrote; the next step rewrites it
	}
	owned := func(a map[string]string) patch.Fields {
		return patch.Fields{"metadata": patch.Fields{"annotations": patch.Keys(a, v1alpha1.RevisionAnnotation)}}
	}
	data, err := patch.Diff(owned, d.Annotations, withEntries(d.Annotations, map[string]string{v1alpha1.RevisionAnnotation: rev}),
		d.ResourceVersion)
	if err != nil || data == nil {
		return d, err
	}
	updated, err := patch.Send(ctx, c.client.MachineV1alpha1().MachineDeployments(d.Namespace).Patch, d.Name, data, c.opts.FieldManager)
	if err != nil {
		return d, fmt.Errorf("recording revision of machine deployment %s: %w", d.Name, err)
	}
	c.writes.Wrote(workqueue.KeyOf(updated), updated.ResourceVersion)
	return updated, nil
}

// deleteSet deletes one set of the deployment, guarded by its UID.
func (c *Controller) deleteSet(ctx context.Context, d *v1alpha1.MachineDeployment, s *v1alpha1.MachineSet) error {
	uid := s.UID
	err := c.client.MachineV1alpha1().MachineSets(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case err == nil:
		c.event(d, corev1.EventTypeNormal, ReasonDeletedSet, "Deleted machine set "+s.Name)
		return nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return nil // gone, or replaced by another of that name
	default:
		return fmt.Errorf("deleting machine set %s: %w", s.Name, err)
	}
}

// cleanup deletes old sets beyond the revision history limit.
func (c *Controller) cleanup(ctx context.Context, d *v1alpha1.MachineDeployment, obs observed) error {
	var errs []error
	for _, s := range setsToDelete(d, obs.newSet, obs.old, obs.counts) {
		errs = append(errs, c.deleteSet(ctx, d, s))
	}
	return errors.Join(errs...)
}

// adopt takes orphan sets into the deployment after an uncached read
// confirms the deployment is the one the cache holds and not being
// deleted.
func (c *Controller) adopt(ctx context.Context, d *v1alpha1.MachineDeployment, orphans []*v1alpha1.MachineSet) ([]*v1alpha1.MachineSet, error) {
	if len(orphans) == 0 {
		return nil, nil
	}
	fresh, err := c.client.MachineV1alpha1().MachineDeployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("confirming machine deployment before adoption: %w", err)
	}
	if fresh.UID != d.UID || fresh.DeletionTimestamp != nil {
		return nil, nil
	}
	var adopted []*v1alpha1.MachineSet
	var errs []error
	for _, s := range orphans {
		updated, err := c.setOwners(ctx, s, ownership.With(s.OwnerReferences, controllerRef(d)))
		if err != nil {
			c.warn(d, ReasonAdoptFailed, err.Error())
			errs = append(errs, err)
			continue
		}
		adopted = append(adopted, updated)
	}
	return adopted, errors.Join(errs...)
}

// release lets go of sets the deployment no longer selects.
func (c *Controller) release(ctx context.Context, d *v1alpha1.MachineDeployment, sets []*v1alpha1.MachineSet) error {
	var errs []error
	for _, s := range sets {
		if _, err := c.setOwners(ctx, s, ownership.Without(s.OwnerReferences, d)); err != nil && !apierrors.IsNotFound(err) {
			c.warn(d, ReasonReleaseFailed, err.Error())
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// setOwners writes a set's owner references, guarded by its
// resourceVersion.
func (c *Controller) setOwners(ctx context.Context, s *v1alpha1.MachineSet, refs []metav1.OwnerReference) (*v1alpha1.MachineSet, error) {
	data, err := patch.Diff(ownership.Fields, s.OwnerReferences, refs, s.ResourceVersion)
	if err != nil || data == nil {
		return s, err
	}
	updated, err := patch.Send(ctx, c.client.MachineV1alpha1().MachineSets(s.Namespace).Patch, s.Name, data, c.opts.FieldManager)
	if err != nil {
		return nil, fmt.Errorf("setting owners of machine set %s: %w", s.Name, err)
	}
	c.writes.Wrote(workqueue.KeyOf(updated), updated.ResourceVersion)
	return updated, nil
}
