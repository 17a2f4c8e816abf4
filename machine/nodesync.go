package machine

import (
	"encoding/json"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// appliedTemplate is what the last-applied annotation on a Node records:
// the labels, annotations and taints last applied from the machine's node
// template.
type appliedTemplate struct {
	Labels      map[string]string
	Annotations map[string]string
	Taints      []corev1.Taint
}

func (a appliedTemplate) empty() bool {
	return len(a.Labels) == 0 && len(a.Annotations) == 0 && len(a.Taints) == 0
}

func (a appliedTemplate) equal(b appliedTemplate) bool {
	return maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations) &&
		slices.EqualFunc(a.Taints, b.Taints, taintEqual)
}

// templateRecord is the last-applied annotation as it is read. MCM writes
// the JSON of the machine's NodeTemplateSpec
// ({"metadata":{"labels":…,"annotations":…},"spec":{"taints":…}}), and so
// does this controller; an earlier version of it wrote the three fields at
// the top level. Both shapes are read, so that a node keeps its record
// across a switch from MCM or from that version.
type templateRecord struct {
	v1alpha1.NodeTemplateSpec
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Taints      []corev1.Taint    `json:"taints,omitempty"`
}

// readTemplateRecord decodes a last-applied annotation. An unreadable
// record is treated as empty: nothing is removed on its account.
func readTemplateRecord(raw string) appliedTemplate {
	var r templateRecord
	if raw == "" || json.Unmarshal([]byte(raw), &r) != nil {
		return appliedTemplate{}
	}
	out := appliedTemplate{
		Labels:      r.NodeTemplateSpec.Labels,
		Annotations: r.NodeTemplateSpec.Annotations,
		Taints:      r.Spec.Taints,
	}
	if len(r.Labels) > 0 || len(r.Annotations) > 0 || len(r.Taints) > 0 {
		out = appliedTemplate{
			Labels:      mergeMap(out.Labels, nil, r.Labels),
			Annotations: mergeMap(out.Annotations, nil, r.Annotations),
			Taints:      append(out.Taints, r.Taints...),
		}
	}
	return out
}

// desiredTemplate is what the machine's node template applies.
func desiredTemplate(m *v1alpha1.Machine) appliedTemplate {
	tmpl := m.Spec.NodeTemplateSpec
	want := appliedTemplate{
		Labels:      maps.Clone(tmpl.Labels),
		Annotations: maps.Clone(tmpl.Annotations),
		Taints:      slices.Clone(tmpl.Spec.Taints),
	}
	// The records are ours to write; a template cannot set them.
	delete(want.Annotations, v1alpha1.LastAppliedNodeTemplateAnnotation)
	delete(want.Annotations, v1alpha1.LastAppliedVirtualCapacityAnnotation)
	delete(want.Annotations, v1alpha1.MachineUIDAnnotation)
	return want
}

// templateRecordOf is the last-applied annotation for what m's template
// applies, in MCM's format.
func templateRecordOf(want appliedTemplate) string {
	spec := v1alpha1.NodeTemplateSpec{}
	spec.Labels, spec.Annotations, spec.Spec.Taints = want.Labels, want.Annotations, want.Taints
	raw, _ := json.Marshal(spec) // cannot fail for these types
	return string(raw)
}

