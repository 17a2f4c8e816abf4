package crds_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Setup: []func(context.Context, *rest.Config) error{crds.Install}})
}

var resources = map[string]schema.GroupVersionResource{
	"Machine":           v1alpha1.SchemeGroupVersion.WithResource("machines"),
	"MachineClass":      v1alpha1.SchemeGroupVersion.WithResource("machineclasses"),
	"MachineSet":        v1alpha1.SchemeGroupVersion.WithResource("machinesets"),
	"MachineDeployment": v1alpha1.SchemeGroupVersion.WithResource("machinedeployments"),
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestInstallIsIdempotent re-applies the CRDs over the ones TestMain
// installed, as an upgrade would.
func TestInstallIsIdempotent(t *testing.T) {
	env := testenv.Get(t)
	if err := crds.Install(testContext(t), env.Config()); err != nil {
		t.Fatalf("second Install: %v", err)
	}
}

// TestTypedRoundTrip creates one object of each kind through the typed
// clientset and reads it back unchanged.
func TestTypedRoundTrip(t *testing.T) {
	env := testenv.Get(t)
	ctx := testContext(t)
	ns := env.Namespace(t)
	client := versioned.NewForConfigOrDie(env.Config()).MachineV1alpha1()

	template := v1alpha1.MachineTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"name": "web"}},
		Spec: v1alpha1.MachineSpec{
			Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "small"},
			NodeTemplateSpec: v1alpha1.NodeTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"pool": "web"}},
				Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}},
			},
			MachineConfiguration: &v1alpha1.MachineConfiguration{
				MachineDrainTimeout: &metav1.Duration{Duration: 90 * time.Minute},
				MaxEvictRetries:     ptr.To[int32](10),
				NodeConditions:      ptr.To("KernelDeadlock,DiskPressure"),
			},
		},
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"name": "web"}}

	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "small", Labels: map[string]string{"tier": "small"}},
		Provider:     "sim",
		ProviderSpec: runtime.RawExtension{Raw: []byte(`{"instanceType":"small","zones":["a","b"],"nested":{"deep":{"x":1.5}}}`)},
		SecretRef:    &corev1.SecretReference{Name: "small", Namespace: ns},
		NodeTemplate: &v1alpha1.NodeTemplate{
			Capacity:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
			InstanceType: "small", Region: "local", Zone: "local-a", Architecture: ptr.To("amd64"),
		},
	}
	gotClass, err := client.MachineClasses(ns).Create(ctx, class, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create MachineClass: %v", err)
	}
	readClass, err := client.MachineClasses(ns).Get(ctx, class.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "MachineClass", gotClass, readClass)
	compareJSON(t, "MachineClass.providerSpec", class.ProviderSpec.Raw, readClass.ProviderSpec.Raw)
	if diff := cmp.Diff(class.NodeTemplate, readClass.NodeTemplate); diff != "" {
		t.Errorf("MachineClass.nodeTemplate changed (-sent +read):\n%s", diff)
	}

	machine := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Labels: template.Labels}, Spec: template.Spec}
	gotMachine, err := client.Machines(ns).Create(ctx, machine, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Machine: %v", err)
	}
	if diff := cmp.Diff(machine.Spec, gotMachine.Spec); diff != "" {
		t.Errorf("Machine.spec changed (-sent +read):\n%s", diff)
	}
	// Status goes through its own subresource.
	gotMachine.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachinePending, TimeoutActive: true, LastUpdateTime: metav1.Now().Rfc3339Copy()}
	gotMachine.Status.LastOperation = v1alpha1.LastOperation{
		Description: "Creating machine on cloud provider", State: v1alpha1.MachineStateProcessing,
		Type: v1alpha1.MachineOperationCreate, LastUpdateTime: metav1.Now().Rfc3339Copy(),
	}
	updated, err := client.Machines(ns).UpdateStatus(ctx, gotMachine, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update Machine status: %v", err)
	}
	readMachine, err := client.Machines(ns).Get(ctx, machine.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "Machine", updated, readMachine)

	set := &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc"},
		Spec:       v1alpha1.MachineSetSpec{Replicas: 2, Selector: selector, Template: template, MinReadySeconds: 10},
	}
	gotSet, err := client.MachineSets(ns).Create(ctx, set, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create MachineSet: %v", err)
	}
	if diff := cmp.Diff(set.Spec, gotSet.Spec); diff != "" {
		t.Errorf("MachineSet.spec changed (-sent +read):\n%s", diff)
	}

	deployment := &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: 3, Selector: selector, Template: template,
			Strategy: v1alpha1.MachineDeploymentStrategy{
				Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge: ptr.To(intstr.FromString("25%")), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				}},
			},
			RevisionHistoryLimit:    ptr.To[int32](3),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}
	gotDeployment, err := client.MachineDeployments(ns).Create(ctx, deployment, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create MachineDeployment: %v", err)
	}
	readDeployment, err := client.MachineDeployments(ns).Get(ctx, deployment.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "MachineDeployment", gotDeployment, readDeployment)
	if diff := cmp.Diff(deployment.Spec, readDeployment.Spec); diff != "" {
		t.Errorf("MachineDeployment.spec changed (-sent +read):\n%s", diff)
	}

	// List and delete through the same client.
	list, err := client.Machines(ns).List(ctx, metav1.ListOptions{LabelSelector: "name=web"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list Machines: %v, %d items", err, len(list.Items))
	}
	if err := client.MachineSets(ns).Delete(ctx, set.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete MachineSet: %v", err)
	}
	if _, err := client.MachineSets(ns).Get(ctx, set.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("MachineSet still there after delete: %v", err)
	}
}

