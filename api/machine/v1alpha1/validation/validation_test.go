package validation_test

import (
	"cmp"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/api/machine/v1alpha1/validation"
)

// fieldError is what the tests compare: where an error is and what kind it
// is. Messages are checked separately against the CRDs' messages.
type fieldError struct {
	Field string
	Type  field.ErrorType
}

func fieldErrors(errs field.ErrorList) []fieldError {
	out := make([]fieldError, 0, len(errs))
	for _, err := range errs {
		out = append(out, fieldError{err.Field, err.Type})
	}
	return out
}

func checkErrors(t *testing.T, got field.ErrorList, want ...fieldError) {
	t.Helper()
	byFieldAndType := cmpopts.SortSlices(func(a, b fieldError) bool {
		return cmp.Or(cmp.Compare(a.Field, b.Field), cmp.Compare(a.Type, b.Type)) < 0
	})
	if diff := gocmp.Diff(want, fieldErrors(got), byFieldAndType, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("errors (-want +got):\n%s\nall errors: %v", diff, got)
	}
}

func invalid(path string) fieldError      { return fieldError{path, field.ErrorTypeInvalid} }
func required(path string) fieldError     { return fieldError{path, field.ErrorTypeRequired} }
func forbidden(path string) fieldError    { return fieldError{path, field.ErrorTypeForbidden} }
func notSupported(path string) fieldError { return fieldError{path, field.ErrorTypeNotSupported} }
func duplicate(path string) fieldError    { return fieldError{path, field.ErrorTypeDuplicate} }
func tooLong(path string) fieldError      { return fieldError{path, field.ErrorTypeTooLong} }

func duration(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func intOrString(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

// validMachineSpec sets every field, zeros included, to a valid value.
func validMachineSpec() v1alpha1.MachineSpec {
	return v1alpha1.MachineSpec{
		Class:      v1alpha1.ClassSpec{Kind: "MachineClass", Name: "small"},
		ProviderID: "aws:///eu-west-1a/i-0123456789",
		NodeTemplateSpec: v1alpha1.NodeTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{"worker.gardener.cloud/pool": "pool-a", "empty": ""},
				Annotations: map[string]string{"example.com/Owner": "team a, with spaces"},
			},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{
				{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
				{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoExecute},
				{Key: "example.com/soft", Effect: corev1.TaintEffectPreferNoSchedule},
			}},
		},
		MachineConfiguration: &v1alpha1.MachineConfiguration{
			MachineDrainTimeout:         duration(0),
			MachineHealthTimeout:        duration(10 * time.Minute),
			MachineCreationTimeout:      duration(20 * time.Minute),
			MachineInPlaceUpdateTimeout: duration(20 * time.Minute),
			MachinePreserveTimeout:      duration(96 * time.Hour),
			DisableHealthTimeout:        new(false),
			MaxEvictRetries:             new(int32(0)),
			NodeConditions:              new("KernelDeadlock,ReadonlyFilesystem"),
		},
	}
}

func validMachine() *v1alpha1.Machine {
	return &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc12", Namespace: "shoot--dev"},
		Spec:       validMachineSpec(),
	}
}

func validTemplate() v1alpha1.MachineTemplateSpec {
	return v1alpha1.MachineTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"name": "web", "machine-template-hash": "abc123"},
			Annotations: map[string]string{"machinepriority.machine.sapcloud.io": "3"},
		},
		Spec: validMachineSpec(),
	}
}

func validMachineSet() *v1alpha1.MachineSet {
	return &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc123", Namespace: "shoot--dev"},
		Spec: v1alpha1.MachineSetSpec{
			Replicas: 2,
			Selector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"name": "web"},
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "machine-template-hash", Operator: metav1.LabelSelectorOpIn, Values: []string{"abc123", "def456"}},
					{Key: "name", Operator: metav1.LabelSelectorOpExists},
					{Key: "frozen", Operator: metav1.LabelSelectorOpDoesNotExist},
					{Key: "name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"api"}},
				},
			},
			Template:                     validTemplate(),
			MinReadySeconds:              0,
			AutoPreserveFailedMachineMax: new(int32(0)),
		},
	}
}

