package machineset

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/ownership"
)

// scope is what one sync of a set sees: the set and its machines as the
// caches show them, and what the controller knows besides (provenance, the
// safety gate). observe fills it; plan and status read it; nothing in it
// is written.
type scope struct {
	key string
	now time.Time
	// set is the set as the cache shows it.
	set *v1alpha1.MachineSet

	// invalid says why the set cannot work; "" if it can. Such a set is
	// planned no write; its status counts the machines it controls
	// (controlled), and nothing below is filled.
	invalid    string
	controlled []*v1alpha1.Machine

	// selector is the set's selector as the status shows it.
	selector string
	// own sorts the namespace's machines for the set.
	own ownership.Plan[*v1alpha1.Machine]
	// adopt are the orphans the set takes: own.Adopt once an uncached read
	// confirmed the set (ownership.CanAdopt), none otherwise.
	adopt []*v1alpha1.Machine
	// adoptErr tells that the read failed: nothing is adopted, and the
	// sync fails.
	adoptErr error
	// foreign are the machines among owned() the set did not create
	// (provenance), those being deleted included, sorted by name.
	foreign []*v1alpha1.Machine

	// frozen says why the set creates no machines now, "" if it may.
	frozen string
	// noClass says why the template's class cannot make machines now, ""
	// if it can; classReason is the reason of the event that tells it.
	noClass, classReason string
	// policy orders the deletion ladder's rungs; policyErr tells why the
	// set's own choice of it was not taken.
	policy    DeletionPolicy
	policyErr error
	// wanted is how many machines the set keeps; capped tells why that is
	// fewer than spec.replicas.
	wanted int
	capped string
	// keepPreserved: a scale-down stops short of preserved machines
	// (Options.KeepPreservedOnScaleDown).
	keepPreserved bool
}

// owned are the machines the set owns once the planned adoptions are made.
func (s *scope) owned() []*v1alpha1.Machine {
	return append(slices.Clip(s.own.Owned), s.adopt...)
}

// observe reads what a sync of set (key) needs. It writes nothing: its one
// API call is the uncached read of the set that an adoption needs first.
// (It does bind the names of the set's creations to the UIDs the cache
// shows, in the process's own provenance record.)
func (c *Controller) observe(ctx context.Context, key string, set *v1alpha1.MachineSet) (*scope, error) {
	s := &scope{key: key, now: c.opts.Clock.Now(), set: set, keepPreserved: c.opts.KeepPreservedOnScaleDown}
	all, err := c.machines.Machines(set.Namespace).List(everything)
	if err != nil {
		return nil, fmt.Errorf("listing machines: %w", err)
	}
	if s.invalid = invalid(set); s.invalid != "" {
		// Without a usable selector the set's machines are those it
		// controls; the status keeps counting them.
		s.controlled = slices.DeleteFunc(all, func(m *v1alpha1.Machine) bool {
			ref := metav1.GetControllerOfNoCopy(m)
			return ref == nil || ref.UID != set.UID
		})
		return s, nil
	}
	selector, _ := metav1.LabelSelectorAsSelector(set.Spec.Selector) // validated above
	s.selector = selector.String()
	s.own = ownership.Decide(set, selector, all)
	if len(s.own.Adopt) > 0 {
		// The cache may be older than a delete and re-create of the set.
		ok, err := ownership.CanAdopt(ctx, c.client.MachineV1alpha1().MachineSets(set.Namespace).Get, set)
		if err != nil {
			s.adoptErr = fmt.Errorf("confirming machine set before adoption: %w", err)
		}
		if ok {
			s.adopt = s.own.Adopt
		}
	}
	s.frozen = machinestate.FrozenReason(ctx, "set", set.Labels, c.opts.SafetyGate)
	if s.classReason, s.noClass, err = c.unusableClass(set); err != nil {
		return nil, err
	}
	s.policy, s.policyErr = policyOf(set, c.opts.DeletionPolicy)
	s.wanted, s.capped = wantedReplicas(set, c.opts.MaxReplicas)
	s.foreign = c.prov.foreign(key, set, s.owned(), machinestate.ForeignMachines(set), func() []*v1alpha1.MachineSet { return c.siblings(set) },
		s.now, c.exp.TTL())
	return s, nil
}

// siblings are the other sets, in the cache, with set's controller (its
// deployment); none for a set without one.
func (c *Controller) siblings(set *v1alpha1.MachineSet) []*v1alpha1.MachineSet {
	owner := metav1.GetControllerOfNoCopy(set)
	if owner == nil {
		return nil
	}
	all, err := c.sets.MachineSets(set.Namespace).List(everything)
	if err != nil {
		return nil // a lister's List does not fail; no sibling is the safe answer
	}
	return slices.DeleteFunc(all, func(s *v1alpha1.MachineSet) bool {
		ref := metav1.GetControllerOfNoCopy(s)
		return s.UID == set.UID || ref == nil || ref.UID != owner.UID
	})
}
