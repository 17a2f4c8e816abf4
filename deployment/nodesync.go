package deployment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/parallel"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

// nodeMarkParallelism bounds the node patches one ReconcileNodes has in
// flight. Issued one after the other, the marks of a thousand nodes took
// seconds longer than the client's rate limit requires; sixteen keep a
// client of a few hundred queries per second busy at round trips of tens
// of milliseconds, without a goroutine per node.
const nodeMarkParallelism = 16

// ReconcileNodes brings the rollout marks of the nodes of the deployment
// with the given key in line with its rollout: observeNodes reads (caches),
// planNodeMarks decides (pure), markNodes writes. Run calls it from the
// node-marks queue's workers. A deployment that is gone, being deleted or
// invalid is left alone: its sets are going or not synced, and the nodes of
// a deleted deployment go with their machines.
func (c *Controller) ReconcileNodes(ctx context.Context, key string) (workqueue.Result, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil || c.nodes == nil {
		return workqueue.Result{}, nil // malformed, or no target cluster
	}
	d, err := c.deployments.MachineDeployments(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.nodeMarksQueued.Forget(key)
		return workqueue.Result{}, nil
	}
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("getting machine deployment %s: %w", key, err)
	}
	if d.DeletionTimestamp != nil || invalid(d) != "" {
		// Nothing was checked: the next sync that plans a step queues
		// the check again, even if the machines are as they were.
		c.nodeMarksQueued.Forget(key)
		return workqueue.Result{}, nil
	}
	s, err := c.observeNodes(d)
	if err != nil {
		return workqueue.Result{}, err
	}
	if err := c.markNodes(ctx, s.nodes, s.plan(!c.opts.SkipAutoscalerAnnotationDuringRollout)); err != nil {
		// Retried with backoff; should the retries stop, the next sync
		// queues the check again.
		c.nodeMarksQueued.Forget(key)
		return workqueue.Result{}, err
	}
	return workqueue.Result{}, nil
}

// nodeScope is what ReconcileNodes observed of a deployment's rollout: the
// machines of its new set and of its old sets, and the nodes they name.
type nodeScope struct {
	rolling, complete bool
	newMachines       []*v1alpha1.Machine
	oldMachines       []*v1alpha1.Machine
	// nodes are the nodes the machines name, by name, those whose cache
	// does not show this controller's last mark yet left out.
	nodes map[string]*corev1.Node
	// preserved names the nodes of machines whose preservation holds.
	preserved map[string]bool
}

// plan is the marks the nodes need (planNodeMarks); annotateScaleDown is
// the controller option. The nodes of preserved machines keep their
// scale-down-disabled annotation when the rollout completes: the machine
// controller put it there for the preservation, under the same by-mcm
// marker, and takes it off when the preservation ends (as MCM's rollout
// skips them).
func (s nodeScope) plan(annotateScaleDown bool) []nodeChange {
	var out []nodeChange
	for _, ch := range planNodeMarks(s.rolling, s.complete, annotateScaleDown, nodesOf(s.newMachines, s.nodes), nodesOf(s.oldMachines, s.nodes)) {
		if ch.ScaleDown < 0 && s.preserved[ch.Node] {
			ch.ScaleDown = 0
		}
		if ch.Taint != 0 || ch.ScaleDown != 0 {
			out = append(out, ch)
		}
	}
	return out
}

// observeNodes reads the deployment's rollout and its nodes from the
// caches.
func (c *Controller) observeNodes(d *v1alpha1.MachineDeployment) (nodeScope, error) {
	newSet, newMachines, oldMachines, err := c.rolloutMachines(d)
	if err != nil {
		return nodeScope{}, err
	}
	s := nodeScope{
		rolling:     (isRollingUpdate(d) || isInPlaceUpdate(d)) && len(oldMachines) > 0,
		complete:    newSet != nil && len(oldMachines) == 0,
		newMachines: newMachines, oldMachines: oldMachines,
		nodes: map[string]*corev1.Node{},
	}
	all := append(slices.Clone(newMachines), oldMachines...)
	s.preserved = preservedNodes(all, c.opts.Clock.Now())
	for _, m := range all {
		name := m.Labels[v1alpha1.NodeLabelKey]
		if name == "" {
			continue
		}
		// A node whose cache does not show this controller's last mark
		// yet is planned again once it does (its update event requeues
		// the deployment here): planned now, it would be marked twice.
		if n, err := c.nodes.Get(name); err == nil && c.nodeWrites.Observed(n.Name, n.ResourceVersion) {
			s.nodes[name] = n
		}
	}
	return s, nil
}

// preservedNodes names the nodes of the machines whose preservation holds
// at now (machinestate.Preserved).
func preservedNodes(machines []*v1alpha1.Machine, now time.Time) map[string]bool {
	out := map[string]bool{}
	for _, m := range machines {
		if name := m.Labels[v1alpha1.NodeLabelKey]; name != "" && machinestate.Preserved(m, now) {
			out[name] = true
		}
	}
	return out
}

// rolloutMachines returns the deployment's new set (nil when the cache
// shows none), its machines and those of its old sets, from the caches:
// the sets the deployment controls and the machines they control.
func (c *Controller) rolloutMachines(d *v1alpha1.MachineDeployment) (newSet *v1alpha1.MachineSet, newMachines, oldMachines []*v1alpha1.Machine, err error) {
	sets, err := c.sets.MachineSets(d.Namespace).List(everything)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("listing machine sets: %w", err)
	}
	owned := slices.DeleteFunc(sets, func(s *v1alpha1.MachineSet) bool {
		ref := metav1.GetControllerOfNoCopy(s)
		return ref == nil || ref.UID != d.UID
	})
	machines, err := c.machines.Machines(d.Namespace).List(everything)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("listing machines: %w", err)
	}
	bySet := machinesBySet(owned, machines)
	newSet, old := splitSets(d, owned)
	if newSet != nil {
		newMachines = bySet[newSet.Name]
	}
	for _, s := range old {
		oldMachines = append(oldMachines, bySet[s.Name]...)
	}
	return newSet, newMachines, oldMachines, nil
}

// markNodes writes the changes on the nodes, nodeMarkParallelism at a
// time, and joins the failures; a node that is gone needs no mark.
func (c *Controller) markNodes(ctx context.Context, nodes map[string]*corev1.Node, changes []nodeChange) error {
	work := make([]func(context.Context) error, 0, len(changes))
	for _, ch := range changes {
		work = append(work, func(ctx context.Context) error {
			data, err := nodeMarkPatch(nodes[ch.Node], ch)
			if err == nil && data != nil {
				var updated *corev1.Node
				if updated, err = patch.Send(ctx, c.target.CoreV1().Nodes().Patch, ch.Node, data, c.opts.FieldManager); err == nil {
					c.nodeWrites.Wrote(updated.Name, updated.ResourceVersion)
				}
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("marking node %s for the rollout: %w", ch.Node, err)
			}
			return nil
		})
	}
	return errors.Join(parallel.Run(ctx, nodeMarkParallelism, work)...)
}
