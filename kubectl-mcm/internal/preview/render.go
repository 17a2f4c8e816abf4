package preview

import (
	"fmt"
	"strings"

	"github.com/mcmkit/mcm/deployment"
)

// Render says what p means for deployment name, in a few lines.
func Render(name string, p deployment.Preview) string {
	var b strings.Builder
	fmt.Fprintf(&b, "MachineDeployment %s (%s):\n", name, p.Strategy)
	switch p.Change {
	case deployment.ChangeNone:
		b.WriteString("  No machine changes: the template is the same revision and its in-place parts are unchanged.\n")
	case deployment.ChangePropagate:
		fmt.Fprintf(&b, "  Propagation only: %d machine(s) and their nodes get the new node template, machine configuration\n"+
			"  or class kind in place; no machine is replaced or updated.\n", p.Machines)
	case deployment.ChangeRoll:
		fmt.Fprintf(&b, "  Rolls %d machine(s): new machines replace the old ones in %d wave(s) (maxSurge %d, maxUnavailable %d).\n",
			p.Machines, p.Waves, p.Surge, p.Unavailable)
	case deployment.ChangeInPlace:
		if p.Waves == 0 && p.Machines > 0 {
			fmt.Fprintf(&b, "  Updates %d machine(s) in place, when a person selects their nodes (orchestration Manual).\n", p.Machines)
		} else {
			fmt.Fprintf(&b, "  Updates %d machine(s) in place, on their VMs, in %d batch(es) of at most %d (maxUnavailable).\n",
				p.Machines, p.Waves, max(p.Unavailable, 1))
		}
	}
	if p.RollbackTo > 0 {
		fmt.Fprintf(&b, "  The template is revision %d's: its MachineSet becomes the new set again.\n", p.RollbackTo)
	}
	if p.Scale != nil {
		fmt.Fprintf(&b, "  Scales from %d to %d machines.\n", p.Scale[0], p.Scale[1])
	}
	if p.Paused {
		b.WriteString("  The deployment is paused: only the scale happens until it is resumed.\n")
	}
	if len(p.Fields) > 0 {
		fmt.Fprintf(&b, "  Because of: %s\n", strings.Join(p.Fields, ", "))
	}
	return b.String()
}
