package deployment_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/deployment"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Setup: []func(context.Context, *rest.Config) error{crds.Install}})
}

// rolloutWorld is the machine, MachineSet and MachineDeployment
// controllers on a simulated cloud against the real control plane.
type rolloutWorld struct {
	t *testing.T
	*simstack.Stack
}

func startRolloutWorld(t *testing.T) *rolloutWorld {
	return &rolloutWorld{t: t, Stack: simstack.Start(t, simstack.Options{Deployments: true})}
}

// addClass creates a copy of the stack's class named name, changed by
// change.
func (w *rolloutWorld) addClass(name string, change func(*sim.ProviderSpec)) {
	w.t.Helper()
	ctx := context.Background()
	base, err := w.Machines.MachineV1alpha1().MachineClasses(w.NS).Get(ctx, w.Class, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	var spec sim.ProviderSpec
	if err := json.Unmarshal(base.ProviderSpec.Raw, &spec); err != nil {
		w.t.Fatal(err)
	}
	change(&spec)
	class := &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS}, Provider: base.Provider,
		ProviderSpec: spec.RawExtension(), SecretRef: base.SecretRef}
	if _, err := w.Machines.MachineV1alpha1().MachineClasses(w.NS).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *rolloutWorld) createDeployment(name string, replicas int32, strategy v1alpha1.MachineDeploymentStrategy) {
	w.t.Helper()
	labels := map[string]string{"pool": name}
	d := &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.NS},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: w.Class}},
			},
			Strategy: strategy,
		},
	}
	if _, err := w.Machines.MachineV1alpha1().MachineDeployments(w.NS).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *rolloutWorld) patch(name, patch string) {
	w.t.Helper()
	if _, err := w.Machines.MachineV1alpha1().MachineDeployments(w.NS).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *rolloutWorld) get(name string) *v1alpha1.MachineDeployment {
	w.t.Helper()
	d, err := w.Machines.MachineV1alpha1().MachineDeployments(w.NS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return d
}

// live lists the machines not being deleted.
func (w *rolloutWorld) live(ctx context.Context) []v1alpha1.Machine {
	list, err := w.Machines.MachineV1alpha1().Machines(w.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	return slices.DeleteFunc(list.Items, func(m v1alpha1.Machine) bool { return m.DeletionTimestamp != nil })
}

// complete waits until the deployment's rollout is complete: replicas
// Running machines, all of class class, the status saying so for the
// current generation, and no machine of an old set left.
func (w *rolloutWorld) complete(name string, replicas int32, class string) {
	w.t.Helper()
	testenv.Eventually(w.t, 4*time.Minute, func(ctx context.Context) (bool, string) {
		d := w.get(name)
		list, err := w.Machines.MachineV1alpha1().Machines(w.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		running, other := 0, 0
		for _, m := range list.Items {
			if m.Labels["pool"] != name {
				continue
			}
			if m.Spec.Class.Name == class && m.DeletionTimestamp == nil && m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
				running++
			} else {
				other++
			}
		}
		st := d.Status
		return running == int(replicas) && other == 0 && st.UpdatedReplicas == replicas && st.AvailableReplicas == replicas &&
				st.Replicas == replicas && st.ObservedGeneration == d.Generation,
			fmt.Sprintf("%d Running of class %s, %d others; status replicas %d updated %d available %d, observed %d of %d",
				running, class, other, st.Replicas, st.UpdatedReplicas, st.AvailableReplicas, st.ObservedGeneration, d.Generation)
	})
}

// machineWatch follows the machines of the namespace from a watch and
// calls each with the machines as they are after every event.
type machineWatch struct {
	mu       sync.Mutex
	machines map[string]v1alpha1.Machine
	stop     context.CancelFunc
	done     chan struct{}
	ended    bool // the watch ended before it was stopped
}

func (w *rolloutWorld) watchMachines(each func(map[string]v1alpha1.Machine)) *machineWatch {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	list, err := w.Machines.MachineV1alpha1().Machines(w.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	watcher, err := w.Machines.MachineV1alpha1().Machines(w.NS).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		w.t.Fatal(err)
	}
	mw := &machineWatch{machines: map[string]v1alpha1.Machine{}, stop: cancel, done: make(chan struct{})}
	for _, m := range list.Items {
		mw.machines[m.Name] = m
	}
	go func() {
		defer close(mw.done)
		defer watcher.Stop()
		for ev := range watcher.ResultChan() {
			m, ok := ev.Object.(*v1alpha1.Machine)
			if !ok {
				continue
			}
			mw.mu.Lock()
			if ev.Type == "DELETED" {
				delete(mw.machines, m.Name)
			} else {
				mw.machines[m.Name] = *m
			}
			each(mw.machines)
			mw.mu.Unlock()
		}
		mw.mu.Lock()
		mw.ended = ctx.Err() == nil
		mw.mu.Unlock()
	}()
	w.t.Cleanup(func() { cancel(); <-mw.done })
	return mw
}

// finish stops the watch; it fails the test if the watch ended early, when
// events may have been missed.
func (mw *machineWatch) finish(t *testing.T) {
	t.Helper()
	mw.stop()
	<-mw.done
	if mw.ended {
		t.Fatal("the machine watch ended early; the check saw only part of the rollout")
	}
}

func available(machines map[string]v1alpha1.Machine) int {
	n := 0
	for _, m := range machines {
		if m.DeletionTimestamp == nil && m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
			n++
		}
	}
	return n
}

func rolling(surge, unavailable int32) v1alpha1.MachineDeploymentStrategy {
	return v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
		RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
			MaxSurge: ptrTo(intstr.FromInt32(surge)), MaxUnavailable: ptrTo(intstr.FromInt32(unavailable))}}}
}

