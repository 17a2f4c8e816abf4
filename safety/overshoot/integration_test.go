package overshoot_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machineset"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Setup: []func(context.Context, *rest.Config) error{crds.Install}})
}

// TestIntegrationOvershootFreezes: machines created by hand into a set's
// selector push it over its limit; the set and its deployment are frozen
// (seen from a watch), the set removes the surplus, and both are unfrozen.
// A freeze put by hand is lifted by the unfreeze annotation.
func TestIntegrationOvershootFreezes(t *testing.T) {
	// The set removes one surplus machine per sync (burst 1), so that the
	// overshoot lasts long enough for a watch to see the freeze: with the
	// default burst the set adopts and deletes all of them at once, and
	// whether the check runs in between is a race.
	s := simstack.Start(t, simstack.Options{Deployments: true, Safety: true, MachineSet: machineset.Options{BurstReplicas: 1}})
	ctx := context.Background()
	mc := s.Machines.MachineV1alpha1()
	labels := map[string]string{"pool": "web"}
	d := rollingDeployment(s, "web", 3, labels)
	if _, err := mc.MachineDeployments(s.NS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := func(want int) {
		t.Helper()
		testenv.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
			list, err := mc.Machines(s.NS).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			n := 0
			for _, m := range list.Items {
				if m.DeletionTimestamp == nil && m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
					n++
				}
			}
			return n == want && len(list.Items) == want, fmt.Sprintf("%d of %d machines Running, want %d", n, len(list.Items), want)
		})
	}
	running(3)
	sets, err := mc.MachineSets(s.NS).List(ctx, metav1.ListOptions{})
	if err != nil || len(sets.Items) != 1 {
		t.Fatalf("sets %v, %v", sets, err)
	}
	set := sets.Items[0]

	frozenSeen := watchFreezes(t, s, set.Name, d.Name)
	// Ten machines by hand into the set's selector: 13 machines pass the
	// limit of 3 replicas + maxSurge 1 + safety-up 2.
	for range 10 {
		m := &v1alpha1.Machine{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "by-hand-", Namespace: s.NS, Labels: set.Spec.Template.Labels},
			Spec:       set.Spec.Template.Spec,
		}
		if _, err := mc.Machines(s.NS).Create(ctx, m, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	running(3)
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		setNow, _ := mc.MachineSets(s.NS).Get(ctx, set.Name, metav1.GetOptions{})
		dNow, _ := mc.MachineDeployments(s.NS).Get(ctx, d.Name, metav1.GetOptions{})
		return setNow.Labels[v1alpha1.FreezeLabelKey] == "" && dNow.Labels[v1alpha1.FreezeLabelKey] == "",
			fmt.Sprintf("set labels %v, deployment labels %v", setNow.Labels, dNow.Labels)
	})
	if setFroze, dFroze := frozenSeen(); !setFroze || !dFroze {
		t.Errorf("frozen while overshooting: set %v, deployment %v; want both", setFroze, dFroze)
	}

	// A freeze by hand stays until the unfreeze annotation lifts it.
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, v1alpha1.FreezeLabelKey, v1alpha1.FreezeLabelValue)
	if _, err := mc.MachineSets(s.NS).Patch(ctx, set.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if got, _ := mc.MachineSets(s.NS).Get(ctx, set.Name, metav1.GetOptions{}); got.Labels[v1alpha1.FreezeLabelKey] != v1alpha1.FreezeLabelValue {
		t.Fatal("the safety controller lifted a freeze it did not make")
	}
	patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, v1alpha1.UnfreezeAnnotation)
	if _, err := mc.MachineSets(s.NS).Patch(ctx, set.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		got, _ := mc.MachineSets(s.NS).Get(ctx, set.Name, metav1.GetOptions{})
		_, annotated := got.Annotations[v1alpha1.UnfreezeAnnotation]
		return got.Labels[v1alpha1.FreezeLabelKey] == "" && !annotated, fmt.Sprintf("labels %v, annotations %v", got.Labels, got.Annotations)
	})
}

// watchFreezes reports whether the set and the deployment were seen with
// the freeze label since the call.
func watchFreezes(t *testing.T, s *simstack.Stack, set, deployment string) func() (bool, bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mc := s.Machines.MachineV1alpha1()
	sw, err := mc.MachineSets(s.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dw, err := mc.MachineDeployments(s.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var setFroze, dFroze bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range sw.ResultChan() {
			if o, ok := ev.Object.(*v1alpha1.MachineSet); ok && o.Name == set && o.Labels[v1alpha1.FreezeLabelKey] == v1alpha1.FreezeLabelValue &&
				slices.ContainsFunc(o.Status.Conditions, func(c v1alpha1.MachineSetCondition) bool { return c.Type == v1alpha1.MachineSetFrozen }) {
				mu.Lock()
				setFroze = true
				mu.Unlock()
			}
		}
	})
	wg.Go(func() {
		for ev := range dw.ResultChan() {
			if o, ok := ev.Object.(*v1alpha1.MachineDeployment); ok && o.Name == deployment && o.Labels[v1alpha1.FreezeLabelKey] == v1alpha1.FreezeLabelValue {
				mu.Lock()
				dFroze = true
				mu.Unlock()
			}
		}
	})
	t.Cleanup(func() { cancel(); sw.Stop(); dw.Stop(); wg.Wait() })
	return func() (bool, bool) {
		mu.Lock()
		defer mu.Unlock()
		return setFroze, dFroze
	}
}

// rollingDeployment is a MachineDeployment of s's class with replicas
// machines labelled labels, rolled out one surge machine at a time.
func rollingDeployment(s *simstack.Stack, name string, replicas int32, labels map[string]string) *v1alpha1.MachineDeployment {
	surge, unavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	return &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.NS},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: s.Class}},
			},
			Strategy: v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge: &surge, MaxUnavailable: &unavailable}}},
		},
	}
}
