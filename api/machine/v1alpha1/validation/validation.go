package validation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// Messages of the CRDs' CEL rules, repeated word for word so that users read
// the same sentence whether the API server or a controller rejects an object.
const (
	msgClassNameRequired      = "class.name is required: name the MachineClass to create the machine from"
	msgClassKind              = "class.kind must be MachineClass (or left empty)"
	msgSelectorRequired       = "selector is required: it tells which machines belong to the set"
	msgSelectorEmpty          = "selector must not be empty: an empty selector would adopt every machine in the namespace"
	msgSelectorNotPositive    = "selector must have a positive requirement (a matchLabels entry, or a matchExpressions entry with operator In or Exists): a selector of only NotIn and DoesNotExist would adopt nearly every machine in the namespace"
	msgSelectorMatchLabels    = "selector.matchLabels must match template.metadata.labels: machines created from the template would not be selected"
	msgSelectorMatchExprs     = "selector.matchExpressions must match template.metadata.labels: machines created from the template would not be selected"
	msgProgressDeadline       = "progressDeadlineSeconds must be greater than minReadySeconds"
	msgRollingUpdateForbidden = "strategy.rollingUpdate may only be set when strategy.type is RollingUpdate"
	msgInPlaceUpdateForbidden = "strategy.inPlaceUpdate may only be set when strategy.type is InPlaceUpdate"
	msgInPlaceUpdateRequired  = "strategy.type InPlaceUpdate needs strategy.inPlaceUpdate"
	msgSurgeAndUnavailable    = "maxSurge and maxUnavailable must not both be 0 (an unset maxUnavailable is 0): the rollout could never make progress"
	msgCapacity               = "nodeTemplate.capacity must contain cpu and memory: autoscalers size new nodes from it"
	msgMachineNameLength      = "metadata.name must be at most 63 characters: a machine's name is used as a label value and as its host name"
)

// MaxDuration bounds every duration of a MachineConfiguration: longer than
// anyone waits for a machine, far from overflowing time.Duration.
const MaxDuration = 10000 * time.Hour

// maxMachineNameLength is the longest label value, which a machine's name
// becomes (node.gardener.cloud/machine-name on its Node).
const maxMachineNameLength = 63

// msgDuration is the CEL message of the duration fields, for the field's JSON name.
func msgDuration(name string) string {
	return name + " must be a non-negative duration such as 90s, 20m or 2h"
}

// msgDurationBound is the CEL message of a duration over MaxDuration.
func msgDurationBound(name string) string { return name + " must be at most 10000h" }

// msgDurationPositive is the CEL message of a zero timeout that must not be.
func msgDurationPositive(name string) string { return name + " must be greater than 0s" }

// msgControllerWrittenKeys is the CEL message of the rule that keeps the
// keys controllerWrittenKey names out of owner's selector and template.
func msgControllerWrittenKeys(owner SelectorOwner) string {
	if owner == OwnerMachineDeployment {
		return "selector and template.metadata.labels must not use the label keys " + joinKeys(deploymentWrittenKeys) +
			": the controllers write them on machines and machine sets, so a deployment selecting by them would lose its machine sets and create others without end, or adopt ones that are not its own"
	}
	return "selector and template.metadata.labels must not use the label keys " + joinKeys(machineWrittenKeys) +
		": the controllers write them on machines, so a set selecting by them would lose its machines and create others without end, or adopt machines that are not its own"
}

// joinKeys lists keys as a sentence does: "a, b and c".
func joinKeys(keys []string) string {
	if len(keys) < 2 {
		return strings.Join(keys, "")
	}
	return strings.Join(keys[:len(keys)-1], ", ") + " and " + keys[len(keys)-1]
}

// msgIntOrPercent is the CEL message of maxSurge and maxUnavailable.
func msgIntOrPercent(name string) string {
	return name + " must be a non-negative number or a percentage such as 25%"
}

// msgSecretRefName is the CEL message of secretRef and credentialsSecretRef.
func msgSecretRefName(name string) string {
	return name + ".name is required when " + name + " is set"
}

