package deployment

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// baseTemplate is a template with every kind of field set, so that each
// mutation below changes something that is there.
func baseTemplate() *v1alpha1.MachineTemplateSpec {
	return &v1alpha1.MachineTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"pool": "workers", "zone": "a"},
			Annotations: map[string]string{"note": "x"},
		},
		Spec: v1alpha1.MachineSpec{
			Class: v1alpha1.ClassSpec{APIGroup: "machine.sapcloud.io", Kind: "MachineClass", Name: "class-a"},
			NodeTemplateSpec: v1alpha1.NodeTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"role": "worker"}},
				Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}}},
			},
			MachineConfiguration: &v1alpha1.MachineConfiguration{
				MachineDrainTimeout: &metav1.Duration{Duration: time.Hour},
				MaxEvictRetries:     new(int32(10)),
				NodeConditions:      new("DiskPressure"),
			},
		},
	}
}

type templateMutation struct {
	name   string
	mutate func(*v1alpha1.MachineTemplateSpec)
}

// propagated are changes that reach machines without replacing them.
var propagated = []templateMutation{
	{"node template label", func(t *v1alpha1.MachineTemplateSpec) { t.Spec.NodeTemplateSpec.Labels["role"] = "infra" }},
	{"node template annotation", func(t *v1alpha1.MachineTemplateSpec) {
		t.Spec.NodeTemplateSpec.Annotations = map[string]string{"a": "b"}
	}},
	{"node template taints", func(t *v1alpha1.MachineTemplateSpec) { t.Spec.NodeTemplateSpec.Spec.Taints = nil }},
	{"drain timeout", func(t *v1alpha1.MachineTemplateSpec) {
		t.Spec.MachineConfiguration.MachineDrainTimeout = &metav1.Duration{Duration: 2 * time.Hour}
	}},
	{"health timeout", func(t *v1alpha1.MachineTemplateSpec) {
		t.Spec.MachineConfiguration.MachineHealthTimeout = &metav1.Duration{Duration: time.Minute}
	}},
	{"creation timeout", func(t *v1alpha1.MachineTemplateSpec) {
		t.Spec.MachineConfiguration.MachineCreationTimeout = &metav1.Duration{Duration: time.Minute}
	}},
	{"max evict retries", func(t *v1alpha1.MachineTemplateSpec) { t.Spec.MachineConfiguration.MaxEvictRetries = new(int32(3)) }},
	{"node conditions", func(t *v1alpha1.MachineTemplateSpec) {
		t.Spec.MachineConfiguration.NodeConditions = new("KernelDeadlock")
	}},
	{"no machine configuration", func(t *v1alpha1.MachineTemplateSpec) { t.Spec.MachineConfiguration = nil }},
	{"class kind", func(t *v1alpha1.MachineTemplateSpec) { t.Spec.Class.Kind = "" }},
	{"hash label", func(t *v1alpha1.MachineTemplateSpec) { t.Labels[v1alpha1.MachineTemplateHashLabelKey] = "abcde" }},
}

// rolledOut are changes that need new machines.
var rolledOut = []templateMutation{
	{"class name", func(t *v1alpha1.MachineTemplateSpec) { t.Spec.Class.Name = "class-b" }},
	{"class api group", func(t *v1alpha1.MachineTemplateSpec) { t.Spec.Class.APIGroup = "" }},
	{"template label value", func(t *v1alpha1.MachineTemplateSpec) { t.Labels["zone"] = "b" }},
	{"template label added", func(t *v1alpha1.MachineTemplateSpec) { t.Labels["team"] = "x" }},
	{"template label removed", func(t *v1alpha1.MachineTemplateSpec) { delete(t.Labels, "zone") }},
	{"template annotation", func(t *v1alpha1.MachineTemplateSpec) { t.Annotations["note"] = "y" }},
	{"provider ID", func(t *v1alpha1.MachineTemplateSpec) { t.Spec.ProviderID = "aws:///i-1" }},
}

func TestTemplateHashIgnoresPropagatedFields(t *testing.T) {
	base := templateHash(baseTemplate(), nil)
	for _, m := range propagated {
		t.Run(m.name, func(t *testing.T) {
			tpl := baseTemplate()
			m.mutate(tpl)
			if got := templateHash(tpl, nil); got != base {
				t.Errorf("hash changed from %s to %s", base, got)
			}
			if !sameTemplate(tpl, baseTemplate()) {
				t.Error("sameTemplate = false, want true")
			}
		})
	}
}

