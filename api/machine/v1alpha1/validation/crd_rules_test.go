package validation_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/api/machine/v1alpha1/validation"
)

const fixtureTemplate = `
  template:
    metadata:
      labels: {name: web}
    spec:
      class: {name: small}`

// rejectedObjects are objects the API server rejects through a CEL rule or
// an OpenAPI constraint of the CRDs (the first ones mirror the admission
// test of package crds). message is the part of the API server's message
// the Go validation must repeat.
var rejectedObjects = []struct {
	name, object, message string
	// undecodable marks objects that a typed client cannot even decode, so
	// no controller ever gets to validate them.
	undecodable bool
}{
	{name: "machine without class name", object: `
kind: Machine
spec:
  class: {kind: MachineClass}`, message: "class.name is required"},
	{name: "machine with a foreign class kind", object: `
kind: Machine
spec:
  class: {kind: AWSMachineClass, name: small}`, message: "class.kind must be MachineClass"},
	{name: "machine with an unparseable drain timeout", object: `
kind: Machine
spec:
  class: {name: small}
  drainTimeout: 2 hours`, undecodable: true},
	{name: "machine with a negative health timeout", object: `
kind: Machine
spec:
  class: {name: small}
  healthTimeout: -5m`, message: "healthTimeout must be a non-negative duration"},
	{name: "machine with an unknown phase", object: `
kind: Machine
spec:
  class: {name: small}
status:
  currentStatus: {phase: Exploded}`, message: `Unsupported value: "Exploded"`},
	{name: "machine set without selector", object: `
kind: MachineSet
spec:
  replicas: 1` + fixtureTemplate, message: "selector is required"},
	{name: "machine set whose selector misses the template", object: `
kind: MachineSet
spec:
  replicas: 1
  selector:
    matchLabels: {name: api}` + fixtureTemplate, message: "selector.matchLabels must match template.metadata.labels"},
	{name: "machine deployment whose expression excludes the template", object: `
kind: MachineDeployment
spec:
  replicas: 1
  selector:
    matchExpressions:
    - {key: name, operator: NotIn, values: [web]}` + fixtureTemplate, message: "selector.matchExpressions must match template.metadata.labels"},
	{name: "machine deployment with negative replicas", object: `
kind: MachineDeployment
spec:
  replicas: -1
  selector:
    matchLabels: {name: web}` + fixtureTemplate, message: "should be greater than or equal to 0"},
	{name: "machine deployment with maxSurge and maxUnavailable both zero", object: `
kind: MachineDeployment
spec:
  replicas: 1
  selector:
    matchLabels: {name: web}
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 0, maxUnavailable: 0%}` + fixtureTemplate, message: "maxSurge and maxUnavailable must not both be 0"},
	{name: "machine deployment with rollingUpdate under Recreate", object: `
kind: MachineDeployment
spec:
  replicas: 1
  selector:
    matchLabels: {name: web}
  strategy:
    type: Recreate
    rollingUpdate: {maxSurge: 1}` + fixtureTemplate, message: "strategy.rollingUpdate may only be set when strategy.type is RollingUpdate"},
	{name: "machine deployment with InPlaceUpdate but no parameters", object: `
kind: MachineDeployment
spec:
  replicas: 1
  selector:
    matchLabels: {name: web}
  strategy:
    type: InPlaceUpdate` + fixtureTemplate, message: "strategy.type InPlaceUpdate needs strategy.inPlaceUpdate"},
	{name: "machine deployment with an unknown strategy", object: `
kind: MachineDeployment
spec:
  replicas: 1
  selector:
    matchLabels: {name: web}
  strategy:
    type: BlueGreen` + fixtureTemplate, message: `Unsupported value: "BlueGreen"`},
	{name: "machine deployment with a malformed maxSurge", object: `
kind: MachineDeployment
spec:
  replicas: 1
  selector:
    matchLabels: {name: web}
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: lots}` + fixtureTemplate, message: "maxSurge must be a non-negative number or a percentage"},
	{name: "machine deployment with a progress deadline below minReadySeconds", object: `
kind: MachineDeployment
spec:
  replicas: 1
  minReadySeconds: 600
  progressDeadlineSeconds: 300
  selector:
    matchLabels: {name: web}` + fixtureTemplate, message: "progressDeadlineSeconds must be greater than minReadySeconds"},
	{name: "machine class whose node template lacks memory", object: `
kind: MachineClass
providerSpec: {}
nodeTemplate:
  capacity: {cpu: "2"}
  instanceType: small
  region: local
  zone: local-a`, message: "nodeTemplate.capacity must contain cpu and memory"},
	{name: "machine class with a nameless secret reference", object: `
kind: MachineClass
providerSpec: {}
secretRef: {namespace: default}`, message: "secretRef.name is required"},

	// The remaining CEL rules, so that every rule of the CRDs has a case.
	{name: "machine with negative drain, creation, in-place and preserve timeouts", object: `
kind: Machine
spec:
  class: {name: small}
  drainTimeout: -1h
  creationTimeout: -1m
  inPlaceUpdateTimeout: -1s
  machinePreserveTimeout: -1ms`, message: "drainTimeout must be a non-negative duration"},
	{name: "machine set whose template has a negative preserve timeout", object: `
kind: MachineSet
spec:
  selector:
    matchLabels: {name: web}` + fixtureTemplate + `
      machinePreserveTimeout: -3h`, message: "machinePreserveTimeout must be a non-negative duration"},
	{name: "machine set with an empty selector", object: `
kind: MachineSet
spec:
  selector: {}` + fixtureTemplate, message: "selector must not be empty"},
	{name: "machine deployment with a negative maxUnavailable", object: `
kind: MachineDeployment
spec:
  selector:
    matchLabels: {name: web}
  strategy:
    rollingUpdate: {maxUnavailable: -1}` + fixtureTemplate, message: "maxUnavailable must be a non-negative number or a percentage"},
	{name: "machine deployment with inPlaceUpdate under RollingUpdate", object: `
kind: MachineDeployment
spec:
  selector:
    matchLabels: {name: web}
  strategy:
    type: RollingUpdate
    inPlaceUpdate: {orchestrationType: Auto}` + fixtureTemplate, message: "strategy.inPlaceUpdate may only be set when strategy.type is InPlaceUpdate"},
	{name: "machine deployment with an unknown orchestration type", object: `
kind: MachineDeployment
spec:
  selector:
    matchLabels: {name: web}
  strategy:
    type: InPlaceUpdate
    inPlaceUpdate: {orchestrationType: Sometimes}` + fixtureTemplate, message: `Unsupported value: "Sometimes"`},
	{name: "machine deployment with a progress deadline of 0", object: `
kind: MachineDeployment
spec:
  progressDeadlineSeconds: 0
  selector:
    matchLabels: {name: web}` + fixtureTemplate, message: "should be greater than or equal to 1"},
	{name: "machine class with a nameless credentials reference", object: `
kind: MachineClass
providerSpec: {}
credentialsSecretRef: {namespace: default}`, message: "credentialsSecretRef.name is required when credentialsSecretRef is set"},
	{name: "machine class without provider spec", object: `
kind: MachineClass
provider: AWS`, message: "providerSpec: Required value"},
}

