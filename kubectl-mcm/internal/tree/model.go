package tree

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// Objects are what a tree is built from, as read from the control cluster
// (deployments, sets, machines) and the target cluster (nodes). Build only
// reads them.
type Objects struct {
	Deployments []*v1alpha1.MachineDeployment
	Sets        []*v1alpha1.MachineSet
	Machines    []*v1alpha1.Machine
	// Nodes by name; nil without a target cluster.
	Nodes map[string]*corev1.Node
}

// Tree is deployments → sets → machines → nodes. Objects without an owner
// among the objects given hang at the top level, so nothing is hidden.
type Tree struct {
	Deployments []Deployment `json:"deployments,omitempty"`
	// Sets without a deployment.
	Sets []Set `json:"machineSets,omitempty"`
	// Machines without a set.
	Machines []Machine `json:"machines,omitempty"`
}

// Deployment is one MachineDeployment and its sets, newest revision first.
type Deployment struct {
	Name      string                                 `json:"name"`
	Strategy  v1alpha1.MachineDeploymentStrategyType `json:"strategy"`
	Replicas  int32                                  `json:"replicas"`
	Updated   int32                                  `json:"updated"`
	Ready     int32                                  `json:"ready"`
	Available int32                                  `json:"available"`
	// Notes are what a person should know: paused, conditions that are
	// not as they should be (Progressing False, Frozen, ReplicaFailure).
	Notes []string `json:"notes,omitempty"`
	Sets  []Set    `json:"machineSets"`
}

// Set is one MachineSet and its machines.
type Set struct {
	Name     string `json:"name"`
	Revision int64  `json:"revision,omitempty"`
	Desired  int32  `json:"desired"`
	Current  int32  `json:"current"`
	Ready    int32  `json:"ready"`
	// Notes: frozen, scale-up disabled for an in-place update.
	Notes    []string  `json:"notes,omitempty"`
	Machines []Machine `json:"machines,omitempty"`
}

// Machine is one Machine, its node, and what it does now.
type Machine struct {
	Name    string                `json:"name"`
	Phase   v1alpha1.MachinePhase `json:"phase,omitempty"`
	Created time.Time             `json:"created"`
	// Doing says what the machine does now, e.g. "creating for 40s",
	// "draining: 3 pods left", "in-place update: ReadyForUpdate"; empty
	// for a machine that just runs.
	Doing string `json:"doing,omitempty"`
	// DoingKind is Doing without its times and counts, so that machines
	// doing the same thing can be grouped.
	DoingKind string `json:"-"`
	Node      *Node  `json:"node,omitempty"`
}

// Node is a machine's node as the target cluster shows it.
type Node struct {
	Name string `json:"name"`
	// Ready is the Ready condition's status ("True", "False", "Unknown"),
	// or "Missing" when the machine names a node the cluster does not have.
	Ready corev1.ConditionStatus `json:"ready"`
	// Notes: cordoned, conditions other than Ready that are True, the
	// in-place update's reason and labels.
	Notes []string `json:"notes,omitempty"`
}

// Missing is Node.Ready for a node the target cluster does not have.
const Missing corev1.ConditionStatus = "Missing"

