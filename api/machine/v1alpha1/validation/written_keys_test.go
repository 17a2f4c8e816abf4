package validation_test

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/api/machine/v1alpha1/validation"
)

const (
	hashKey           = v1alpha1.MachineTemplateHashLabelKey
	nodeKey           = v1alpha1.NodeLabelKey
	updateResultKey   = v1alpha1.UpdateResultLabel
	scaleUpDisabled   = v1alpha1.ScaleUpDisabledLabel
	exists            = metav1.LabelSelectorOpExists
	doesNotExist      = metav1.LabelSelectorOpDoesNotExist
	in                = metav1.LabelSelectorOpIn
	machineSet        = validation.OwnerMachineSet
	machineDeployment = validation.OwnerMachineDeployment
)

// TestControllerWrittenKeys checks a MachineSet and a MachineDeployment with
// the same selector and template: which keys each may not use, and where
// the error is reported.
func TestControllerWrittenKeys(t *testing.T) {
	cases := []struct {
		name           string
		selector       *metav1.LabelSelector
		labels         map[string]string
		wantSet        []fieldError
		wantDeployment []fieldError
	}{
		{
			name:     "node in selector and template (the runaway)",
			selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "run", nodeKey: "x"}},
			labels:   map[string]string{"app": "run", nodeKey: "x"},
			wantSet: []fieldError{
				invalid("spec.selector.matchLabels[node]"), invalid("spec.template.metadata.labels[node]"),
			},
			wantDeployment: []fieldError{
				invalid("spec.selector.matchLabels[node]"), invalid("spec.template.metadata.labels[node]"),
			},
		},
		{
			// Every bound machine carries node: this adopted them all. A
			// positive requirement on node does not count either.
			name: "only node Exists",
			selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: nodeKey, Operator: exists},
			}},
			labels: map[string]string{nodeKey: "x"},
			wantSet: []fieldError{
				invalid("spec.selector"), invalid("spec.selector.matchExpressions[0].key"), invalid("spec.template.metadata.labels[node]"),
			},
			wantDeployment: []fieldError{
				invalid("spec.selector"), invalid("spec.selector.matchExpressions[0].key"), invalid("spec.template.metadata.labels[node]"),
			},
		},
		{
			name: "node DoesNotExist beside a label",
			selector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"app": "run"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: nodeKey, Operator: doesNotExist}},
			},
			labels:         map[string]string{"app": "run"},
			wantSet:        []fieldError{invalid("spec.selector.matchExpressions[0].key")},
			wantDeployment: []fieldError{invalid("spec.selector.matchExpressions[0].key")},
		},
		{
			name:           "update-result in the template only",
			selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "run"}},
			labels:         map[string]string{"app": "run", updateResultKey: "successful"},
			wantSet:        []fieldError{invalid("spec.template.metadata.labels[node.machine.sapcloud.io/update-result]")},
			wantDeployment: []fieldError{invalid("spec.template.metadata.labels[node.machine.sapcloud.io/update-result]")},
		},
		{
			// A deployment's own sets carry the hash; the deployment may not.
			name: "template hash, as a deployment's set carries it",
			selector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"name": "web", hashKey: "abc123"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: hashKey, Operator: in, Values: []string{"abc123"}}},
			},
			labels: map[string]string{"name": "web", hashKey: "abc123"},
			wantDeployment: []fieldError{
				invalid("spec.selector.matchLabels[machine-template-hash]"),
				invalid("spec.selector.matchExpressions[0].key"),
				invalid("spec.template.metadata.labels[machine-template-hash]"),
			},
		},
		{
			name:     "only the template hash",
			selector: &metav1.LabelSelector{MatchLabels: map[string]string{hashKey: "abc123"}},
			labels:   map[string]string{hashKey: "abc123"},
			wantDeployment: []fieldError{
				invalid("spec.selector"),
				invalid("spec.selector.matchLabels[machine-template-hash]"),
				invalid("spec.template.metadata.labels[machine-template-hash]"),
			},
		},
		{
			// The deployment labels its old sets so; the safety controller freezes sets.
			name: "set marks in a deployment's selector and template",
			selector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"name": "web"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: scaleUpDisabled, Operator: doesNotExist}},
			},
			labels: map[string]string{"name": "web", v1alpha1.FreezeLabelKey: v1alpha1.FreezeLabelValue},
			wantDeployment: []fieldError{
				invalid("spec.selector.matchExpressions[0].key"),
				invalid("spec.template.metadata.labels[freeze]"),
			},
		},
		{
			// Gardener's and the cluster-autoscaler's objects select by name.
			name:     "keys the controllers do not write",
			selector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": "web", "node-pool": "a"}},
			labels:   map[string]string{"name": "web", "node-pool": "a", "nodes": "x"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := validMachineSet()
			set.Spec.Selector = tc.selector
			set.Spec.Template.Labels = tc.labels
			checkErrors(t, validation.ValidateMachineSet(set), tc.wantSet...)

			md := validMachineDeployment()
			md.Spec.Selector = tc.selector
			md.Spec.Template.Labels = tc.labels
			checkErrors(t, validation.ValidateMachineDeployment(md), tc.wantDeployment...)
		})
	}
}

// TestSelectorAdopts checks the selectors the controllers adopt through.
func TestSelectorAdopts(t *testing.T) {
	req := func(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	cases := []struct {
		name       string
		selector   *metav1.LabelSelector
		set        bool
		deployment bool
	}{
		{"nil", nil, false, false},
		{"a label", &metav1.LabelSelector{MatchLabels: map[string]string{"name": "web"}}, true, true},
		{"Exists", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req("name", exists)}}, true, true},
		{"In", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req("name", in, "web")}}, true, true},
		{"only DoesNotExist", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req("name", doesNotExist)}}, false, false},
		{"node Exists", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req(nodeKey, exists)}}, false, false},
		{"node In", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req(nodeKey, in, "x")}}, false, false},
		{"a label and node", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "run", nodeKey: "x"}}, false, false},
		{"a label and node DoesNotExist", &metav1.LabelSelector{
			MatchLabels:      map[string]string{"app": "run"},
			MatchExpressions: []metav1.LabelSelectorRequirement{req(nodeKey, doesNotExist)},
		}, false, false},
		{"update-result", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "run", updateResultKey: "successful"}}, false, false},
		{"a label and the hash", &metav1.LabelSelector{MatchLabels: map[string]string{"name": "web", hashKey: "abc"}}, true, false},
		{"only the hash", &metav1.LabelSelector{MatchLabels: map[string]string{hashKey: "abc"}}, true, false},
		{"a label and freeze", &metav1.LabelSelector{
			MatchLabels:      map[string]string{"name": "web"},
			MatchExpressions: []metav1.LabelSelectorRequirement{req(v1alpha1.FreezeLabelKey, doesNotExist)},
		}, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := []bool{validation.SelectorAdopts(machineSet, tc.selector), validation.SelectorAdopts(machineDeployment, tc.selector)}
			if diff := gocmp.Diff([]bool{tc.set, tc.deployment}, got); diff != "" {
				t.Errorf("SelectorAdopts(set, deployment) (-want +got):\n%s", diff)
			}
		})
	}
}
