package machine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/simcluster"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Setup: []func(context.Context, *rest.Config) error{crds.Install}})
}

// integration sets up a namespace, a sim cloud, a kubelet and a running
// controller against the test environment.
func integration(t *testing.T, wo worldOptions) *world {
	t.Helper()
	env := testenv.Get(t)
	ns := env.Namespace(t)
	mc := versioned.NewForConfigOrDie(env.Config())
	core := env.Client()
	cloud, err := sim.New(wo.cloud)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ns: ns, prefix: ns[len(ns)-6:], mc: mc, core: core, cloud: cloud}
	if !wo.noTarget {
		w.kubelet = simcluster.RunKubelet(t, cloud, core, wo.kubelet)
	}
	if wo.ctrl.DrainOptions.PollInterval == 0 {
		wo.ctrl.DrainOptions.PollInterval = 500 * time.Millisecond
	}
	if wo.ctrl.HealthCheckPeriod == 0 {
		wo.ctrl.HealthCheckPeriod = time.Second
	}
	var d driver.Driver = cloud.Driver()
	if wo.drv != nil {
		d = wo.drv(d)
	}
	ctrlCore := core
	if wo.wrap != nil {
		cfg := rest.CopyConfig(env.Config())
		cfg.Wrap(wo.wrap)
		ctrlCore = kubernetes.NewForConfigOrDie(cfg)
	}
	w.ctrl, w.stop = startController(t, mc, ctrlCore, ns, d, wo.noTarget, wo.ctrl)
	return w
}

func (w *world) name(i int) string { return fmt.Sprintf("m%s-%02d", w.prefix, i) }

func TestIntegrationTwentyMachinesRun(t *testing.T) {
	t.Parallel()
	w := integration(t, worldOptions{cloud: sim.Options{BootDelay: 500 * time.Millisecond, BootJitter: time.Second}})
	createClass(t, w.mc, w.core, w.ns, true)
	const n = 20
	for i := range n {
		createMachine(t, w.mc, newMachine(w.ns, w.name(i), "sim", nil))
	}
	ctx := context.Background()
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		list, err := w.mc.MachineV1alpha1().Machines(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, m := range list.Items {
			if m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
				running++
			}
		}
		return running == n, fmt.Sprintf("%d of %d running", running, n)
	})
	for i := range n {
		m, err := getMachine(ctx, w.mc, w.ns, w.name(i))
		if err != nil {
			t.Fatal(err)
		}
		node, err := w.core.CoreV1().Nodes().Get(ctx, m.Labels[v1alpha1.NodeLabelKey], metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node of %s: %v", m.Name, err)
		}
		if node.Spec.ProviderID != m.Spec.ProviderID || node.Labels[v1alpha1.MachineNameLabelKey] != m.Name {
			t.Errorf("node %s: providerID %q (machine %q), machine-name label %q", node.Name, node.Spec.ProviderID, m.Spec.ProviderID, node.Labels[v1alpha1.MachineNameLabelKey])
		}
		if m.Annotations[v1alpha1.MachinePriorityAnnotation] != "3" || !strings.Contains(m.Status.LastOperation.Description, "successfully joined the cluster in") {
			t.Errorf("machine %s annotations %v", m.Name, m.Annotations)
		}
		if !slices.Contains(m.Finalizers, v1alpha1.MachineFinalizer) {
			t.Errorf("machine %s has no finalizer", m.Name)
		}
	}
	if got := len(w.cloud.VMs()); got != n {
		t.Errorf("%d VMs, want %d", got, n)
	}
	if got := w.cloud.Calls(driver.OperationCreateMachine); got != n {
		t.Errorf("CreateMachine called %d times, want %d", got, n)
	}
	class, _ := w.mc.MachineV1alpha1().MachineClasses(w.ns).Get(ctx, "sim", metav1.GetOptions{})
	secret, _ := w.core.CoreV1().Secrets(w.ns).Get(ctx, "sim-secret", metav1.GetOptions{})
	if !slices.Contains(class.Finalizers, v1alpha1.MachineFinalizer) || !slices.Contains(secret.Finalizers, v1alpha1.SecretFinalizer) {
		t.Errorf("finalizers: class %v, secret %v", class.Finalizers, secret.Finalizers)
	}
	// Userdata reached the VM with the machine name substituted.
	vm := w.cloud.VMs()[0]
	if !strings.Contains(string(vm.UserData), vm.MachineName) {
		t.Errorf("user data %q lacks machine name %q", vm.UserData, vm.MachineName)
	}
	// Deleting all machines removes VMs, nodes and then the finalizers.
	for i := range n {
		if err := w.mc.MachineV1alpha1().Machines(w.ns).Delete(ctx, w.name(i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		testenv.Eventually(t, time.Minute, machineGone(w.mc, w.ns, w.name(i)))
	}
	if leaked := w.cloud.LeakedVMs(nil); len(leaked) > 0 {
		t.Errorf("leaked VMs: %v", leaked)
	}
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		class, err := w.mc.MachineV1alpha1().MachineClasses(w.ns).Get(ctx, "sim", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(class.Finalizers) == 0, fmt.Sprintf("class finalizers %v", class.Finalizers)
	})
}

