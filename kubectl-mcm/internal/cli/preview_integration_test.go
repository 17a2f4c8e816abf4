package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/deployment"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/simcluster"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// TestIntegrationPreviewAgrees (acceptance 1): what preview says for three
// kinds of change is what the controllers then do — a class change of a
// rolling deployment rolls every machine in as many waves as the new set
// grows steps; a node template label only propagates (same machines, the
// label on their nodes); a class change of an InPlaceUpdate deployment
// keeps every VM and updates it.
func TestIntegrationPreviewAgrees(t *testing.T) {
	env := testenv.Get(t)
	s := simstack.Prepare(t, simcluster.Options{Agent: simcluster.AgentOptions{Machines: versioned.NewForConfigOrDie(env.Config())}})
	oldClass := agentClass(t, s, "v-old", "v1.37.1")
	newClass := agentClass(t, s, "v-new", "v1.37.2")
	s.Run(t, simstack.Options{Deployments: true})
	p := newPlugin(t, s)

	t.Run("class change rolls in waves", func(t *testing.T) {
		create(t, s, rollingDeployment(s.NS, "roll", oldClass, 3))
		p.ok(t, "rollout", "status", "roll", "--timeout", settle.String())
		before := poolMachines(t, s, "roll")
		got := previewOf(t, p, "roll", "--class", newClass)
		if got.Change != deployment.ChangeRoll || got.Machines != 3 || got.Waves != 3 {
			t.Fatalf("preview: %+v, want a roll of 3 machines in 3 waves (maxSurge 1, maxUnavailable 0)", got)
		}
		steps := watchNewSetSizes(t, s, newClass)
		patchDeployment(t, s, "roll", fmt.Sprintf(`{"spec":{"template":{"spec":{"class":{"name":%q}}}}}`, newClass))
		p.ok(t, "rollout", "status", "roll", "--timeout", settle.String())
		after := poolMachines(t, s, "roll")
		if len(after) != 3 || slices.ContainsFunc(after, func(n string) bool { return slices.Contains(before, n) }) {
			t.Errorf("machines before %v, after %v: want 3, all new", before, after)
		}
		if sizes := steps(); len(sizes) != got.Waves {
			t.Errorf("the new set grew through sizes %v: %d waves, preview said %d", sizes, len(sizes), got.Waves)
		}
	})

	t.Run("node template label propagates", func(t *testing.T) {
		create(t, s, rollingDeployment(s.NS, "labels", oldClass, 2))
		p.ok(t, "rollout", "status", "labels", "--timeout", settle.String())
		before := poolMachines(t, s, "labels")
		got := previewOf(t, p, "labels", "--set", "template.spec.nodeTemplate.metadata.labels.tier=gold")
		if got.Change != deployment.ChangePropagate || got.Machines != 2 {
			t.Fatalf("preview: %+v, want propagation to 2 machines", got)
		}
		patchDeployment(t, s, "labels", `{"spec":{"template":{"spec":{"nodeTemplate":{"metadata":{"labels":{"tier":"gold"}}}}}}}`)
		testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
			nodes, err := s.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "tier=gold"})
			if err != nil {
				return false, err.Error()
			}
			var names []string
			for _, n := range nodes.Items {
				if slices.Contains(before, n.Name) {
					names = append(names, n.Name)
				}
			}
			return len(names) == 2, fmt.Sprintf("nodes of %v labelled tier=gold: %v", before, names)
		})
		if after := poolMachines(t, s, "labels"); !slices.Equal(before, after) {
			t.Errorf("machines before %v, after %v: propagation replaced machines", before, after)
		}
	})

	t.Run("in-place deployment updates in place", func(t *testing.T) {
		create(t, s, inPlaceDeployment(s.NS, "inplace", oldClass, 2))
		p.ok(t, "rollout", "status", "inplace", "--timeout", settle.String())
		before := poolMachines(t, s, "inplace")
		got := previewOf(t, p, "inplace", "--class", newClass)
		if got.Change != deployment.ChangeInPlace || got.Machines != 2 || got.Waves != 2 {
			t.Fatalf("preview: %+v, want 2 machines in place in 2 batches (maxUnavailable 1)", got)
		}
		patchDeployment(t, s, "inplace", fmt.Sprintf(`{"spec":{"template":{"spec":{"class":{"name":%q}}}}}`, newClass))
		testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
			var versions []string
			for _, name := range before {
				n, err := s.Core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				versions = append(versions, n.Status.NodeInfo.KubeletVersion)
			}
			return slices.Equal(versions, []string{"v1.37.2", "v1.37.2"}), fmt.Sprintf("nodes of %v report %v", before, versions)
		})
		p.ok(t, "rollout", "status", "inplace", "--timeout", settle.String())
		if after := poolMachines(t, s, "inplace"); !slices.Equal(before, after) {
			t.Errorf("machines before %v, after %v: an in-place update replaced machines", before, after)
		}
	})
}

