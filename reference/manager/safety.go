package manager

import (
	"fmt"
	"slices"

	"github.com/mcmkit/mcm/safety/budget"
	"github.com/mcmkit/mcm/safety/outage"
)

// safetyParts are the safety pieces the manager builds once and hands to
// every controller that asks them (ControllerContext.Outage and
// .Replacement), rather than one controller providing them to the others:
// the API-server outage gate, whose check runs as the safety controller,
// and the replacement budget.
type safetyParts struct {
	// outage is built by buildSafety; nil before.
	outage *outage.Gate
	// budgetOpts are the budget's; followSets: its groups are deployments
	// (through a MachineSet informer), not sets.
	budgetOpts budget.Options
	followSets bool
	// budget is built on the first informer set a group acquires: the set
	// every group running at a time shares, so one budget for them, whose
	// holds every machine worker sees.
	budget *budget.Budget
	on     *informerSet
}

// buildSafety builds the manager's outage gate on cc's clients and settles
// the budget's options for the controllers names, which are to run; from
// then on /readyz says when the gate is frozen. It returns cc with the
// gate.
func (m *Manager) buildSafety(cc ControllerContext, names []string) (ControllerContext, error) {
	maxUnhealthy, err := budget.ParseMaxUnhealthy(m.cfg.MachineMaxUnhealthy)
	if err != nil {
		return cc, fmt.Errorf("--machine-max-unhealthy: %w", err) // validated with the flags
	}
	gate, err := outage.New(cc.Machines, cc.TargetCore, outage.Options{
		StatusCheckPeriod: m.cfg.StatusCheckPeriod, StatusCheckTimeout: m.cfg.StatusCheckTimeout, ProbeNamespace: m.cfg.Namespace,
		Logger: m.log.WithName("safety"), Recorder: cc.Recorder, Registerer: m.reg})
	if err != nil {
		return cc, err
	}
	m.safety = safetyParts{outage: gate, budgetOpts: budget.Options{MaxUnhealthy: maxUnhealthy},
		// A budget per deployment follows each machine's set to its
		// deployment through a MachineSet informer: only when a controller
		// to run watches MachineSets anyway, so that no process watches a
		// resource that it was not asked to (nor needs RBAC for it).
		followSets: slices.ContainsFunc(names, func(n string) bool {
			return slices.Contains(m.opts.Controllers[n].Resources, "machinesets")
		})}
	m.state.update(func(s *state) { s.outage = gate })
	cc.Outage = gate
	return cc, nil
}

// replacementBudget is the manager's budget on set, built at the first
// call for set. Call it with the informers' build lock held: the budget
// adds an index to the machine informer.
func (p *safetyParts) replacementBudget(set *informerSet) (*budget.Budget, error) {
	if p.budget != nil && p.on == set {
		return p.budget, nil
	}
	opts := p.budgetOpts
	if p.followSets {
		opts.MachineSets = set.machines.Machine().V1alpha1().MachineSets()
	}
	b, err := budget.New(set.machines.Machine().V1alpha1().Machines(), opts)
	if err != nil {
		return nil, fmt.Errorf("replacement budget: %w", err)
	}
	p.budget, p.on = b, set
	return b, nil
}
