package main

import (
	"sync"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/workqueue"
)

// floorCheck counts the available machines on every event of the demo's
// machine informer, in the order the watch delivers them: the table is
// redrawn from the cache at most once per batch of events, which could
// hide a dip below the floor that lasts less than a redraw.
type floorCheck struct {
	done v1alpha1.MachinePhase // the phase of an available machine

	mu        sync.Mutex
	up        map[string]bool // machines in the done phase and not being deleted
	available int             // len(up)
	armed     bool
	lowest    int // fewest available machines since arm
}

func newFloorCheck(done v1alpha1.MachinePhase) *floorCheck {
	return &floorCheck{done: done, up: map[string]bool{}}
}

// observe records one event; gone is true for a deletion.
func (f *floorCheck) observe(obj any, gone bool) {
	m, ok := workqueue.ObjectOf(obj).(*v1alpha1.Machine)
	if !ok {
		return
	}
	up := !gone && m.DeletionTimestamp == nil && m.Status.CurrentStatus.Phase == f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	if up {
		f.up[m.Name] = true
	} else {
		delete(f.up, m.Name)
	}
	f.available = len(f.up)
	if f.armed {
		f.lowest = min(f.lowest, f.available)
	}
}

// armAt starts recording the fewest available machines if the events so
// far leave at least n available, and tells whether it did. The cache can
// be a few events ahead of this count: arming from a count that has not
// caught up would report a dip that never was.
func (f *floorCheck) armAt(n int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.available < n {
		return false
	}
	f.armed, f.lowest = true, f.available
	return true
}

// counts returns the fewest available machines any event left since
// armAt, and the available machines now.
func (f *floorCheck) counts() (lowest, available int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lowest, f.available
}
