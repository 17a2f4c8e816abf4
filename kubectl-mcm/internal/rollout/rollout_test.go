package rollout

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/deployment"
)

func withStatus(gen, observed int64, replicas int32, st v1alpha1.MachineDeploymentStatus) *v1alpha1.MachineDeployment {
	d := &v1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: gen}}
	d.Spec.Replicas = replicas
	st.ObservedGeneration = observed
	d.Status = st
	return d
}

func progressingFalse(reason, msg string) []v1alpha1.MachineDeploymentCondition {
	return []v1alpha1.MachineDeploymentCondition{{Type: v1alpha1.MachineDeploymentProgressing, Status: v1alpha1.ConditionFalse, Reason: reason, Message: msg}}
}

func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    *v1alpha1.MachineDeployment
		msg  string
		done bool
		err  error
	}{
		{"spec not observed", withStatus(2, 1, 3, v1alpha1.MachineDeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}),
			"Waiting for machinedeployment spec update to be observed...\n", false, nil},
		{"updating", withStatus(2, 2, 3, v1alpha1.MachineDeploymentStatus{Replicas: 4, UpdatedReplicas: 1, AvailableReplicas: 3}),
			"Waiting for machinedeployment \"web\" rollout to finish: 1 out of 3 new replicas have been updated...\n", false, nil},
		{"old pending", withStatus(2, 2, 3, v1alpha1.MachineDeploymentStatus{Replicas: 4, UpdatedReplicas: 3, AvailableReplicas: 3}),
			"Waiting for machinedeployment \"web\" rollout to finish: 1 old replicas are pending termination...\n", false, nil},
		{"not available", withStatus(2, 2, 3, v1alpha1.MachineDeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 2}),
			"Waiting for machinedeployment \"web\" rollout to finish: 2 of 3 updated replicas are available...\n", false, nil},
		{"done", withStatus(2, 2, 3, v1alpha1.MachineDeploymentStatus{Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}),
			"machinedeployment \"web\" successfully rolled out\n", true, nil},
		{"deadline", withStatus(2, 2, 3, v1alpha1.MachineDeploymentStatus{Replicas: 3, UpdatedReplicas: 1,
			Conditions: progressingFalse(v1alpha1.ProgressDeadlineExceededReason, "timed out")}), "", false, ErrDeadlineExceeded},
		{"in-place failed", withStatus(2, 2, 3, v1alpha1.MachineDeploymentStatus{Replicas: 3, UpdatedReplicas: 1,
			Conditions: progressingFalse(deployment.ReasonInPlaceUpdateFailed, "machine web-a: disk full")}), "", false, ErrInPlaceUpdateFailed},
	} {
		msg, done, err := Status(tc.d)
		if msg != tc.msg || done != tc.done || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%s: Status = %q, %v, %v; want %q, %v, %v", tc.name, msg, done, err, tc.msg, tc.done, tc.err)
		}
	}
}

func set(name, owner string, rev string, cause string) *v1alpha1.MachineSet {
	yes := true
	s := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
	if rev != "" {
		s.Annotations[v1alpha1.RevisionAnnotation] = rev
	}
	if cause != "" {
		s.Annotations[ChangeCauseAnnotation] = cause
	}
	s.OwnerReferences = []metav1.OwnerReference{{Kind: "MachineDeployment", Name: owner, UID: "uid-" + "web", Controller: &yes}}
	if owner != "web" {
		s.OwnerReferences[0].UID = "uid-other"
	}
	s.Spec.Template.Spec.Class.Name = "class-" + rev
	return s
}

