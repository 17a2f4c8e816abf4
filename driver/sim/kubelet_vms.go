package sim

import (
	"cmp"
	"slices"
	"time"
)

// vmRereadPeriod bounds how long the kubelet goes on with a snapshot of a
// source that notifies changes. VM.StateUntil is on the source's clock,
// which need not be the kubelet's (a test may step a fake clock of the
// cloud's); re-reading now and then keeps a transition that the kubelet's
// clock does not see coming from going unnoticed for good.
const vmRereadPeriod = 5 * time.Second

// changeNotifier is the optional part of a VMSource that lets the kubelet
// skip reading VMs that did not change; *Cloud has it.
type changeNotifier interface {
	Changed() <-chan struct{}
}

// sharedSource is a VMSource whose snapshots may share the source's maps
// and slices, which the kubelet only reads; *Cloud is one.
type sharedSource interface {
	sharedVMs() []VM
}

// vmView is the kubelet's last snapshot of its VMSource, indexed for a
// sync. It is used by one goroutine at a time (Run's).
type vmView struct {
	// changed is the source's change channel taken before the snapshot was
	// read (nil for a source that notifies no changes).
	changed <-chan struct{}
	read    time.Time // when the snapshot was read, on the kubelet's clock
	// until is the earliest VM.StateUntil of the snapshot: then a state ends
	// by itself without a change being notified. Zero if none ends so.
	until time.Time

	known         map[string]struct{} // node names of every VM that exists
	running       map[string]struct{} // node names of Running, initialized VMs
	runningSorted []VM                // the same, by node name
}

// get returns the view of the VMs at now, reading the source again only if
// it may have changed since the last read.
func (v *vmView) get(source VMSource, now time.Time) *vmView {
	if v.fresh(now) {
		return v
	}
	notifier, ok := source.(changeNotifier)
	v.changed = nil
	if ok {
		v.changed = notifier.Changed() // before the snapshot: miss no change
	}
	var vms []VM
	if shared, ok := source.(sharedSource); ok {
		vms = shared.sharedVMs()
	} else {
		vms = source.VMs()
	}
	v.read = now
	v.until = time.Time{}
	v.known = make(map[string]struct{}, len(vms))
	v.running = make(map[string]struct{}, len(vms))
	v.runningSorted = v.runningSorted[:0]
	for _, vm := range vms {
		v.known[vm.NodeName] = struct{}{}
		if !vm.StateUntil.IsZero() && (v.until.IsZero() || vm.StateUntil.Before(v.until)) {
			v.until = vm.StateUntil
		}
		if vm.State == VMRunning && vm.Initialized {
			v.running[vm.NodeName] = struct{}{}
			v.runningSorted = append(v.runningSorted, vm)
		}
	}
	slices.SortFunc(v.runningSorted, func(a, b VM) int { return cmp.Compare(a.NodeName, b.NodeName) })
	return v
}

// fresh reports whether the snapshot still shows the source as it is.
func (v *vmView) fresh(now time.Time) bool {
	if v.changed == nil || now.Sub(v.read) >= vmRereadPeriod || (!v.until.IsZero() && !now.Before(v.until)) {
		return false
	}
	select {
	case <-v.changed:
		return false
	default:
		return true
	}
}