func ptrTo[T any](v T) *T { return &v }

// TestIntegrationRollingUpdateKeepsCapacity rolls 30 machines to a new
// class with maxSurge 3 and maxUnavailable 0: a watch on the machines sees
// the Running machines never drop below 30, never more than 33 machines,
// and three new machines booting at once, so that the rollout takes about
// ten machine replacements' time. A node template change then reaches every node
// without a new machine, and a rollback to revision 1 rolls back, scaled
// to 36 half-way.
func TestIntegrationRollingUpdateKeepsCapacity(t *testing.T) {
	t.Parallel()
	w := startRolloutWorld(t)
	w.addClass("sim2", func(*sim.ProviderSpec) {})
	w.createDeployment("web", 30, rolling(3, 0))
	w.complete("web", 30, w.Class)

	var lowest, highest, total, inflight int
	lowest = 30
	mw := w.watchMachines(func(ms map[string]v1alpha1.Machine) {
		a := available(ms)
		lowest, highest = min(lowest, a), max(highest, a)
		live, booting := 0, 0
		for _, m := range ms {
			if m.DeletionTimestamp != nil {
				continue
			}
			live++
			if m.Spec.Class.Name == "sim2" && m.Status.CurrentStatus.Phase != v1alpha1.MachineRunning {
				booting++
			}
		}
		total, inflight = max(total, live), max(inflight, booting)
	})
	growth := w.countSetGrowth()
	marks := w.watchNodeMarks(w.kubeletIdentity())
	start := time.Now()
	w.patch("web", `{"spec":{"template":{"spec":{"class":{"name":"sim2"}}}}}`)
	w.complete("web", 30, "sim2")
	took := time.Since(start)
	mw.finish(t)
	t.Logf("rolled 30 machines in %v: %d new-set scale-ups, at most %d new machines booting at once; Running machines between %d and %d, at most %d machines",
		took.Round(time.Second), growth(), inflight, lowest, highest, total)
	if lowest < 30 {
		t.Errorf("Running machines dropped to %d during the rollout; maxUnavailable 0 allows none fewer than 30", lowest)
	}
	if total > 33 {
		t.Errorf("%d machines at once; maxSurge 3 allows 33", total)
	}
	// Old nodes are tainted and scale-down is disabled while the rollout
	// runs; both marks are gone when it is done.
	tainted, disabled := marks()
	if !tainted || !disabled {
		t.Errorf("during the rollout: PreferNoSchedule taint seen %v, scale-down-disabled seen %v; want both", tainted, disabled)
	}
	identity := w.kubeletIdentity()
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		nodes, err := w.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, n := range nodes.Items {
			if n.Annotations[sim.AnnotationSimulated] != identity {
				continue // another test's node
			}
			if _, ok := n.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation]; ok {
				return false, "node " + n.Name + " still has scale-down disabled"
			}
			for _, taint := range n.Spec.Taints {
				if taint.Key == v1alpha1.PreferNoScheduleTaintKey {
					return false, "node " + n.Name + " still tainted"
				}
			}
		}
		return true, ""
	})
	// Three machines booting at once is what makes 30 machines take about
	// ten machine replacements' time rather than thirty.
	if inflight != 3 {
		t.Errorf("at most %d new machines booted at once; maxSurge 3 should keep 3 in flight", inflight)
	}
	d := w.get("web")
	if d.Annotations[v1alpha1.RevisionAnnotation] != "2" {
		t.Errorf("revision %q after one rollout, want 2", d.Annotations[v1alpha1.RevisionAnnotation])
	}

	// A node template change is no rollout: it reaches the nodes in place.
	before := names(w.live(context.Background()))
	w.patch("web", `{"spec":{"template":{"spec":{"nodeTemplate":{"metadata":{"labels":{"tier":"web"}}}}}}}`)
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		labelled := 0
		for _, m := range w.live(ctx) {
			node, err := w.Core.CoreV1().Nodes().Get(ctx, m.Labels[v1alpha1.NodeLabelKey], metav1.GetOptions{})
			if err == nil && node.Labels["tier"] == "web" {
				labelled++
			}
		}
		return labelled == 30, fmt.Sprintf("%d of 30 nodes labelled", labelled)
	})
	if diff := slices.Compare(before, names(w.live(context.Background()))); diff != 0 {
		t.Errorf("a node template change replaced machines")
	}

	// Roll back to revision 1; scale to 36 half-way.
	w.patch("web", fmt.Sprintf(`{"metadata":{"annotations":{%q:"1"}}}`, deployment.RollbackAnnotation))
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		n := 0
		for _, m := range w.live(ctx) {
			if m.Spec.Class.Name == w.Class && m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
				n++
			}
		}
		return n >= 12, fmt.Sprintf("%d machines rolled back", n)
	})
	w.patch("web", `{"spec":{"replicas":36}}`)
	w.complete("web", 36, w.Class)
	if d := w.get("web"); d.Annotations[v1alpha1.RevisionAnnotation] != "3" {
		t.Errorf("revision %q after the rollback, want 3", d.Annotations[v1alpha1.RevisionAnnotation])
	}
}