func TestIntegrationNodeTemplateSync(t *testing.T) {
	t.Parallel()
	w := integration(t, worldOptions{})
	createClass(t, w.mc, w.core, w.ns, true)
	m := newMachine(w.ns, w.name(0), "sim", nil)
	m.Spec.NodeTemplateSpec.Labels = map[string]string{"team": "a", "tier": "web"}
	m.Spec.NodeTemplateSpec.Annotations = map[string]string{"example.com/note": "hello"}
	m.Spec.NodeTemplateSpec.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}
	createMachine(t, w.mc, m)
	testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, m.Name, v1alpha1.MachineRunning))
	nodeName := w.name(0)
	nodeHas := func(want func(*corev1.Node) string) func(context.Context) (bool, string) {
		return func(ctx context.Context) (bool, string) {
			n, err := w.core.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			msg := want(n)
			return msg == "", msg
		}
	}
	testenv.Eventually(t, 30*time.Second, nodeHas(func(n *corev1.Node) string {
		if n.Labels["team"] != "a" || n.Labels["tier"] != "web" || n.Annotations["example.com/note"] != "hello" ||
			!slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "dedicated" && t.Value == "web" }) {
			return fmt.Sprintf("labels %v annotations %v taints %v", n.Labels, n.Annotations, n.Spec.Taints)
		}
		return ""
	}))
	ctx := context.Background()
	// A user adds a label of their own.
	if _, err := w.core.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, []byte(`{"metadata":{"labels":{"user":"mine"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := getMachine(ctx, w.mc, w.ns, m.Name)
	// The template changes: team removed, tier changed, a new label, taint value changed.
	patch := `{"spec":{"nodeTemplate":{"metadata":{"labels":{"team":null,"tier":"api","zone":"z1"}},"spec":{"taints":[{"key":"dedicated","value":"api","effect":"NoSchedule"}]}}}}`
	if _, err := w.mc.MachineV1alpha1().Machines(w.ns).Patch(ctx, m.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, nodeHas(func(n *corev1.Node) string {
		_, hasTeam := n.Labels["team"]
		if hasTeam || n.Labels["tier"] != "api" || n.Labels["zone"] != "z1" || n.Labels["user"] != "mine" ||
			!slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "dedicated" && t.Value == "api" }) {
			return fmt.Sprintf("labels %v taints %v", n.Labels, n.Spec.Taints)
		}
		return ""
	}))
	after, _ := getMachine(ctx, w.mc, w.ns, m.Name)
	if after.Spec.ProviderID != before.Spec.ProviderID || after.Status.CurrentStatus.Phase != v1alpha1.MachineRunning {
		t.Errorf("machine replaced or disturbed: providerID %q → %q, phase %q", before.Spec.ProviderID, after.Spec.ProviderID, after.Status.CurrentStatus.Phase)
	}
	if got := w.cloud.Calls(driver.OperationCreateMachine); got != 1 {
		t.Errorf("CreateMachine called %d times", got)
	}
}

// TestIntegrationVirtualCapacity: the class's virtual capacity is added
// to the node's capacity beside the kubelet's, and removed when the class
// drops it, through a node cache that keeps only the capacity entries the
// record annotation names.
func TestIntegrationVirtualCapacity(t *testing.T) {
	t.Parallel()
	w := integration(t, worldOptions{})
	ctx := context.Background()
	createClass(t, w.mc, w.core, w.ns, true)
	const licenses = corev1.ResourceName("example.com/licenses")
	patchClass := func(virtualCapacity string) {
		t.Helper()
		data := `{"nodeTemplate":{"capacity":{"cpu":"2","memory":"4Gi"},"instanceType":"m1","region":"region-a","zone":"zone-a","virtualCapacity":` + virtualCapacity + `}}`
		if _, err := w.mc.MachineV1alpha1().MachineClasses(w.ns).Patch(ctx, "sim", types.MergePatchType, []byte(data), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patchClass(`{"example.com/licenses":"4"}`)
	m := newMachine(w.ns, w.name(0), "sim", nil)
	createMachine(t, w.mc, m)
	testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, m.Name, v1alpha1.MachineRunning))
	capacityIs := func(wantLicenses string) func(context.Context) (bool, string) {
		return func(ctx context.Context) (bool, string) {
			n, err := w.core.CoreV1().Nodes().Get(ctx, w.name(0), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			got, has := n.Status.Capacity[licenses]
			_, recorded := n.Annotations[v1alpha1.LastAppliedVirtualCapacityAnnotation]
			pods := n.Status.Capacity[corev1.ResourcePods]
			ok := pods.String() == "110" && recorded == (wantLicenses != "") &&
				((wantLicenses == "" && !has) || (has && got.String() == wantLicenses))
			return ok, fmt.Sprintf("capacity %v, record %v", n.Status.Capacity, recorded)
		}
	}
	testenv.Eventually(t, 30*time.Second, capacityIs("4"))

	patchClass("null")
	testenv.Eventually(t, 30*time.Second, capacityIs(""))
}

func TestIntegrationHealthTimeoutLimitsReplacements(t *testing.T) {
	t.Parallel()
	// No ReplacementGate: the default budget allows one replacement
	// at a time among the machines a MachineSet controls (it has no set
	// cache to follow the set to its deployment). Membership is the
	// controller reference, not a label: no MachineSet controller runs
	// here, the set only owns the machines.
	w := integration(t, worldOptions{ctrl: machine.Options{
		Machine: v1alpha1.MachineConfiguration{MachineHealthTimeout: &metav1.Duration{Duration: 3 * time.Second}},
	}})
	createClass(t, w.mc, w.core, w.ns, true)
	pool := map[string]string{v1alpha1.MachineDeploymentNameLabelKey: "pool"}
	set, err := w.mc.MachineV1alpha1().MachineSets(w.ns).Create(context.Background(), &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: w.ns},
		Spec: v1alpha1.MachineSetSpec{Selector: &metav1.LabelSelector{MatchLabels: pool},
			Template: v1alpha1.MachineTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pool},
				Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "sim"}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	for i := range n {
		m := newMachine(w.ns, w.name(i), "sim", pool)
		m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(set, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))}
		createMachine(t, w.mc, m)
	}
	for i := range n {
		testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, w.name(i), v1alpha1.MachineRunning))
	}
	for i := range n {
		w.kubelet.SetCondition(w.name(i), corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"})
	}
	// Watch the phases: never more than one Failed at a time.
	var maxFailed atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	count := func(ctx context.Context) (failed, unknown int, names []string) {
		list, err := w.mc.MachineV1alpha1().Machines(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, 0, nil
		}
		for _, m := range list.Items {
			switch m.Status.CurrentStatus.Phase {
			case v1alpha1.MachineFailed:
				failed++
				names = append(names, m.Name)
			case v1alpha1.MachineUnknown:
				unknown++
			}
		}
		return failed, unknown, names
	}
	go func() {
		for ctx.Err() == nil {
			if f, _, _ := count(ctx); int32(f) > maxFailed.Load() {
				maxFailed.Store(int32(f))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	var failedName string
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		f, u, names := count(ctx)
		if f == 1 {
			failedName = names[0]
		}
		return f == 1 && u == n-1, fmt.Sprintf("%d failed, %d unknown", f, u)
	})
	// Hold for a few health timeouts: still only one.
	time.Sleep(5 * time.Second)
	if f, _, _ := count(ctx); f != 1 {
		t.Fatalf("%d machines Failed, want 1 while the first is not replaced", f)
	}
	m, _ := getMachine(ctx, w.mc, w.ns, failedName)
	if m.Status.LastOperation.Type != v1alpha1.MachineOperationHealthCheck || m.Status.LastOperation.State != v1alpha1.MachineStateFailed {
		t.Errorf("lastOperation %+v", m.Status.LastOperation)
	}
	// The "MachineSet" removes the Failed machine: the next one may fail.
	if err := w.mc.MachineV1alpha1().Machines(w.ns).Delete(ctx, failedName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, machineGone(w.mc, w.ns, failedName))
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		f, u, _ := count(ctx)
		return f == 1 && u == n-2, fmt.Sprintf("%d failed, %d unknown", f, u)
	})
	cancel()
	if got := maxFailed.Load(); got > 1 {
		t.Errorf("up to %d machines were Failed at once, want at most 1", got)
	}
}

func TestIntegrationResourceExhaustedAndRecovery(t *testing.T) {
	t.Parallel()
	w := integration(t, worldOptions{
		cloud: sim.Options{Quota: sim.Quota{MaxVMs: 1}},
		ctrl:  machine.Options{ResourceExhaustedRetry: time.Second, MaxRetryDelay: 2 * time.Second},
	})
	createClass(t, w.mc, w.core, w.ns, true)
	createMachine(t, w.mc, newMachine(w.ns, w.name(0), "sim", nil))
	testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, w.name(0), v1alpha1.MachineRunning))
	createMachine(t, w.mc, newMachine(w.ns, w.name(1), "sim", nil))
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		m, err := getMachine(ctx, w.mc, w.ns, w.name(1))
		if err != nil {
			return false, err.Error()
		}
		op := m.Status.LastOperation
		return m.Status.CurrentStatus.Phase == v1alpha1.MachineCrashLoopBackOff && op.ErrorCode == "ResourceExhausted" &&
				op.State == v1alpha1.MachineStateFailed && op.Type == v1alpha1.MachineOperationCreate,
			fmt.Sprintf("phase %q lastOperation %+v", m.Status.CurrentStatus.Phase, op)
	})
	// Backoff, not a hot loop: in 3 seconds at most a handful of creates.
	before := w.cloud.Calls(driver.OperationCreateMachine)
	time.Sleep(3 * time.Second)
	if got := w.cloud.Calls(driver.OperationCreateMachine) - before; got > 4 {
		t.Errorf("%d CreateMachine calls in 3s: hot loop", got)
	}
	if err := w.cloud.SetQuota(sim.Quota{MaxVMs: 2}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, w.name(1), v1alpha1.MachineRunning))
	m, _ := getMachine(context.Background(), w.mc, w.ns, w.name(1))
	if m.Status.LastOperation.ErrorCode != "" {
		t.Errorf("errorCode %q after recovery", m.Status.LastOperation.ErrorCode)
	}
}

func TestIntegrationDeletionDrainsWithPDBAndHooks(t *testing.T) {
	t.Parallel()
	w := integration(t, worldOptions{})
	createClass(t, w.mc, w.core, w.ns, true)
	ctx := context.Background()
	a, b := w.name(0), w.name(1)
	ma := newMachine(w.ns, a, "sim", nil)
	ma.Annotations = map[string]string{
		machine.PreDrainHookPrefix + "/backup":      "",
		machine.PreTerminateHookPrefix + "/release": "",
	}
	createMachine(t, w.mc, ma)
	testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, a, v1alpha1.MachineRunning))

	// A deployment of two pods on node a, guarded by a PDB.
	labels := map[string]string{"app": "web-" + w.prefix}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: w.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: new(int64(1)),
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
							MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1alpha1.MachineNameLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{a, b}}},
						}}},
					}},
					Containers: []corev1.Container{{Name: "web", Image: "example.com/web"}},
				},
			},
		},
	}
	if _, err := w.core.AppsV1().Deployments(w.ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: w.ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: new(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := w.core.PolicyV1().PodDisruptionBudgets(w.ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readyOn := func(ctx context.Context) (ready int, onA int) {
		pods, _ := w.core.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
		for _, p := range pods.Items {
			if p.Spec.NodeName == a && p.DeletionTimestamp == nil {
				onA++
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					ready++
				}
			}
		}
		return ready, onA
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		r, on := readyOn(ctx)
		return r == 2 && on == 2, fmt.Sprintf("%d ready, %d on %s", r, on, a)
	})
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		p, err := w.core.PolicyV1().PodDisruptionBudgets(w.ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.DisruptionsAllowed == 1, fmt.Sprintf("pdb status %+v", p.Status)
	})
	// Node b for the pods to move to.
	createMachine(t, w.mc, newMachine(w.ns, b, "sim", nil))
	testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, b, v1alpha1.MachineRunning))

	providerA := func() string { m, _ := getMachine(ctx, w.mc, w.ns, a); return m.Spec.ProviderID }()
	if err := w.mc.MachineV1alpha1().Machines(w.ns).Delete(ctx, a, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	stepIs := func(step machine.DeletionStep) func(context.Context) (bool, string) {
		return func(ctx context.Context) (bool, string) {
			m, err := getMachine(ctx, w.mc, w.ns, a)
			if err != nil {
				return false, err.Error()
			}
			got := m.Annotations[machine.DeletionStepAnnotation]
			return got == string(step), fmt.Sprintf("step %q, phase %q, lastOperation %q", got, m.Status.CurrentStatus.Phase, m.Status.LastOperation.Description)
		}
	}
	testenv.Eventually(t, 30*time.Second, stepIs(machine.StepWaitPreDrainHooks))
	time.Sleep(2 * time.Second)
	if _, on := readyOn(ctx); on != 2 {
		t.Fatalf("pods evicted while a pre-drain hook is set: %d left on %s", on, a)
	}
	if node, _ := w.core.CoreV1().Nodes().Get(ctx, a, metav1.GetOptions{}); node.Spec.Unschedulable {
		t.Fatal("node cordoned while a pre-drain hook is set")
	}
	// Watch the PDB: at least one pod ready at all times.
	var minReady atomic.Int32
	minReady.Store(2)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go func() {
		for wctx.Err() == nil {
			if r, _ := readyOn(wctx); wctx.Err() == nil && int32(r) < minReady.Load() {
				minReady.Store(int32(r))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	removeAnnotation := func(key string) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, key)
		if _, err := w.mc.MachineV1alpha1().Machines(w.ns).Patch(ctx, a, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	removeAnnotation(machine.PreDrainHookPrefix + "/backup")
	testenv.Eventually(t, 2*time.Minute, stepIs(machine.StepWaitPreTerminateHooks))
	wcancel()
	if _, on := readyOn(ctx); on != 0 {
		t.Errorf("%d pods left on %s after drain", on, a)
	}
	if got := minReady.Load(); got < 1 {
		t.Errorf("ready pods dropped to %d during the drain; the PDB needs 1", got)
	}
	if vm, ok := w.cloud.VM(providerA); !ok || vm.State == sim.VMTerminating {
		t.Errorf("VM deleted before the pre-terminate hook was removed: %+v", vm)
	}
	removeAnnotation(machine.PreTerminateHookPrefix + "/release")
	testenv.Eventually(t, time.Minute, machineGone(w.mc, w.ns, a))
	if vm, ok := w.cloud.VM(providerA); ok && vm.State != sim.VMTerminating {
		t.Errorf("VM of deleted machine still %s", vm.State)
	}
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		_, err := w.core.CoreV1().Nodes().Get(ctx, a, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("node %s: %v", a, err)
	})
}

func TestIntegrationNoTargetCluster(t *testing.T) {
	t.Parallel()
	w := integration(t, worldOptions{noTarget: true})
	createClass(t, w.mc, w.core, w.ns, true)
	createMachine(t, w.mc, newMachine(w.ns, w.name(0), "sim", nil))
	testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, w.name(0), v1alpha1.MachineAvailable))
	ctx := context.Background()
	m, _ := getMachine(ctx, w.mc, w.ns, w.name(0))
	if len(m.Status.Addresses) == 0 || m.Spec.ProviderID == "" || m.Labels[v1alpha1.NodeLabelKey] != "" {
		t.Errorf("addresses %v, providerID %q, labels %v", m.Status.Addresses, m.Spec.ProviderID, m.Labels)
	}
	if err := w.mc.MachineV1alpha1().Machines(w.ns).Delete(ctx, m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, machineGone(w.mc, w.ns, m.Name))
	if leaked := w.cloud.LeakedVMs(nil); len(leaked) > 0 {
		t.Errorf("leaked VMs %v", leaked)
	}
}

func TestIntegrationBadInput(t *testing.T) {
	t.Parallel()
	rec := record.NewFakeRecorder(100)
	w := integration(t, worldOptions{ctrl: machine.Options{Recorder: rec, MediumRetry: time.Second, MaxRetryDelay: 2 * time.Second}})
	ctx := context.Background()
	// No class at all.
	createMachine(t, w.mc, newMachine(w.ns, w.name(0), "missing", nil))
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		m, err := getMachine(ctx, w.mc, w.ns, w.name(0))
		if err != nil {
			return false, err.Error()
		}
		op := m.Status.LastOperation
		return op.State == v1alpha1.MachineStateFailed && strings.Contains(op.Description, `MachineClass "missing" not found`), fmt.Sprintf("%+v", op)
	})
	// A class whose secret has no userData.
	createClass(t, w.mc, w.core, w.ns, false)
	createMachine(t, w.mc, newMachine(w.ns, w.name(1), "sim", nil))
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		m, err := getMachine(ctx, w.mc, w.ns, w.name(1))
		if err != nil {
			return false, err.Error()
		}
		op := m.Status.LastOperation
		return op.State == v1alpha1.MachineStateFailed && strings.Contains(op.Description, "has no userData"), fmt.Sprintf("%+v", op)
	})
	time.Sleep(3 * time.Second)
	for _, op := range []driver.Operation{driver.OperationCreateMachine, driver.OperationGetMachineStatus} {
		if got := w.cloud.Calls(op); got != 0 {
			t.Errorf("%s called %d times for bad input", op, got)
		}
	}
	if len(w.cloud.VMs()) != 0 {
		t.Errorf("VMs created: %v", w.cloud.VMs())
	}
	// Fixing the secret lets the machine through.
	if _, err := w.core.CoreV1().Secrets(w.ns).Patch(ctx, "sim-secret", types.MergePatchType, []byte(`{"stringData":{"userData":"#!/bin/sh"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, w.name(1), v1alpha1.MachineRunning))
	var reasons []string
	for len(rec.Events) > 0 {
		reasons = append(reasons, <-rec.Events)
	}
	for _, want := range []string{machine.ReasonClassNotFound, machine.ReasonSecretInvalid} {
		if !slices.ContainsFunc(reasons, func(e string) bool { return strings.Contains(e, want) }) {
			t.Errorf("no %s event in %v", want, reasons)
		}
	}
}