func validMachineDeployment() *v1alpha1.MachineDeployment {
	// The deployment adds the template hash to the sets it creates; its
	// own template must not carry it.
	template := validTemplate()
	delete(template.Labels, v1alpha1.MachineTemplateHashLabelKey)
	return &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shoot--dev"},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: 3,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": "web"}},
			Template: template,
			Strategy: v1alpha1.MachineDeploymentStrategy{
				Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge:       intOrString("25%"),
					MaxUnavailable: intOrString("0"),
				}},
			},
			MinReadySeconds:              500,
			RevisionHistoryLimit:         new(int32(0)),
			ProgressDeadlineSeconds:      new(int32(501)),
			AutoPreserveFailedMachineMax: new(int32(1)),
		},
	}
}

func validMachineClass() *v1alpha1.MachineClass {
	return &v1alpha1.MachineClass{
		ObjectMeta:           metav1.ObjectMeta{Name: "small", Namespace: "shoot--dev"},
		ProviderSpec:         runtime.RawExtension{Raw: []byte(` {"machineType": "m5.large"} `)},
		Provider:             "AWS",
		SecretRef:            &corev1.SecretReference{Name: "cloud-config", Namespace: "shoot--dev"},
		CredentialsSecretRef: &corev1.SecretReference{Name: "cloudprovider"},
		NodeTemplate: &v1alpha1.NodeTemplate{
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("2"),
				corev1.ResourceMemory: resource.MustParse("8Gi"),
				v1alpha1.ResourceGPU:  resource.MustParse("0"),
			},
			VirtualCapacity: corev1.ResourceList{"example.com/dongle": resource.MustParse("4")},
			InstanceType:    "m5.large",
			Region:          "eu-west-1",
			Zone:            "eu-west-1a",
		},
	}
}

// machineSpecCases are checked on a Machine's spec and on the templates of
// MachineSets and MachineDeployments, under their own path prefixes.
var machineSpecCases = []struct {
	name   string
	change func(*v1alpha1.MachineSpec)
	want   func(spec string) []fieldError
}{
	{"valid", func(*v1alpha1.MachineSpec) {}, func(string) []fieldError { return nil }},
	{"no configuration at all", func(s *v1alpha1.MachineSpec) { s.MachineConfiguration = nil }, func(string) []fieldError { return nil }},
	{"class kind left empty", func(s *v1alpha1.MachineSpec) { s.Class.Kind = "" }, func(string) []fieldError { return nil }},
	{"class name missing", func(s *v1alpha1.MachineSpec) { s.Class.Name = "" }, func(spec string) []fieldError {
		return []fieldError{required(spec + ".class.name")}
	}},
	{"class name not an object name", func(s *v1alpha1.MachineSpec) { s.Class.Name = "Small_Class" }, func(spec string) []fieldError {
		return []fieldError{invalid(spec + ".class.name")}
	}},
	{"class of a foreign kind", func(s *v1alpha1.MachineSpec) { s.Class.Kind = "AWSMachineClass" }, func(spec string) []fieldError {
		return []fieldError{invalid(spec + ".class.kind")}
	}},
	{"negative durations", func(s *v1alpha1.MachineSpec) {
		c := s.MachineConfiguration
		c.MachineDrainTimeout = duration(-time.Second)
		c.MachineHealthTimeout = duration(-time.Second)
		c.MachineCreationTimeout = duration(-time.Second)
		c.MachineInPlaceUpdateTimeout = duration(-time.Second)
		c.MachinePreserveTimeout = duration(-time.Second)
	}, func(spec string) []fieldError {
		return []fieldError{
			invalid(spec + ".drainTimeout"),
			invalid(spec + ".healthTimeout"),
			invalid(spec + ".creationTimeout"),
			invalid(spec + ".inPlaceUpdateTimeout"),
			invalid(spec + ".machinePreserveTimeout"),
		}
	}},
	{"negative maxEvictRetries", func(s *v1alpha1.MachineSpec) { s.MachineConfiguration.MaxEvictRetries = new(int32(-1)) }, func(spec string) []fieldError {
		return []fieldError{invalid(spec + ".maxEvictRetries")}
	}},
	{"node label with a bad key and one with a bad value", func(s *v1alpha1.MachineSpec) {
		s.NodeTemplateSpec.Labels = map[string]string{"bad key": "ok", "pool": "not ok!"}
	}, func(spec string) []fieldError {
		return []fieldError{
			invalid(spec + ".nodeTemplate.metadata.labels[bad key]"),
			invalid(spec + ".nodeTemplate.metadata.labels[pool]"),
		}
	}},
	{"node annotation with a bad key", func(s *v1alpha1.MachineSpec) {
		s.NodeTemplateSpec.Annotations = map[string]string{"example.com/a b": "x"}
	}, func(spec string) []fieldError {
		return []fieldError{invalid(spec + ".nodeTemplate.metadata.annotations[example.com/a b]")}
	}},
	{"node annotations too large", func(s *v1alpha1.MachineSpec) {
		s.NodeTemplateSpec.Annotations = map[string]string{"big": strings.Repeat("x", 256*1024)}
	}, func(spec string) []fieldError {
		return []fieldError{tooLong(spec + ".nodeTemplate.metadata.annotations")}
	}},
	{"bad taints", func(s *v1alpha1.MachineSpec) {
		s.NodeTemplateSpec.Spec.Taints = []corev1.Taint{
			{Key: "", Effect: corev1.TaintEffectNoSchedule},
			{Key: "a b", Value: "c d", Effect: "Sometimes"},
			{Key: "ok"},
			{Key: "twice", Effect: corev1.TaintEffectNoSchedule},
			{Key: "twice", Value: "other", Effect: corev1.TaintEffectNoSchedule},
		}
	}, func(spec string) []fieldError {
		taints := spec + ".nodeTemplate.spec.taints"
		return []fieldError{
			required(taints + "[0].key"),
			invalid(taints + "[1].key"),
			invalid(taints + "[1].value"),
			notSupported(taints + "[1].effect"),
			required(taints + "[2].effect"),
			duplicate(taints + "[4]"),
		}
	}},
}

