package deployment

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// ipWorld is a simulated cluster for in-place rollouts: the deployment
// controller's pure plan (plan, with planInPlace), the node marks
// (nodeScope.plan), a MachineSet controller that honours scale-up-disabled
// and the update-result label, a machine controller that walks the node
// condition InPlaceUpdate through MCM's reasons, and a node agent. Every
// actor does one step per round; the lagging machine's machine controller
// and agent act every other round only.
type ipWorld struct {
	d        *v1alpha1.MachineDeployment
	now      time.Time
	sets     []*v1alpha1.MachineSet
	machines []*v1alpha1.Machine
	nodes    map[string]*corev1.Node
	critical bool
	// lagging names the machine whose update moves every other round.
	lagging string
	// failing names the nodes whose next update the agent fails, with the
	// reason.
	failing map[string]string
	// created and deleted count the VMs the sets created and deleted
	// since the world started.
	created, deleted int
	// scaled tells that spec.replicas changed during the rollout: machines
	// are then created and deleted, and the bounds move.
	scaled         bool
	rounds, serial int
	templates      int
	// fail reports a broken invariant.
	fail func(format string, args ...any)
}

// ipVersionLabel is the label the agent puts on a node it updated: the
// class it was updated to.
const ipVersionLabel = "test.mcmkit.io/version"

func inPlaceDeployment(replicas int32, orchestration v1alpha1.OrchestrationType, surge, unavailable string) *v1alpha1.MachineDeployment {
	d := newDeployment(replicas)
	d.Spec.Strategy = v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.InPlaceUpdateMachineDeploymentStrategyType,
		InPlaceUpdate: &v1alpha1.InPlaceUpdateMachineDeployment{OrchestrationType: orchestration,
			UpdateConfiguration: v1alpha1.UpdateConfiguration{MaxSurge: intOrPercent(surge), MaxUnavailable: intOrPercent(unavailable)}}}
	return d
}

// newIPWorld starts a world settled on the deployment's template: one set
// of spec.replicas Running machines, each with its node.
func newIPWorld(d *v1alpha1.MachineDeployment, fail func(string, ...any)) *ipWorld {
	w := &ipWorld{d: d, now: epoch, nodes: map[string]*corev1.Node{}, failing: map[string]string{}, fail: fail}
	w.controller()
	for range 3 {
		w.sync()
		w.bootMachines()
	}
	w.created = 0
	return w
}

// scope is what observe would read from the world.
func (w *ipWorld) scope() scope {
	bySet := machinesBySet(w.sets, w.machines)
	s := scope{d: w.d, now: w.now, frozen: ""}
	s.newSet, s.old = splitSets(w.d, w.sets)
	s.machines = bySet
	s.counts = countSets(w.sets, bySet, minReadyOf(w.d), w.now)
	s.inPlace = inPlaceNodes{nodes: w.nodes, stale: map[string]bool{}, criticalTaint: w.critical}
	return s
}

// controller runs one sync of the deployment controller on the world and
// applies its writes; it returns the in-place plan (nil when the sync ran
// another step).
func (w *ipWorld) controller() *inPlacePlan {
	p := plan(w.scope(), DefaultMaxReplicas)
	if p.phase != phaseStep {
		w.fail("round %d: plan phase %d (%s), want a step", w.rounds, p.phase, p.invalid)
		return nil
	}
	if p.create != nil {
		s := p.create.DeepCopy()
		s.UID = types.UID("uid-" + s.Name)
		s.CreationTimestamp = metav1.NewTime(w.now)
		w.sets = append(w.sets, s)
	}
	if ip := p.inPlace; ip != nil {
		for _, t := range ip.transfers {
			w.transfer(t)
		}
	}
	for _, sp := range p.setPatches {
		i := slices.IndexFunc(w.sets, func(s *v1alpha1.MachineSet) bool { return s.Name == sp.Set.Name })
		w.sets[i] = sp.Want.DeepCopy()
	}
	if ip := p.inPlace; ip != nil {
		for _, ch := range ip.nodes {
			w.applyNodeChange(ch)
		}
		for _, m := range ip.unlabel {
			delete(w.machine(m.Name).Labels, v1alpha1.UpdateResultLabel)
		}
	}
	w.markNodes()
	if p.revision != "" {
		w.d.Annotations = withEntries(w.d.Annotations, map[string]string{v1alpha1.RevisionAnnotation: p.revision})
	}
	return p.inPlace
}

// transfer moves a machine as transferPatch says, after checking that its
// update is done and seen.
func (w *ipWorld) transfer(t transfer) {
	m := w.machine(t.Machine.Name)
	n := w.nodes[m.Labels[v1alpha1.NodeLabelKey]]
	if n == nil || n.Labels[v1alpha1.UpdateResultLabel] != v1alpha1.UpdateResultSuccessful ||
		m.Status.CurrentStatus.Phase == v1alpha1.MachineInPlaceUpdating || m.Status.CurrentStatus.Phase == v1alpha1.MachineInPlaceUpdateFailed {
		w.fail("round %d: machine %s moved before its update succeeded (phase %s)", w.rounds, m.Name, m.Status.CurrentStatus.Phase)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(m); ref == nil || ref.UID != t.From.UID {
		w.fail("round %d: machine %s moved from %s, which does not own it", w.rounds, m.Name, t.From.Name)
		return
	}
	m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(t.To, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))}
	for k := range t.From.Spec.Selector.MatchLabels {
		delete(m.Labels, k)
	}
	for k, v := range t.To.Spec.Selector.MatchLabels {
		m.Labels[k] = v
	}
	m.Labels[v1alpha1.UpdateResultLabel] = v1alpha1.UpdateResultSuccessful
}

