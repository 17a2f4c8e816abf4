// Package parallel runs a controller's independent API calls side by side,
// a bounded number at a time: the deletions of a MachineSet's scale-down,
// the creations of one slow-start batch, the rollout marks of a
// deployment's nodes, the simulated kubelet's node and lease writes.
// Issued one after the other, a hundred such calls take seconds on a
// loaded API server; a goroutine per call, unbounded, is a storm.
//
// It is the module's only fan-out: nothing in the module calls client-go's
// workqueue.ParallelizeUntil, which bounds the same way but suits these
// callers worse, and TestNoParallelizeUntil keeps it so. Its pieces
// return nothing, so each caller would keep an error per piece and
// collect them itself; Run returns the errors in the order of work, which
// the callers' events and sync errors are built from, so that a report
// does not change with the order the answers came in. And once its
// context is done it skips the pieces not started yet without a word;
// Run calls every piece and lets each report for itself (a request made
// with a done context fails with the context's error). A MachineSet's
// slow start counts on that: each creation records its outcome, and one
// never called would count as created.
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