func TestValidateMachine(t *testing.T) {
	for _, tc := range machineSpecCases {
		t.Run(tc.name, func(t *testing.T) {
			machine := validMachine()
			tc.change(&machine.Spec)
			checkErrors(t, validation.ValidateMachine(machine), tc.want("spec")...)
		})
	}
}

func TestValidateMachineStatus(t *testing.T) {
	cases := []struct {
		name   string
		status v1alpha1.MachineStatus
		want   []fieldError
	}{
		{name: "empty"},
		{name: "known values", status: v1alpha1.MachineStatus{
			CurrentStatus: v1alpha1.CurrentStatus{Phase: v1alpha1.MachineInPlaceUpdateFailed},
			LastOperation: v1alpha1.LastOperation{State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationDrainNode},
		}},
		{name: "unknown values", status: v1alpha1.MachineStatus{
			CurrentStatus: v1alpha1.CurrentStatus{Phase: "Exploded"},
			LastOperation: v1alpha1.LastOperation{State: "Pondering", Type: "Reboot"},
		}, want: []fieldError{
			notSupported("status.currentStatus.phase"),
			notSupported("status.lastOperation.state"),
			notSupported("status.lastOperation.type"),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			machine := validMachine()
			machine.Status = tc.status
			checkErrors(t, validation.ValidateMachineStatus(machine), tc.want...)
		})
	}
}

func TestValidateMachineClass(t *testing.T) {
	cases := []struct {
		name   string
		change func(*v1alpha1.MachineClass)
		want   []fieldError
	}{
		{"valid", func(*v1alpha1.MachineClass) {}, nil},
		{"minimal", func(c *v1alpha1.MachineClass) {
			*c = v1alpha1.MachineClass{ProviderSpec: runtime.RawExtension{Raw: []byte("{}")}}
		}, nil},
		{"provider spec set as a Go object", func(c *v1alpha1.MachineClass) {
			c.ProviderSpec = runtime.RawExtension{Object: &v1alpha1.Machine{}}
		}, nil},
		{"provider spec missing", func(c *v1alpha1.MachineClass) { c.ProviderSpec = runtime.RawExtension{} }, []fieldError{required("providerSpec")}},
		{"provider spec null", func(c *v1alpha1.MachineClass) { c.ProviderSpec.Raw = []byte("null") }, []fieldError{required("providerSpec")}},
		{"provider spec an array", func(c *v1alpha1.MachineClass) { c.ProviderSpec.Raw = []byte(`[{"a": 1}]`) }, []fieldError{invalid("providerSpec")}},
		{"provider spec malformed", func(c *v1alpha1.MachineClass) { c.ProviderSpec.Raw = []byte(`{"a": `) }, []fieldError{invalid("providerSpec")}},
		{"capacity without memory", func(c *v1alpha1.MachineClass) {
			delete(c.NodeTemplate.Capacity, corev1.ResourceMemory)
		}, []fieldError{required("nodeTemplate.capacity[memory]")}},
		{"capacity empty", func(c *v1alpha1.MachineClass) { c.NodeTemplate.Capacity = nil }, []fieldError{
			required("nodeTemplate.capacity[cpu]"),
			required("nodeTemplate.capacity[memory]"),
		}},
		{"negative capacities", func(c *v1alpha1.MachineClass) {
			c.NodeTemplate.Capacity[corev1.ResourceCPU] = resource.MustParse("-1")
			c.NodeTemplate.VirtualCapacity["example.com/dongle"] = resource.MustParse("-4")
		}, []fieldError{
			invalid("nodeTemplate.capacity[cpu]"),
			invalid("nodeTemplate.virtualCapacity[example.com/dongle]"),
		}},
		{"secret reference without a name", func(c *v1alpha1.MachineClass) { c.SecretRef.Name = "" }, []fieldError{required("secretRef.name")}},
		{"credentials reference without a name", func(c *v1alpha1.MachineClass) { c.CredentialsSecretRef.Name = "" }, []fieldError{required("credentialsSecretRef.name")}},
		{"secret reference with bad names", func(c *v1alpha1.MachineClass) {
			c.SecretRef = &corev1.SecretReference{Name: "Cloud_Config", Namespace: "shoot.dev"}
		}, []fieldError{invalid("secretRef.name"), invalid("secretRef.namespace")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			class := validMachineClass()
			tc.change(class)
			checkErrors(t, validation.ValidateMachineClass(class), tc.want...)
		})
	}
}

