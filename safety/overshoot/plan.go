package overshoot

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/api/machine/v1alpha1/validation"
	"github.com/mcmkit/mcm/internal/apitime"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// Reasons of the Frozen condition the overshoot check writes, MCM's.
const (
	// ReasonOvershooting: the set has machines at or above its threshold.
	ReasonOvershooting = "OverShootingReplicaCount"
	// ReasonDeploymentStateSync: the deployment is frozen because one of
	// its sets is.
	ReasonDeploymentStateSync = "MachineDeploymentStateSync"
)

// thresholds of the overshoot check.
type thresholds struct {
	// up is how many machines above its most (spec.replicas + maxSurge of
	// its deployment, or twice its replicas without one) a set may have
	// before it is frozen.
	up int
	// down is how far below the freezing count a frozen set must come to
	// be unfrozen.
	down int
}

// freezeChange freezes or unfreezes one set or deployment: the freeze
// label and the Frozen condition together.
type freezeChange struct {
	// Kind is "MachineSet" or "MachineDeployment".
	Kind, Name string
	// Freeze: true freezes, false unfreezes.
	Freeze bool
	// Reason and Message of the Frozen condition (of the event when
	// unfreezing).
	Reason, Message string
	// ClearUnfreeze: remove the unfreeze annotation, which asked for this.
	ClearUnfreeze bool
}

// planOvershoot decides the freezes and unfreezes of one namespace's sets
// and deployments, as MCM's overshoot check does with three differences
// written down below. It is pure.
//
//   - A set's count is its machines that carry its template's labels, are
//     controlled by it (or orphans it selects, which it adopts next) and
//     are not being deleted. Its threshold is high =
//     deployment replicas + maxSurge + up (2 × replicas + up without a
//     deployment); low = high − down.
//   - A set at or above high is frozen (label freeze=True, Frozen condition
//     with reason OverShootingReplicaCount). A set frozen so is unfrozen at
//     or below low. The unfreeze annotation on a set, or on its deployment,
//     unfreezes it whatever its count and is removed.
//   - A deployment is frozen while one of its sets is (reason
//     MachineDeploymentStateSync) and unfrozen when none is.
//
// Unlike MCM: a freeze this check did not make (a person's freeze=True
// label, without our condition reason) is never lifted by the count, only
// by the unfreeze annotation; every set is looked at in one pass (MCM
// stops at the first change); and machines being deleted do not count, as
// they are on their way out.
func planOvershoot(sets []*v1alpha1.MachineSet, deployments []*v1alpha1.MachineDeployment, machines []*v1alpha1.Machine, o thresholds) []freezeChange {
	byName := make(map[string]*v1alpha1.MachineDeployment, len(deployments))
	for _, d := range deployments {
		byName[d.Name] = d
	}
	grouped := groupMachines(machines)
	var changes []freezeChange
	frozenSets := map[string]bool{} // deployment name → one of its sets is frozen after this pass
	for _, s := range sortedSets(sets) {
		d := deploymentOfSet(s, byName)
		frozen := isFrozen(s.Labels)
		switch count, high := grouped.count(s), overshootLimit(s, d, o); {
		case hasUnfreeze(s.Annotations) || (d != nil && hasUnfreeze(d.Annotations)):
			if frozen || hasUnfreeze(s.Annotations) {
				changes = append(changes, freezeChange{Kind: "MachineSet", Name: s.Name, Reason: "Unfrozen",
					Message: "unfrozen by the " + v1alpha1.UnfreezeAnnotation + " annotation", ClearUnfreeze: hasUnfreeze(s.Annotations)})
			}
			frozen = false
		case !frozen && count >= high:
			changes = append(changes, freezeChange{Kind: "MachineSet", Name: s.Name, Freeze: true, Reason: ReasonOvershooting,
				Message: fmt.Sprintf("%d machines, at or above the safety limit of %d", count, high)})
			frozen = true
		case frozen && frozeForOvershoot(s) && count <= high-o.down:
			changes = append(changes, freezeChange{Kind: "MachineSet", Name: s.Name, Reason: "Unfrozen",
				Message: fmt.Sprintf("%d machines, at or below %d", count, high-o.down)})
			frozen = false
		}
		if d != nil && frozen {
			frozenSets[d.Name] = true
		}
	}
	for _, d := range sortedDeployments(deployments) {
		frozen := isFrozen(d.Labels)
		switch {
		case hasUnfreeze(d.Annotations):
			changes = append(changes, freezeChange{Kind: "MachineDeployment", Name: d.Name, Reason: "Unfrozen",
				Message: "unfrozen by the " + v1alpha1.UnfreezeAnnotation + " annotation", ClearUnfreeze: true})
		case !frozen && frozenSets[d.Name]:
			changes = append(changes, freezeChange{Kind: "MachineDeployment", Name: d.Name, Freeze: true, Reason: ReasonDeploymentStateSync,
				Message: "a machine set of the deployment is frozen"})
		case frozen && !frozenSets[d.Name] && deploymentFrozeForSets(d):
			changes = append(changes, freezeChange{Kind: "MachineDeployment", Name: d.Name, Reason: "Unfrozen",
				Message: "no machine set of the deployment is frozen"})
		}
	}
	return changes
}

