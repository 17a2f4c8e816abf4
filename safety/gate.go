package safety

import "context"

// Gate is the question the machine, MachineSet and MachineDeployment
// controllers ask before they add machines (and, in the machine
// controller, before a health transition): is creation frozen? While it
// is, nothing is created; deletion and scale-down go on. The answer is
// cheap and may change at any time, so the controllers ask it at every
// sync instead of caching it.
//
// The API-server outage gate (*outage.Gate, package safety/outage)
// implements it: frozen while the API servers have been out of reach for
// longer than the status-check timeout. One gate value is meant to be
// passed to all three controllers, so that they freeze and thaw together.
// GateFunc adapts a function, for embedders with a freeze of their own
// and for tests.
type Gate interface {
	Frozen(ctx context.Context) bool
}

// GateFunc adapts a function to Gate.
type GateFunc func(ctx context.Context) bool

// Frozen calls f.
func (f GateFunc) Frozen(ctx context.Context) bool { return f(ctx) }