func TestHistoryAndFind(t *testing.T) {
	d := &v1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid-web"}}
	sets := []*v1alpha1.MachineSet{set("web-c", "web", "3", "bigger"), set("web-a", "web", "1", ""), set("db-a", "db", "7", ""),
		set("web-b", "web", "2", ""), set("web-new", "web", "", "")}
	h := History(d, sets)
	var got []string
	for _, r := range h {
		got = append(got, r.MachineSet+"/"+r.ChangeCause)
	}
	if diff := cmp.Diff([]string{"web-a/", "web-b/", "web-c/bigger"}, got); diff != "" {
		t.Errorf("History (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		n    int64
		want string
		err  string
	}{{0, "web-b", ""}, {1, "web-a", ""}, {3, "web-c", ""}, {7, "", "unable to find specified revision 7"}} {
		r, err := Find(h, tc.n)
		if r.MachineSet != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Find(%d) = %s, %v; want %s, %q", tc.n, r.MachineSet, err, tc.want, tc.err)
		}
	}
	if _, err := Find(h[:1], 0); err == nil {
		t.Error("Find(0) with one revision: no error")
	}
	var b strings.Builder
	if err := PrintHistory(&b, "machinedeployment.machine.sapcloud.io/web", h); err != nil {
		t.Fatal(err)
	}
	want := "machinedeployment.machine.sapcloud.io/web\nREVISION  MACHINESET  CHANGE-CAUSE\n1         web-a       <none>\n2         web-b       <none>\n3         web-c       bigger\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("PrintHistory (-want +got):\n%s", diff)
	}
}

func decode(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPatches(t *testing.T) {
	d := &v1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid-web", ResourceVersion: "42"}}
	p, err := PausePatch(d, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"metadata": map[string]any{"resourceVersion": "42"}, "spec": map[string]any{"paused": true}}
	if diff := cmp.Diff(want, decode(t, p)); diff != "" {
		t.Errorf("pause (-want +got):\n%s", diff)
	}
	if _, err := PausePatch(d, false); err == nil || !strings.Contains(err.Error(), "is not paused") {
		t.Errorf("resume of a running deployment: %v", err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p, err = RestartPatch(d, now)
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]any{"metadata": map[string]any{"resourceVersion": "42"}, "spec": map[string]any{"template": map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{RestartedAtAnnotation: "2026-03-01T12:00:00Z"}}}}}
	if diff := cmp.Diff(want, decode(t, p)); diff != "" {
		t.Errorf("restart (-want +got):\n%s", diff)
	}
	paused := d.DeepCopy()
	paused.Spec.Paused = true
	if _, err := PausePatch(paused, true); err == nil || !strings.Contains(err.Error(), "already paused") {
		t.Errorf("pause of a paused deployment: %v", err)
	}
	if _, err := RestartPatch(paused, now); err == nil {
		t.Error("restart of a paused deployment: no error")
	}
}

func TestUndoPatch(t *testing.T) {
	d := &v1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid-web", ResourceVersion: "7"}}
	d.Spec.Template.Spec.Class.Name = "class-2"
	sets := []*v1alpha1.MachineSet{set("web-a", "web", "1", ""), set("web-b", "web", "2", "")}
	sets[0].Spec.Template.Labels = map[string]string{v1alpha1.MachineTemplateHashLabelKey: "abc"}
	p, to, skip, err := UndoPatch(d, sets, 0)
	if err != nil || skip || to.Revision != 1 {
		t.Fatalf("UndoPatch(0) = %v, %v, %v", to.Revision, skip, err)
	}
	want := map[string]any{"metadata": map[string]any{"resourceVersion": "7"}, "spec": map[string]any{"rollbackTo": map[string]any{"revision": float64(1)}}}
	if diff := cmp.Diff(want, decode(t, p)); diff != "" {
		t.Errorf("undo (-want +got):\n%s", diff)
	}
	if _, _, skip, err := UndoPatch(d, sets, 2); err != nil || !skip {
		t.Errorf("undo to the current template: skip=%v err=%v, want a skip", skip, err)
	}
	if _, _, _, err := UndoPatch(d, sets, 5); err == nil {
		t.Error("undo to a missing revision: no error")
	}
}