// countSetGrowth counts, from a watch, the times a set of the namespace
// grows; call the returned function for the count so far.
func (w *rolloutWorld) countSetGrowth() func() int {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	list, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	watcher, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		w.t.Fatal(err)
	}
	var mu sync.Mutex
	sizes := map[string]int32{}
	for _, s := range list.Items {
		sizes[s.Name] = s.Spec.Replicas
	}
	growth := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer watcher.Stop()
		for ev := range watcher.ResultChan() {
			s, ok := ev.Object.(*v1alpha1.MachineSet)
			if !ok {
				continue
			}
			mu.Lock()
			if s.Spec.Replicas > sizes[s.Name] {
				growth++
			}
			sizes[s.Name] = s.Spec.Replicas
			mu.Unlock()
		}
	}()
	w.t.Cleanup(func() { cancel(); <-done })
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return growth
	}
}

// kubeletIdentity is the identity the stack's simulated kubelet marks its
// nodes with, read off the node of one of the namespace's machines: the
// control plane also holds other tests' nodes.
func (w *rolloutWorld) kubeletIdentity() string {
	w.t.Helper()
	for _, m := range w.live(context.Background()) {
		n, err := w.Core.CoreV1().Nodes().Get(context.Background(), m.Labels[v1alpha1.NodeLabelKey], metav1.GetOptions{})
		if err == nil && n.Annotations[sim.AnnotationSimulated] != "" {
			return n.Annotations[sim.AnnotationSimulated]
		}
	}
	w.t.Fatal("no node of this test's machines carries the simulated kubelet's identity")
	return ""
}