// fixtureHeader completes the rejected objects, which leave it out.
const fixtureHeader = "apiVersion: machine.sapcloud.io/v1alpha1\nmetadata: {name: fixture}\n"

// decode reads a YAML object the way a typed client does.
func decode(t *testing.T, document string) (runtime.Object, error) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	obj, _, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode([]byte(document), nil, nil)
	return obj, err
}

// validate runs every validation function that applies to obj.
func validate(t *testing.T, obj runtime.Object) field.ErrorList {
	t.Helper()
	switch obj := obj.(type) {
	case *v1alpha1.Machine:
		return append(validation.ValidateMachine(obj), validation.ValidateMachineStatus(obj)...)
	case *v1alpha1.MachineClass:
		return validation.ValidateMachineClass(obj)
	case *v1alpha1.MachineSet:
		return validation.ValidateMachineSet(obj)
	case *v1alpha1.MachineDeployment:
		return validation.ValidateMachineDeployment(obj)
	}
	t.Fatalf("no validation for %T", obj)
	return nil
}

// rejectionMessages validates every rejected object, fails the test for
// each one validation accepts, and returns all error messages.
func rejectionMessages(t *testing.T) []string {
	var messages []string
	for _, tc := range rejectedObjects {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := decode(t, fixtureHeader+tc.object)
			if tc.undecodable {
				if err == nil {
					t.Fatalf("decoded an object a typed client cannot read: %#v", obj)
				}
				return
			}
			if err != nil {
				t.Fatalf("decoding fixture: %v", err)
			}
			errs := validate(t, obj)
			if len(errs) == 0 {
				t.Fatalf("validation accepts an object the CRD rejects")
			}
			for _, err := range errs {
				messages = append(messages, err.Error())
			}
			if !slices.ContainsFunc(errs, func(err *field.Error) bool { return strings.Contains(err.Error(), tc.message) }) {
				t.Errorf("no error carries the CRD's message %q; got %v", tc.message, errs)
			}
		})
	}
	return messages
}

