package mcmdriver_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcm "github.com/gardener/machine-controller-manager/pkg/util/provider/driver"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/mcmdriver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/reference/manager"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Setup: []func(context.Context, *rest.Config) error{crds.Install}})
}

// stage bounds each step of the life cycle on a loaded two-core machine.
const stage = 4 * time.Minute

// countingMCM counts the calls that reach the MCM driver, to show that the
// manager's machines were made and removed through MCM's interface.
type countingMCM struct {
	mcm.Driver
	creates, deletes atomic.Int32
}

func (c *countingMCM) CreateMachine(ctx context.Context, req *mcm.CreateMachineRequest) (*mcm.CreateMachineResponse, error) {
	c.creates.Add(1)
	return c.Driver.CreateMachine(ctx, req)
}

func (c *countingMCM) DeleteMachine(ctx context.Context, req *mcm.DeleteMachineRequest) (*mcm.DeleteMachineResponse, error) {
	c.deletes.Add(1)
	return c.Driver.DeleteMachine(ctx, req)
}

// TestManagerRunsAnMCMDriver runs the reference manager with an MCM
// driver behind the adapter: the simulated cloud (whose kubelet registers
// a Node for every VM) behind MCM's interface, as an MCM provider is. A
// MachineDeployment of 5 becomes Running, rolls to a new class, scales to
// 2 and is deleted; then no VM and no Node of it is left.
func TestManagerRunsAnMCMDriver(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	machines := versioned.NewForConfigOrDie(env.Config())

	var mu sync.Mutex
	var provider *countingMCM
	drivers := manager.BuiltinDrivers()
	drivers["mcm-sim"] = func(ctx context.Context, denv manager.DriverEnv) (driver.Driver, manager.Runnable, error) {
		simDriver, kubelet, err := manager.NewSimDriver(ctx, denv)
		if err != nil {
			return nil, nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		provider = &countingMCM{Driver: mcmdriver.ToMCM(simDriver)}
		return mcmdriver.New(provider), kubelet, nil
	}
	startManager(t, env.Kubeconfig(), ns, drivers)

	createSecretAndClasses(t, env, machines, ns)
	md := deployment(ns, "pool", 5, "small")
	if _, err := machines.MachineV1alpha1().MachineDeployments(ns).Create(ctx, md, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	waitMachines(t, machines, ns, 5, "small", nodes)

	patch := []byte(`{"spec":{"template":{"spec":{"class":{"name":"large"}}}}}`)
	if _, err := machines.MachineV1alpha1().MachineDeployments(ns).Patch(ctx, "pool", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitMachines(t, machines, ns, 5, "large", nodes)

	if _, err := machines.MachineV1alpha1().MachineDeployments(ns).Patch(ctx, "pool", types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitMachines(t, machines, ns, 2, "large", nodes)

	if err := machines.MachineV1alpha1().MachineDeployments(ns).Delete(ctx, "pool", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitMachines(t, machines, ns, 0, "", nodes)

	mu.Lock()
	defer mu.Unlock()
	waitCloudAndNodesEmpty(t, env, machines, provider, ns, nodes)
	c, d := provider.creates.Load(), provider.deletes.Load()
	t.Logf("the MCM driver saw %d CreateMachine and %d DeleteMachine calls", c, d)
	if c < 10 || d < 10 {
		t.Errorf("the MCM driver saw %d creates and %d deletes, want at least 10 of each (5, 5 more for the new class)", c, d)
	}
}

// startManager runs the reference manager, all controllers, on the test's
// namespace with the mcm-sim driver until the test ends.
func startManager(t *testing.T, kubeconfig, ns string, drivers manager.Drivers) {
	t.Helper()
	cfg := manager.DefaultConfig()
	cfg.ControlKubeconfig, cfg.TargetKubeconfig, cfg.Driver, cfg.Port = kubeconfig, kubeconfig, "mcm-sim", 0
	cfg.Namespace, cfg.LeaderElect = ns, false
	m, err := manager.New(cfg, manager.Options{
		Drivers: drivers,
		Logger:  funcr.New(func(prefix, args string) { t.Log(prefix, args) }, funcr.Options{Verbosity: 1}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the manager did not stop within 30s")
		}
	})
}

func createSecretAndClasses(t *testing.T, env *testenv.Env, machines versioned.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloud", Namespace: ns},
		Data: map[string][]byte{sim.CredentialsKey: []byte("token"), v1alpha1.UserDataKey: []byte("#cloud-config")}}
	if _, err := env.Client().CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"small", "large"} {
		class := &v1alpha1.MachineClass{
			ObjectMeta:   metav1.ObjectMeta{Name: name, Namespace: ns},
			Provider:     sim.ProviderName,
			ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: name}.RawExtension(),
			SecretRef:    &corev1.SecretReference{Name: "cloud", Namespace: ns},
		}
		if _, err := machines.MachineV1alpha1().MachineClasses(ns).Create(ctx, class, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func deployment(ns, name string, replicas int32, class string) *v1alpha1.MachineDeployment {
	labels := map[string]string{"pool": name}
	return &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: class}},
			},
		},
	}
}

// waitMachines waits until the namespace has exactly n machines, all
// Running on class with a Node, none being deleted, and adds their nodes
// to nodes.
func waitMachines(t *testing.T, machines versioned.Interface, ns string, n int, class string, nodes map[string]bool) {
	t.Helper()
	testenv.Eventually(t, stage, func(ctx context.Context) (bool, string) {
		list, err := machines.MachineV1alpha1().Machines(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var states []string
		ready := 0
		for _, m := range list.Items {
			node := m.Labels[v1alpha1.NodeLabelKey]
			states = append(states, fmt.Sprintf("%s(%s, %s, node %q)", m.Name, m.Spec.Class.Name, m.Status.CurrentStatus.Phase, node))
			if m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning && m.DeletionTimestamp == nil && m.Spec.Class.Name == class && node != "" {
				ready++
			}
		}
		if len(list.Items) != n || ready != n {
			return false, fmt.Sprintf("want %d Running machines of class %q: %v", n, class, states)
		}
		for _, m := range list.Items {
			nodes[m.Labels[v1alpha1.NodeLabelKey]] = true
		}
		return true, ""
	})
}

// waitCloudAndNodesEmpty waits until the MCM driver lists no VM of either
// class and none of the nodes the machines had is left.
func waitCloudAndNodesEmpty(t *testing.T, env *testenv.Env, machines versioned.Interface, provider *countingMCM, ns string, nodes map[string]bool) {
	t.Helper()
	secret := &corev1.Secret{Data: map[string][]byte{sim.CredentialsKey: []byte("token")}}
	// Asked through the adapter, the list still comes from the MCM driver.
	cloud := mcmdriver.New(provider)
	testenv.Eventually(t, stage, func(ctx context.Context) (bool, string) {
		for _, name := range []string{"small", "large"} {
			class, err := machines.MachineV1alpha1().MachineClasses(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			resp, err := cloud.ListMachines(ctx, &driver.ListMachinesRequest{MachineClass: class, Secret: secret})
			if err != nil {
				return false, fmt.Sprintf("ListMachines of %s: %v", name, err)
			}
			if len(resp.Machines) != 0 {
				return false, fmt.Sprintf("VMs of class %s left: %v", name, resp.Machines)
			}
		}
		list, err := env.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, n := range list.Items {
			if nodes[n.Name] {
				left = append(left, n.Name)
			}
		}
		slices.Sort(left)
		return len(left) == 0, fmt.Sprintf("nodes left of the %d the machines had: %v", len(nodes), left)
	})
}