func TestTemplateHashChangesWithRolledOutFields(t *testing.T) {
	base := templateHash(baseTemplate(), nil)
	for _, m := range rolledOut {
		t.Run(m.name, func(t *testing.T) {
			tpl := baseTemplate()
			m.mutate(tpl)
			if got := templateHash(tpl, nil); got == base {
				t.Errorf("hash stayed %s", base)
			}
			if sameTemplate(tpl, baseTemplate()) {
				t.Error("sameTemplate = true, want false")
			}
		})
	}
}

func TestTemplateHashCollisionCount(t *testing.T) {
	tpl := baseTemplate()
	seen := map[string]string{}
	for name, count := range map[string]*int32{"nil": nil, "0": new(int32(0)), "1": new(int32(1)), "2": new(int32(2))} {
		h := templateHash(tpl, count)
		if other, ok := seen[h]; ok {
			t.Errorf("collision count %s and %s give the same hash %s", name, other, h)
		}
		seen[h] = name
	}
}

func TestTemplateHashIsStableLabelValue(t *testing.T) {
	tpl := baseTemplate()
	h := templateHash(tpl, nil)
	if errs := validation.IsValidLabelValue(h); len(errs) > 0 {
		t.Errorf("hash %q is no label value: %v", h, errs)
	}
	for range 10 {
		if again := templateHash(baseTemplate(), nil); again != h {
			t.Fatalf("hash not stable: %s then %s", h, again)
		}
	}
	// Pinned: a different value means every deployment would get new set
	// names for unchanged templates after an upgrade.
	const pinned = "ddc97f758"
	if h != pinned {
		t.Errorf("templateHash(baseTemplate) = %s, pinned %s", h, pinned)
	}
	if tpl.Labels[v1alpha1.MachineTemplateHashLabelKey] != "" || tpl.Spec.MachineConfiguration == nil {
		t.Error("templateHash modified its argument")
	}
}

func TestSameTemplateTreatsEmptyAndMissingLabelsAlike(t *testing.T) {
	a, b := baseTemplate(), baseTemplate()
	a.Labels, b.Labels = nil, map[string]string{v1alpha1.MachineTemplateHashLabelKey: "x"}
	if !sameTemplate(a, b) {
		t.Error("no labels and only the hash label should be the same template")
	}
	if templateHash(a, nil) != templateHash(b, nil) {
		t.Error("hashes differ")
	}
}

// genTemplate draws a template with a random mix of fields.
func genTemplate(t *rapid.T) *v1alpha1.MachineTemplateSpec {
	tpl := baseTemplate()
	tpl.Labels = rapid.MapOfN(rapid.StringMatching(`[a-z]{1,5}`), rapid.StringMatching(`[a-z0-9]{0,5}`), 0, 4).Draw(t, "labels")
	tpl.Spec.Class.Name = rapid.StringMatching(`class-[a-z]{1,3}`).Draw(t, "class")
	tpl.Spec.ProviderID = rapid.SampledFrom([]string{"", "p1"}).Draw(t, "providerID")
	if rapid.Bool().Draw(t, "noConfig") {
		tpl.Spec.MachineConfiguration = nil
	}
	return tpl
}

// TestTemplateHashProperties: a propagated change never changes the hash,
// a rolled-out change always does, whatever the template.
func TestTemplateHashProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tpl := genTemplate(t)
		if tpl.Labels == nil {
			tpl.Labels = map[string]string{}
		}
		if tpl.Spec.MachineConfiguration == nil {
			tpl.Spec.MachineConfiguration = &v1alpha1.MachineConfiguration{}
		}
		var count *int32
		if rapid.Bool().Draw(t, "counted") {
			count = new(rapid.Int32Range(0, 5).Draw(t, "collisionCount"))
		}
		before := templateHash(tpl, count)

		same := tpl.DeepCopy()
		rapid.SampledFrom(propagated).Draw(t, "propagated").mutate(same)
		if got := templateHash(same, count); got != before {
			t.Fatalf("propagated change: hash %s became %s", before, got)
		}

		changed := tpl.DeepCopy()
		switch rapid.IntRange(0, 2).Draw(t, "change") {
		case 0:
			changed.Spec.Class.Name += "x"
		case 1:
			changed.Labels["label-"+rapid.StringMatching(`[a-z]{1,3}`).Draw(t, "key")] = "v"
		case 2:
			changed.Annotations["note"] += "!"
		}
		if got := templateHash(changed, count); got == before {
			t.Fatalf("rolled-out change kept hash %s", before)
		}

		next := int32(0)
		if count != nil {
			next = *count + 1
		}
		if got := templateHash(tpl, &next); got == before {
			t.Fatalf("another collision count kept hash %s", before)
		}
	})
}
