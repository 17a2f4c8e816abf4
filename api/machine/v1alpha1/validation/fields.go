// Rules for single fields: object names, labels, annotations and taints
// as the API server checks them on the objects made from a template, and
// numeric minimums.

package validation

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func validateObjectName(name string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range content.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

// validateLabels reports each bad key or value under its own key, in key
// order, so that the errors are stable and point at the offending label.
func validateLabels(labelSet map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, key := range slices.Sorted(maps.Keys(labelSet)) {
		keyPath := path.Key(key)
		for _, msg := range content.IsLabelKey(key) {
			errs = append(errs, field.Invalid(keyPath, key, msg))
		}
		for _, msg := range content.IsLabelValue(labelSet[key]) {
			errs = append(errs, field.Invalid(keyPath, labelSet[key], msg))
		}
	}
	return errs
}

func validateAnnotations(annotations map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, key := range slices.Sorted(maps.Keys(annotations)) {
		// Annotation keys follow the label key rules, ignoring case.
		for _, msg := range content.IsLabelKey(strings.ToLower(key)) {
			errs = append(errs, field.Invalid(path.Key(key), key, msg))
		}
	}
	if err := apivalidation.ValidateAnnotationsSize(annotations); err != nil {
		errs = append(errs, field.TooLong(path, "", apivalidation.TotalAnnotationSizeLimitB))
	}
	return errs
}

func validateTaints(taints []corev1.Taint, path *field.Path) field.ErrorList {
	type keyAndEffect struct {
		key    string
		effect corev1.TaintEffect
	}
	seen := make(map[keyAndEffect]bool, len(taints))
	var errs field.ErrorList
	for i, taint := range taints {
		taintPath := path.Index(i)
		if taint.Key == "" {
			errs = append(errs, field.Required(taintPath.Child("key"), ""))
		} else {
			for _, msg := range content.IsLabelKey(taint.Key) {
				errs = append(errs, field.Invalid(taintPath.Child("key"), taint.Key, msg))
			}
		}
		for _, msg := range content.IsLabelValue(taint.Value) {
			errs = append(errs, field.Invalid(taintPath.Child("value"), taint.Value, msg))
		}
		switch {
		case taint.Effect == "":
			errs = append(errs, field.Required(taintPath.Child("effect"), ""))
		case !slices.Contains(taintEffects, taint.Effect):
			errs = append(errs, field.NotSupported(taintPath.Child("effect"), taint.Effect, taintEffects))
		}
		// The Node API allows a key twice only with different effects.
		id := keyAndEffect{taint.Key, taint.Effect}
		if seen[id] {
			errs = append(errs, field.Duplicate(taintPath, taint.Key+":"+string(taint.Effect)))
		}
		seen[id] = true
	}
	return errs
}

func validateMinimum(value, minimum int64, path *field.Path) field.ErrorList {
	if value < minimum {
		return field.ErrorList{field.Invalid(path, value, msgMinimum(minimum))}
	}
	return nil
}

func validateOptionalMinimum(value *int32, minimum int64, path *field.Path) field.ErrorList {
	if value == nil {
		return nil
	}
	return validateMinimum(int64(*value), minimum, path)
}
