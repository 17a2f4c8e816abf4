package machineset

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// How a set knows which of its machines it created.
//
// Anyone who may create machines can create one with a set's labels, a
// controller reference to the set (its name and UID are readable) and a
// high machinepriority; the set used to count it as its own and, on the
// next scale-down, delete its own Running machines to keep it. Nothing a
// machine carries can prove where it came from: its name (generateName's
// prefix too), labels, annotations, owner references, finalizers, even
// metadata.managedFields are the creator's to choose, and its status,
// which such a user cannot write, is written by the machine controller
// for every machine alike. What the creator cannot forge is the set's own
// evidence: the set chooses each machine's name (<set>-<random>, as the
// API server's generateName would) before it sends the request, so it
// knows which machines it created even when an answer is lost, and binds
// the name to the UID the answer or the cache shows. That evidence lives
// in the process; across restarts two more facts carry it:
//
//   - a machine that the informer's initial list showed controlled by the
//     set was there before this process watched: the controller before it
//     created it, or found it foreign and listed it in the set's
//     v1alpha1.ForeignMachinesAnnotation;
//   - that annotation, which this controller keeps up to date, and which
//     only those who may write MachineSets can change: they can scale the
//     set anyway.
//
// Every other machine the set controls is foreign: one it adopted (an
// orphan with its labels is just as easy to make), or one that came with
// its controller reference. Foreign machines stay the set's, as in MCM,
// but rank first for deletion, above priority and phase, so that none is
// ever kept in place of the set's own machines; the status condition
// ConditionForeignMachines and one Warning event per machine name them.
// A machine created while no controller watched (between leaders, say) is
// trusted as inherited: no evidence tells it apart.

// maxPersistedForeign bounds v1alpha1.ForeignMachinesAnnotation (37 bytes
// a UID), well below the API server's 256 KiB for all annotations.
// Foreign machines are deleted first whenever the set has more than it
// wants, so the list only grows while the set is short of machines;
// beyond the bound, a restart would trust the rest.
const maxPersistedForeign = 1000

// provenance is the evidence of which machines each set created.
type provenance struct {
	mu sync.Mutex
	// created holds, per set key, the machines this process created for
	// the set by name, with their UID once known ("" before).
	created map[string]map[string]createdMachine
	// inherited maps the UID of each machine the informer's initial list
	// held to the UID of the set that controlled it then ("" for none).
	inherited map[types.UID]types.UID
}

type createdMachine struct {
	uid  types.UID
	sent time.Time
}

// sending records that the set key is about to create a machine named
// name.
func (p *provenance) sending(key, name string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.created == nil {
		p.created = map[string]map[string]createdMachine{}
	}
	if p.created[key] == nil {
		p.created[key] = map[string]createdMachine{}
	}
	p.created[key][name] = createdMachine{sent: now}
}

// answered binds the machine the API server created for the set key to
// its UID (and name, which a server may choose).
func (p *provenance) answered(key, sentName string, m *v1alpha1.Machine, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.created[key] == nil {
		return // the set is gone
	}
	if m.Name != sentName {
		delete(p.created[key], sentName)
	}
	p.created[key][m.Name] = createdMachine{uid: m.UID, sent: now}
}

// initial records a machine of the informer's initial list.
func (p *provenance) initial(m *v1alpha1.Machine) {
	var owner types.UID
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		owner = ref.UID
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inherited == nil {
		p.inherited = map[types.UID]types.UID{}
	}
	p.inherited[m.UID] = owner
}

// gone forgets a deleted machine.
func (p *provenance) gone(key string, m *v1alpha1.Machine) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.inherited, m.UID)
	if c, ok := p.created[key][m.Name]; ok && c.uid == m.UID {
		delete(p.created[key], m.Name)
	}
}

// forgetSet drops what is known of the set key.
func (p *provenance) forgetSet(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.created, key)
}

