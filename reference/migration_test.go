package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// Keys of a node template MCM applied before the template dropped them.
const (
	droppedLabel = "example.com/dropped-by-template"
	droppedTaint = "example.com/dropped-taint"
)

// TestSwitchFromMCM: a namespace exactly as Gardener MCM leaves it — a
// MachineDeployment of three Running machines with MCM's status,
// lastOperation, labels, annotations and finalizers, its MachineSet, their
// Nodes with MCM's last-applied record, finalizer and labels (the record
// naming a label and a taint the template no longer has), the class's
// Secret with MCM's finalizer — and a simulated cloud holding their VMs.
// Our manager starts on it: no VM, Machine, MachineSet or Node is created
// or deleted, no node label or taint changes except the two the template
// dropped, which are removed; then a template change rolls out normally.
//
// The cloud and its Nodes are made by a first run of the manager; the
// objects are then rewritten to MCM's form, every trace of that run
// removed, while no manager runs.
func TestSwitchFromMCM(t *testing.T) {
	t.Parallel()
	env := testenv.GetOwn(t) // it lists nodes by label across the cluster
	ctx := context.Background()
	ns := env.Namespace(t)
	mc := versioned.NewForConfigOrDie(env.Config())
	kube := env.Client()
	createMachineObjects(t, env, mc, ns)
	createWebDeployment(t, mc, ns, 3, 1)
	d, err := mc.MachineV1alpha1().MachineDeployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.NodeTemplateSpec.Labels = map[string]string{"pool": "web"}
	if _, err := mc.MachineV1alpha1().MachineDeployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir() + "/cloud.json"
	args := []string{"--control-kubeconfig", env.Kubeconfig(), "--target-kubeconfig", env.Kubeconfig(),
		"--namespace", ns, "--driver", "sim", "--sim-state-file", state, "--leader-elect=false"}

	// The cloud: three VMs and their Nodes.
	first := start(t, binary(t), "first", args...)
	converged(t, mc, ns, "before the switch", 3, "sim")
	terminate(t, first)
	// Machines are Running as soon as their Nodes are Ready, which can be
	// before kube-controller-manager has finished with the new Nodes (the
	// not-ready taint removed, the beta labels added); the snapshot waits
	// for that, so that only the switch can change the Nodes after it.
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		machines, err := mc.MachineV1alpha1().Machines(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, m := range machines.Items {
			n, err := kube.CoreV1().Nodes().Get(ctx, m.Labels[v1alpha1.NodeLabelKey], metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if _, ok := n.Labels["beta.kubernetes.io/arch"]; !ok || len(n.Spec.Taints) > 0 {
				return false, fmt.Sprintf("node %s not settled by kube-controller-manager: taints %v", n.Name, n.Spec.Taints)
			}
		}
		return true, ""
	})

	// The namespace as MCM leaves it.
	rewriteAsMCM(t, env, mc, ns)
	before := snapshot(t, env, mc, ns, state)

	second := start(t, binary(t), "second", args...)
	// The dropped keys go; that is the one change to the nodes.
	seen := "no list yet"
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=web"})
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, n := range nodes.Items {
			if _, ok := n.Labels[droppedLabel]; ok {
				left = append(left, n.Name+": label")
			}
			if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == droppedTaint }) {
				left = append(left, n.Name+": taint")
			}
		}
		if len(nodes.Items) == 3 && len(left) == 0 {
			return true, ""
		}
		seen = fmt.Sprintf("%d nodes, dropped keys left on %v", len(nodes.Items), left)
		return false, seen
	})
	// Long enough for anything the manager would do on its own to show.
	time.Sleep(15 * time.Second)
	after := snapshot(t, env, mc, ns, state)
	for name, n := range before.nodes {
		delete(n.labels, droppedLabel)
		n.taints = slices.DeleteFunc(n.taints, func(t string) bool { return strings.HasPrefix(t, droppedTaint) })
		before.nodes[name] = n
	}
	compare := func(what string, want, got any) {
		t.Helper()
		if s := fmt.Sprint(want); s != fmt.Sprint(got) {
			t.Errorf("%s changed across the switch:\nbefore %v\nafter  %v", what, want, got)
		}
	}
	compare("machines (uid, providerID, phase)", before.machines, after.machines)
	compare("machine sets", before.sets, after.sets)
	compare("nodes (uid, labels, taints, finalizers)", before.nodes, after.nodes)
	compare("VMs", before.vms, after.vms)
	compare("provider IDs ever issued", before.issued, after.issued)

	// And the manager works the namespace as its own: a new class rolls out.
	d, err = mc.MachineV1alpha1().MachineDeployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Class.Name = "sim-next"
	if _, err := mc.MachineV1alpha1().MachineDeployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	converged(t, mc, ns, "after the template change", 3, "sim-next")
	checkVMs(t, mc, ns, state, "after the template change")
	terminate(t, second)
}

