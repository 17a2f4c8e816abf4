package machineset_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// The CRDs' rules that keep the label keys the controllers write out of
// selectors and templates: writtenKeysRule starts both messages, the
// others are the parts that differ.
const (
	writtenKeysRule           = "selector and template.metadata.labels must not use the label keys"
	setWrittenKeysRule        = writtenKeysRule + " node and node.machine.sapcloud.io/update-result: the controllers write them on machines"
	deploymentWrittenKeysRule = writtenKeysRule + " node, node.machine.sapcloud.io/update-result, machine-template-hash"
)

// runawayLimit is how many machines the runaway tests tolerate in their
// namespace before failing: the sets they create ask for one.
const runawayLimit = 4

// TestIntegrationSelectorOnNodeRunsAway is the repro of a set selecting
// and labelling its machines with node: the machine controller rewrote
// node to the node's name, the set released the machine (it no longer
// matched) and created another, hundreds within seconds, all standalone.
// Admission refuses such a set now; one stored from before the rule is
// refused by the controller with a condition and creates nothing.
func TestIntegrationSelectorOnNodeRunsAway(t *testing.T) {
	w := &setWorld{t: t, Stack: simstack.Start(t, simstack.Options{})}
	deleteEverythingAtTheEnd(t, w)
	ctx := context.Background()
	labels := map[string]string{"app": "run", v1alpha1.NodeLabelKey: "x"}
	set := &v1alpha1.MachineSet{
		TypeMeta:   metav1.TypeMeta{Kind: "MachineSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: w.NS},
		Spec: v1alpha1.MachineSetSpec{Replicas: 1, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: v1alpha1.MachineTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: w.Class}},
		}},
	}
	_, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).Create(ctx, set, metav1.CreateOptions{})
	wantRefused(t, err, setWrittenKeysRule)

	storeWithoutRule(t, set, "machinesets", writtenKeysRule)
	w.waitRefusedWithoutRunaway(func(ctx context.Context) (string, error) {
		s, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).Get(ctx, set.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return setRefusal(s), nil
	}, setWrittenKeysRule)
}

// TestIntegrationDeploymentSelectorOnNodeRunsAway is the same repro through
// a MachineDeployment, whose set inherited the selector and template.
func TestIntegrationDeploymentSelectorOnNodeRunsAway(t *testing.T) {
	w := &setWorld{t: t, Stack: simstack.Start(t, simstack.Options{Deployments: true})}
	deleteEverythingAtTheEnd(t, w)
	ctx := context.Background()
	labels := map[string]string{"app": "run", v1alpha1.NodeLabelKey: "x"}
	deploy := &v1alpha1.MachineDeployment{
		TypeMeta:   metav1.TypeMeta{Kind: "MachineDeployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: w.NS},
		Spec: v1alpha1.MachineDeploymentSpec{Replicas: 1, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: v1alpha1.MachineTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: w.Class}},
		}},
	}
	_, err := w.Machines.MachineV1alpha1().MachineDeployments(w.NS).Create(ctx, deploy, metav1.CreateOptions{})
	wantRefused(t, err, deploymentWrittenKeysRule)

	storeWithoutRule(t, deploy, "machinedeployments", writtenKeysRule)
	w.waitRefusedWithoutRunaway(func(ctx context.Context) (string, error) {
		d, err := w.Machines.MachineV1alpha1().MachineDeployments(w.NS).Get(ctx, deploy.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return deploymentRefusal(d), nil
	}, deploymentWrittenKeysRule)
	sets, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sets.Items) != 0 {
		t.Errorf("the refused deployment made %d machine set(s)", len(sets.Items))
	}
}

