package budget

import (
	"k8s.io/apimachinery/pkg/util/intstr"

	machineinformers "github.com/mcmkit/mcm/client/informers/externalversions/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/replacement"
)

// Budget is the replacement budget; it implements machine.ReplacementGate.
// Create it with New.
type Budget = replacement.Budget

// Options configures a Budget. The zero value allows one replacement at a
// time per MachineSet; with MachineSets, one per deployment, as MCM. See
// the fields: Max, MaxUnhealthy, MachineSets, HoldTTL, Clock.
type Options = replacement.Options

// DefaultHoldTTL is how long an allowed replacement counts although the
// cache does not show it: a watch normally delivers the Failed phase within
// a second; a minute covers a slow one, and a write that never happened
// (the caller crashed before telling the budget) frees its slot after that.
const DefaultHoldTTL = replacement.DefaultHoldTTL

// New returns a budget over the machines of the informer (and, with
// opts.MachineSets, of that informer's sets). It adds an index to the
// machine informer, so call it before the informer starts; it starts
// nothing.
func New(machines machineinformers.MachineInformer, opts Options) (*Budget, error) {
	return replacement.New(machines, opts)
}

// ParseMaxUnhealthy reads Options.MaxUnhealthy written as a flag value:
// empty is nil (no short-circuit), else a non-negative number or a
// percentage such as 40%.
func ParseMaxUnhealthy(s string) (*intstr.IntOrString, error) {
	return replacement.ParseMaxUnhealthy(s)
}