func compare[T any](t *testing.T, kind string, want, got T) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s read back differs (-written +read):\n%s", kind, diff)
	}
}

func compareJSON(t *testing.T, what string, want, got []byte) {
	t.Helper()
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("%s changed (-sent +read):\n%s", what, diff)
	}
}

// readObjects decodes a multi-document YAML file, putting objects into ns.
func readObjects(t *testing.T, path, ns string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.ReplaceAll(data, []byte("NAMESPACE"), []byte(ns))
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("decoding %s: %v", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		obj.SetNamespace(ns)
		objs = append(objs, obj)
	}
}

// TestMCMFormatRoundTrip applies objects written the way MCM users write them
// with kubectl and checks that every field survives both the API server and
// a decode into the Go types.
func TestMCMFormatRoundTrip(t *testing.T) {
	env := testenv.Get(t)
	ctx := testContext(t)
	ns := env.Namespace(t)

	objs := readObjects(t, "testdata/mcm-objects.yaml", ns)
	if len(objs) != 4 {
		t.Fatalf("want 4 objects in the fixture, got %d", len(objs))
	}
	manifest := t.TempDir() + "/objects.json"
	var buf bytes.Buffer
	for _, obj := range objs {
		b, err := json.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if err := os.WriteFile(manifest, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl(ctx, "apply", "--server-side", "-f", manifest); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}

	dyn := dynamic.NewForConfigOrDie(env.Config())
	typed := versioned.NewForConfigOrDie(env.Config()).MachineV1alpha1()
	for _, want := range objs {
		kind := want.GetKind()
		got, err := dyn.Resource(resources[kind]).Namespace(ns).Get(ctx, want.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get %s: %v", kind, err)
		}
		if missing := missingFields(want.Object, got.Object, "", false); len(missing) > 0 {
			t.Errorf("%s lost or changed fields in the API server: %v", kind, missing)
		}

		// Decode through the Go types and encode again: nothing MCM users
		// write may be dropped by our types.
		var obj any
		switch kind {
		case "Machine":
			obj, err = typed.Machines(ns).Get(ctx, want.GetName(), metav1.GetOptions{})
		case "MachineClass":
			obj, err = typed.MachineClasses(ns).Get(ctx, want.GetName(), metav1.GetOptions{})
		case "MachineSet":
			obj, err = typed.MachineSets(ns).Get(ctx, want.GetName(), metav1.GetOptions{})
		case "MachineDeployment":
			obj, err = typed.MachineDeployments(ns).Get(ctx, want.GetName(), metav1.GetOptions{})
		}
		if err != nil {
			t.Fatalf("typed get %s: %v", kind, err)
		}
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		var viaTypes map[string]any
		if err := json.Unmarshal(raw, &viaTypes); err != nil {
			t.Fatal(err)
		}
		delete(want.Object, "apiVersion") // typed Get leaves TypeMeta empty
		delete(want.Object, "kind")
		if missing := missingFields(want.Object, viaTypes, "", true); len(missing) > 0 {
			t.Errorf("%s lost or changed fields through the Go types: %v", kind, missing)
		}
	}
}

// missingFields lists the paths of want that are absent from got or differ.
// throughGoTypes allows what MCM's Go types do too: a false, zero or empty
// value of an omitempty field vanishes, and a duration comes back in Go's
// canonical spelling (20m as 20m0s).
func missingFields(want, got any, path string, throughGoTypes bool) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{path}
		}
		var out []string
		for k, v := range w {
			gv, ok := g[k]
			if !ok {
				if throughGoTypes && isZero(v) {
					continue
				}
				out = append(out, path+"."+k)
				continue
			}
			out = append(out, missingFields(v, gv, path+"."+k, throughGoTypes)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{path}
		}
		var out []string
		for i := range w {
			out = append(out, missingFields(w[i], g[i], path+"[]", throughGoTypes)...)
		}
		return out
	default:
		if throughGoTypes && sameDuration(want, got) {
			return nil
		}
		if !cmp.Equal(normalizeNumber(want), normalizeNumber(got)) {
			return []string{path}
		}
		return nil
	}
}