// watchNodeMarks reports, from a watch on the nodes of the kubelet with
// identity, whether any carried the rollout's PreferNoSchedule taint, and
// whether any carried the scale-down-disabled annotation this controller
// sets, since the call.
func (w *rolloutWorld) watchNodeMarks(identity string) func() (tainted, disabled bool) {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	watcher, err := w.Core.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	var mu sync.Mutex
	var tainted, disabled bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer watcher.Stop()
		for ev := range watcher.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || n.Annotations[sim.AnnotationSimulated] != identity {
				continue
			}
			mu.Lock()
			disabled = disabled || n.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] == "true"
			for _, taint := range n.Spec.Taints {
				tainted = tainted || taint.Key == v1alpha1.PreferNoScheduleTaintKey
			}
			mu.Unlock()
		}
	}()
	w.t.Cleanup(func() { cancel(); <-done })
	return func() (bool, bool) {
		mu.Lock()
		defer mu.Unlock()
		return tainted, disabled
	}
}

func names(ms []v1alpha1.Machine) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}

// TestIntegrationRecreatePauseAndDeadline: Recreate never runs old and new
// machines side by side; a paused rollout stops and resumes; a class whose
// VMs never join makes the rollout exceed its progress deadline.
func TestIntegrationRecreatePauseAndDeadline(t *testing.T) {
	t.Parallel()
	w := startRolloutWorld(t)
	w.addClass("sim2", func(*sim.ProviderSpec) {})
	w.addClass("never", func(s *sim.ProviderSpec) { s.BootDelay = &metav1.Duration{Duration: time.Hour} })

	w.createDeployment("batch", 4, v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RecreateMachineDeploymentStrategyType})
	w.complete("batch", 4, w.Class)
	var mixed bool
	mw := w.watchMachines(func(ms map[string]v1alpha1.Machine) {
		classes := map[string]bool{}
		for _, m := range ms {
			classes[m.Spec.Class.Name] = true
		}
		mixed = mixed || len(classes) > 1
	})
	w.patch("batch", `{"spec":{"template":{"spec":{"class":{"name":"sim2"}}}}}`)
	w.complete("batch", 4, "sim2")
	mw.finish(t)
	if mixed {
		t.Error("Recreate had machines of the old and the new class at the same time")
	}

	// Pause half-way through a rolling update; nothing moves until resumed.
	w.createDeployment("web", 6, rolling(1, 0))
	w.complete("web", 6, w.Class)
	w.patch("web", `{"spec":{"template":{"spec":{"class":{"name":"sim2"}}}}}`)
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		n := 0
		for _, m := range w.live(ctx) {
			if m.Labels["pool"] == "web" && m.Spec.Class.Name == "sim2" && m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
				n++
			}
		}
		return n >= 2, fmt.Sprintf("%d new machines", n)
	})
	w.patch("web", `{"spec":{"paused":true}}`)
	// Let a step already under way land: the controller has seen the
	// pause, and the sets' controller has made their machines match their
	// replicas (on a loaded machine that can take longer than a second).
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) { return pauseLanded(ctx, w, "web") })
	paused := names(w.live(context.Background()))
	time.Sleep(4 * time.Second)
	if now := names(w.live(context.Background())); !slices.Equal(paused, now) {
		t.Errorf("a paused rollout went on: %v, then %v", paused, now)
	}
	if c := condition(w.get("web"), v1alpha1.MachineDeploymentProgressing); c == nil || c.Reason != v1alpha1.DeploymentPausedReason {
		t.Errorf("Progressing %+v while paused", c)
	}
	w.patch("web", `{"spec":{"paused":false}}`)
	w.complete("web", 6, "sim2")

	// VMs that never join: no progress for longer than the deadline.
	w.patch("web", `{"spec":{"progressDeadlineSeconds":10,"template":{"spec":{"class":{"name":"never"}}}}}`)
	testenv.Eventually(t, 2*time.Minute, func(context.Context) (bool, string) {
		c := condition(w.get("web"), v1alpha1.MachineDeploymentProgressing)
		return c != nil && c.Reason == v1alpha1.ProgressDeadlineExceededReason && c.Status == v1alpha1.ConditionFalse,
			fmt.Sprintf("Progressing %+v", c)
	})
	// The capacity stays: maxUnavailable 0 keeps every old machine.
	n := 0
	for _, m := range w.live(context.Background()) {
		if m.Labels["pool"] == "web" && m.Spec.Class.Name == "sim2" && m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
			n++
		}
	}
	if n != 6 {
		t.Errorf("%d Running machines while the rollout is stuck, want 6", n)
	}
}

