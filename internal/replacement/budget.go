package replacement

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	machineinformers "github.com/mcmkit/mcm/client/informers/externalversions/machine/v1alpha1"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// DefaultHoldTTL is how long an allowed replacement counts although the
// cache does not show it: a watch normally delivers the Failed phase within
// a second; a minute covers a slow one, and a write that never happened
// (the caller crashed before telling the budget) frees its slot after that.
const DefaultHoldTTL = time.Minute

// Options configures a Budget. The zero value allows one replacement at a
// time per MachineSet; with MachineSets, one per deployment, as MCM.
type Options struct {
	// Max is how many machines of one deployment may be in replacement at
	// once (Failed, being deleted, or not up yet: phase empty, Pending or
	// CrashLoopBackOff, as MCM counts them) before another is marked
	// Failed: a number, or a percentage of the deployment's machines
	// (rounded down, at least 1). Nil means 1.
	Max *intstr.IntOrString
	// MaxUnhealthy, when set, lets no machine of a deployment be marked
	// Failed by its health timeout while more of its machines are
	// unhealthy (Unknown or Failed) than this number or percentage
	// (rounded down): the remediation short-circuit (see the package
	// documentation). Nil means no such limit.
	MaxUnhealthy *intstr.IntOrString
	// MachineSets is the cache through which a machine's set leads to its
	// deployment (the machine's controller reference names the set, the
	// set's names the deployment). Nil counts each set's machines on
	// their own: a deployment in a rollout, with two sets, then has a
	// budget per set. New reads it; the caller starts it.
	MachineSets machineinformers.MachineSetInformer
	// HoldTTL: see DefaultHoldTTL. Zero means DefaultHoldTTL.
	HoldTTL time.Duration
	// Clock is the time source. Nil means the real clock.
	Clock clock.PassiveClock
}

// Budget is the replacement budget. Create it with New.
type Budget struct {
	machines     cache.Indexer
	sets         machinelisters.MachineSetLister // nil without Options.MachineSets
	max          intstr.IntOrString
	maxUnhealthy *intstr.IntOrString
	ttl          time.Duration
	clock        clock.PassiveClock

	mu sync.Mutex
	// held: machines this budget allowed to be replaced, by machine key,
	// until the cache shows them Failed or gone.
	held map[string]hold
}

// hold is a slot a yes of MayReplace took: for a machine of group, since
// at.
type hold struct {
	group string
	at    time.Time
}

// New returns a budget over the machines of the informer; it adds an
// index to the informer, so call it before the informer starts. It starts
// nothing.
func New(machines machineinformers.MachineInformer, opts Options) (*Budget, error) {
	if machines == nil {
		return nil, errors.New("replacement budget: a machine informer is required")
	}
	b := &Budget{max: intstr.FromInt32(1), ttl: opts.HoldTTL, clock: opts.Clock, held: map[string]hold{}}
	if opts.Max != nil {
		b.max = *opts.Max
		if _, err := resolveMax(b.max, 1); err != nil {
			return nil, fmt.Errorf("replacement budget: %w", err)
		}
	}
	if err := ValidMaxUnhealthy(opts.MaxUnhealthy); err != nil {
		return nil, fmt.Errorf("replacement budget: %w", err)
	}
	b.maxUnhealthy = opts.MaxUnhealthy
	if b.ttl < 0 {
		return nil, fmt.Errorf("replacement budget: HoldTTL must not be negative, got %v", b.ttl)
	}
	if b.ttl == 0 {
		b.ttl = DefaultHoldTTL
	}
	if b.clock == nil {
		b.clock = clock.RealClock{}
	}
	inf := machines.Informer()
	if err := machinestate.EnsureIndex(inf, indexByControllingSet, controllingSetIndex); err != nil {
		return nil, fmt.Errorf("replacement budget: adding machine index: %w", err)
	}
	b.machines = inf.GetIndexer()
	if opts.MachineSets != nil {
		b.sets = opts.MachineSets.Lister()
	}
	return b, nil
}

// setOf looks a set up in the cache; nil without one.
func (b *Budget) setOf(namespace, name string) *v1alpha1.MachineSet {
	if b.sets == nil {
		return nil
	}
	s, err := b.sets.MachineSets(namespace).Get(name)
	if err != nil {
		return nil
	}
	return s
}