func isZero(v any) bool {
	switch x := v.(type) {
	case bool:
		return !x
	case string:
		return x == ""
	case nil:
		return true
	}
	return normalizeNumber(v) == float64(0)
}

func sameDuration(want, got any) bool {
	ws, ok1 := want.(string)
	gs, ok2 := got.(string)
	if !ok1 || !ok2 {
		return false
	}
	wd, err1 := time.ParseDuration(ws)
	gd, err2 := time.ParseDuration(gs)
	return err1 == nil && err2 == nil && wd == gd
}

// normalizeNumber lets 360 decoded by YAML (int64) equal 360 decoded by JSON
// (float64 or int64).
func normalizeNumber(v any) any {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case int:
		return float64(n)
	}
	return v
}

// TestAdmissionRejectsInvalidObjects shows each CEL rule and schema
// constraint rejecting an invalid object with its message.
func TestAdmissionRejectsInvalidObjects(t *testing.T) {
	env := testenv.Get(t)
	ctx := testContext(t)
	ns := env.Namespace(t)
	dyn := dynamic.NewForConfigOrDie(env.Config())

	data, err := os.ReadFile("testdata/rejected.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name, Message, Object string
	}
	if err := yaml.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 6 {
		t.Fatalf("only %d rejected objects in the fixture", len(cases))
	}
	for i, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte("apiVersion: machine.sapcloud.io/v1alpha1\n"+tc.Object), &obj.Object); err != nil {
				t.Fatalf("fixture: %v", err)
			}
			if obj.GetName() == "" {
				obj.SetName(fmt.Sprintf("%s-%d", strings.ToLower(obj.GetKind()), i))
			}
			resource := dyn.Resource(resources[obj.GetKind()]).Namespace(ns)
			status, hasStatus, _ := unstructured.NestedMap(obj.Object, "status")
			_, err := resource.Create(ctx, obj, metav1.CreateOptions{})
			if hasStatus {
				// Status is not writable on create: it is dropped, so this
				// object is accepted. Writing it through /status must fail.
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				got, err := resource.Get(ctx, obj.GetName(), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				_ = unstructured.SetNestedMap(got.Object, status, "status")
				_, err = resource.UpdateStatus(ctx, got, metav1.UpdateOptions{})
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.Message) {
					t.Fatalf("want an Invalid error with %q, got %v", tc.Message, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("the API server accepted the invalid object")
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.Message) {
				t.Fatalf("error does not carry the rule's message %q:\n%v", tc.Message, err)
			}
			t.Logf("rejected: %v", err)
		})
	}
}

