package deployment

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/ownership"
	"github.com/mcmkit/mcm/workqueue"
)

// scope is what one sync of a deployment observed: the deployment as the
// cache holds it, its sets as its selector sorts them, their machines and
// the freeze. observe fills it by reading only; plan decides every write
// of the sync from it alone.
type scope struct {
	d   *v1alpha1.MachineDeployment
	now time.Time
	// invalid says why the deployment cannot work ("" if it can); nothing
	// else is read then.
	invalid string
	// selector is the deployment's selector as a string, for the scale
	// subresource.
	selector string
	// adopt are the orphan sets the deployment selects, once an uncached
	// read confirmed that the deployment is the one the cache holds and not
	// being deleted; release are the sets it controls but no longer
	// selects.
	adopt, release []*v1alpha1.MachineSet
	// observed are the sets the deployment controls and selects, those
	// about to be adopted included, and their machines.
	observed
	// frozen says why the deployment adds no machines now, or "".
	frozen string
	// inPlace is what an in-place rollout decides on beyond the sets and
	// machines: their nodes (observeInPlace).
	inPlace inPlaceNodes
}

// observed is what a sync sees of a deployment's sets and machines.
type observed struct {
	newSet *v1alpha1.MachineSet
	old    []*v1alpha1.MachineSet
	// machines holds the machines of each owned set by set name.
	machines map[string][]*v1alpha1.Machine
	counts   map[string]machineCounts
}

func (o observed) all() []*v1alpha1.MachineSet { return withNew(o.newSet, o.old) }

// observe reads what a sync of d decides on, from the caches; before an
// adoption it confirms the deployment by an uncached read. wait tells that
// the cache does not show one of the controller's own writes to a set yet:
// planning now would scale it twice; its event requeues the deployment.
func (c *Controller) observe(ctx context.Context, d *v1alpha1.MachineDeployment) (s scope, wait bool, err error) {
	s = scope{d: d, now: c.opts.Clock.Now()}
	if s.invalid = invalid(d); s.invalid != "" {
		return s, false, nil
	}
	selector, _ := metav1.LabelSelectorAsSelector(d.Spec.Selector) // validated above
	s.selector = selector.String()
	sets, err := c.sets.MachineSets(d.Namespace).List(everything)
	if err != nil {
		return scope{}, false, fmt.Errorf("listing machine sets: %w", err)
	}
	own := ownership.Decide(d, selector, sets)
	for _, set := range own.Owned {
		if !c.writes.Observed(workqueue.KeyOf(set), set.ResourceVersion) {
			return scope{}, true, nil
		}
	}
	if s.adopt, err = c.confirmedOrphans(ctx, d, own.Adopt); err != nil {
		return scope{}, false, err
	}
	s.release = own.Release
	machines, err := c.machines.Machines(d.Namespace).List(everything)
	if err != nil {
		return scope{}, false, fmt.Errorf("listing machines: %w", err)
	}
	owned := append(own.Owned, s.adopt...)
	s.machines = machinesBySet(owned, machines)
	s.newSet, s.old = splitSets(d, owned)
	if s.newSet == nil {
		// The new set this controller created may not be in the cache
		// yet: planning now would create it again, and fail.
		name := newSetName(d)
		if !c.writes.Observed(cache.NewObjectName(d.Namespace, name).String(), versionOf(sets, name)) {
			return scope{}, true, nil
		}
	}
	s.counts = countSets(owned, s.machines, minReadyOf(d), s.now)
	s.frozen = machinestate.FrozenReason(ctx, "deployment", d.Labels, c.opts.SafetyGate)
	if isInPlaceUpdate(d) {
		if wait = c.observeInPlace(&s); wait {
			return scope{}, true, nil
		}
	}
	return s, false, nil
}

// versionOf is the resourceVersion of the set named name among sets, ""
// when there is none. A set of the new set's name that the deployment does
// not own ends the wait for it too: the creation's name collision is then
// the step's to handle.
func versionOf(sets []*v1alpha1.MachineSet, name string) string {
	for _, s := range sets {
		if s.Name == name {
			return s.ResourceVersion
		}
	}
	return ""
}

// confirmedOrphans returns the orphans the deployment may adopt: all of
// them when an uncached read shows the deployment is the one the cache
// holds and not being deleted (ownership.CanAdopt), none otherwise.
func (c *Controller) confirmedOrphans(ctx context.Context, d *v1alpha1.MachineDeployment, orphans []*v1alpha1.MachineSet) ([]*v1alpha1.MachineSet, error) {
	if len(orphans) == 0 {
		return nil, nil
	}
	ok, err := ownership.CanAdopt(ctx, c.client.MachineV1alpha1().MachineDeployments(d.Namespace).Get, d)
	if err != nil {
		return nil, fmt.Errorf("confirming machine deployment before adoption: %w", err)
	}
	if !ok {
		return nil, nil
	}
	return orphans, nil
}

// machinesBySet groups the machines controlled by sets by set name.
func machinesBySet(sets []*v1alpha1.MachineSet, machines []*v1alpha1.Machine) map[string][]*v1alpha1.Machine {
	byUID := make(map[string]string, len(sets))
	for _, s := range sets {
		byUID[string(s.UID)] = s.Name
	}
	out := make(map[string][]*v1alpha1.Machine, len(sets))
	for _, m := range machines {
		ref := metav1.GetControllerOfNoCopy(m)
		if ref == nil {
			continue
		}
		if name, ok := byUID[string(ref.UID)]; ok {
			out[name] = append(out[name], m)
		}
	}
	return out
}