// TestIntegrationInvalidProviderSpec gives a machine a class whose
// providerSpec the driver rejects: the machine shows the driver's
// InvalidArgument with the offending field, no VM is created, and the
// driver is asked again only with backoff.
func TestIntegrationInvalidProviderSpec(t *testing.T) {
	t.Parallel()
	rec := record.NewFakeRecorder(100)
	w := integration(t, worldOptions{ctrl: machine.Options{Recorder: rec, MediumRetry: time.Second, MaxRetryDelay: 4 * time.Second}})
	ctx := context.Background()
	createClass(t, w.mc, w.core, w.ns, true)
	patch := []byte(`{"providerSpec":{"zone":"zone-a","instanceType":"m1","cpuCount":4}}`)
	if _, err := w.mc.MachineV1alpha1().MachineClasses(w.ns).Patch(ctx, "sim", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	createMachine(t, w.mc, newMachine(w.ns, w.name(0), "sim", nil))
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		m, err := getMachine(ctx, w.mc, w.ns, w.name(0))
		if err != nil {
			return false, err.Error()
		}
		op := m.Status.LastOperation
		return op.State == v1alpha1.MachineStateFailed && op.ErrorCode == driver.InvalidArgument.String() &&
			strings.Contains(op.Description, "cpuCount"), fmt.Sprintf("%+v", op)
	})
	first := w.cloud.Calls(driver.OperationGetMachineStatus) + w.cloud.Calls(driver.OperationCreateMachine)
	const window = 8 * time.Second
	time.Sleep(window)
	calls := w.cloud.Calls(driver.OperationGetMachineStatus) + w.cloud.Calls(driver.OperationCreateMachine) - first
	// Backoff from 1 s doubling to 4 s: at most 1+2+4+4 s worth of retries
	// in the window; a hot loop would make hundreds of calls.
	if calls > 5 {
		t.Errorf("%d driver calls in %v for a class the driver rejects: no backoff", calls, window)
	}
	if len(w.cloud.VMs()) != 0 {
		t.Errorf("VMs created for an invalid providerSpec: %v", w.cloud.VMs())
	}
	found := false
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, "cpuCount") {
			found = true
		}
	}
	if !found {
		t.Error("no event names the invalid providerSpec field")
	}
}