// members are the cached machines of group g: of a deployment, those its
// sets control and created (createdBy); of a set not known, all it
// controls.
func (b *Budget) members(g replacementGroup) []*v1alpha1.Machine {
	var out []*v1alpha1.Machine
	add := func(uid types.UID, foreign map[types.UID]bool) {
		objs, _ := b.machines.ByIndex(indexByControllingSet, setIndexKey(g.Namespace, uid)) // the index exists: New added it
		for _, o := range objs {
			if m, ok := o.(*v1alpha1.Machine); ok && !foreign[m.UID] {
				out = append(out, m)
			}
		}
	}
	if g.Kind != machineDeploymentGVK.Kind {
		add(g.UID, nil)
		return out
	}
	// Only a known set leads to a deployment group: b.sets is set.
	sets, _ := b.sets.MachineSets(g.Namespace).List(labels.Everything()) // a cache read never fails
	for _, s := range sets {
		if dg, ok := deploymentGroupOf(s); ok && dg.UID == g.UID {
			add(s.UID, machinestate.ForeignMachines(s))
		}
	}
	return out
}

func machineKey(m *v1alpha1.Machine) string { return cache.NewObjectName(m.Namespace, m.Name).String() }

// MayReplace reports whether the unhealthy machine m may be marked Failed
// now. A yes holds a slot of m's group for m until Replaced is called (or
// DefaultHoldTTL passes); a no says why. Machines of no deployment are
// never held back; which machines are a deployment's is decided by
// ownership (see groupOf), never by their labels.
func (b *Budget) MayReplace(_ context.Context, m *v1alpha1.Machine) (bool, string) {
	g, ok := groupOf(m, b.setOf)
	if !ok {
		return true, ""
	}
	members := b.members(g)
	gkey := g.key()
	now := b.clock.Now()
	self := machineKey(m)

	b.mu.Lock()
	defer b.mu.Unlock()
	inFlight := map[string]bool{}
	present := map[string]bool{}
	shown := map[string]bool{}
	for _, s := range members {
		key := machineKey(s)
		present[key] = true
		switch {
		case s.DeletionTimestamp != nil:
			shown[key], inFlight[key] = true, true
		case replacing(s.Status.CurrentStatus.Phase):
			// A machine whose preservation holds is kept, not
			// replaced (as MCM's canMarkMachineFailed); once it runs
			// out, the machine counts again.
			shown[key] = true
			if !machinestate.Preserved(s, now) {
				inFlight[key] = true
			}
		}
	}
	// A hold counts in the group it was taken in: a set adopted by a
	// deployment in between (rare) frees its holds after the TTL at most.
	for key, h := range b.held {
		if now.Sub(h.at) > b.ttl {
			delete(b.held, key) // never happened, or shown long since: of any group, so none stays forever
			continue
		}
		if h.group != gkey {
			continue
		}
		if !present[key] || shown[key] {
			delete(b.held, key) // the cache shows it, or it is gone
			continue
		}
		if key != self {
			inFlight[key] = true
		}
	}
	if b.maxUnhealthy != nil {
		if r := Assess(members, *b.maxUnhealthy, now); r.Blocked() {
			return false, r.Message(g.String())
		}
	}
	limit, _ := resolveMax(b.max, len(members)) // validated by New
	if len(inFlight) >= limit {
		return false, fmt.Sprintf("%d of at most %d machines of %s are being replaced", len(inFlight), limit, g)
	}
	b.held[self] = hold{group: gkey, at: now}
	return true, ""
}

// Replaced tells the budget whether m, which MayReplace allowed, was marked
// Failed. If it was, its slot stays held until the cache shows it; if the
// write failed, the slot is free at once.
func (b *Budget) Replaced(_ context.Context, m *v1alpha1.Machine, marked bool) {
	key := machineKey(m)
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.held[key]
	switch {
	case !ok:
	case marked:
		h.at = b.clock.Now()
		b.held[key] = h
	default:
		delete(b.held, key)
	}
}

// replacing reports whether a machine in phase counts as a replacement in
// flight: Failed (about to be replaced), or not up yet (a replacement on
// its way). Counting the new machines, as MCM does, keeps a deployment
// from losing a second healthy-looking machine before the first one's
// replacement has joined.
func replacing(phase v1alpha1.MachinePhase) bool {
	switch phase {
	case v1alpha1.MachineFailed, "", v1alpha1.MachinePending, v1alpha1.MachineCrashLoopBackOff, v1alpha1.MachineTerminating:
		return true
	}
	return false
}

// resolveMax turns Max into a count for a deployment of total machines: a
// percentage rounds down but never below 1.
func resolveMax(v intstr.IntOrString, total int) (int, error) {
	n, err := scaledIntOrPercent(v, total)
	if err != nil {
		return 0, fmt.Errorf("Max: %w", err)
	}
	if v.Type == intstr.String && n < 1 {
		n = 1
	}
	return n, nil
}

// scaledIntOrPercent is v, a non-negative number or a percentage of total
// rounded down.
func scaledIntOrPercent(v intstr.IntOrString, total int) (int, error) {
	if v.Type == intstr.String && !strings.HasSuffix(v.StrVal, "%") {
		return 0, fmt.Errorf("%q: want a number or a percentage", v.StrVal)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, total, false)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("must not be negative, got %v", v.String())
	}
	return n, nil
}