// rewriteAsMCM rewrites the namespace's objects and their Nodes as MCM
// v0.62 leaves them: MCM's finalizers, labels, annotations, status and
// lastOperation, no annotation of ours, and on each Node MCM's
// last-applied record of a template that also set droppedLabel and
// droppedTaint, which the Node carries.
func rewriteAsMCM(t *testing.T, env *testenv.Env, mc versioned.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	ours := func(annotations map[string]string) {
		maps.DeleteFunc(annotations, func(k, _ string) bool { return strings.Contains(k, "mcmkit.io/") })
	}
	machines := mc.MachineV1alpha1().Machines(ns)
	list, err := machines.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	joined := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	for _, m := range list.Items {
		ours(m.Annotations)
		m.Annotations[v1alpha1.MachinePriorityAnnotation] = v1alpha1.MachinePriorityDefault
		m.Annotations[v1alpha1.MachineJoinDurationAnnotation] = "1m2.5s"
		m.Finalizers = []string{v1alpha1.MachineFinalizer}
		updated, err := machines.Update(ctx, &m, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		updated.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning, LastUpdateTime: joined}
		updated.Status.LastOperation = v1alpha1.LastOperation{
			Description:    fmt.Sprintf("Machine %s successfully joined the cluster in 1m2.5s", m.Name),
			State:          v1alpha1.MachineStateSuccessful,
			Type:           v1alpha1.MachineOperationCreate,
			LastUpdateTime: joined,
		}
		if _, err := machines.UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	sets := mc.MachineV1alpha1().MachineSets(ns)
	setList, err := sets.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range setList.Items {
		ours(s.Annotations)
		maps.Copy(s.Annotations, map[string]string{v1alpha1.RevisionAnnotation: "1", v1alpha1.DesiredReplicasAnnotation: "3", v1alpha1.MaxReplicasAnnotation: "4"})
		s.Finalizers = []string{v1alpha1.MachineFinalizer}
		updated, err := sets.Update(ctx, &s, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		updated.Status = v1alpha1.MachineSetStatus{Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
			ObservedGeneration: updated.Generation,
			LastOperation:      v1alpha1.LastOperation{LastUpdateTime: joined}}
		if _, err := sets.UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	deployments := mc.MachineV1alpha1().MachineDeployments(ns)
	d, err := deployments.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ours(d.Annotations)
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[v1alpha1.RevisionAnnotation] = "1"
	d.Finalizers = []string{v1alpha1.MachineFinalizer}
	if d, err = deployments.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d.Status = v1alpha1.MachineDeploymentStatus{ObservedGeneration: d.Generation, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
		Conditions: []v1alpha1.MachineDeploymentCondition{
			{Type: v1alpha1.MachineDeploymentAvailable, Status: v1alpha1.ConditionTrue, Reason: "MinimumReplicasAvailable",
				Message: "Deployment has minimum availability.", LastUpdateTime: joined, LastTransitionTime: joined},
			{Type: v1alpha1.MachineDeploymentProgressing, Status: v1alpha1.ConditionTrue, Reason: "NewMachineSetAvailable",
				Message: fmt.Sprintf("MachineSet %q has successfully progressed.", setList.Items[0].Name), LastUpdateTime: joined, LastTransitionTime: joined},
		}}
	if _, err := deployments.UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	secret, err := env.Client().CoreV1().Secrets(ns).Get(ctx, "cloud", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret.Finalizers = []string{v1alpha1.SecretFinalizer}
	if _, err := env.Client().CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// MCM's record: the JSON of the NodeTemplateSpec it applied, which then
	// also had the two dropped keys.
	record := fmt.Sprintf(`{"metadata":{"creationTimestamp":null,"labels":{"pool":"web",%q:"yes"}},"spec":{"taints":[{"key":%q,"value":"yes","effect":"PreferNoSchedule"}]}}`,
		droppedLabel, droppedTaint)
	for _, m := range list.Items {
		node, err := env.Client().CoreV1().Nodes().Get(ctx, m.Labels[v1alpha1.NodeLabelKey], metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ours(node.Annotations)
		node.Annotations[v1alpha1.LastAppliedNodeTemplateAnnotation] = record
		node.Labels[droppedLabel] = "yes"
		node.Labels[v1alpha1.MachineNameLabelKey] = m.Name
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: droppedTaint, Value: "yes", Effect: corev1.TaintEffectPreferNoSchedule})
		node.Finalizers = []string{v1alpha1.NodeFinalizer}
		if _, err := env.Client().CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// world is what must not change across the switch.
type world struct {
	machines map[string]string // name: uid, providerID, phase
	sets     map[string]string // name: uid
	nodes    map[string]nodeState
	vms      []string // provider IDs of the cloud's live VMs
	issued   int      // provider IDs the cloud ever issued
}

type nodeState struct {
	uid        string
	labels     map[string]string
	taints     []string
	finalizers []string
}

func snapshot(t *testing.T, env *testenv.Env, mc versioned.Interface, ns, state string) world {
	t.Helper()
	ctx := context.Background()
	w := world{machines: map[string]string{}, sets: map[string]string{}, nodes: map[string]nodeState{}}
	machines, err := mc.MachineV1alpha1().Machines(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range machines.Items {
		w.machines[m.Name] = fmt.Sprintf("%s %s %s", m.UID, m.Spec.ProviderID, m.Status.CurrentStatus.Phase)
		node, err := env.Client().CoreV1().Nodes().Get(ctx, m.Labels[v1alpha1.NodeLabelKey], metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var taints []string
		for _, tn := range node.Spec.Taints {
			taints = append(taints, fmt.Sprintf("%s=%s:%s", tn.Key, tn.Value, tn.Effect))
		}
		w.nodes[node.Name] = nodeState{uid: string(node.UID), labels: node.Labels, taints: taints, finalizers: node.Finalizers}
	}
	sets, err := mc.MachineV1alpha1().MachineSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets.Items {
		w.sets[s.Name] = string(s.UID)
	}
	cloud, err := sim.New(sim.Options{StateFile: state})
	if err != nil {
		t.Fatal(err)
	}
	for _, vm := range cloud.VMs() {
		if vm.State != sim.VMTerminating {
			w.vms = append(w.vms, vm.ProviderID)
		}
	}
	slices.Sort(w.vms)
	raw, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Issued []string `json:"issuedProviderIDs"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	w.issued = len(file.Issued)
	return w
}
