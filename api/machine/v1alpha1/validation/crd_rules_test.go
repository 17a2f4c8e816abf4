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

// rejectedObject is an object the API server rejects through a CEL rule or
// an OpenAPI constraint of the CRDs, shared with the admission test of
// package crds. Message is the part of the API server's message the Go
// validation must repeat.
type rejectedObject struct {
	Name    string `json:"name"`
	Message string `json:"message"`
	// Undecodable marks objects that a typed client cannot even decode, so
	// no controller ever gets to validate them.
	Undecodable bool   `json:"undecodable"`
	Object      string `json:"object"`
}

func rejectedObjects(t *testing.T) []rejectedObject {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "crds", "testdata", "rejected.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []rejectedObject
	if err := yaml.Unmarshal(data, &objs); err != nil {
		t.Fatal(err)
	}
	return objs
}

// withHeader completes a rejected object with what it leaves out: the
// apiVersion, and metadata unless the object is rejected for its metadata.
func withHeader(object string) string {
	header := "apiVersion: machine.sapcloud.io/v1alpha1\n"
	if !strings.HasPrefix(object, "metadata:") && !strings.Contains(object, "\nmetadata:") {
		header += "metadata: {name: fixture}\n"
	}
	return header + object
}

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
	for _, tc := range rejectedObjects(t) {
		t.Run(tc.Name, func(t *testing.T) {
			obj, err := decode(t, withHeader(tc.Object))
			if tc.Undecodable {
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
			if !slices.ContainsFunc(errs, func(err *field.Error) bool { return strings.Contains(err.Error(), tc.Message) }) {
				t.Errorf("no error carries the CRD's message %q; got %v", tc.Message, errs)
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