// planNodeSync returns the node as the machine wants it, or nil when the
// node needs no change. node is not modified.
//
//   - The node template's labels, annotations and taints are applied by a
//     three-way merge (last applied, desired, current): keys the template
//     set before and no longer sets are removed, keys it sets are set,
//     every other key is left alone. The record of what was applied is
//     kept in MCM's format and rewritten only when its content changes;
//     a template that applies nothing needs no record.
//   - The machine-name label is set, and the binding to the machine
//     (v1alpha1.MachineUIDAnnotation): planNodeSync is only asked for
//     the node of a machine that owns it (see bindingOf).
//   - The node finalizer is added while neither the node nor the machine
//     is being deleted, so that deleting the node goes through the
//     machine's deletion (drain first).
//   - With class, the class's nodeTemplate.virtualCapacity is applied to
//     status.capacity the same three-way way, recorded in the
//     last-applied-virtual-capacity annotation. A nil class (not found)
//     leaves capacity and its record alone.
func planNodeSync(node *corev1.Node, m *v1alpha1.Machine, class *v1alpha1.MachineClass) *corev1.Node {
	out := node.DeepCopy()
	last := readTemplateRecord(node.Annotations[v1alpha1.LastAppliedNodeTemplateAnnotation])
	want := desiredTemplate(m)
	out.Labels = mergeMap(out.Labels, last.Labels, want.Labels)
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[v1alpha1.MachineNameLabelKey] = m.Name
	out.Annotations = mergeMap(out.Annotations, last.Annotations, want.Annotations)
	setMapKey(&out.Annotations, v1alpha1.MachineUIDAnnotation, string(m.UID))
	out.Spec.Taints = mergeTaints(out.Spec.Taints, last.Taints, want.Taints)
	switch {
	case last.equal(want):
		// The record (or its absence) says what is applied, in whichever
		// format: keep it.
	case want.empty():
		delete(out.Annotations, v1alpha1.LastAppliedNodeTemplateAnnotation)
	default:
		setMapKey(&out.Annotations, v1alpha1.LastAppliedNodeTemplateAnnotation, templateRecordOf(want))
	}

	if node.DeletionTimestamp == nil && m.DeletionTimestamp == nil && !slices.Contains(out.Finalizers, v1alpha1.NodeFinalizer) {
		out.Finalizers = append(out.Finalizers, v1alpha1.NodeFinalizer)
	}
	if class != nil {
		syncVirtualCapacity(out, node, class)
	}

	if nodeSame(out, node) {
		return nil
	}
	return out
}

// syncVirtualCapacity applies the class's virtual capacity to out's
// status.capacity: resources the record lists and the class no longer
// has are removed, the class's are set; the record follows.
func syncVirtualCapacity(out, node *corev1.Node, class *v1alpha1.MachineClass) {
	var want corev1.ResourceList
	if class.NodeTemplate != nil {
		want = class.NodeTemplate.VirtualCapacity
	}
	last, recorded := machinestate.RecordedVirtualCapacity(node)
	if len(want) == 0 && len(last) == 0 && !recorded {
		return
	}
	for name := range last {
		if _, ok := want[name]; !ok {
			delete(out.Status.Capacity, name)
		}
	}
	for name, q := range want {
		if cur, ok := out.Status.Capacity[name]; !ok || !cur.Equal(q) {
			if out.Status.Capacity == nil {
				out.Status.Capacity = corev1.ResourceList{}
			}
			out.Status.Capacity[name] = q.DeepCopy()
		}
	}
	switch {
	case len(want) == 0:
		delete(out.Annotations, v1alpha1.LastAppliedVirtualCapacityAnnotation)
	case !apiequality.Semantic.DeepEqual(last, want) || !recorded:
		record, _ := json.Marshal(want) // cannot fail for a ResourceList
		setMapKey(&out.Annotations, v1alpha1.LastAppliedVirtualCapacityAnnotation, string(record))
	}
}

func setMapKey(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}

// mergeMap applies want over cur, removing the keys of last that want no
// longer has. cur is modified and returned (it is a copy).
func mergeMap(cur, last, want map[string]string) map[string]string {
	for k := range last {
		if _, ok := want[k]; !ok {
			delete(cur, k)
		}
	}
	if len(want) > 0 && cur == nil {
		cur = map[string]string{}
	}
	maps.Copy(cur, want)
	return cur
}

// mergeTaints does for taints, identified by key and effect, what
// mergeMap does for labels. Existing taints keep their position.
func mergeTaints(cur, last, want []corev1.Taint) []corev1.Taint {
	same := func(a, b corev1.Taint) bool { return a.Key == b.Key && a.Effect == b.Effect }
	var out []corev1.Taint
	for _, t := range cur {
		wanted := slices.ContainsFunc(want, func(w corev1.Taint) bool { return same(w, t) })
		applied := slices.ContainsFunc(last, func(l corev1.Taint) bool { return same(l, t) })
		if applied && !wanted {
			continue
		}
		out = append(out, t)
	}
	for _, w := range want {
		i := slices.IndexFunc(out, func(t corev1.Taint) bool { return same(t, w) })
		if i < 0 {
			out = append(out, w)
			continue
		}
		if out[i].Value != w.Value {
			out[i].Value = w.Value
		}
	}
	return out
}

func taintEqual(a, b corev1.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect
}
