package tree

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/machine"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func owned(meta *metav1.ObjectMeta, kind, name string) {
	yes := true
	meta.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: name, UID: types.UID(name), Controller: &yes}}
}

func newSet(name, deployment string, rev string, desired, current, ready int32) *v1alpha1.MachineSet {
	s := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name),
		Annotations: map[string]string{v1alpha1.RevisionAnnotation: rev}}}
	owned(&s.ObjectMeta, "MachineDeployment", deployment)
	s.Spec.Replicas, s.Status.Replicas, s.Status.ReadyReplicas = desired, current, ready
	return s
}

func newMachine(name, set string, phase v1alpha1.MachinePhase, age time.Duration) *v1alpha1.Machine {
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(age),
		Labels: map[string]string{v1alpha1.NodeLabelKey: name}}}
	owned(&m.ObjectMeta, "MachineSet", set)
	m.Status.CurrentStatus.Phase = phase
	return m
}

func readyNode(name string, ready corev1.ConditionStatus) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
}

// rollout is a deployment in the middle of a rolling update: a new set
// with many alike machines and a few that are busy, an old set with a
// draining, a failed and preserved, an unhealthy and an updating machine.
func rollout() Objects {
	d := &v1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "web"}}
	d.Spec.Replicas = 14
	d.Status = v1alpha1.MachineDeploymentStatus{UpdatedReplicas: 11, ReadyReplicas: 12, AvailableReplicas: 12,
		Conditions: []v1alpha1.MachineDeploymentCondition{{Type: v1alpha1.MachineDeploymentProgressing, Status: v1alpha1.ConditionTrue,
			Reason: v1alpha1.MachineSetUpdatedReason}}}
	objs := Objects{Deployments: []*v1alpha1.MachineDeployment{d}, Nodes: map[string]*corev1.Node{},
		Sets: []*v1alpha1.MachineSet{newSet("web-old", "web", "1", 3, 4, 3), newSet("web-new", "web", "2", 11, 11, 9)}}
	for i := range 10 {
		m := newMachine(fmt.Sprintf("web-new-%02d", i), "web-new", v1alpha1.MachineRunning, time.Duration(i+1)*time.Minute)
		objs.Machines = append(objs.Machines, m)
		objs.Nodes[m.Name] = readyNode(m.Name, corev1.ConditionTrue)
	}
	creating := newMachine("web-new-10", "web-new", "", 40*time.Second)
	delete(creating.Labels, v1alpha1.NodeLabelKey)
	objs.Machines = append(objs.Machines, creating)

	draining := newMachine("web-old-a", "web-old", v1alpha1.MachineTerminating, time.Hour)
	draining.DeletionTimestamp = &metav1.Time{Time: now.Add(-30 * time.Second)}
	draining.Annotations = map[string]string{machine.DeletionStepAnnotation: string(machine.StepDrain), drainBlockedByAnnotation: "shop/web"}
	draining.Status.LastOperation.Description = "Draining node: 3 pods left: shop/web-1 blocked by shop/web (needs 3 healthy, has 3)"
	cordoned := readyNode("web-old-a", corev1.ConditionTrue)
	cordoned.Spec.Unschedulable = true
	objs.Nodes["web-old-a"] = cordoned

	failed := newMachine("web-old-b", "web-old", v1alpha1.MachineFailed, 2*time.Hour)
	failed.Status.LastOperation.Description = "Machine web-old-b is not healthy since 10m: node NotReady"
	failed.Status.CurrentStatus.PreserveExpiryTime = &metav1.Time{Time: now.Add(96 * time.Hour)}
	objs.Nodes["web-old-b"] = readyNode("web-old-b", corev1.ConditionFalse)

	unknown := newMachine("web-old-c", "web-old", v1alpha1.MachineUnknown, 3*time.Hour)
	unknown.Status.CurrentStatus.LastUpdateTime = ago(90 * time.Second)
	pressure := readyNode("web-old-c", corev1.ConditionUnknown)
	pressure.Status.Conditions = append(pressure.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue})
	objs.Nodes["web-old-c"] = pressure

	updating := newMachine("web-old-d", "web-old", v1alpha1.MachineInPlaceUpdating, 4*time.Hour)
	inPlace := readyNode("web-old-d", corev1.ConditionTrue)
	inPlace.Status.Conditions = append(inPlace.Status.Conditions, corev1.NodeCondition{Type: v1alpha1.NodeInPlaceUpdate,
		Status: corev1.ConditionTrue, Reason: v1alpha1.ReadyForUpdate})
	objs.Nodes["web-old-d"] = inPlace

	gone := newMachine("loner", "", v1alpha1.MachineRunning, 5*time.Minute)
	gone.OwnerReferences = nil
	objs.Nodes["loner"] = readyNode("loner", corev1.ConditionTrue)
	orphan := newSet("spare", "", "", 0, 0, 0)
	orphan.OwnerReferences = nil
	objs.Sets = append(objs.Sets, orphan)
	objs.Machines = append(objs.Machines, draining, failed, unknown, updating, gone)
	return objs
}

func TestRenderGolden(t *testing.T) {
	paused := rollout()
	paused.Deployments[0] = paused.Deployments[0].DeepCopy()
	paused.Deployments[0].Spec.Paused = true
	paused.Deployments[0].Status.Conditions = []v1alpha1.MachineDeploymentCondition{{Type: v1alpha1.MachineDeploymentProgressing,
		Status: v1alpha1.ConditionFalse, Reason: v1alpha1.ProgressDeadlineExceededReason, Message: "MachineDeployment web has timed out progressing."}}
	for _, tc := range []struct {
		name string
		objs Objects
		opts RenderOptions
	}{
		{"rollout", rollout(), RenderOptions{}},
		{"rollout-show-all", rollout(), RenderOptions{ShowAll: true}},
		{"rollout-color", rollout(), RenderOptions{Color: true}},
		{"paused-deadline", paused, RenderOptions{}},
		{"empty", Objects{}, RenderOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Now = now
			got := Render(Build(tc.objs, now), tc.opts)
			golden(t, filepath.Join("testdata", tc.name+".golden"), got)
		})
	}
}

// golden compares got with the file at path, or rewrites it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

func TestGroupingCounts(t *testing.T) {
	objs := rollout()
	got := Build(objs, now)
	r := &renderer{o: RenderOptions{Now: now, GroupAbove: 7, GroupShown: 3}}
	lines := r.group(got.Deployments[0].Sets[0].Machines)
	var more []int
	listed := 0
	for _, l := range lines {
		if l.machine == nil {
			more = append(more, l.more)
		} else {
			listed++
		}
	}
	if diff := cmp.Diff([]int{7}, more); diff != "" {
		t.Errorf("counted groups (-want +got):\n%s", diff)
	}
	if listed != 4 {
		t.Errorf("listed %d machines, want the creating one and 3 Running ones", listed)
	}
}