func (w *ipWorld) applyNodeChange(ch nodeLabelChange) {
	n := w.nodes[ch.Node.Name]
	for k, v := range ch.Labels {
		if v == nil {
			delete(n.Labels, k)
		} else {
			n.Labels[k] = *v
		}
	}
	for k, v := range ch.Annotations {
		if v == nil {
			delete(n.Annotations, k)
		} else {
			n.Annotations[k] = *v
		}
	}
	if ch.Uncordon {
		n.Spec.Unschedulable = false
	}
	if ch.Untaint || ch.Critical {
		n.Spec.Taints, _ = taintsAfter(n.Spec.Taints, -1)
		if ch.Critical {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.CriticalComponentsNotReadyTaintKey, Effect: corev1.TaintEffectNoSchedule})
		}
	}
}

// markNodes runs the node marks (ReconcileNodes) on the world.
func (w *ipWorld) markNodes() {
	newSet, old := splitSets(w.d, w.sets)
	bySet := machinesBySet(w.sets, w.machines)
	s := nodeScope{nodes: w.nodes, preserved: map[string]bool{}}
	if newSet != nil {
		s.newMachines = bySet[newSet.Name]
	}
	for _, o := range old {
		s.oldMachines = append(s.oldMachines, bySet[o.Name]...)
	}
	s.rolling = len(s.oldMachines) > 0
	s.complete = newSet != nil && len(s.oldMachines) == 0
	for _, ch := range s.plan(true) {
		n := w.nodes[ch.Node]
		n.Spec.Taints, _ = taintsAfter(n.Spec.Taints, ch.Taint)
		for k, v := range scaleDownPatch(n.Annotations, ch.ScaleDown) {
			if v == nil {
				delete(n.Annotations, k)
			} else {
				n.Annotations[k] = *v
			}
		}
	}
}

func (w *ipWorld) machine(name string) *v1alpha1.Machine {
	i := slices.IndexFunc(w.machines, func(m *v1alpha1.Machine) bool { return m.Name == name })
	if i < 0 {
		w.fail("round %d: no machine %s", w.rounds, name)
		return &v1alpha1.Machine{}
	}
	return w.machines[i]
}

// owned lists the machines a set controls, by name.
func (w *ipWorld) owned(s *v1alpha1.MachineSet) []*v1alpha1.Machine {
	return machinesBySet([]*v1alpha1.MachineSet{s}, w.machines)[s.Name]
}

// sync runs each set's MachineSet controller once: machines missing are
// created unless the set is scale-up-disabled; the surplus is deleted,
// never a machine labelled update-result=successful (package machineset's
// planReplicas), unavailable machines first, then the newest.
func (w *ipWorld) sync() {
	for _, s := range w.sets {
		mine := w.owned(s)
		_, disabled := s.Labels[v1alpha1.ScaleUpDisabledLabel]
		for range max(int(s.Spec.Replicas)-len(mine), 0) {
			if disabled {
				break
			}
			w.createMachine(s)
		}
		deletable := slices.DeleteFunc(slices.Clone(mine), func(m *v1alpha1.Machine) bool {
			return m.Labels[v1alpha1.UpdateResultLabel] == v1alpha1.UpdateResultSuccessful
		})
		slices.SortStableFunc(deletable, func(a, b *v1alpha1.Machine) int {
			if av, bv := w.available(a), w.available(b); av != bv {
				if !av {
					return -1
				}
				return 1
			}
			return strings.Compare(b.Name, a.Name)
		})
		for _, m := range deletable[:max(len(deletable)-int(s.Spec.Replicas), 0)] {
			w.remove(m)
		}
	}
}

func (w *ipWorld) createMachine(s *v1alpha1.MachineSet) {
	w.serial++
	w.created++
	name := fmt.Sprintf("m%02d", w.serial)
	labels := withEntries(s.Spec.Template.Labels, map[string]string{v1alpha1.NodeLabelKey: "n-" + name})
	m := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, UID: types.UID("uid-" + name), Labels: labels,
			CreationTimestamp: metav1.NewTime(w.now),
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(s, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))}},
		Spec:   v1alpha1.MachineSpec{Class: s.Spec.Template.Spec.Class, ProviderID: "p-" + name},
		Status: v1alpha1.MachineStatus{CurrentStatus: v1alpha1.CurrentStatus{Phase: v1alpha1.MachinePending, LastUpdateTime: metav1.NewTime(w.now)}},
	}
	w.machines = append(w.machines, m)
	w.nodes["n-"+name] = &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n-" + name, ResourceVersion: "1",
			Labels:      map[string]string{ipVersionLabel: s.Spec.Template.Spec.Class.Name},
			Annotations: map[string]string{v1alpha1.MachineUIDAnnotation: string(m.UID)}},
		Spec: corev1.NodeSpec{ProviderID: "p-" + name},
	}
}

func (w *ipWorld) remove(m *v1alpha1.Machine) {
	w.deleted++
	w.machines = slices.DeleteFunc(w.machines, func(x *v1alpha1.Machine) bool { return x == m })
	delete(w.nodes, m.Labels[v1alpha1.NodeLabelKey])
}

// bootMachines makes Pending machines Running.
func (w *ipWorld) bootMachines() {
	for _, m := range w.machines {
		if m.Status.CurrentStatus.Phase == v1alpha1.MachinePending {
			w.setPhase(m, v1alpha1.MachineRunning)
		}
	}
}

func (w *ipWorld) setPhase(m *v1alpha1.Machine, p v1alpha1.MachinePhase) {
	m.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: p, LastUpdateTime: metav1.NewTime(w.now)}
}

func (w *ipWorld) available(m *v1alpha1.Machine) bool {
	return machinestate.Available(m, minReadyOf(w.d), w.now)
}
