package machine

import (
	"encoding/json"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// appliedTemplate is what the last-applied annotation on a Node records:
// the labels, annotations and taints last applied from the machine's node
// template.
type appliedTemplate struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Taints      []corev1.Taint    `json:"taints,omitempty"`
}

// planNodeSync returns the node with the machine's node template applied by
// a three-way merge (last applied, desired, current): keys the template
// set before and no longer sets are removed, keys it sets are set, every
// other key is left alone. It also sets the machine-name label. It returns
// nil when the node needs no change. node is not modified.
func planNodeSync(node *corev1.Node, m *v1alpha1.Machine) *corev1.Node {
	var last appliedTemplate
	if raw := node.Annotations[v1alpha1.LastAppliedNodeTemplateAnnotation]; raw != "" {
		// An unreadable record is treated as empty: nothing is removed.
		_ = json.Unmarshal([]byte(raw), &last)
	}
	tmpl := m.Spec.NodeTemplateSpec
	want := appliedTemplate{
		Labels:      maps.Clone(tmpl.Labels),
		Annotations: maps.Clone(tmpl.Annotations),
		Taints:      slices.Clone(tmpl.Spec.Taints),
	}
	delete(want.Annotations, v1alpha1.LastAppliedNodeTemplateAnnotation)

	out := node.DeepCopy()
	out.Labels = mergeMap(out.Labels, last.Labels, want.Labels)
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[v1alpha1.MachineNameLabelKey] = m.Name
	out.Annotations = mergeMap(out.Annotations, last.Annotations, want.Annotations)
	out.Spec.Taints = mergeTaints(out.Spec.Taints, last.Taints, want.Taints)

	record, _ := json.Marshal(want) // cannot fail for these types
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[v1alpha1.LastAppliedNodeTemplateAnnotation] = string(record)

	if maps.Equal(out.Labels, node.Labels) && maps.Equal(out.Annotations, node.Annotations) &&
		slices.EqualFunc(out.Spec.Taints, node.Spec.Taints, taintEqual) {
		return nil
	}
	return out
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
