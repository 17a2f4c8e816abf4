package safety

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	machineinformers "github.com/mcmkit/mcm/client/informers/externalversions/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machineindex"
)

// DefaultHoldTTL is how long an allowed replacement counts although the
// cache does not show it: a watch normally delivers the Failed phase within
// a second; a minute covers a slow one, and a write that never happened
// (the caller crashed before telling the budget) frees its slot after that.
const DefaultHoldTTL = time.Minute

// indexByDeployment indexes machines by "namespace/deployment".
const indexByDeployment = "mcmkit.io/machine-by-deployment"

// BudgetOptions configures a Budget. The zero value is MCM's behaviour: one
// replacement at a time per deployment.
type BudgetOptions struct {
	// Max is how many machines of one deployment may be in replacement at
	// once (Failed, being deleted, or not up yet: phase empty, Pending or
	// CrashLoopBackOff, as MCM counts them) before another is marked
	// Failed: a number, or a percentage of the deployment's machines
	// (rounded down, at least 1). Nil means 1.
	Max *intstr.IntOrString
	// MaxUnhealthy, when set, lets no machine of a deployment be replaced
	// while more of its machines are unhealthy (Unknown or Failed) than
	// this number or percentage (rounded down): see Options.MaxUnhealthy
	// of the controller. Nil means no such limit.
	MaxUnhealthy *intstr.IntOrString
	// HoldTTL: see DefaultHoldTTL. Zero means DefaultHoldTTL.
	HoldTTL time.Duration
	// Clock is the time source. Nil means the real clock.
	Clock clock.PassiveClock
}

// Budget is the replacement budget. Create it with NewBudget.
type Budget struct {
	machines     cache.Indexer
	max          intstr.IntOrString
	maxUnhealthy *intstr.IntOrString
	ttl          time.Duration
	clock        clock.PassiveClock

	mu sync.Mutex
	// held: machines this budget allowed to be replaced, by deployment key,
	// with when, until the cache shows them Failed or gone.
	held map[string]map[string]time.Time
}

// NewBudget returns a budget over the machines of the informer; it adds an
// index to the informer, so call it before the informer starts. It starts
// nothing.
func NewBudget(machines machineinformers.MachineInformer, opts BudgetOptions) (*Budget, error) {
	if machines == nil {
		return nil, errors.New("safety: a machine informer is required")
	}
	b := &Budget{max: intstr.FromInt32(1), ttl: opts.HoldTTL, clock: opts.Clock, held: map[string]map[string]time.Time{}}
	if opts.Max != nil {
		b.max = *opts.Max
		if _, err := resolveMax(b.max, 1); err != nil {
			return nil, fmt.Errorf("safety: %w", err)
		}
	}
	if err := validMaxUnhealthy(opts.MaxUnhealthy); err != nil {
		return nil, fmt.Errorf("safety: %w", err)
	}
	b.maxUnhealthy = opts.MaxUnhealthy
	if b.ttl < 0 {
		return nil, fmt.Errorf("safety: HoldTTL must not be negative, got %v", b.ttl)
	}
	if b.ttl == 0 {
		b.ttl = DefaultHoldTTL
	}
	if b.clock == nil {
		b.clock = clock.RealClock{}
	}
	inf := machines.Informer()
	if err := machineindex.Ensure(inf, indexByDeployment, deploymentIndex); err != nil {
		return nil, fmt.Errorf("safety: adding machine index: %w", err)
	}
	b.machines = inf.GetIndexer()
	return b, nil
}

func deploymentIndex(obj any) ([]string, error) {
	m, ok := obj.(*v1alpha1.Machine)
	if !ok || deploymentOf(m) == "" {
		return nil, nil
	}
	return []string{deploymentKey(m)}, nil
}

func deploymentOf(m *v1alpha1.Machine) string {
	return m.Labels[v1alpha1.MachineDeploymentNameLabelKey]
}

func deploymentKey(m *v1alpha1.Machine) string {
	return cache.NewObjectName(m.Namespace, deploymentOf(m)).String()
}

func machineKey(m *v1alpha1.Machine) string { return cache.NewObjectName(m.Namespace, m.Name).String() }

// MayReplace reports whether the unhealthy machine m may be marked Failed
// now. A yes holds a slot of m's deployment for m until Replaced is
// called (or DefaultHoldTTL passes); a no says why. Machines without a
// deployment are never held back.
func (b *Budget) MayReplace(_ context.Context, m *v1alpha1.Machine) (bool, string) {
	if deploymentOf(m) == "" {
		return true, ""
	}
	dkey := deploymentKey(m)
	objs, _ := b.machines.ByIndex(indexByDeployment, dkey) // the index exists: NewBudget added it
	now := b.clock.Now()
	self := machineKey(m)

	b.mu.Lock()
	defer b.mu.Unlock()
	inFlight := map[string]bool{}
	present := map[string]bool{}
	var siblings []*v1alpha1.Machine // for MaxUnhealthy only
	for _, o := range objs {
		s, ok := o.(*v1alpha1.Machine)
		if !ok {
			continue
		}
		if b.maxUnhealthy != nil {
			siblings = append(siblings, s)
		}
		key := machineKey(s)
		present[key] = true
		if s.DeletionTimestamp != nil || replacing(s.Status.CurrentStatus.Phase) {
			inFlight[key] = true
		}
	}
	for key, at := range b.held[dkey] {
		if !present[key] || inFlight[key] || now.Sub(at) > b.ttl {
			delete(b.held[dkey], key) // the cache shows it (or it is gone, or it never happened)
			continue
		}
		if key != self {
			inFlight[key] = true
		}
	}
	if b.maxUnhealthy != nil {
		if r := assessRemediation(siblings, *b.maxUnhealthy); r.Blocked() {
			return false, r.message(deploymentOf(m))
		}
	}
	limit, _ := resolveMax(b.max, len(objs)) // validated by NewBudget
	if len(inFlight) >= limit {
		return false, fmt.Sprintf("%d of at most %d machines of deployment %q are being replaced",
			len(inFlight), limit, deploymentOf(m))
	}
	if b.held[dkey] == nil {
		b.held[dkey] = map[string]time.Time{}
	}
	b.held[dkey][self] = now
	return true, ""
}

// Replaced tells the budget whether m, which MayReplace allowed, was marked
// Failed. If it was, its slot stays held until the cache shows it; if the
// write failed, the slot is free at once.
func (b *Budget) Replaced(_ context.Context, m *v1alpha1.Machine, marked bool) {
	if deploymentOf(m) == "" {
		return
	}
	dkey := deploymentKey(m)
	b.mu.Lock()
	defer b.mu.Unlock()
	if marked {
		if b.held[dkey] != nil {
			b.held[dkey][machineKey(m)] = b.clock.Now()
		}
		return
	}
	delete(b.held[dkey], machineKey(m))
	if len(b.held[dkey]) == 0 {
		delete(b.held, dkey)
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
