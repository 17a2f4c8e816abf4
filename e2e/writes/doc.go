// Package writes holds no code: its tests pin the API writes the machine,
// MachineSet and MachineDeployment controllers make, composed as the
// reference manager composes them, against client-go's fake API (fake
// clientsets whose tracker stamps resourceVersions, UIDs and creation
// times and honours finalizers, as the API server does) with the
// simulated cloud as the driver.
//
// The controllers do not Run: the tests call their reconcilers, every key
// of every one in a fixed order, round after round, and after each write
// wait until the informer caches show it, so a scenario takes the same
// writes on every run (see stack). The test plays the kubelet: when a
// round writes nothing, it registers the Node of one machine whose VM the
// machine controller recorded; so every count is that of a node that
// joins after the manager has done what it does before the join. Neither
// the node's registration nor the test's other writes (the objects it
// starts with, the MachineSet or MachineDeployment it posts, the template
// it changes) are counted. Each class is in use by a machine of a set of
// its own before and after what is counted: a class's finalizer comes
// with its first machine and goes with its last, not with each.
//
//   - TestSetCreatedMachineWrites: one machine a MachineSet creates, from
//     the set's POST to the machine Running with its Node finalized
//     (without and with a bootstrap token).
//   - TestRolloutWrites: a MachineDeployment of 3 machines (RollingUpdate,
//     maxSurge 1, maxUnavailable 0) moved to a new class, from the
//     template change until the rollout has settled: the new machines'
//     creation paths, the old machines' deletion paths, the status writes
//     and scale patches of the deployment and its sets.
//
// Counts are not timings: nothing here asserts how long anything takes.
//
// # Reading a failure
//
// Each test compares a map from "<verb> <resource>[/<subresource>]" to
// how many such writes were made with the figure it pins, and fails with
// a go-cmp diff: a line with "-" is the pinned figure, "+" the one
// measured, so a new key names the write that appeared and a changed
// count the one that was repeated or saved. Every write is also logged,
// in the order it was made, with its field manager (the controller that
// made it; deletions carry none), the object's name and the patch's body
// (go test -v), which tells which step of which controller made it. A
// count that went down is good news: check that crash safety still holds
// (machine/doc.go, Creation) and lower the figure.
//
// The controllers' Run, whose workers race their informers, now and then
// syncs from a cache that shows one write and not yet the next, and
// writes a status more than here: in the rollout, 10 to 12 status writes
// of the deployment in 15 runs, the other counts as here.
//
// # Usage
//
//	go test -race -count=5 ./e2e/writes/
package writes