// TestIntegrationSelectorNodeExistsAdoptsNothing is the repro of a set
// whose only positive requirement was "node Exists": every bound machine
// carries node, so the set adopted the standalone machines and deleted
// one as surplus. Admission refuses such a set now; one stored from before
// the rule is refused by the controller and touches no machine.
func TestIntegrationSelectorNodeExistsAdoptsNothing(t *testing.T) {
	w := &setWorld{t: t, Stack: simstack.Start(t, simstack.Options{})}
	deleteEverythingAtTheEnd(t, w)
	ctx := context.Background()
	machines := w.Machines.MachineV1alpha1().Machines(w.NS)
	for _, name := range []string{"bound-a", "bound-b"} {
		m := &v1alpha1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS, Labels: map[string]string{"app": "db"}},
			Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: w.Class}},
		}
		if _, err := machines.Create(ctx, m, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range w.running(2) {
		if m.Labels[v1alpha1.NodeLabelKey] == "" {
			t.Fatalf("Running machine %s has no %s label", m.Name, v1alpha1.NodeLabelKey)
		}
	}

	set := &v1alpha1.MachineSet{
		TypeMeta:   metav1.TypeMeta{Kind: "MachineSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "everything-bound", Namespace: w.NS},
		Spec: v1alpha1.MachineSetSpec{
			Replicas: 1,
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: v1alpha1.NodeLabelKey, Operator: metav1.LabelSelectorOpExists},
			}},
			Template: v1alpha1.MachineTemplateSpec{
				// The template must meet the selector (an older rule).
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.NodeLabelKey: "x"}},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: w.Class}},
			},
		},
	}
	_, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).Create(ctx, set, metav1.CreateOptions{})
	wantRefused(t, err, setWrittenKeysRule)

	storeWithoutRule(t, set, "machinesets", writtenKeysRule)
	var touched []string
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		list, err := machines.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		touched = touched[:0]
		for _, m := range list.Items {
			if len(m.OwnerReferences) > 0 || m.DeletionTimestamp != nil {
				touched = append(touched, fmt.Sprintf("%s (owners %v, deletion %v)", m.Name, m.OwnerReferences, m.DeletionTimestamp))
			}
		}
		if len(touched) > 0 || len(list.Items) != 2 {
			return true, "" // fails below
		}
		s, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).Get(ctx, set.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		msg := setRefusal(s)
		return strings.Contains(msg, setWrittenKeysRule), fmt.Sprintf("set conditions: %+v", s.Status.Conditions)
	})
	if list, err := machines.List(ctx, metav1.ListOptions{}); err != nil || len(touched) > 0 || len(list.Items) != 2 {
		t.Fatalf("the set took standalone machines: touched %v; machines now %v (%v)", touched, names(list.Items), err)
	}

	// Deleting the refused set deletes nothing either.
	if err := w.Machines.MachineV1alpha1().MachineSets(w.NS).Delete(ctx, set.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		_, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).Get(ctx, set.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("the set is still there: %v", err)
	})
	list, err := machines.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(list.Items); len(got) != 2 || got[0] != "bound-a" || got[1] != "bound-b" {
		t.Fatalf("machines: got %v, want the two standalone ones", got)
	}
	for _, m := range list.Items {
		if len(m.OwnerReferences) > 0 || m.DeletionTimestamp != nil {
			t.Errorf("standalone machine %s: owners %v, deletion %v", m.Name, m.OwnerReferences, m.DeletionTimestamp)
		}
	}
}

// wantRefused fails t unless err is admission's Invalid error with rule's
// message. It does not stop the test: what follows shows what the
// controllers do with such an object when it is stored anyway.
func wantRefused(t *testing.T, err error, rule string) {
	t.Helper()
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), rule) {
		t.Errorf("admission: want an Invalid error with %q, got %v", rule, err)
		return
	}
	t.Logf("admission refused: %v", err)
}

// setRefusal returns the message of the set's ReplicaFailure condition
// when the controller found the set invalid, or "".
func setRefusal(s *v1alpha1.MachineSet) string {
	for _, c := range s.Status.Conditions {
		if c.Type == v1alpha1.MachineSetReplicaFailure && c.Reason == "InvalidMachineSet" {
			return c.Message
		}
	}
	return ""
}

// deploymentRefusal is setRefusal for a deployment.
func deploymentRefusal(d *v1alpha1.MachineDeployment) string {
	for _, c := range d.Status.Conditions {
		if c.Type == v1alpha1.MachineDeploymentReplicaFailure && c.Reason == "InvalidMachineDeployment" {
			return c.Message
		}
	}
	return ""
}

// waitRefusedWithoutRunaway waits until refused (the message of the
// object's invalid condition) carries rule, failing as soon as the
// namespace holds more than runawayLimit machines, and then checks that no
// machine was created: a refused set or deployment creates none.
func (w *setWorld) waitRefusedWithoutRunaway(refused func(context.Context) (string, error), rule string) {
	w.t.Helper()
	var count int
	var seen []string
	testenv.Eventually(w.t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		list, err := w.Machines.MachineV1alpha1().Machines(w.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		if count, seen = len(list.Items), names(list.Items); count > runawayLimit {
			return true, "" // fails below
		}
		msg, err := refused(ctx)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(msg, rule), fmt.Sprintf("%d machines; invalid condition %q, want one with %q", count, msg, rule)
	})
	if count > runawayLimit {
		w.t.Fatalf("runaway: %d machines for 1 replica: %v", count, seen)
	}
	list, err := w.Machines.MachineV1alpha1().Machines(w.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	if len(list.Items) != 0 {
		w.t.Fatalf("the refused object made machines: %v", names(list.Items))
	}
}

// deleteEverythingAtTheEnd deletes, while the controllers still run, the
// deployments, sets and machines of the test's namespace, and waits
// (bounded) for the machines to go, so that a runaway stops with the test.
func deleteEverythingAtTheEnd(t *testing.T, w *setWorld) {
	t.Cleanup(func() {
		ctx := context.Background()
		api := w.Machines.MachineV1alpha1()
		for _, err := range []error{
			api.MachineDeployments(w.NS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}),
			api.MachineSets(w.NS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}),
		} {
			if err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		// Machines the sets released are standalone: delete them too,
		// once no set creates more.
		why, ok := testenv.Poll(time.Minute, func(ctx context.Context) (bool, string) {
			sets, err := api.MachineSets(w.NS).List(ctx, metav1.ListOptions{})
			if err != nil || len(sets.Items) > 0 {
				return false, fmt.Sprintf("sets left: %v", err)
			}
			if err := api.Machines(w.NS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				return false, err.Error()
			}
			list, err := api.Machines(w.NS).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			return len(list.Items) == 0, fmt.Sprintf("%d machines left", len(list.Items))
		})
		if !ok {
			t.Logf("cleanup: %s", why)
		}
	})
}
