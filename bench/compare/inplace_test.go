//go:build linux

// Scenario I: a deployment's machines updated in place, by MCM's
// protocol, with the simulated cloud's node agent doing each update.

package compare

import (
	"context"
	"fmt"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver/sim"
)

// The kubelet versions the nodes of I's classes report: the agent's
// update of a node shows as the change from the one to the other.
const (
	inPlaceOldVersion = "v1.37.1"
	inPlaceNewVersion = "v1.38.0"
)

// inPlaceMaxUnavailable is I's maxUnavailable (maxSurge is 0): 10 machines
// of 100 updating at a time.
var inPlaceMaxUnavailable = intstr.FromString("10%")

// inPlaceRollout is scenario I: a deployment of N Running machines,
// strategy InPlaceUpdate with orchestration Auto, maxUnavailable 10 % and
// no surge, on a class whose nodes report inPlaceOldVersion, gets a class
// whose nodes report inPlaceNewVersion. Both classes run the node agent,
// which takes the update delay to update a drained node. It ends when every
// node reports the new version, the deployment's status is complete and
// the old set is at 0; the run fails if a VM was created or deleted.
func (r *run) inPlaceRollout(ctx context.Context) error {
	n := r.spec.Machines
	agent := &sim.InPlaceUpdate{Agent: true, UpdateDelay: &metav1.Duration{Duration: r.spec.UpdateDelay}}
	spec := func(version string) sim.ProviderSpec {
		s := bootSpec(r.spec.Boot)
		s.KubeletVersion, s.InPlaceUpdate = version, agent
		return s
	}
	if err := r.createClassesOf(ctx, []namedClass{{className, spec(inPlaceOldVersion)}, {nextClassName, spec(inPlaceNewVersion)}}); err != nil {
		return err
	}
	progress("%s: setting up: the deployment's %d machines", r.spec, n)
	if _, err := r.scaleUp(ctx, n, inPlaceStrategy()); err != nil {
		return fmt.Errorf("setting up: %w", err)
	}
	if err := r.sleep(r.spec.Settle); err != nil {
		return err
	}
	progress("%s: set up; rolling the deployment to class %s in place (an update takes %v)", r.spec, nextClassName, r.spec.UpdateDelay)
	r.watch.markVMs()
	p, err := r.begin(ctx)
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"class":{"name":%q}}}}}`, nextClassName)
	if _, err := r.genMachines.MachineV1alpha1().MachineDeployments(r.ns).Patch(ctx, deploymentName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("changing the deployment's class: %w", err)
	}
	done, err := r.waitUntil(fmt.Sprintf("the in-place rollout of %d machines", n), func(s state) bool {
		return s.inPlaceDone(n, className, inPlaceNewVersion)
	})
	if err != nil {
		return err
	}
	if err := r.end(ctx, p, done); err != nil {
		return err
	}
	// After the settle period: a VM deleted late is counted too.
	created, deleted, peak := r.watch.vmChanges()
	r.res.UpdateDelay, r.res.PeakNotRunning = r.spec.UpdateDelay, peak
	r.res.VMsCreated, r.res.VMsDeleted = len(created), len(deleted)
	if len(created)+len(deleted) > 0 {
		return fmt.Errorf("the in-place rollout created %d VMs %v and deleted %d %v; it must do neither", len(created), created, len(deleted), deleted)
	}
	return nil
}

// inPlaceStrategy is I's: InPlaceUpdate, orchestration Auto,
// inPlaceMaxUnavailable and no surge.
func inPlaceStrategy() v1alpha1.MachineDeploymentStrategy {
	surge := intstr.FromInt32(0)
	return v1alpha1.MachineDeploymentStrategy{
		Type: v1alpha1.InPlaceUpdateMachineDeploymentStrategyType,
		InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{
			UpdateConfiguration: v1alpha1.UpdateConfiguration{MaxSurge: &surge, MaxUnavailable: &inPlaceMaxUnavailable},
			OrchestrationType:   v1alpha1.OrchestrationTypeAuto,
		},
	}
}

// inPlaceDone tells whether an in-place rollout of n machines away from
// the sets of oldClass is complete: n machines, all Running, on n nodes
// that all report version, the sets of oldClass at 0 (desired and
// counted) and the deployment's status complete.
func (s state) inPlaceDone(n int, oldClass, version string) bool {
	return s.machines == n && s.running == n && s.nodes == n && s.nodesOfVersion[version] == n &&
		s.setReplicasOfClass[oldClass] == 0 && s.deploymentDone(n)
}

// vmLedger follows the VMs of a run from a mark on, by the provider IDs
// of its machines and nodes: the simulated cloud gives every VM an ID of
// its own, never reused, and registers its node with it.
type vmLedger struct {
	before  map[string]bool // the IDs at the mark
	created map[string]bool // IDs first seen after it
}

// saw records a provider ID seen on a machine or a node; nil ignores it.
func (l *vmLedger) saw(providerID string) {
	if l == nil || providerID == "" || l.before[providerID] {
		return
	}
	l.created[providerID] = true
}

// markVMs starts a ledger of the VMs with those of the machines and nodes
// seen now, and restarts the count of the most machines not Running at
// once.
func (w *watcher) markVMs() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.vms = &vmLedger{before: w.providerIDsLocked(), created: map[string]bool{}}
	w.peakNotRunning = w.notRunning
}

// vmChanges returns the provider IDs of the VMs created since markVMs, of
// those of the mark that no machine or node has any more, and the most
// machines not Running at once since the mark.
func (w *watcher) vmChanges() (created, deleted []string, peakNotRunning int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.vms == nil {
		return nil, nil, w.peakNotRunning
	}
	now := w.providerIDsLocked()
	for id := range w.vms.before {
		if !now[id] {
			deleted = append(deleted, id)
		}
	}
	slices.Sort(deleted)
	return slices.Sorted(maps.Keys(w.vms.created)), deleted, w.peakNotRunning
}

// providerIDsLocked returns the provider IDs of the machines and nodes;
// w.mu is held.
func (w *watcher) providerIDsLocked() map[string]bool {
	ids := map[string]bool{}
	for _, m := range w.machines {
		if m.providerID != "" {
			ids[m.providerID] = true
		}
	}
	for _, n := range w.nodeSeen {
		if n.providerID != "" {
			ids[n.providerID] = true
		}
	}
	return ids
}

// inPlaceExtra is I's own figures for the table.
func inPlaceExtra(r result) string {
	return fmt.Sprintf("update %.0f s, maxUnavailable %s: at most %d not Running, %d VMs created, %d deleted",
		r.UpdateDelay.Seconds(), inPlaceMaxUnavailable.String(), r.PeakNotRunning, r.VMsCreated, r.VMsDeleted)
}
