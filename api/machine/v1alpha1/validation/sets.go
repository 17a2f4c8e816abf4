// The rules MachineSets and MachineDeployments share (selector and
// template) and a deployment's own (strategy, update configuration).

package validation

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// SelectorOwner is the kind whose selector and template are checked: it
// decides which label keys the controllers write on what the selector
// selects (see SelectorAdopts).
type SelectorOwner int

const (
	// OwnerMachineSet is a MachineSet, whose selector selects Machines.
	OwnerMachineSet SelectorOwner = iota
	// OwnerMachineDeployment is a MachineDeployment, whose selector selects
	// MachineSets and, through them, Machines.
	OwnerMachineDeployment
)

// Label keys the controllers write on the objects a selector selects. On
// Machines: the machine controller writes node (the name of the machine's
// Node), and the deployment controller writes update-result while it moves
// a machine into the new set of an in-place rollout. A MachineDeployment's
// selector also selects MachineSets, its template becomes theirs and their
// machines', and the controllers write on those sets and machines: the
// template hash the deployment adds to each set it creates (and moves a
// machine's labels to), the scale-up-disabled mark of an in-place
// rollout's old sets, and the safety controller's freeze label.
var (
	machineWrittenKeys    = []string{v1alpha1.NodeLabelKey, v1alpha1.UpdateResultLabel}
	deploymentWrittenKeys = append(slices.Clone(machineWrittenKeys),
		v1alpha1.MachineTemplateHashLabelKey, v1alpha1.ScaleUpDisabledLabel, v1alpha1.FreezeLabelKey)
)

// controllerWrittenKey reports whether a controller writes the label key on
// what a selector of owner selects. A selector using such a key loses hold
// of its objects once the controller rewrites or removes the label (the set
// releases the machine and creates another, without end), or adopts the
// objects the controller labelled for someone else (every bound machine
// carries node); a template carrying it claims the controller's own mark.
// Neither may use one. The template hash is the deployment's to set: the
// sets a deployment creates carry it in their selector and template, so a
// MachineSet may, and a MachineDeployment may not.
func controllerWrittenKey(owner SelectorOwner, key string) bool {
	if owner == OwnerMachineDeployment {
		return slices.Contains(deploymentWrittenKeys, key)
	}
	return slices.Contains(machineWrittenKeys, key)
}

// validateSelectorAndTemplate checks the part MachineSets and
// MachineDeployments share: the template, the selector, and that the
// selector selects the machines created from the template.
func validateSelectorAndTemplate(owner SelectorOwner, selector *metav1.LabelSelector, template *v1alpha1.MachineTemplateSpec, spec *field.Path) field.ErrorList {
	templatePath := spec.Child("template")
	metadata := templatePath.Child("metadata")
	// The CRD accepts any strings here; the API server would only reject
	// them when a controller creates a Machine from the template.
	errs := validateLabels(template.Labels, metadata.Child("labels"))
	errs = append(errs, validateAnnotations(template.Annotations, metadata.Child("annotations"))...)
	errs = append(errs, validateMachineSpec(&template.Spec, templatePath.Child("spec"))...)
	for _, key := range slices.Sorted(maps.Keys(template.Labels)) {
		if controllerWrittenKey(owner, key) {
			errs = append(errs, field.Invalid(metadata.Child("labels").Key(key), template.Labels[key], msgControllerWrittenKeys(owner)))
		}
	}
	errs = append(errs, validateSelector(owner, selector, template.Labels, spec.Child("selector"))...)
	return errs
}

func validateSelector(owner SelectorOwner, selector *metav1.LabelSelector, templateLabels map[string]string, path *field.Path) field.ErrorList {
	if selector == nil {
		return field.ErrorList{field.Required(path, msgSelectorRequired)}
	}
	// Unlike the CEL rule, which only asks whether the fields are present,
	// this also catches "matchLabels: {}".
	if len(selector.MatchLabels) == 0 && len(selector.MatchExpressions) == 0 {
		return field.ErrorList{field.Invalid(path, metav1.FormatLabelSelector(selector), msgSelectorEmpty)}
	}
	if errs := metav1validation.ValidateLabelSelector(selector, metav1validation.LabelSelectorValidationOptions{}, path); len(errs) > 0 {
		// A selector that does not parse cannot be matched against the template.
		return errs
	}

	var errs field.ErrorList
	if !positiveRequirement(owner, selector) {
		errs = append(errs, field.Invalid(path, metav1.FormatLabelSelector(selector), msgSelectorNotPositive))
	}
	matchLabels := path.Child("matchLabels")
	for _, key := range slices.Sorted(maps.Keys(selector.MatchLabels)) {
		want := selector.MatchLabels[key]
		if controllerWrittenKey(owner, key) {
			errs = append(errs, field.Invalid(matchLabels.Key(key), want, msgControllerWrittenKeys(owner)))
		}
		if got, ok := templateLabels[key]; !ok || got != want {
			errs = append(errs, field.Invalid(matchLabels.Key(key), want, msgSelectorMatchLabels))
		}
	}
	matchExpressions := path.Child("matchExpressions")
	templateSet := labels.Set(templateLabels)
	for i, requirement := range selector.MatchExpressions {
		if controllerWrittenKey(owner, requirement.Key) {
			errs = append(errs, field.Invalid(matchExpressions.Index(i).Child("key"), requirement.Key, msgControllerWrittenKeys(owner)))
		}
		// One requirement at a time, so the error names the one that fails.
		single := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{requirement}}
		parsed, err := metav1.LabelSelectorAsSelector(single)
		if err != nil {
			errs = append(errs, field.Invalid(matchExpressions.Index(i), requirement.Key, err.Error()))
			continue
		}
		if !parsed.Matches(templateSet) {
			errs = append(errs, field.Invalid(matchExpressions.Index(i), parsed.String(), msgSelectorMatchExprs))
		}
	}
	return errs
}

