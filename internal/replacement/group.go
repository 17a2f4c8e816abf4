package replacement

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

var (
	machineSetGVK        = v1alpha1.SchemeGroupVersion.WithKind("MachineSet")
	machineDeploymentGVK = v1alpha1.SchemeGroupVersion.WithKind("MachineDeployment")
)

// indexByControllingSet indexes machines by "namespace/uid" of the
// MachineSet their controller reference names. The index holds the UID,
// not the set: which deployment a set belongs to can change after a
// machine was indexed (a deployment adopts the set), so the group is
// resolved when asked.
const indexByControllingSet = "mcmkit.io/machine-by-controlling-set"

// replacementGroup is the machines whose replacements are counted
// together. Membership is ownership, never a label: anyone who may create
// a Machine may label it name=<deployment>, and a label would let such a
// machine, stuck in CrashLoopBackOff, use up a deployment's budget for
// good.
type replacementGroup struct {
	// Kind is MachineDeployment: the machines of the sets the deployment
	// controls; or MachineSet: the machines of one set whose deployment is
	// not known (no set cache, or the set is not in it).
	Kind      string
	Namespace string
	Name      string
	UID       types.UID
}

func (g replacementGroup) key() string {
	return g.Namespace + "/" + g.Kind + "/" + string(g.UID)
}

// String names the group in messages, as "deployment \"pool\"".
func (g replacementGroup) String() string {
	if g.Kind == machineSetGVK.Kind {
		return fmt.Sprintf("machine set %q", g.Name)
	}
	return fmt.Sprintf("deployment %q", g.Name)
}

// setLookup returns the cached MachineSet namespace/name, or nil when it
// is not known.
type setLookup func(namespace, name string) *v1alpha1.MachineSet

// groupOf is the replacement group of m: the MachineDeployment that
// controls the MachineSet that controls m, matched by UID at each step.
// A machine no set controls (created by hand, whatever its labels) is in
// no group, nor is one of a set no deployment controls: neither is ever
// held back, as MCM never holds back a machine without a deployment. Nor
// is a machine its set lists as foreign (machinestate.ForeignMachines:
// the set did not create it, it came with the set's controller reference
// or was adopted): a controller reference is anyone's to write who may
// create machines, and such a machine, kept Terminating by a finalizer of
// its creator or stuck Pending, would hold the deployment's only slot.
// When the set is not known (setOf returns nil, or a set of that name
// with another UID), the machine counts with the other machines of its
// set: bounded, and by nothing a foreign machine can join.
func groupOf(m *v1alpha1.Machine, setOf setLookup) (replacementGroup, bool) {
	ref := controllerRef(m, machineSetGVK)
	if ref == nil {
		return replacementGroup{}, false
	}
	s := setOf(m.Namespace, ref.Name)
	if s == nil || s.UID != ref.UID {
		return replacementGroup{Kind: machineSetGVK.Kind, Namespace: m.Namespace, Name: ref.Name, UID: ref.UID}, true
	}
	if machinestate.ForeignMachines(s)[m.UID] {
		return replacementGroup{}, false
	}
	return deploymentGroupOf(s)
}

// deploymentGroupOf is the group of a set's machines when the set is
// known: its controlling deployment's, or none.
func deploymentGroupOf(s *v1alpha1.MachineSet) (replacementGroup, bool) {
	dref := controllerRef(s, machineDeploymentGVK)
	if dref == nil {
		return replacementGroup{}, false
	}
	return replacementGroup{Kind: machineDeploymentGVK.Kind, Namespace: s.Namespace, Name: dref.Name, UID: dref.UID}, true
}

// controllerRef is obj's controller reference when it names an object of
// kind gvk, nil otherwise.
func controllerRef(obj metav1.Object, gvk schema.GroupVersionKind) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != gvk.Kind || ref.APIVersion != gvk.GroupVersion().String() || ref.UID == "" {
		return nil
	}
	return ref
}

// controllingSetIndex is the index function of indexByControllingSet.
func controllingSetIndex(obj any) ([]string, error) {
	m, ok := obj.(*v1alpha1.Machine)
	if !ok {
		return nil, nil
	}
	ref := controllerRef(m, machineSetGVK)
	if ref == nil {
		return nil, nil
	}
	return []string{setIndexKey(m.Namespace, ref.UID)}, nil
}

// setIndexKey is namespace/uid: owner references are namespace-local, so
// a machine naming the UID of another namespace's set is not its member.
func setIndexKey(namespace string, uid types.UID) string { return namespace + "/" + string(uid) }

// GroupByDeployment sorts machines by the UID of the deployment whose
// replacement group they are in, given the namespace's sets: the
// machines a deployment's remediation condition counts, the same the
// budget counts.
func GroupByDeployment(sets []*v1alpha1.MachineSet, machines []*v1alpha1.Machine) map[types.UID][]*v1alpha1.Machine {
	byName := make(map[string]*v1alpha1.MachineSet, len(sets))
	for _, s := range sets {
		byName[s.Namespace+"/"+s.Name] = s
	}
	setOf := func(namespace, name string) *v1alpha1.MachineSet { return byName[namespace+"/"+name] }
	out := map[types.UID][]*v1alpha1.Machine{}
	for _, m := range machines {
		if g, ok := groupOf(m, setOf); ok && g.Kind == machineDeploymentGVK.Kind {
			out[g.UID] = append(out[g.UID], m)
		}
	}
	return out
}