// selectorCases are checked on MachineSets and MachineDeployments alike.
var selectorCases = []struct {
	name     string
	selector *metav1.LabelSelector
	labels   map[string]string
	want     []fieldError
}{
	{name: "match labels", selector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": "web"}}},
	{name: "selector missing", want: []fieldError{required("spec.selector")}},
	{name: "selector empty", selector: &metav1.LabelSelector{}, want: []fieldError{invalid("spec.selector")}},
	{
		name:     "selector with empty matchLabels",
		selector: &metav1.LabelSelector{MatchLabels: map[string]string{}},
		want:     []fieldError{invalid("spec.selector")},
	},
	{
		name:     "matchLabels with another value and a key the template lacks",
		selector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": "api", "tier": "backend"}},
		want:     []fieldError{invalid("spec.selector.matchLabels[name]"), invalid("spec.selector.matchLabels[tier]")},
	},
	{
		name:     "template without labels",
		selector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": "web"}},
		labels:   map[string]string{},
		want:     []fieldError{invalid("spec.selector.matchLabels[name]")},
	},
	{
		name: "expressions that match",
		selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "name", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}},
			{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"backend"}},
			{Key: "name", Operator: metav1.LabelSelectorOpExists},
			{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist},
		}},
	},
	{
		name: "expressions that do not match",
		selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "name", Operator: metav1.LabelSelectorOpIn, Values: []string{"api"}},
			{Key: "name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}},
			{Key: "tier", Operator: metav1.LabelSelectorOpExists},
			{Key: "name", Operator: metav1.LabelSelectorOpDoesNotExist},
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}},
		}},
		want: []fieldError{
			invalid("spec.selector.matchExpressions[0]"),
			invalid("spec.selector.matchExpressions[1]"),
			invalid("spec.selector.matchExpressions[2]"),
			invalid("spec.selector.matchExpressions[3]"),
			invalid("spec.selector.matchExpressions[4]"),
		},
	},
	{
		// Met by every machine without the label pool, standalone ones too.
		name: "only DoesNotExist",
		selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "pool", Operator: metav1.LabelSelectorOpDoesNotExist},
		}},
		want: []fieldError{invalid("spec.selector")},
	},
	{
		name: "only NotIn, one of them excluding the template",
		selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"api"}},
			{Key: "name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}},
		}},
		want: []fieldError{invalid("spec.selector"), invalid("spec.selector.matchExpressions[1]")},
	},
	{
		name: "Exists beside DoesNotExist",
		selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "name", Operator: metav1.LabelSelectorOpExists},
			{Key: "pool", Operator: metav1.LabelSelectorOpDoesNotExist},
		}},
	},
	{
		// Syntax errors alone: a selector that does not parse is not
		// compared with the template.
		name: "syntactically invalid selector",
		selector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"name": "not valid!"},
			MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "name", Operator: "Like", Values: []string{"web"}},
				{Key: "name", Operator: metav1.LabelSelectorOpIn},
				{Key: "name", Operator: metav1.LabelSelectorOpExists, Values: []string{"web"}},
				{Key: "bad key", Operator: metav1.LabelSelectorOpExists},
			},
		},
		want: []fieldError{
			invalid("spec.selector.matchLabels"),
			invalid("spec.selector.matchExpressions[0].operator"),
			required("spec.selector.matchExpressions[1].values"),
			forbidden("spec.selector.matchExpressions[2].values"),
			invalid("spec.selector.matchExpressions[3].key"),
		},
	},
}