// TestKubectlColumns checks what a person sees with kubectl get.
func TestKubectlColumns(t *testing.T) {
	env := testenv.Get(t)
	ctx := testContext(t)
	ns := env.Namespace(t)
	for _, obj := range readObjects(t, "testdata/mcm-objects.yaml", ns) {
		if _, err := dynamic.NewForConfigOrDie(env.Config()).Resource(resources[obj.GetKind()]).Namespace(ns).
			Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", obj.GetKind(), err)
		}
	}
	out, err := env.Kubectl(ctx, "get", "mcd,mcs,mc,mcc", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl get: %v\n%s", err, out)
	}
	var headers [][]string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "NAME") {
			headers = append(headers, splitColumns(line))
		}
	}
	want := [][]string{
		{"NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"},
		{"NAME", "DESIRED", "CURRENT", "READY", "AVAILABLE", "AGE"},
		{"NAME", "STATUS", "NODE", "PROVIDERID", "PRESERVED", "AGE"},
		{"NAME", "PROVIDER", "AGE"},
	}
	if diff := cmp.Diff(want, headers); diff != "" {
		t.Errorf("kubectl get columns differ (-want +got):\n%s\nfull output:\n%s", diff, out)
	}
	if !strings.Contains(string(out), "aws:///eu-west-1a/i-0123456789") || !strings.Contains(string(out), "ip-10-0-0-1.ec2.internal") {
		t.Errorf("machine row lacks node or providerID:\n%s", out)
	}
	t.Logf("kubectl get mcd,mcs,mc,mcc:\n%s", out)
}

func splitColumns(line string) []string {
	// Column names may contain single spaces; columns are separated by two
	// or more.
	var cols []string
	for _, f := range strings.Split(line, "  ") {
		if f = strings.TrimSpace(f); f != "" {
			cols = append(cols, f)
		}
	}
	return cols
}

// TestScaleSubresource scales a MachineDeployment and a MachineSet through
// /scale, as kubectl scale and autoscalers do.
func TestScaleSubresource(t *testing.T) {
	env := testenv.Get(t)
	ctx := testContext(t)
	ns := env.Namespace(t)
	objs := readObjects(t, "testdata/mcm-objects.yaml", ns)
	dyn := dynamic.NewForConfigOrDie(env.Config())
	for _, obj := range objs {
		if _, err := dyn.Resource(resources[obj.GetKind()]).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", obj.GetKind(), err)
		}
	}
	client := versioned.NewForConfigOrDie(env.Config()).MachineV1alpha1()

	scale, err := client.MachineDeployments(ns).GetScale(ctx, "test-deployment", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get scale: %v", err)
	}
	if scale.Spec.Replicas != 3 {
		t.Fatalf("scale.spec.replicas = %d, want 3", scale.Spec.Replicas)
	}
	scale.Spec.Replicas = 5
	if _, err := client.MachineDeployments(ns).UpdateScale(ctx, "test-deployment", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update scale: %v", err)
	}
	md, err := client.MachineDeployments(ns).Get(ctx, "test-deployment", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if md.Spec.Replicas != 5 {
		t.Errorf("MachineDeployment spec.replicas = %d after scaling to 5", md.Spec.Replicas)
	}

	if out, err := env.Kubectl(ctx, "scale", "-n", ns, "mcs/test-set", "--replicas=4"); err != nil {
		t.Fatalf("kubectl scale: %v\n%s", err, out)
	}
	ms, err := client.MachineSets(ns).Get(ctx, "test-set", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ms.Spec.Replicas != 4 {
		t.Errorf("MachineSet spec.replicas = %d after kubectl scale --replicas=4", ms.Spec.Replicas)
	}
	// A negative scale is rejected like a negative spec.replicas.
	negative := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "test-set", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: -2}}
	if _, err := client.MachineSets(ns).UpdateScale(ctx, "test-set", negative, metav1.UpdateOptions{}); err == nil {
		t.Errorf("scaling to -2 was accepted")
	}
}