func TestValidationRejectsWhatTheCRDsReject(t *testing.T) {
	rejectionMessages(t)
}

// TestEveryCRDRuleIsRepeated reads the CEL rules from the generated CRDs and
// checks that each rule's message is produced for some rejected object, so
// a rule added to the types fails here until validation repeats it.
func TestEveryCRDRuleIsRepeated(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("finding the CRDs: %v (found %d files)", err, len(files))
	}
	var rules []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var crd map[string]any
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		rules = append(rules, celMessages(crd)...)
	}
	if len(rules) == 0 {
		t.Fatal("found no CEL rules in the CRDs")
	}
	// Rules shared by several kinds (class, selector, durations) count once.
	slices.Sort(rules)
	rules = slices.Compact(rules)

	produced := rejectionMessages(t)
	for _, rule := range rules {
		if !slices.ContainsFunc(produced, func(message string) bool { return strings.Contains(message, rule) }) {
			t.Errorf("no rejected object makes validation report the CRD rule %q", rule)
		}
	}
}

// celMessages returns the messages of all x-kubernetes-validations below v.
func celMessages(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for key, child := range v {
			if key != "x-kubernetes-validations" {
				out = append(out, celMessages(child)...)
				continue
			}
			for _, rule := range child.([]any) {
				if message, ok := rule.(map[string]any)["message"].(string); ok {
					out = append(out, message)
				}
			}
		}
	case []any:
		for _, child := range v {
			out = append(out, celMessages(child)...)
		}
	}
	return out
}

// TestMCMObjectsAreValid validates the objects in the form MCM users write
// them (the round-trip fixture of package crds): what works with MCM must
// not be reported as invalid.
func TestMCMObjectsAreValid(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "crds", "testdata", "mcm-objects.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The fixture leaves the namespace of secret references to its test.
	data = bytes.ReplaceAll(data, []byte("NAMESPACE"), []byte("shoot--dev"))
	documents := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	kinds := 0
	for {
		document, err := documents.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(document)) == 0 {
			continue
		}
		obj, err := decode(t, string(document))
		if err != nil {
			t.Fatalf("decoding %s: %v", document, err)
		}
		kinds++
		if errs := validate(t, obj); len(errs) > 0 {
			t.Errorf("%T from MCM is reported invalid: %v", obj, errs)
		}
	}
	if kinds < 4 {
		t.Fatalf("read %d objects from the fixture, want one of each kind", kinds)
	}
}