// templateCases are checked on MachineSets and MachineDeployments alike.
var templateCases = []struct {
	name   string
	change func(*v1alpha1.MachineTemplateSpec)
	want   []fieldError
}{
	{"bad template label", func(tmpl *v1alpha1.MachineTemplateSpec) { tmpl.Labels["bad key"] = "x" }, []fieldError{
		invalid("spec.template.metadata.labels[bad key]"),
	}},
	{"bad template annotation", func(tmpl *v1alpha1.MachineTemplateSpec) { tmpl.Annotations["/x"] = "x" }, []fieldError{
		invalid("spec.template.metadata.annotations[/x]"),
	}},
}

func TestValidateMachineSet(t *testing.T) {
	cases := []struct {
		name   string
		change func(*v1alpha1.MachineSet)
		want   []fieldError
	}{
		{"valid", func(*v1alpha1.MachineSet) {}, nil},
		{"negative counts", func(s *v1alpha1.MachineSet) {
			s.Spec.Replicas = -1
			s.Spec.MinReadySeconds = -1
			s.Spec.AutoPreserveFailedMachineMax = new(int32(-1))
		}, []fieldError{
			invalid("spec.replicas"),
			invalid("spec.minReadySeconds"),
			invalid("spec.autoPreserveFailedMachineMax"),
		}},
		{"legacy machineClass is not interpreted", func(s *v1alpha1.MachineSet) {
			s.Spec.MachineClass = v1alpha1.ClassSpec{Kind: "AWSMachineClass"}
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := validMachineSet()
			tc.change(set)
			checkErrors(t, validation.ValidateMachineSet(set), tc.want...)
		})
	}
	for _, tc := range selectorCases {
		t.Run("selector/"+tc.name, func(t *testing.T) {
			set := validMachineSet()
			set.Spec.Selector = tc.selector
			if tc.labels != nil {
				set.Spec.Template.Labels = tc.labels
			}
			checkErrors(t, validation.ValidateMachineSet(set), tc.want...)
		})
	}
	for _, tc := range templateCases {
		t.Run("template/"+tc.name, func(t *testing.T) {
			set := validMachineSet()
			tc.change(&set.Spec.Template)
			checkErrors(t, validation.ValidateMachineSet(set), tc.want...)
		})
	}
	for _, tc := range machineSpecCases {
		t.Run("template spec/"+tc.name, func(t *testing.T) {
			set := validMachineSet()
			tc.change(&set.Spec.Template.Spec)
			checkErrors(t, validation.ValidateMachineSet(set), tc.want("spec.template.spec")...)
		})
	}
}