// foreign returns the machines among set's (key's) machines that the set
// did not create, sorted by name, those being deleted included: the
// annotation lists them until they are gone, so that the replacement
// budget never counts a foreign machine that a finalizer of its creator
// keeps Terminating, nor a restart takes it for inherited. persisted are
// the UIDs the set's v1alpha1.ForeignMachinesAnnotation lists; siblings, called only when a machine is not known as the set's,
// lists the sets with the same controller (see fromSibling). Creations
// that were never seen are forgotten after ttl.
func (p *provenance) foreign(key string, set *v1alpha1.MachineSet, machines []*v1alpha1.Machine, persisted map[types.UID]bool,
	siblings func() []*v1alpha1.MachineSet, now time.Time, ttl time.Duration) []*v1alpha1.Machine {
	p.mu.Lock()
	defer p.mu.Unlock()
	created := p.created[key]
	var out []*v1alpha1.Machine
	for _, m := range machines {
		c, ok := created[m.Name]
		switch {
		case ok && c.uid == "":
			created[m.Name] = createdMachine{uid: m.UID, sent: c.sent}
		case ok && c.uid == m.UID:
		case !persisted[m.UID] && p.inherited[m.UID] == set.UID && set.UID != "":
		case !persisted[m.UID] && p.fromSibling(m, siblings()):
			// It keeps its provenance in this set from now on, even once
			// the sibling is gone.
			if created == nil {
				created = map[string]createdMachine{}
				p.created[key] = created
			}
			created[m.Name] = createdMachine{uid: m.UID, sent: now}
		default:
			out = append(out, m)
		}
	}
	for name, c := range created {
		if c.uid == "" && now.Sub(c.sent) > ttl {
			delete(created, name) // its creation failed unseen
		}
	}
	slices.SortFunc(out, func(a, b *v1alpha1.Machine) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// fromSibling tells whether one of siblings, the sets with the same
// controller as the machine's set, created m or inherited it as its own:
// an in-place rollout moves machines from a deployment's old sets to its
// new one, and a machine keeps its provenance when it moves. A machine a
// sibling holds as foreign stays foreign.
func (p *provenance) fromSibling(m *v1alpha1.Machine, siblings []*v1alpha1.MachineSet) bool {
	for _, s := range siblings {
		if c, ok := p.created[s.Namespace+"/"+s.Name][m.Name]; ok && c.uid == m.UID {
			return true
		}
		if s.UID != "" && p.inherited[m.UID] == s.UID && !machinestate.ForeignMachines(s)[m.UID] {
			return true
		}
	}
	return false
}

// foreignAnnotation is the value of v1alpha1.ForeignMachinesAnnotation
// for the foreign machines, "" for none.
func foreignAnnotation(foreign []*v1alpha1.Machine) string {
	uids := make([]string, 0, len(foreign))
	for _, m := range foreign {
		uids = append(uids, string(m.UID))
	}
	slices.Sort(uids)
	return strings.Join(uids[:min(len(uids), maxPersistedForeign)], ",")
}

// foreignMessage is the ConditionForeignMachines message; "" for none.
func foreignMessage(foreign []*v1alpha1.Machine) string {
	if len(foreign) == 0 {
		return ""
	}
	names := make([]string, 0, min(len(foreign), 10))
	for _, m := range foreign[:min(len(foreign), 10)] {
		names = append(names, m.Name)
	}
	list := strings.Join(names, ", ")
	if more := len(foreign) - len(names); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("%d machine(s) carry this set's controller reference but were not created by it: %s; they are deleted before the set's own machines",
		len(foreign), list)
}

// uidSet is the set of the machines' UIDs.
func uidSet(machines []*v1alpha1.Machine) map[types.UID]bool {
	if len(machines) == 0 {
		return nil
	}
	out := make(map[types.UID]bool, len(machines))
	for _, m := range machines {
		out[m.UID] = true
	}
	return out
}