// overshootLimit is the machine count at which a set is frozen.
func overshootLimit(s *v1alpha1.MachineSet, d *v1alpha1.MachineDeployment, o thresholds) int {
	if d == nil {
		return 2*int(s.Spec.Replicas) + o.up
	}
	return int(d.Spec.Replicas) + maxSurge(d) + o.up
}

// maxSurge is the deployment's maxSurge in machines (a percentage rounds
// up, as the rollout does); 0 for Recreate and unreadable values.
func maxSurge(d *v1alpha1.MachineDeployment) int {
	var v *intstr.IntOrString
	switch st := d.Spec.Strategy; {
	case st.Type == v1alpha1.RecreateMachineDeploymentStrategyType:
		return 0
	case st.InPlaceUpdate != nil && st.Type == v1alpha1.InPlaceUpdateMachineDeploymentStrategyType:
		v = st.InPlaceUpdate.MaxSurge
	case st.RollingUpdate != nil:
		v = st.RollingUpdate.MaxSurge
	}
	if v == nil {
		return 1 // the API's default for a rolling update
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, int(d.Spec.Replicas), true)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// machinesBySet groups the machines of a namespace once per check: the
// ones not being deleted by the UID of their controller, and the orphans
// among them apart, so that counting a set looks only at its own.
type machinesBySet struct {
	owned   map[types.UID][]*v1alpha1.Machine
	orphans []*v1alpha1.Machine
}

func groupMachines(machines []*v1alpha1.Machine) machinesBySet {
	g := machinesBySet{owned: map[types.UID][]*v1alpha1.Machine{}}
	for _, m := range machines {
		if machinestate.BeingDeleted(m) {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
			g.owned[ref.UID] = append(g.owned[ref.UID], m)
		} else {
			g.orphans = append(g.orphans, m)
		}
	}
	return g
}

// count is the set's machine count: the machines it controls and those it
// would adopt (orphans its selector matches), carrying its template's
// labels and not being deleted. Orphans count because the set adopts them
// at its next sync: a machine created by hand into a set's selector is as
// much an overshoot as one the set created too many.
func (g machinesBySet) count(s *v1alpha1.MachineSet) int {
	template := labels.SelectorFromSet(s.Spec.Template.Labels)
	selector, err := metav1.LabelSelectorAsSelector(s.Spec.Selector)
	if err != nil || !validation.SelectorAdopts(validation.OwnerMachineSet, s.Spec.Selector) {
		// A set whose selector has no positive requirement, or names
		// a label key the controllers write (stored before admission
		// refused it), adopts nothing.
		selector = labels.Nothing()
	}
	n := 0
	for _, m := range g.owned[s.UID] {
		if template.Matches(labels.Set(m.Labels)) {
			n++
		}
	}
	for _, m := range g.orphans {
		if template.Matches(labels.Set(m.Labels)) && selector.Matches(labels.Set(m.Labels)) {
			n++
		}
	}
	return n
}

func deploymentOfSet(s *v1alpha1.MachineSet, byName map[string]*v1alpha1.MachineDeployment) *v1alpha1.MachineDeployment {
	ref := metav1.GetControllerOfNoCopy(s)
	if ref == nil || ref.Kind != "MachineDeployment" {
		return nil
	}
	if d := byName[ref.Name]; d != nil && d.UID == ref.UID {
		return d
	}
	return nil
}

func isFrozen(l map[string]string) bool {
	return l[v1alpha1.FreezeLabelKey] == v1alpha1.FreezeLabelValue
}

func hasUnfreeze(a map[string]string) bool {
	_, ok := a[v1alpha1.UnfreezeAnnotation]
	return ok
}

// frozeForOvershoot tells whether the set's freeze is this check's: its
// Frozen condition has the overshoot reason.
func frozeForOvershoot(s *v1alpha1.MachineSet) bool {
	for _, c := range s.Status.Conditions {
		if c.Type == v1alpha1.MachineSetFrozen {
			return c.Reason == ReasonOvershooting
		}
	}
	return false
}

// deploymentFrozeForSets tells whether the deployment's freeze is this
// check's.
func deploymentFrozeForSets(d *v1alpha1.MachineDeployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == v1alpha1.MachineDeploymentFrozen {
			return c.Reason == ReasonDeploymentStateSync || c.Reason == ReasonOvershooting
		}
	}
	return false
}

