// Package parallel runs a controller's independent API calls side by side,
// a bounded number at a time: the deletions of a MachineSet's scale-down,
// the creations of one slow-start batch, the rollout marks of a
// deployment's nodes, the simulated kubelet's node and lease writes.
// Issued one after the other, a hundred such calls take seconds on a
// loaded API server; a goroutine per call, unbounded, is a storm.
//
// # Usage
//
//	work := make([]func(context.Context) error, 0, len(nodes))
//	for _, n := range nodes {
//		work = append(work, func(ctx context.Context) error { return mark(ctx, n) })
//	}
//	errs := parallel.Run(ctx, 16, work) // the failures, in the order of work
//	return errors.Join(errs...)
package parallel
