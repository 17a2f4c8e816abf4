package deployment

import (
	"cmp"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/ownership"
	"github.com/mcmkit/mcm/internal/patch"
)

// byAge returns sets ordered oldest first: by creation time, then by name so
// that sets created in the same second still have one order. Rollout steps
// take old sets in this order, so the sets furthest behind go first. The
// argument is not reordered.
func byAge(sets []*v1alpha1.MachineSet) []*v1alpha1.MachineSet {
	sorted := slices.Clone(sets)
	slices.SortStableFunc(sorted, compareAge)
	return sorted
}

// compareAge orders two sets oldest first, then by name.
func compareAge(a, b *v1alpha1.MachineSet) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// findNewSet returns the deployment's new set: the oldest set with the
// deployment's template, or nil when there is none. More than one set can
// have the template (MCM and Kubernetes have seen this after upgrades that
// changed hashing); taking the oldest makes every sync pick the same one.
func findNewSet(d *v1alpha1.MachineDeployment, sets []*v1alpha1.MachineSet) *v1alpha1.MachineSet {
	for _, s := range byAge(sets) {
		if sameTemplate(&s.Spec.Template, &d.Spec.Template) {
			return s
		}
	}
	return nil
}

// splitSets separates the deployment's sets into its new set (nil when it
// does not exist yet) and the old ones, in the order given.
func splitSets(d *v1alpha1.MachineDeployment, sets []*v1alpha1.MachineSet) (*v1alpha1.MachineSet, []*v1alpha1.MachineSet) {
	newSet := findNewSet(d, sets)
	var old []*v1alpha1.MachineSet
	for _, s := range sets {
		if s != newSet {
			old = append(old, s)
		}
	}
	return newSet, old
}

// withNew returns old followed by newSet when there is one: all sets of a
// deployment, as most sums need them.
func withNew(newSet *v1alpha1.MachineSet, old []*v1alpha1.MachineSet) []*v1alpha1.MachineSet {
	all := slices.Clone(old)
	if newSet != nil {
		all = append(all, newSet)
	}
	return all
}

// activeSets returns the sets that are meant to have machines (spec.replicas
// above 0), skipping nil entries.
func activeSets(sets []*v1alpha1.MachineSet) []*v1alpha1.MachineSet {
	var active []*v1alpha1.MachineSet
	for _, s := range sets {
		if s != nil && s.Spec.Replicas > 0 {
			active = append(active, s)
		}
	}
	return active
}

// specReplicas sums spec.replicas over sets.
func specReplicas(sets []*v1alpha1.MachineSet) int32 {
	var sum int32
	for _, s := range sets {
		if s != nil {
			sum += s.Spec.Replicas
		}
	}
	return sum
}

// newest returns the most recently created of sets, or nil when there are none.
func newest(sets []*v1alpha1.MachineSet) *v1alpha1.MachineSet {
	if len(sets) == 0 {
		return nil
	}
	sorted := byAge(sets)
	return sorted[len(sorted)-1]
}

// findActiveOrLatest returns the set a scaling event sizes alone: the only
// active set, or when no set is active the new set (the newest old set when
// there is no new set), which scales the deployment up from zero. It returns
// nil when several sets are active, which are then scaled together.
func findActiveOrLatest(newSet *v1alpha1.MachineSet, old []*v1alpha1.MachineSet) *v1alpha1.MachineSet {
	switch active := activeSets(withNew(newSet, old)); len(active) {
	case 0:
		if newSet != nil {
			return newSet
		}
		return newest(old)
	case 1:
		return active[0]
	default:
		return nil
	}
}

// isSaturated reports whether set, the new set, already carries the whole
// deployment: sized for the current replicas, told so by its desired-replicas
// annotation, and with that many machines available. Old sets are then of no
// use and can go to 0 without a rolling step.
func isSaturated(d *v1alpha1.MachineDeployment, set *v1alpha1.MachineSet, counts map[string]machineCounts) bool {
	if set == nil || set.Spec.Replicas != d.Spec.Replicas {
		return false
	}
	desired, ok := desiredReplicasOf(set)
	return ok && desired == d.Spec.Replicas && counts[set.Name].Available >= d.Spec.Replicas
}

// wantedSet is the set s as the deployment wants it after this step: size
// replicas; the deployment's replica annotations when it was sized now; its
// policy annotations (withSetPolicy), on every set; and, for the new set,
// the deployment's annotations, its revision, its minReadySeconds, its
// autoPreserveFailedMachineMax and the in-place parts of its template (node template, machine configuration,
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
	// Only the new set follows the deployment's maximum, as in MCM: old
	// sets keep the marks they have while they shrink.
	want.Spec.AutoPreserveFailedMachineMax = copyInt32(d.Spec.AutoPreserveFailedMachineMax)
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
	spec["autoPreserveFailedMachineMax"] = s.Spec.AutoPreserveFailedMachineMax
	// Of the labels, only the in-place rollout's scale-up-disabled is the
	// deployment's.
	f["metadata"] = patch.Fields{"annotations": s.Annotations, "labels": patch.Keys(s.Labels, v1alpha1.ScaleUpDisabledLabel)}
	return f
}

// controllerRef is the owner reference a deployment puts on its sets.
func controllerRef(d *v1alpha1.MachineDeployment) metav1.OwnerReference {
	return ownership.ControllerRef(d, v1alpha1.SchemeGroupVersion.WithKind("MachineDeployment"))
}

// newSetOf is the new set of a deployment for its current template: named
// <deployment>-<hash>, labelled and selected by machine-template-hash on
// top of the deployment's selector, with the deployment's annotations and
// revision and the given replicas.
func newSetOf(d *v1alpha1.MachineDeployment, replicas int32, revision int64) (*v1alpha1.MachineSet, error) {
	hash := newSetHash(d)
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
			Name:            newSetName(d),
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
			// The maximum goes to the new set only, as in MCM.
			AutoPreserveFailedMachineMax: copyInt32(d.Spec.AutoPreserveFailedMachineMax),
		},
	}, nil
}

// newSetHash is the machine-template-hash of d's new set.
func newSetHash(d *v1alpha1.MachineDeployment) string {
	return templateHash(&d.Spec.Template, d.Status.CollisionCount)
}

// newSetName is the name of d's new set.
func newSetName(d *v1alpha1.MachineDeployment) string { return d.Name + "-" + newSetHash(d) }

// copyInt32 returns a copy of p, nil for nil.
func copyInt32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