// msgMinimum is the API server's message for an OpenAPI minimum.
func msgMinimum(minimum int64) string {
	return fmt.Sprintf("should be greater than or equal to %d", minimum)
}

// machineClassKind is the only kind a ClassSpec may name. MCM's
// provider-specific kinds (AWSMachineClass, ...) are gone from MCM too.
const machineClassKind = "MachineClass"

var (
	strategyTypes = []v1alpha1.MachineDeploymentStrategyType{
		v1alpha1.RecreateMachineDeploymentStrategyType,
		v1alpha1.RollingUpdateMachineDeploymentStrategyType,
		v1alpha1.InPlaceUpdateMachineDeploymentStrategyType,
	}
	orchestrationTypes = []v1alpha1.OrchestrationType{
		v1alpha1.OrchestrationTypeAuto,
		v1alpha1.OrchestrationTypeManual,
	}
	machinePhases = []v1alpha1.MachinePhase{
		v1alpha1.MachinePending,
		v1alpha1.MachineAvailable,
		v1alpha1.MachineRunning,
		v1alpha1.MachineTerminating,
		v1alpha1.MachineUnknown,
		v1alpha1.MachineFailed,
		v1alpha1.MachineCrashLoopBackOff,
		v1alpha1.MachineInPlaceUpdating,
		v1alpha1.MachineInPlaceUpdateSuccessful,
		v1alpha1.MachineInPlaceUpdateFailed,
	}
	operationStates = []v1alpha1.MachineState{
		v1alpha1.MachineStateProcessing,
		v1alpha1.MachineStateFailed,
		v1alpha1.MachineStateSuccessful,
	}
	operationTypes = []v1alpha1.MachineOperationType{
		v1alpha1.MachineOperationCreate,
		v1alpha1.MachineOperationUpdate,
		v1alpha1.MachineOperationInPlaceUpdate,
		v1alpha1.MachineOperationDrainNode,
		v1alpha1.MachineOperationHealthCheck,
		v1alpha1.MachineOperationDelete,
	}
	taintEffects = []corev1.TaintEffect{
		corev1.TaintEffectNoSchedule,
		corev1.TaintEffectPreferNoSchedule,
		corev1.TaintEffectNoExecute,
	}
)

// ValidateMachine checks the spec of machine: the class reference, the node
// template the machine's Node is kept in sync with, and the configuration
// overrides.
func ValidateMachine(machine *v1alpha1.Machine) field.ErrorList {
	var errs field.ErrorList
	if len(machine.Name) > maxMachineNameLength {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), machine.Name, msgMachineNameLength))
	}
	return append(errs, validateMachineSpec(&machine.Spec, field.NewPath("spec"))...)
}

// ValidateMachineStatus checks the enumerated fields of machine's status:
// the phase and the last operation's state and type. The machine controller
// drives its state machine from the phase, so an unknown phase (written by a
// newer or foreign controller) must be noticed rather than guessed at.
func ValidateMachineStatus(machine *v1alpha1.Machine) field.ErrorList {
	status := field.NewPath("status")
	var errs field.ErrorList
	if phase := machine.Status.CurrentStatus.Phase; phase != "" && !slices.Contains(machinePhases, phase) {
		errs = append(errs, field.NotSupported(status.Child("currentStatus", "phase"), phase, machinePhases))
	}
	operation := machine.Status.LastOperation
	if state := operation.State; state != "" && !slices.Contains(operationStates, state) {
		errs = append(errs, field.NotSupported(status.Child("lastOperation", "state"), state, operationStates))
	}
	if kind := operation.Type; kind != "" && !slices.Contains(operationTypes, kind) {
		errs = append(errs, field.NotSupported(status.Child("lastOperation", "type"), kind, operationTypes))
	}
	return errs
}

