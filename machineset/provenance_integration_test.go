package machineset_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machineset"
)

// createForged creates a machine as anyone who may create machines can:
// with the set's labels, a controller reference to it (its name and UID
// are readable) and machinepriority 5, from the set's template.
func createForged(t *testing.T, client versioned.Interface, set *v1alpha1.MachineSet, name string) {
	t.Helper()
	m := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: set.Namespace,
			Labels:      set.Spec.Template.Labels,
			Annotations: map[string]string{v1alpha1.MachinePriorityAnnotation: "5"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set,
				v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))},
		},
		Spec: set.Spec.Template.Spec,
	}
	if _, err := client.MachineV1alpha1().Machines(set.Namespace).Create(context.Background(), m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitForeignEvents waits until the set told of each named machine by a
// ForeignMachine Warning event.
func waitForeignEvents(t *testing.T, ns, set string, names ...string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		events, err := testenv.Get(t).Client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + machineset.ReasonForeignMachine})
		if err != nil {
			return false, err.Error()
		}
		for _, name := range names {
			if !slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
				return e.InvolvedObject.Name == set && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "Machine "+name+" ")
			}) {
				return false, fmt.Sprintf("no %s event for %s among %d", machineset.ReasonForeignMachine, name, len(events.Items))
			}
		}
		return true, ""
	})
}

// TestIntegrationForgedMachinesDoNotSteerDeletions is the repro: two
// machines with a set's labels, a controller reference to it and priority
// 5 made the set delete two of its Running machines and keep them. Now the
// set deletes them, keeps its own, and names them in events.
func TestIntegrationForgedMachinesDoNotSteerDeletions(t *testing.T) {
	t.Parallel()
	recorder, stop := apiRecorder(t)
	defer stop()
	w := &setWorld{t: t, Stack: simstack.Start(t, simstack.Options{MachineSet: machineset.Options{Recorder: recorder}})}
	w.createSet("victim", 2, nil, nil)
	own := names(w.running(2))
	set, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).Get(context.Background(), "victim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createForged(t, w.Machines, set, "forged-a")
	createForged(t, w.Machines, set, "forged-b")
	waitForeignEvents(t, w.NS, "victim", "forged-a", "forged-b")
	testenv.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
		list, err := w.Machines.MachineV1alpha1().Machines(w.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var live, deleting []string
		for _, m := range list.Items {
			if m.DeletionTimestamp == nil {
				live = append(live, m.Name)
			} else {
				deleting = append(deleting, m.Name)
			}
		}
		slices.Sort(live)
		return slices.Equal(live, own), fmt.Sprintf("live %v, being deleted %v; want the set's own %v", live, deleting, own)
	})
	// The set's own stay Running throughout; they were never deleted.
	for _, m := range w.running(2) {
		if !slices.Contains(own, m.Name) {
			t.Errorf("machine %s is not one of the set's own %v", m.Name, own)
		}
	}
}

// TestIntegrationForeignMachinesSurviveARestart: forged machines that the
// set holds while it is short of machines are listed on the set, so that
// a controller started afterwards, whose informer shows them as the set's
// from the start, still deletes them first when the set scales down.
func TestIntegrationForeignMachinesSurviveARestart(t *testing.T) {
	t.Parallel()
	w := startReplicaWorld(t, 50, 100, machineset.Options{})
	w.createSet("keep", 2)
	w.waitLive(2)
	ctx := context.Background()
	list, err := w.machines.MachineV1alpha1().Machines(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	own := names(list.Items)
	// Short of two machines but frozen, the set keeps what it gets. The
	// forged machines come once the controller has seen it so: a sync that
	// saw them with the set still at 2 would delete them as excess.
	set := w.patchSet("keep", `{"metadata":{"labels":{"freeze":"True"}},"spec":{"replicas":4}}`)
	w.waitObserved(set)
	createForged(t, w.machines, set, "forged-a")
	createForged(t, w.machines, set, "forged-b")
	waitForeignEvents(t, w.ns, "keep", "forged-a", "forged-b")
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		s, err := w.machines.MachineV1alpha1().MachineSets(w.ns).Get(ctx, "keep", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := len(strings.Split(s.Annotations[v1alpha1.ForeignMachinesAnnotation], ","))
		return s.Annotations[v1alpha1.ForeignMachinesAnnotation] != "" && n == 2,
			fmt.Sprintf("annotation %q", s.Annotations[v1alpha1.ForeignMachinesAnnotation])
	})

	w.stop()
	w.startController()
	w.patchSet("keep", `{"metadata":{"labels":{"freeze":null}},"spec":{"replicas":2}}`)
	w.waitLive(2)
	list, err = w.machines.MachineV1alpha1().Machines(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, m := range list.Items {
		if m.DeletionTimestamp == nil {
			live = append(live, m.Name)
		}
	}
	slices.Sort(live)
	if !slices.Equal(live, own) {
		t.Errorf("after the restart the set kept %v, want its own %v", live, own)
	}
}