func sortedSets(sets []*v1alpha1.MachineSet) []*v1alpha1.MachineSet {
	out := slices.Clone(sets)
	slices.SortFunc(out, func(a, b *v1alpha1.MachineSet) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func sortedDeployments(ds []*v1alpha1.MachineDeployment) []*v1alpha1.MachineDeployment {
	out := slices.Clone(ds)
	slices.SortFunc(out, func(a, b *v1alpha1.MachineDeployment) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// setFrozenCondition returns a set's conditions with the Frozen condition
// as ch says: added (True, with ch's reason and message) or removed.
func setFrozenCondition(conds []v1alpha1.MachineSetCondition, ch freezeChange, now time.Time) []v1alpha1.MachineSetCondition {
	out := slices.DeleteFunc(slices.Clone(conds), func(c v1alpha1.MachineSetCondition) bool { return c.Type == v1alpha1.MachineSetFrozen })
	if ch.Freeze {
		out = append(out, v1alpha1.MachineSetCondition{Type: v1alpha1.MachineSetFrozen, Status: v1alpha1.ConditionTrue,
			Reason: ch.Reason, Message: ch.Message, LastTransitionTime: apitime.Of(now)})
	}
	return out
}

// setFrozenDeploymentCondition is setFrozenCondition for a deployment.
func setFrozenDeploymentCondition(conds []v1alpha1.MachineDeploymentCondition, ch freezeChange, now time.Time) []v1alpha1.MachineDeploymentCondition {
	out := slices.DeleteFunc(slices.Clone(conds), func(c v1alpha1.MachineDeploymentCondition) bool {
		return c.Type == v1alpha1.MachineDeploymentFrozen
	})
	if ch.Freeze {
		at := apitime.Of(now)
		out = append(out, v1alpha1.MachineDeploymentCondition{Type: v1alpha1.MachineDeploymentFrozen, Status: v1alpha1.ConditionTrue,
			Reason: ch.Reason, Message: ch.Message, LastUpdateTime: at, LastTransitionTime: at})
	}
	return out
}