// ValidateMachineClass checks class: the provider spec, the node template
// autoscalers read, and the secret references.
func ValidateMachineClass(class *v1alpha1.MachineClass) field.ErrorList {
	errs := validateProviderSpec(class.ProviderSpec, field.NewPath("providerSpec"))
	if class.NodeTemplate != nil {
		errs = append(errs, validateNodeTemplate(class.NodeTemplate, field.NewPath("nodeTemplate"))...)
	}
	errs = append(errs, validateSecretReference(class.SecretRef, field.NewPath("secretRef"))...)
	errs = append(errs, validateSecretReference(class.CredentialsSecretRef, field.NewPath("credentialsSecretRef"))...)
	return errs
}

// ValidateMachineSet checks the spec of set: counts, the selector and
// whether it selects the template's machines, and the template.
func ValidateMachineSet(set *v1alpha1.MachineSet) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateMinimum(int64(set.Spec.Replicas), 0, spec.Child("replicas"))
	errs = append(errs, validateMinimum(int64(set.Spec.MinReadySeconds), 0, spec.Child("minReadySeconds"))...)
	errs = append(errs, validateOptionalMinimum(set.Spec.AutoPreserveFailedMachineMax, 0, spec.Child("autoPreserveFailedMachineMax"))...)
	errs = append(errs, validateSelectorAndTemplate(OwnerMachineSet, set.Spec.Selector, &set.Spec.Template, spec)...)
	return errs
}

// ValidateMachineDeployment checks the spec of deployment: counts and
// deadlines, the rollout strategy, the selector and whether it selects the
// template's machines, and the template.
func ValidateMachineDeployment(deployment *v1alpha1.MachineDeployment) field.ErrorList {
	spec := field.NewPath("spec")
	s := &deployment.Spec
	errs := validateMinimum(int64(s.Replicas), 0, spec.Child("replicas"))
	errs = append(errs, validateMinimum(int64(s.MinReadySeconds), 0, spec.Child("minReadySeconds"))...)
	errs = append(errs, validateOptionalMinimum(s.RevisionHistoryLimit, 0, spec.Child("revisionHistoryLimit"))...)
	errs = append(errs, validateOptionalMinimum(s.AutoPreserveFailedMachineMax, 0, spec.Child("autoPreserveFailedMachineMax"))...)
	if deadline := s.ProgressDeadlineSeconds; deadline != nil {
		path := spec.Child("progressDeadlineSeconds")
		if *deadline < 1 {
			errs = append(errs, validateMinimum(int64(*deadline), 1, path)...)
		} else if *deadline <= s.MinReadySeconds {
			errs = append(errs, field.Invalid(path, *deadline, msgProgressDeadline))
		}
	}
	errs = append(errs, validateStrategy(&s.Strategy, spec.Child("strategy"))...)
	errs = append(errs, validateSelectorAndTemplate(OwnerMachineDeployment, s.Selector, &s.Template, spec)...)
	return errs
}

func validateMachineSpec(spec *v1alpha1.MachineSpec, path *field.Path) field.ErrorList {
	errs := validateClass(spec.Class, path.Child("class"))
	errs = append(errs, validateNodeTemplateSpec(&spec.NodeTemplateSpec, path.Child("nodeTemplate"))...)
	if spec.MachineConfiguration != nil {
		// The configuration is inlined: its fields are children of spec.
		errs = append(errs, validateMachineConfiguration(spec.MachineConfiguration, path)...)
	}
	return errs
}

func validateClass(class v1alpha1.ClassSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if class.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), msgClassNameRequired))
	} else {
		errs = append(errs, validateObjectName(class.Name, path.Child("name"))...)
	}
	if class.Kind != "" && class.Kind != machineClassKind {
		errs = append(errs, field.Invalid(path.Child("kind"), class.Kind, msgClassKind))
	}
	return errs
}

// validateNodeTemplateSpec checks what the machine controller copies onto
// the Node: an invalid label, annotation or taint would make every update of
// the Node fail.
func validateNodeTemplateSpec(template *v1alpha1.NodeTemplateSpec, path *field.Path) field.ErrorList {
	metadata := path.Child("metadata")
	errs := validateLabels(template.Labels, metadata.Child("labels"))
	errs = append(errs, validateAnnotations(template.Annotations, metadata.Child("annotations"))...)
	errs = append(errs, validateTaints(template.Spec.Taints, path.Child("spec", "taints"))...)
	return errs
}