// pauseLanded tells whether the deployment name shows it was seen paused
// (Progressing DeploymentPaused) and its sets' live machines are as many
// as their replicas.
func pauseLanded(ctx context.Context, w *rolloutWorld, name string) (bool, string) {
	if c := condition(w.get(name), v1alpha1.MachineDeploymentProgressing); c == nil || c.Reason != v1alpha1.DeploymentPausedReason {
		return false, fmt.Sprintf("Progressing %+v, want the pause seen", c)
	}
	sets, err := w.Machines.MachineV1alpha1().MachineSets(w.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	ours, want := map[string]bool{}, int32(0)
	for _, set := range sets.Items {
		if owner := metav1.GetControllerOf(&set); owner != nil && owner.Name == name {
			ours[set.Name] = true
			want += set.Spec.Replicas
		}
	}
	have := 0
	for _, m := range w.live(ctx) {
		if owner := metav1.GetControllerOf(&m); owner != nil && ours[owner.Name] {
			have++
		}
	}
	return have == int(want), fmt.Sprintf("%d live machines in the sets of %s, their replicas %d", have, name, want)
}

func condition(d *v1alpha1.MachineDeployment, typ v1alpha1.MachineDeploymentConditionType) *v1alpha1.MachineDeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == typ {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// TestIntegrationAutoscalerContract acts as the cluster-autoscaler's MCM
// provider does: it names two machines in trigger-deletion-by-mcm, records
// its change time and lowers the replicas in one patch. Exactly the named
// machines go.
func TestIntegrationAutoscalerContract(t *testing.T) {
	t.Parallel()
	w := startRolloutWorld(t)
	w.createDeployment("pool", 6, rolling(1, 0))
	w.complete("pool", 6, w.Class)
	machines := w.live(context.Background())
	slices.SortFunc(machines, func(a, b v1alpha1.Machine) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	// The newest two: the default order would delete the oldest first.
	victims := []string{machines[0].Name, machines[1].Name}
	now := time.Now().UTC().Format(time.RFC3339)
	w.patch("pool", fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}},"spec":{"replicas":4}}`,
		v1alpha1.TriggerDeletionByMCMAnnotation, victims[0]+"~"+now+","+victims[1]+"~"+now,
		v1alpha1.LastReplicaChangeByScalerAnnotation, now))
	w.complete("pool", 4, w.Class)
	want := slices.DeleteFunc(names(machines), func(n string) bool { return slices.Contains(victims, n) })
	if got := names(w.live(context.Background())); !slices.Equal(want, got) {
		t.Errorf("machines left %v, want all but the named %v", got, victims)
	}
	if v, ok := w.get("pool").Annotations[v1alpha1.TriggerDeletionByMCMAnnotation]; ok {
		t.Errorf("%s still %q after the machines went", v1alpha1.TriggerDeletionByMCMAnnotation, v)
	}
}
