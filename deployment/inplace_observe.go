package deployment

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/workqueue"
)

// inPlaceNodes is what observe reads for an in-place deployment beyond its
// sets and machines.
type inPlaceNodes struct {
	// nodes are the nodes the deployment's machines name, by name; stale
	// those whose cache does not show the controller's last write.
	nodes map[string]*corev1.Node
	stale map[string]bool
	// noTarget: there is no target cluster, so no node to read or write.
	noTarget bool
	// criticalTaint is Options.CriticalComponentsNotReadyTaint.
	criticalTaint bool
}

// observeInPlace reads the nodes of the deployment's machines from the
// cache. wait tells that the cache does not show one of the controller's
// own writes to a machine yet (a move to the new set): planning now would
// move it, and its replica, twice; its event requeues the deployment. A
// node whose cache lags behind the controller's write is marked stale
// instead: its update event requeues the deployment too (onNodeUpdate),
// and meanwhile its machine counts as busy.
func (c *Controller) observeInPlace(s *scope) (wait bool) {
	s.inPlace = inPlaceNodes{noTarget: c.nodes == nil, criticalTaint: c.opts.CriticalComponentsNotReadyTaint,
		nodes: map[string]*corev1.Node{}, stale: map[string]bool{}}
	for _, ms := range s.machines {
		for _, m := range ms {
			if !c.machineWrites.Observed(workqueue.KeyOf(m), m.ResourceVersion) {
				return true
			}
			name := m.Labels[v1alpha1.NodeLabelKey]
			if name == "" || c.nodes == nil {
				continue
			}
			n, err := c.nodes.Get(name)
			if err != nil {
				continue // not there (yet): the machine has no node to act on
			}
			s.inPlace.nodes[name] = n
			if !c.nodeWrites.Observed(n.Name, n.ResourceVersion) {
				s.inPlace.stale[name] = true
			}
		}
	}
	return false
}

// inPlaceRolls tells whether the sync runs d's in-place rollout
// (planInPlace): an InPlaceUpdate deployment, not paused, with a target
// cluster, whose old sets have replicas or machines, or whose new set has
// a machine whose move is not cleaned up yet (the machine's update-result
// label, or one of the rollout's marks on its node). Otherwise planStep
// sizes the sets.
func inPlaceRolls(d *v1alpha1.MachineDeployment, s scope) bool {
	if !isInPlaceUpdate(d) || d.Spec.Paused || s.inPlace.noTarget {
		return false
	}
	if len(activeSets(s.old)) > 0 || oldMachinesExist(s.old, s.counts) {
		return true
	}
	if s.newSet == nil {
		return false
	}
	for _, m := range s.machines[s.newSet.Name] {
		n := s.inPlace.nodes[m.Labels[v1alpha1.NodeLabelKey]]
		if m.Labels[v1alpha1.UpdateResultLabel] == v1alpha1.UpdateResultSuccessful || hasInPlaceMarks(n) {
			return true
		}
	}
	return false
}

// inPlaceInput is the planner's view of the scope, for d.
func (s scope) inPlaceInput(d *v1alpha1.MachineDeployment) inPlaceInput {
	return inPlaceInput{d: d, obs: s.observed, nodes: s.inPlace.nodes, stale: s.inPlace.stale,
		minReady: minReadyOf(d), now: s.now, criticalTaint: s.inPlace.criticalTaint}
}

// hasInPlaceMarks tells whether n carries one of the in-place rollout's
// labels or the stamp.
func hasInPlaceMarks(n *corev1.Node) bool {
	if n == nil {
		return false
	}
	for _, k := range []string{v1alpha1.CandidateForUpdateLabel, v1alpha1.SelectedForUpdateLabel, v1alpha1.UpdateResultLabel} {
		if _, ok := n.Labels[k]; ok {
			return true
		}
	}
	_, ok := n.Annotations[InPlaceTargetAnnotation]
	return ok
}

// inPlaceTrue is the value MCM gives its in-place labels.
const inPlaceTrue = "true"

// withInPlaceMarks marks want, a set of an in-place rollout, as MCM does:
// an old set gets the scale-up-disabled label (it creates no machines
// while they move to the new set) and the prefer-no-schedule annotation
// (its nodes carry the PreferNoSchedule taint). The new set loses the
// label: after a rollback a former old set is the new set and must grow
// again, which MCM's never-removed label prevents (its quirk).
//
// An old set without replicas and machines (one from before the rollout)
// gets no marks: there is nothing on it to protect.
func withInPlaceMarks(want *v1alpha1.MachineSet, isNew, inUse bool) {
	if isNew {
		if _, ok := want.Labels[v1alpha1.ScaleUpDisabledLabel]; ok {
			want.Labels = withoutKey(want.Labels, v1alpha1.ScaleUpDisabledLabel)
		}
		return
	}
	if !inUse {
		return
	}
	want.Labels = withEntries(want.Labels, map[string]string{v1alpha1.ScaleUpDisabledLabel: inPlaceTrue})
	want.Annotations = withEntries(want.Annotations, map[string]string{v1alpha1.PreferNoScheduleAnnotation: preferNoScheduleValue})
}

// withoutKey returns a copy of m without key.
func withoutKey(m map[string]string, key string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}
