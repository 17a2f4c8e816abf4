// Package machinedraw draws machines for rapid properties of the event
// filters of the MachineSet and MachineDeployment controllers: a machine
// with every part a sync may read drawn from a few values either side of
// what matters (labels, annotations, owner, deletion, phase and its time,
// preservation, last operation, conditions, provider ID and class), and
// the same machine with one or two parts drawn again. The values are few
// on purpose: a filter that misses a change shows only when the property
// draws a value that changes a decision.
//
// # Usage
//
//	d := machinedraw.New(epoch) // the times drawn are around epoch
//	rapid.Check(t, func(t *rapid.T) {
//		old := d.Machine(t, base, set, "old")
//		updated := d.Mutate(t, old, set)
//		// compare the sync's decisions on old and updated with the filter's
//		// verdict on the pair
//	})
package machinedraw