// TestIntegrationNodeDeletedDeletesMachine deletes a running machine's Node
// behind the controller's back (kubectl delete node): the node finalizer
// keeps the Node while the machine goes the regular way — the node gets
// the Terminating condition, its pod is evicted before the VM is deleted —
// and the Node goes with the machine. A Node being deleted that no machine
// claims loses the finalizer at once.
func TestIntegrationNodeDeletedDeletesMachine(t *testing.T) {
	t.Parallel()
	w := integration(t, worldOptions{})
	ctx := context.Background()
	createClass(t, w.mc, w.core, w.ns, true)
	createMachine(t, w.mc, newMachine(w.ns, w.name(0), "sim", nil))
	testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, w.name(0), v1alpha1.MachineRunning))
	m, err := getMachine(ctx, w.mc, w.ns, w.name(0))
	if err != nil {
		t.Fatal(err)
	}
	node := m.Labels[v1alpha1.NodeLabelKey]
	if node == "" {
		t.Fatalf("running machine has no %s label", v1alpha1.NodeLabelKey)
	}
	nodes := w.core.CoreV1().Nodes()
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		n, err := nodes.Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(n.Finalizers, v1alpha1.NodeFinalizer), fmt.Sprintf("node finalizers %v", n.Finalizers)
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "on-" + node, Namespace: w.ns},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []corev1.Container{{Name: "c", Image: "example.com/c"}}},
	}
	if _, err := w.core.CoreV1().Pods(w.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The condition may be there for moments only: every stored version
	// of the node is looked at.
	watch, err := nodes.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + node, ResourceVersion: m.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()
	var sawTerminating atomic.Bool
	go func() {
		for ev := range watch.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			for _, c := range n.Status.Conditions {
				if c.Type == v1alpha1.NodeTerminationCondition && c.Status == corev1.ConditionTrue && c.Reason == v1alpha1.NodeScaleDown {
					sawTerminating.Store(true)
				}
			}
		}
	}()
	if err := nodes.Delete(ctx, node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var problems []string
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		_, nodeErr := nodes.Get(ctx, node, metav1.GetOptions{})
		_, podErr := w.core.CoreV1().Pods(w.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		vm, _ := w.cloud.VM(m.Spec.ProviderID)
		if podErr == nil && vm.State == sim.VMTerminating {
			problems = append(problems, "the VM was deleted before its node was drained")
		}
		_, machineErr := getMachine(ctx, w.mc, w.ns, w.name(0))
		done := apierrors.IsNotFound(nodeErr) && apierrors.IsNotFound(podErr) && apierrors.IsNotFound(machineErr)
		return done, fmt.Sprintf("node: %v, pod: %v, machine: %v", nodeErr, podErr, machineErr)
	})
	watch.Stop()
	if !sawTerminating.Load() {
		t.Error("the node never showed the Terminating condition")
	}
	if len(problems) > 0 {
		t.Error(problems[0])
	}
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		vms := w.cloud.VMs()
		live := 0
		for _, vm := range vms {
			if vm.State != sim.VMTerminating {
				live++
			}
		}
		return live == 0, fmt.Sprintf("%d VMs still live", live)
	})

	// A node no machine claims, carrying the finalizer, is deleted.
	orphan := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "orphan-" + w.prefix, Finalizers: []string{v1alpha1.NodeFinalizer}}}
	if _, err := nodes.Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := nodes.Delete(ctx, orphan.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		_, err := nodes.Get(ctx, orphan.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("unclaimed node being deleted: %v", err)
	})
}