func TestValidateMachineDeployment(t *testing.T) {
	strategy := func(s v1alpha1.MachineDeploymentStrategy) func(*v1alpha1.MachineDeployment) {
		return func(md *v1alpha1.MachineDeployment) { md.Spec.Strategy = s }
	}
	rolling := func(maxSurge, maxUnavailable *intstr.IntOrString) *v1alpha1.RollingUpdateMachineDeployment {
		return &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
			MaxSurge: maxSurge, MaxUnavailable: maxUnavailable,
		}}
	}
	const (
		rollingUpdate = v1alpha1.RollingUpdateMachineDeploymentStrategyType
		recreate      = v1alpha1.RecreateMachineDeploymentStrategyType
		inPlaceUpdate = v1alpha1.InPlaceUpdateMachineDeploymentStrategyType
	)
	cases := []struct {
		name   string
		change func(*v1alpha1.MachineDeployment)
		want   []fieldError
	}{
		{"valid", func(*v1alpha1.MachineDeployment) {}, nil},
		{"nothing optional set", func(md *v1alpha1.MachineDeployment) {
			md.Spec = v1alpha1.MachineDeploymentSpec{Selector: md.Spec.Selector, Template: md.Spec.Template}
		}, nil},
		{"negative counts", func(md *v1alpha1.MachineDeployment) {
			md.Spec.Replicas = -1
			md.Spec.MinReadySeconds = -1
			md.Spec.RevisionHistoryLimit = new(int32(-1))
			md.Spec.AutoPreserveFailedMachineMax = new(int32(-1))
		}, []fieldError{
			invalid("spec.replicas"),
			invalid("spec.minReadySeconds"),
			invalid("spec.revisionHistoryLimit"),
			invalid("spec.autoPreserveFailedMachineMax"),
		}},
		{"progress deadline of 0", func(md *v1alpha1.MachineDeployment) {
			md.Spec.MinReadySeconds = 0
			md.Spec.ProgressDeadlineSeconds = new(int32(0))
		}, []fieldError{invalid("spec.progressDeadlineSeconds")}},
		{"progress deadline equal to minReadySeconds", func(md *v1alpha1.MachineDeployment) {
			md.Spec.ProgressDeadlineSeconds = new(md.Spec.MinReadySeconds)
		}, []fieldError{invalid("spec.progressDeadlineSeconds")}},
		{"progress deadline below minReadySeconds", func(md *v1alpha1.MachineDeployment) {
			md.Spec.MinReadySeconds = 600
			md.Spec.ProgressDeadlineSeconds = new(int32(300))
		}, []fieldError{invalid("spec.progressDeadlineSeconds")}},

		{"recreate", strategy(v1alpha1.MachineDeploymentStrategy{Type: recreate}), nil},
		{"rolling update without parameters", strategy(v1alpha1.MachineDeploymentStrategy{Type: rollingUpdate}), nil},
		{"rolling update parameters without a type", strategy(v1alpha1.MachineDeploymentStrategy{
			RollingUpdate: rolling(intOrString("1"), nil),
		}), nil},
		{"in-place update", strategy(v1alpha1.MachineDeploymentStrategy{
			Type: inPlaceUpdate,
			InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{
				UpdateConfiguration: v1alpha1.UpdateConfiguration{MaxSurge: intOrString("0"), MaxUnavailable: intOrString("0")},
				OrchestrationType:   v1alpha1.OrchestrationTypeManual,
			},
		}), nil},
		{"unknown strategy type", strategy(v1alpha1.MachineDeploymentStrategy{Type: "BlueGreen"}), []fieldError{
			notSupported("spec.strategy.type"),
		}},
		{"rolling update parameters under Recreate", strategy(v1alpha1.MachineDeploymentStrategy{
			Type: recreate, RollingUpdate: rolling(intOrString("1"), nil),
		}), []fieldError{forbidden("spec.strategy.rollingUpdate")}},
		{"in-place parameters under RollingUpdate", strategy(v1alpha1.MachineDeploymentStrategy{
			Type: rollingUpdate, InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{OrchestrationType: v1alpha1.OrchestrationTypeAuto},
		}), []fieldError{forbidden("spec.strategy.inPlaceUpdate")}},
		{"in-place parameters without a type", strategy(v1alpha1.MachineDeploymentStrategy{
			InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{},
		}), []fieldError{forbidden("spec.strategy.inPlaceUpdate")}},
		{"in-place update without parameters", strategy(v1alpha1.MachineDeploymentStrategy{Type: inPlaceUpdate}), []fieldError{
			required("spec.strategy.inPlaceUpdate"),
		}},
		{"unknown orchestration type", strategy(v1alpha1.MachineDeploymentStrategy{
			Type: inPlaceUpdate, InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{OrchestrationType: "Sometimes"},
		}), []fieldError{notSupported("spec.strategy.inPlaceUpdate.orchestrationType")}},

		{"numbers and percentages in every form", strategy(v1alpha1.MachineDeploymentStrategy{
			RollingUpdate: rolling(intOrString("5"), new(intstr.FromString("100%"))),
		}), nil},
		{"malformed maxSurge and maxUnavailable", strategy(v1alpha1.MachineDeploymentStrategy{
			RollingUpdate: rolling(intOrString("lots"), new(intstr.FromInt32(-1))),
		}), []fieldError{
			invalid("spec.strategy.rollingUpdate.maxSurge"),
			invalid("spec.strategy.rollingUpdate.maxUnavailable"),
		}},
		{"malformed percentages", strategy(v1alpha1.MachineDeploymentStrategy{
			RollingUpdate: rolling(new(intstr.FromString("1.5%")), new(intstr.FromString("-1"))),
		}), []fieldError{
			invalid("spec.strategy.rollingUpdate.maxSurge"),
			invalid("spec.strategy.rollingUpdate.maxUnavailable"),
		}},
		{"numbers too large to compute with", strategy(v1alpha1.MachineDeploymentStrategy{
			RollingUpdate: rolling(new(intstr.FromString("99999999999999999999")), new(intstr.FromString(""))),
		}), []fieldError{
			invalid("spec.strategy.rollingUpdate.maxSurge"),
			invalid("spec.strategy.rollingUpdate.maxUnavailable"),
		}},
		{"malformed in-place parameters", strategy(v1alpha1.MachineDeploymentStrategy{
			Type: inPlaceUpdate,
			InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
				MaxSurge: intOrString("x"), MaxUnavailable: intOrString("1%%"),
			}},
		}), []fieldError{
			invalid("spec.strategy.inPlaceUpdate.maxSurge"),
			invalid("spec.strategy.inPlaceUpdate.maxUnavailable"),
		}},
		{"maxSurge and maxUnavailable both 0", strategy(v1alpha1.MachineDeploymentStrategy{
			RollingUpdate: rolling(new(intstr.FromInt32(0)), intOrString("0%")),
		}), []fieldError{invalid("spec.strategy.rollingUpdate.maxSurge")}},
		{"maxSurge 0 and maxUnavailable unset", strategy(v1alpha1.MachineDeploymentStrategy{
			Type: rollingUpdate, RollingUpdate: rolling(intOrString("0%"), nil),
		}), []fieldError{invalid("spec.strategy.rollingUpdate.maxSurge")}},
		{"maxSurge 00", strategy(v1alpha1.MachineDeploymentStrategy{
			RollingUpdate: rolling(intOrString("00"), intOrString("0")),
		}), []fieldError{invalid("spec.strategy.rollingUpdate.maxSurge")}},
		{"maxSurge unset and maxUnavailable 0 (maxSurge defaults to 1)", strategy(v1alpha1.MachineDeploymentStrategy{
			RollingUpdate: rolling(nil, intOrString("0")),
		}), nil},
		{"maxSurge 0 and maxUnavailable 1", strategy(v1alpha1.MachineDeploymentStrategy{
			RollingUpdate: rolling(intOrString("0"), intOrString("1")),
		}), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			md := validMachineDeployment()
			tc.change(md)
			checkErrors(t, validation.ValidateMachineDeployment(md), tc.want...)
		})
	}
	for _, tc := range selectorCases {
		t.Run("selector/"+tc.name, func(t *testing.T) {
			md := validMachineDeployment()
			md.Spec.Selector = tc.selector
			if tc.labels != nil {
				md.Spec.Template.Labels = tc.labels
			}
			checkErrors(t, validation.ValidateMachineDeployment(md), tc.want...)
		})
	}
	for _, tc := range templateCases {
		t.Run("template/"+tc.name, func(t *testing.T) {
			md := validMachineDeployment()
			tc.change(&md.Spec.Template)
			checkErrors(t, validation.ValidateMachineDeployment(md), tc.want...)
		})
	}
	for _, tc := range machineSpecCases {
		t.Run("template spec/"+tc.name, func(t *testing.T) {
			md := validMachineDeployment()
			tc.change(&md.Spec.Template.Spec)
			checkErrors(t, validation.ValidateMachineDeployment(md), tc.want("spec.template.spec")...)
		})
	}
}

// TestValidateDoesNotModify guards the promise that validation can run on
// objects straight from an informer cache.
func TestValidateDoesNotModify(t *testing.T) {
	machine, class, set, deployment := validMachine(), validMachineClass(), validMachineSet(), validMachineDeployment()
	deployment.Spec.Strategy = v1alpha1.MachineDeploymentStrategy{}
	deployment.Spec.ProgressDeadlineSeconds = nil
	before := []runtime.Object{machine.DeepCopy(), class.DeepCopy(), set.DeepCopy(), deployment.DeepCopy()}

	validation.ValidateMachine(machine)
	validation.ValidateMachineStatus(machine)
	validation.ValidateMachineClass(class)
	validation.ValidateMachineSet(set)
	validation.ValidateMachineDeployment(deployment)

	after := []runtime.Object{machine, class, set, deployment}
	if diff := gocmp.Diff(before, after); diff != "" {
		t.Errorf("validation modified its input (-before +after):\n%s", diff)
	}
}