func validateMachineConfiguration(config *v1alpha1.MachineConfiguration, path *field.Path) field.ErrorList {
	durations := []struct {
		name     string
		value    *metav1.Duration
		positive bool // zero would make no sense: it would fail every machine at once
	}{
		{"drainTimeout", config.MachineDrainTimeout, false},
		{"healthTimeout", config.MachineHealthTimeout, true},
		{"creationTimeout", config.MachineCreationTimeout, true},
		{"inPlaceUpdateTimeout", config.MachineInPlaceUpdateTimeout, false},
		{"machinePreserveTimeout", config.MachinePreserveTimeout, false},
	}
	var errs field.ErrorList
	for _, d := range durations {
		// A stored duration the CEL pattern rejects, or one that overflows,
		// does not decode at all; what decodes can be negative, zero or over
		// the bound.
		if d.value == nil {
			continue
		}
		switch v, p := d.value.Duration, path.Child(d.name); {
		case v < 0:
			errs = append(errs, field.Invalid(p, v.String(), msgDuration(d.name)))
		case v == 0 && d.positive:
			errs = append(errs, field.Invalid(p, v.String(), msgDurationPositive(d.name)))
		case v > MaxDuration:
			errs = append(errs, field.Invalid(p, v.String(), msgDurationBound(d.name)))
		}
	}
	errs = append(errs, validateOptionalMinimum(config.MaxEvictRetries, 0, path.Child("maxEvictRetries"))...)
	return errs
}

func validateProviderSpec(spec runtime.RawExtension, path *field.Path) field.ErrorList {
	if spec.Object != nil {
		// Set by a Go program; it is encoded as an object.
		return nil
	}
	raw := bytes.TrimSpace(spec.Raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return field.ErrorList{field.Required(path, "")}
	case !json.Valid(raw):
		return field.ErrorList{field.Invalid(path, "malformed JSON", "must be of type object")}
	case raw[0] != '{':
		return field.ErrorList{field.Invalid(path, jsonKind(raw[0]), "must be of type object")}
	}
	return nil
}

// jsonKind names the kind of JSON value that starts with b, as the API
// server names it in type errors.
func jsonKind(b byte) string {
	switch b {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	default:
		return "number"
	}
}

func validateNodeTemplate(template *v1alpha1.NodeTemplate, path *field.Path) field.ErrorList {
	capacity := path.Child("capacity")
	var errs field.ErrorList
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := template.Capacity[name]; !ok {
			errs = append(errs, field.Required(capacity.Key(string(name)), msgCapacity))
		}
	}
	errs = append(errs, validateNonNegativeQuantities(template.Capacity, capacity)...)
	errs = append(errs, validateNonNegativeQuantities(template.VirtualCapacity, path.Child("virtualCapacity"))...)
	return errs
}

// validateNonNegativeQuantities rejects negative resources: an autoscaler
// sizing a node from them would compute nonsense.
func validateNonNegativeQuantities(resources corev1.ResourceList, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(resources)) {
		if quantity := resources[name]; quantity.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Key(string(name)), quantity.String(), msgMinimum(0)))
		}
	}
	return errs
}

func validateSecretReference(ref *corev1.SecretReference, path *field.Path) field.ErrorList {
	if ref == nil {
		return nil
	}
	var errs field.ErrorList
	if ref.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), msgSecretRefName(path.String())))
	} else {
		errs = append(errs, validateObjectName(ref.Name, path.Child("name"))...)
	}
	if ref.Namespace != "" {
		for _, msg := range content.IsDNS1123Label(ref.Namespace) {
			errs = append(errs, field.Invalid(path.Child("namespace"), ref.Namespace, msg))
		}
	}
	return errs
}