func previewOf(t *testing.T, p plugin, args ...string) deployment.Preview {
	t.Helper()
	var got deployment.Preview
	if err := json.Unmarshal([]byte(p.ok(t, append([]string{"preview", "-o", "json"}, args...)...)), &got); err != nil {
		t.Fatal(err)
	}
	return got
}

func patchDeployment(t *testing.T, s *simstack.Stack, name, patch string) {
	t.Helper()
	if _, err := s.Machines.MachineV1alpha1().MachineDeployments(s.NS).Patch(context.Background(), name, types.MergePatchType,
		[]byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// poolMachines lists the names of the machines of deployment pool that
// are not being deleted.
func poolMachines(t *testing.T, s *simstack.Stack, pool string) []string {
	t.Helper()
	list, err := s.Machines.MachineV1alpha1().Machines(s.NS).List(context.Background(), metav1.ListOptions{LabelSelector: "pool=" + pool})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list.Items {
		if m.DeletionTimestamp == nil {
			names = append(names, m.Name)
		}
	}
	sort.Strings(names)
	return names
}

// watchNewSetSizes watches the namespace's sets until t ends and returns a
// function that lists the sizes (spec.replicas above 0) a set of class
// went through, in order.
func watchNewSetSizes(t *testing.T, s *simstack.Stack, class string) func() []int32 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := s.Machines.MachineV1alpha1().MachineSets(s.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var sizes []int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			set, ok := ev.Object.(*v1alpha1.MachineSet)
			if !ok || ev.Type == watch.Deleted || set.Spec.Template.Spec.Class.Name != class || set.Spec.Replicas == 0 {
				continue
			}
			mu.Lock()
			if len(sizes) == 0 || sizes[len(sizes)-1] != set.Spec.Replicas {
				sizes = append(sizes, set.Spec.Replicas)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return func() []int32 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(sizes)
	}
}

// agentClass creates a class of the simulated cloud whose nodes report
// version and run the node agent.
func agentClass(t *testing.T, s *simstack.Stack, name, version string) string {
	t.Helper()
	ctx := context.Background()
	base, err := s.Machines.MachineV1alpha1().MachineClasses(s.NS).Get(ctx, s.Class, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	class := &v1alpha1.MachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.NS},
		Provider:   base.Provider,
		SecretRef:  base.SecretRef,
		ProviderSpec: sim.ProviderSpec{
			Zone: "zone-a", InstanceType: "large", KubeletVersion: version,
			InPlaceUpdate: &sim.InPlaceUpdate{Agent: true, UpdateDelay: &metav1.Duration{Duration: time.Second}},
		}.RawExtension(),
	}
	if _, err := s.Machines.MachineV1alpha1().MachineClasses(s.NS).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

func inPlaceDeployment(ns, name, class string, replicas int32) *v1alpha1.MachineDeployment {
	d := rollingDeployment(ns, name, class, replicas)
	unavailable, surge := intstr.FromInt32(1), intstr.FromInt32(0)
	d.Spec.Strategy = v1alpha1.MachineDeploymentStrategy{
		Type: v1alpha1.InPlaceUpdateMachineDeploymentStrategyType,
		InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{
			UpdateConfiguration: v1alpha1.UpdateConfiguration{MaxUnavailable: &unavailable, MaxSurge: &surge},
			OrchestrationType:   v1alpha1.OrchestrationTypeAuto,
		},
	}
	return d
}
