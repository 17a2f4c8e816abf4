// Package explain puts a machine's state, and a drain's plan, into a few
// lines for people: kubectl mcm why and kubectl mcm drain print them.
//
// Machine reads a machine, its node and its events — the phase and since
// when, what it does now (as kubectl mcm tree says it), the last
// operation, the node's readiness and conditions, the in-place update, the
// drain and the preservation — and Plan a drain.Plan: one line per pod
// with drain.Decide's action and reason. Both are pure; the time is an
// argument.
//
// # Usage
//
//	fmt.Print(explain.Machine(explain.MachineState{Machine: m, Node: node, Events: events}, time.Now()))
//	plan, err := drainer.Plan(ctx, node)
//	fmt.Print(explain.Plan(plan))
package explain
