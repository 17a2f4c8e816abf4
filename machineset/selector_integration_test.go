package machineset_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// positiveRule is the part of the message of the CRDs' rule that refuses a
// selector without a positive requirement.
const positiveRule = "selector must have a positive requirement"

// storeWithoutRule stores obj (a MachineSet or MachineDeployment) through a
// CRD without the rules whose message starts with rule (for example the
// one that refuses selectors without a positive requirement), as an
// installation from before the rule may hold it, and puts the CRD back.
// Without such a rule in the CRD it just creates obj.
func storeWithoutRule(t *testing.T, obj runtime.Object, resource, rule string) {
	t.Helper()
	env := testenv.Get(t)
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(env.Config())
	crds := dyn.Resource(crdResource)
	name := resource + "." + v1alpha1.SchemeGroupVersion.Group
	original, err := crds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		current, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("restoring the CRD %s: %v", name, err)
			return
		}
		back := original.DeepCopy()
		back.SetResourceVersion(current.GetResourceVersion())
		if _, err := crds.Update(ctx, back, metav1.UpdateOptions{}); err != nil {
			t.Errorf("restoring the CRD %s: %v", name, err)
		}
	}()
	loose := original.DeepCopy()
	versions, _, _ := unstructured.NestedSlice(loose.Object, "spec", "versions")
	for i := range versions {
		v := versions[i].(map[string]any)
		path := []string{"schema", "openAPIV3Schema", "properties", "spec", "x-kubernetes-validations"}
		rules, _, _ := unstructured.NestedSlice(v, path...)
		var kept []any
		for _, r := range rules {
			if msg, _ := r.(map[string]any)["message"].(string); !strings.HasPrefix(msg, rule) {
				kept = append(kept, r)
			}
		}
		if err := unstructured.SetNestedSlice(v, kept, path...); err != nil {
			t.Fatal(err)
		}
		versions[i] = v
	}
	if err := unstructured.SetNestedSlice(loose.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if _, err := crds.Update(ctx, loose, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetAPIVersion(v1alpha1.SchemeGroupVersion.String())
	// The API server takes the new schema a moment later.
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		_, err := dyn.Resource(v1alpha1.SchemeGroupVersion.WithResource(resource)).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), fmt.Sprintf("storing %s %s: %v", u.GetKind(), u.GetName(), err)
	})
}

// TestIntegrationSelectorWithoutPositiveRequirement is the repro of a set
// whose selector is only DoesNotExist: it passed the empty-selector guard,
// adopted two standalone machines, deleted one as surplus and the other
// when the set was deleted. Admission refuses such a set and such a
// deployment now; one stored from before the rule is refused by the
// controllers with a condition, and adopts, creates and deletes nothing.
func TestIntegrationSelectorWithoutPositiveRequirement(t *testing.T) {
	s := simstack.Start(t, simstack.Options{Deployments: true})
	w := &setWorld{t: t, Stack: s}
	ctx := context.Background()
	machines := w.Machines.MachineV1alpha1().Machines(w.NS)
	for _, name := range []string{"standalone-a", "standalone-b"} {
		m := &v1alpha1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS, Labels: map[string]string{"app": "db"}},
			Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: w.Class}},
		}
		if _, err := machines.Create(ctx, m, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w.running(2)

	negative := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "pool", Operator: metav1.LabelSelectorOpDoesNotExist},
	}}
	template := v1alpha1.MachineTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "forged"}},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: w.Class}},
	}
	set := &v1alpha1.MachineSet{
		TypeMeta:   metav1.TypeMeta{Kind: "MachineSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "negative", Namespace: w.NS},
		Spec:       v1alpha1.MachineSetSpec{Replicas: 1, Selector: negative, Template: template},
	}
	deploy := &v1alpha1.MachineDeployment{
		TypeMeta:   metav1.TypeMeta{Kind: "MachineDeployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "negative", Namespace: w.NS},
		Spec:       v1alpha1.MachineDeploymentSpec{Replicas: 1, Selector: negative, Template: template},
	}
	// Admission refuses both.
	_, errSet := w.Machines.MachineV1alpha1().MachineSets(w.NS).Create(ctx, set, metav1.CreateOptions{})
	_, errDeploy := w.Machines.MachineV1alpha1().MachineDeployments(w.NS).Create(ctx, deploy, metav1.CreateOptions{})
	for _, err := range []error{errSet, errDeploy} {
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), positiveRule) {
			t.Errorf("admission: want an Invalid error with %q, got %v", positiveRule, err)
		}
	}
	// Stored from before the rule, the controllers refuse them.
	storeWithoutRule(t, set, "machinesets", positiveRule)
	storeWithoutRule(t, deploy, "machinedeployments", positiveRule)
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		s, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).Get(ctx, "negative", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range s.Status.Conditions {
			if c.Type == v1alpha1.MachineSetReplicaFailure && c.Reason == "InvalidMachineSet" && strings.Contains(c.Message, positiveRule) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("set conditions: %+v", s.Status.Conditions)
	})
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		d, err := w.Machines.MachineV1alpha1().MachineDeployments(w.NS).Get(ctx, "negative", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range d.Status.Conditions {
			if c.Type == v1alpha1.MachineDeploymentReplicaFailure && c.Reason == "InvalidMachineDeployment" && strings.Contains(c.Message, positiveRule) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("deployment conditions: %+v", d.Status.Conditions)
	})
	// The syncs that wrote the conditions adopted, created and deleted
	// nothing; deleting the set deletes nothing either.
	if err := w.Machines.MachineV1alpha1().MachineSets(w.NS).Delete(ctx, "negative", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		_, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).Get(ctx, "negative", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("the set is still there: %v", err)
	})
	sets, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sets.Items) != 0 {
		t.Errorf("the deployment made %d machine set(s)", len(sets.Items))
	}
	list, err := machines.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(list.Items); len(got) != 2 || got[0] != "standalone-a" || got[1] != "standalone-b" {
		t.Fatalf("machines: got %v, want the two standalone ones", got)
	}
	for _, m := range list.Items {
		if len(m.OwnerReferences) > 0 || m.DeletionTimestamp != nil {
			t.Errorf("standalone machine %s: owners %v, deletion %v", m.Name, m.OwnerReferences, m.DeletionTimestamp)
		}
	}
}