// waitingDriver is a driver whose CreateMachine returns once the VM's node
// is registered and Ready, as some providers' do.
type waitingDriver struct {
	driver.Driver
	core kubernetes.Interface
}

func (d waitingDriver) CreateMachine(ctx context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	resp, err := d.Driver.CreateMachine(ctx, req)
	if err != nil {
		return resp, err
	}
	for ctx.Err() == nil {
		n, err := d.core.CoreV1().Nodes().Get(ctx, resp.NodeName, metav1.GetOptions{})
		if err == nil && slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}) {
			// Give the controller's node informer the moment a watch
			// event takes.
			time.Sleep(500 * time.Millisecond)
			return resp, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, driver.NewError(driver.DeadlineExceeded, "node did not register")
}

// TestIntegrationReadyDuringCreationSkipsPending: with a driver that
// returns only once the node is Ready, the machine goes straight from
// creation to Running — no Pending status is ever stored — and its node
// gets the machine-name label and the finalizer in the same sync.
func TestIntegrationReadyDuringCreationSkipsPending(t *testing.T) {
	t.Parallel()
	w := integration(t, worldOptions{drv: func(d driver.Driver) driver.Driver {
		return waitingDriver{Driver: d, core: testenv.Get(t).Client()}
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	createClass(t, w.mc, w.core, w.ns, true)
	watch, err := w.mc.MachineV1alpha1().Machines(w.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()
	createMachine(t, w.mc, newMachine(w.ns, w.name(0), "sim", nil))
	var phases []v1alpha1.MachinePhase
	for ev := range watch.ResultChan() {
		m, ok := ev.Object.(*v1alpha1.Machine)
		if !ok {
			t.Fatalf("watch: %v", ev.Object)
		}
		if p := m.Status.CurrentStatus.Phase; len(phases) == 0 || phases[len(phases)-1] != p {
			phases = append(phases, p)
		}
		if m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
			break
		}
	}
	if diff := cmp.Diff([]v1alpha1.MachinePhase{"", v1alpha1.MachineRunning}, phases); diff != "" {
		t.Errorf("phases stored (-want +got):\n%s", diff)
	}
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		n, err := w.core.CoreV1().Nodes().Get(ctx, w.name(0), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return n.Labels[v1alpha1.MachineNameLabelKey] == w.name(0) && slices.Contains(n.Finalizers, v1alpha1.NodeFinalizer),
			fmt.Sprintf("node labels %v finalizers %v", n.Labels, n.Finalizers)
	})
}

// TestIntegrationMaxEvictRetries: a pod whose PodDisruptionBudget allows
// no disruption (another of its pods never runs) is deleted without
// eviction once the budget refused it maxEvictRetries times, long before
// the drain timeout, and the machine says so in an event.
func TestIntegrationMaxEvictRetries(t *testing.T) {
	t.Parallel()
	rec := record.NewFakeRecorder(100)
	w := integration(t, worldOptions{ctrl: machine.Options{Recorder: rec}})
	ctx := context.Background()
	createClass(t, w.mc, w.core, w.ns, true)
	m := newMachine(w.ns, w.name(0), "sim", nil)
	retries := int32(2)
	m.Spec.MachineConfiguration = &v1alpha1.MachineConfiguration{MaxEvictRetries: &retries}
	createMachine(t, w.mc, m)
	testenv.Eventually(t, time.Minute, phaseIs(w.mc, w.ns, m.Name, v1alpha1.MachineRunning))
	guardPod(t, w, m.Name)
	if err := w.mc.MachineV1alpha1().Machines(w.ns).Delete(ctx, m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, machineGone(w.mc, w.ns, m.Name))
	var seen []string
	for len(rec.Events) > 0 {
		e := <-rec.Events
		if strings.HasPrefix(e, "Warning "+machine.ReasonEvictRetriesExhausted) && strings.Contains(e, w.ns+"/guarded") {
			return
		}
		seen = append(seen, e)
	}
	t.Errorf("no %s event naming the pod among %q", machine.ReasonEvictRetriesExhausted, seen)
}