// Build builds the tree of objs as of now. Only objs are read; none is
// changed.
func Build(objs Objects, now time.Time) Tree {
	setsOf := map[types.UID][]*v1alpha1.MachineSet{}
	machinesOf := map[types.UID][]*v1alpha1.Machine{}
	deployments := map[types.UID]bool{}
	sets := map[types.UID]bool{}
	for _, d := range objs.Deployments {
		deployments[d.UID] = true
	}
	for _, s := range objs.Sets {
		sets[s.UID] = true
	}
	var t Tree
	for _, s := range objs.Sets {
		if ref := metav1.GetControllerOf(s); ref != nil && deployments[ref.UID] {
			setsOf[ref.UID] = append(setsOf[ref.UID], s)
		}
	}
	for _, m := range objs.Machines {
		if ref := metav1.GetControllerOf(m); ref != nil && sets[ref.UID] {
			machinesOf[ref.UID] = append(machinesOf[ref.UID], m)
			continue
		}
		t.Machines = append(t.Machines, buildMachine(m, objs.Nodes, now))
	}
	for _, d := range objs.Deployments {
		t.Deployments = append(t.Deployments, buildDeployment(d, setsOf[d.UID], machinesOf, objs.Nodes, now))
	}
	for _, s := range objs.Sets {
		if ref := metav1.GetControllerOf(s); ref == nil || !deployments[ref.UID] {
			t.Sets = append(t.Sets, buildSet(s, machinesOf[s.UID], objs.Nodes, now))
		}
	}
	slices.SortFunc(t.Deployments, func(a, b Deployment) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(t.Sets, compareSets)
	sortMachines(t.Machines)
	return t
}

func buildDeployment(d *v1alpha1.MachineDeployment, sets []*v1alpha1.MachineSet, machinesOf map[types.UID][]*v1alpha1.Machine,
	nodes map[string]*corev1.Node, now time.Time) Deployment {
	out := Deployment{
		Name: d.Name, Strategy: cmp.Or(d.Spec.Strategy.Type, v1alpha1.RollingUpdateMachineDeploymentStrategyType),
		Replicas: d.Spec.Replicas, Updated: d.Status.UpdatedReplicas, Ready: d.Status.ReadyReplicas, Available: d.Status.AvailableReplicas,
	}
	if d.Spec.Paused {
		out.Notes = append(out.Notes, "paused")
	}
	if d.DeletionTimestamp != nil {
		out.Notes = append(out.Notes, "being deleted")
	}
	for _, c := range d.Status.Conditions {
		bad := c.Status == v1alpha1.ConditionFalse && c.Type != v1alpha1.MachineDeploymentFrozen
		bad = bad || (c.Status == v1alpha1.ConditionTrue && (c.Type == v1alpha1.MachineDeploymentFrozen || c.Type == v1alpha1.MachineDeploymentReplicaFailure))
		if bad && c.Reason != v1alpha1.DeploymentPausedReason {
			out.Notes = append(out.Notes, conditionNote(string(c.Type), string(c.Status), c.Reason, c.Message))
		}
	}
	for _, s := range sets {
		out.Sets = append(out.Sets, buildSet(s, machinesOf[s.UID], nodes, now))
	}
	slices.SortFunc(out.Sets, compareSets)
	return out
}

func conditionNote(typ, status, reason, message string) string {
	note := typ + "=" + status
	if reason != "" {
		note += " " + reason
	}
	if message != "" {
		note += ": " + message
	}
	return note
}

func buildSet(s *v1alpha1.MachineSet, machines []*v1alpha1.Machine, nodes map[string]*corev1.Node, now time.Time) Set {
	rev, _ := strconv.ParseInt(s.Annotations[v1alpha1.RevisionAnnotation], 10, 64)
	out := Set{Name: s.Name, Revision: rev, Desired: s.Spec.Replicas, Current: s.Status.Replicas, Ready: s.Status.ReadyReplicas}
	for _, c := range s.Status.Conditions {
		if c.Type == v1alpha1.MachineSetFrozen && c.Status == v1alpha1.ConditionTrue {
			out.Notes = append(out.Notes, "frozen: "+cmp.Or(c.Message, c.Reason))
		}
	}
	if s.Labels[v1alpha1.ScaleUpDisabledLabel] == "true" {
		out.Notes = append(out.Notes, "scale-up disabled (in-place update)")
	}
	for _, m := range machines {
		out.Machines = append(out.Machines, buildMachine(m, nodes, now))
	}
	sortMachines(out.Machines)
	return out
}

// compareSets puts the newest revision first, then orders by name.
func compareSets(a, b Set) int {
	return cmp.Or(cmp.Compare(b.Revision, a.Revision), cmp.Compare(a.Name, b.Name))
}

// phaseRank puts the machines that need attention first.
func phaseRank(p v1alpha1.MachinePhase) int {
	switch p {
	case v1alpha1.MachineFailed, v1alpha1.MachineInPlaceUpdateFailed:
		return 0
	case v1alpha1.MachineCrashLoopBackOff:
		return 1
	case v1alpha1.MachineUnknown:
		return 2
	case v1alpha1.MachineInPlaceUpdating, v1alpha1.MachineInPlaceUpdateSuccessful:
		return 3
	case v1alpha1.MachineTerminating:
		return 4
	case v1alpha1.MachineRunning, v1alpha1.MachineAvailable:
		return 6
	}
	return 5 // no phase yet, Pending
}

func sortMachines(ms []Machine) {
	slices.SortFunc(ms, func(a, b Machine) int {
		return cmp.Or(cmp.Compare(phaseRank(a.Phase), phaseRank(b.Phase)), cmp.Compare(a.Name, b.Name))
	})
}