// SelectorAdopts reports whether a set (owner OwnerMachineSet) or a
// deployment with selector may adopt anything: the selector has a positive
// requirement and names no key a controller writes on what it selects
// (controllerWrittenKey): node and node.machine.sapcloud.io/update-result,
// and for a deployment also machine-template-hash,
// node.machine.sapcloud.io/scale-up-disabled and freeze.
// A nil selector may not. The controllers adopt only through such a
// selector; any other is invalid (ValidateMachineSet,
// ValidateMachineDeployment) and selects nothing.
func SelectorAdopts(owner SelectorOwner, selector *metav1.LabelSelector) bool {
	if !positiveRequirement(owner, selector) {
		return false
	}
	for key := range selector.MatchLabels {
		if controllerWrittenKey(owner, key) {
			return false
		}
	}
	for _, e := range selector.MatchExpressions {
		if controllerWrittenKey(owner, e.Key) {
			return false
		}
	}
	return true
}

// positiveRequirement reports whether selector has a requirement that an
// object meets only by carrying a label someone other than the controllers
// put there: a matchLabels entry, or an In or Exists expression, on a key
// no controller writes. NotIn and DoesNotExist alone are met by every
// machine without the label, standalone machines and other sets' orphans
// included, and Exists on node by every bound machine, so a MachineSet or
// MachineDeployment with such a selector would adopt them. A nil selector
// has none.
func positiveRequirement(owner SelectorOwner, selector *metav1.LabelSelector) bool {
	if selector == nil {
		return false
	}
	for key := range selector.MatchLabels {
		if !controllerWrittenKey(owner, key) {
			return true
		}
	}
	for _, e := range selector.MatchExpressions {
		if (e.Operator == metav1.LabelSelectorOpIn || e.Operator == metav1.LabelSelectorOpExists) && !controllerWrittenKey(owner, e.Key) {
			return true
		}
	}
	return false
}

func validateStrategy(strategy *v1alpha1.MachineDeploymentStrategy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	// An empty type is an unset one (it defaults to RollingUpdate).
	if strategy.Type != "" && !slices.Contains(strategyTypes, strategy.Type) {
		errs = append(errs, field.NotSupported(path.Child("type"), strategy.Type, strategyTypes))
	}

	if rolling := strategy.RollingUpdate; rolling != nil {
		rollingPath := path.Child("rollingUpdate")
		if strategy.Type != "" && strategy.Type != v1alpha1.RollingUpdateMachineDeploymentStrategyType {
			errs = append(errs, field.Forbidden(rollingPath, msgRollingUpdateForbidden))
		}
		errs = append(errs, validateUpdateConfiguration(&rolling.UpdateConfiguration, rollingPath)...)
		if isZero(rolling.MaxSurge) && (rolling.MaxUnavailable == nil || isZero(rolling.MaxUnavailable)) {
			// Reported on maxSurge: the rule only applies once maxSurge is
			// set, while maxUnavailable may well be unset.
			errs = append(errs, field.Invalid(rollingPath.Child("maxSurge"), rolling.MaxSurge.String(), msgSurgeAndUnavailable))
		}
	}

	inPlacePath := path.Child("inPlaceUpdate")
	switch inPlace := strategy.InPlaceUpdate; {
	case inPlace != nil:
		if strategy.Type != v1alpha1.InPlaceUpdateMachineDeploymentStrategyType {
			errs = append(errs, field.Forbidden(inPlacePath, msgInPlaceUpdateForbidden))
		}
		errs = append(errs, validateUpdateConfiguration(&inPlace.UpdateConfiguration, inPlacePath)...)
		if kind := inPlace.OrchestrationType; kind != "" && !slices.Contains(orchestrationTypes, kind) {
			errs = append(errs, field.NotSupported(inPlacePath.Child("orchestrationType"), kind, orchestrationTypes))
		}
	case strategy.Type == v1alpha1.InPlaceUpdateMachineDeploymentStrategyType:
		errs = append(errs, field.Required(inPlacePath, msgInPlaceUpdateRequired))
	}
	return errs
}

func validateUpdateConfiguration(config *v1alpha1.UpdateConfiguration, path *field.Path) field.ErrorList {
	values := []struct {
		name  string
		value *intstr.IntOrString
	}{
		{"maxSurge", config.MaxSurge},
		{"maxUnavailable", config.MaxUnavailable},
	}
	var errs field.ErrorList
	for _, v := range values {
		if v.value == nil {
			continue
		}
		if _, ok := nonNegativeIntOrPercent(*v.value); !ok {
			errs = append(errs, field.Invalid(path.Child(v.name), v.value.String(), msgIntOrPercent(v.name)))
		}
	}
	return errs
}

// nonNegativeIntOrPercent returns the number in value ("5", 5 or "5%" give
// 5) and whether value is a non-negative number or percentage the
// controllers can compute with.
func nonNegativeIntOrPercent(value intstr.IntOrString) (int, bool) {
	switch value.Type {
	case intstr.Int:
		return int(value.IntVal), value.IntVal >= 0
	case intstr.String:
		digits := strings.TrimSuffix(value.StrVal, "%")
		if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
			return 0, false
		}
		// Rejects numbers too large to compute with, which the CEL pattern lets through.
		n, err := strconv.Atoi(digits)
		return n, err == nil
	}
	return 0, false
}

// isZero reports whether value is set to a well-formed 0 or 0%. The CEL rule
// compares the strings with "0" and "0%"; this also catches "00".
func isZero(value *intstr.IntOrString) bool {
	if value == nil {
		return false
	}
	n, ok := nonNegativeIntOrPercent(*value)
	return ok && n == 0
}
