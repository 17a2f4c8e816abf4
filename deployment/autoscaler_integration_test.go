package deployment_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// foreignAnnotations are annotations of a MachineDeployment that other
// writers own: kubectl's, Gardener's per-pool autoscaler options, anyone's.
var foreignAnnotations = map[string]string{
	corev1.LastAppliedConfigAnnotation:                           `{"apiVersion":"machine.sapcloud.io/v1alpha1","kind":"MachineDeployment","metadata":{"name":"pool"}}`,
	"autoscaler.gardener.cloud/scale-down-utilization-threshold": "0.6",
	"example.com/owner":                                          "team-a",
}

// deploymentVersions records every version of a deployment the API
// server has had since the watch started.
type deploymentVersions struct {
	mu       sync.Mutex
	versions []v1alpha1.MachineDeployment
}

func (w *rolloutWorld) watchDeployment(name string) *deploymentVersions {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	watcher, err := w.Machines.MachineV1alpha1().MachineDeployments(w.NS).Watch(ctx,
		metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: w.get(name).ResourceVersion})
	if err != nil {
		cancel()
		w.t.Fatal(err)
	}
	dv := &deploymentVersions{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range watcher.ResultChan() {
			if d, ok := ev.Object.(*v1alpha1.MachineDeployment); ok {
				dv.mu.Lock()
				dv.versions = append(dv.versions, *d)
				dv.mu.Unlock()
			}
		}
	}()
	w.t.Cleanup(func() { cancel(); watcher.Stop(); <-done })
	return dv
}

func (dv *deploymentVersions) all() []v1alpha1.MachineDeployment {
	dv.mu.Lock()
	defer dv.mu.Unlock()
	return slices.Clone(dv.versions)
}

// TestIntegrationAutoscalerKeepsForeignAnnotations acts as the
// cluster-autoscaler's MCM provider that writes plain machine names: it
// names two machines in trigger-deletion-by-mcm and lowers the replicas in
// one patch. Exactly the named machines go, the deployment records the
// scaler's time, and the annotations other writers own are still there,
// unchanged, in every version of the deployment: after the trigger is
// rewritten with times and after it is pruned.
func TestIntegrationAutoscalerKeepsForeignAnnotations(t *testing.T) {
	t.Parallel()
	w := startRolloutWorld(t)
	w.createDeployment("pool", 5, rolling(1, 0))
	ann, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": foreignAnnotations}})
	w.patch("pool", string(ann))
	w.complete("pool", 5, w.Class)
	versions := w.watchDeployment("pool")

	machines := w.live(context.Background())
	slices.SortFunc(machines, func(a, b v1alpha1.Machine) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	victims := []string{machines[0].Name, machines[1].Name} // the newest: the default order deletes the oldest first
	w.patch("pool", fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"replicas":3}}`,
		v1alpha1.TriggerDeletionByMCMAnnotation, strings.Join(victims, ",")))
	w.complete("pool", 3, w.Class)

	want := slices.DeleteFunc(names(machines), func(n string) bool { return slices.Contains(victims, n) })
	if got := names(w.live(context.Background())); !slices.Equal(want, got) {
		t.Errorf("machines left %v, want all but the named %v", got, victims)
	}
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		_, has := w.get("pool").Annotations[v1alpha1.TriggerDeletionByMCMAnnotation]
		return !has, "the trigger is not pruned yet"
	})
	final := w.get("pool")
	if _, err := time.Parse(time.RFC3339, final.Annotations[v1alpha1.LastReplicaChangeByScalerAnnotation]); err != nil {
		t.Errorf("scaler time %q: %v", final.Annotations[v1alpha1.LastReplicaChangeByScalerAnnotation], err)
	}

	rewritten, pruned := false, false
	for _, d := range append(versions.all(), *final) {
		trigger, has := d.Annotations[v1alpha1.TriggerDeletionByMCMAnnotation]
		rewritten = rewritten || (has && strings.Contains(trigger, "~"))
		pruned = pruned || !has
		for k, v := range foreignAnnotations {
			if got, ok := d.Annotations[k]; !ok || got != v {
				t.Errorf("resourceVersion %s (trigger %q): annotation %s is %q (present %t), want %q",
					d.ResourceVersion, trigger, k, got, ok, v)
			}
		}
	}
	if !rewritten || !pruned {
		t.Errorf("the watch saw the trigger rewritten with times: %t, pruned: %t; want both", rewritten, pruned)
	}
	if got := maps.Collect(func(yield func(string, string) bool) {
		for k, v := range final.Annotations {
			if _, foreign := foreignAnnotations[k]; foreign && !yield(k, v) {
				return
			}
		}
	}); !maps.Equal(got, foreignAnnotations) {
		t.Errorf("foreign annotations at the end %v, want %v", got, foreignAnnotations)
	}
}

// TestIntegrationAutoscalerAbsorbedDecrease: the autoscaler names a
// machine but its replica decrease is absorbed (it raised the replicas
// again before the machine set acted: here it never lowers them). As in
// MCM, the named machine is deleted all the same, and replaced.
func TestIntegrationAutoscalerAbsorbedDecrease(t *testing.T) {
	t.Parallel()
	w := startRolloutWorld(t)
	w.createDeployment("pool", 3, rolling(1, 0))
	w.complete("pool", 3, w.Class)
	before := names(w.live(context.Background()))
	victim := before[1]
	w.patch("pool", fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.TriggerDeletionByMCMAnnotation, victim))
	others := slices.DeleteFunc(slices.Clone(before), func(n string) bool { return n == victim })
	testenv.Eventually(t, 4*time.Minute, func(ctx context.Context) (bool, string) {
		now := names(w.live(ctx))
		keptAll := !slices.ContainsFunc(others, func(n string) bool { return !slices.Contains(now, n) })
		return len(now) == 3 && !slices.Contains(now, victim) && keptAll,
			fmt.Sprintf("machines %v; want %s replaced and %v kept", now, victim, others)
	})
	w.complete("pool", 3, w.Class)
}
