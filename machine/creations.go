package machine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// creationSlots bounds how many machines run the creation flow at once
// (Options.MaxConcurrentCreations). A creation holds its worker for as
// long as its driver calls take, up to their deadlines; with every worker
// in a hung creation, deletions and health checks would wait for the
// deadlines. Keeping some workers out of creations keeps them for the
// rest. A machine that finds every slot taken is remembered and queued
// again when a slot frees, so waiting costs no polling.
type creationSlots struct {
	mu sync.Mutex
	// limit is the number of slots; 0 until Run sets it, and then no
	// bound (ReconcileMachine called without Run).
	limit int
	held  int
	// waiting are the keys that found no slot free, oldest first.
	waiting []string
}

// setLimit sets the number of slots (Run does, from its worker count).
func (s *creationSlots) setLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = n
}

// take takes a slot for key, or, when none is free, remembers key as
// waiting and returns false.
func (s *creationSlots) take(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limit > 0 && s.held >= s.limit {
		if !slices.Contains(s.waiting, key) {
			s.waiting = append(s.waiting, key)
		}
		return false
	}
	s.held++
	s.waiting = slices.DeleteFunc(s.waiting, func(k string) bool { return k == key })
	return true
}

// give frees a slot and returns the waiting keys to queue again: as many
// as slots are free, oldest first. A woken key that no longer needs a
// slot (its machine was deleted, say) leaves its slot to the next give.
func (s *creationSlots) give() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held--
	n := min(len(s.waiting), s.limit-s.held)
	if s.limit == 0 {
		n = len(s.waiting)
	}
	wake := slices.Clone(s.waiting[:n])
	s.waiting = slices.Delete(s.waiting, 0, n)
	return wake
}

// defaultCreationSlots is Options.MaxConcurrentCreations's default for
// workers: four fifths of them, at least one, so that one worker in five
// (one at least, with two workers or more) never runs a creation.
func defaultCreationSlots(workers int) int {
	return max(1, workers-max(1, workers/5))
}

// creationLimit is the number of creation slots for Run's workers.
func (o *Options) creationLimit(workers int) (int, error) {
	n := o.MaxConcurrentCreations
	switch {
	case n == 0:
		return defaultCreationSlots(workers), nil
	case workers > 1 && n >= workers:
		return 0, fmt.Errorf("MaxConcurrentCreations (%d) must be below the machine workers (%d), or creations that hang "+
			"until their deadline would leave none for deletions and health checks", n, workers)
	}
	return n, nil
}

// takeCreationSlot takes a creation slot for the machine with key before
// its creation runs, and returns the function that frees it. With no slot
// free it returns nil and how long the machine may wait at most: it is
// queued again as soon as a slot frees, and after that long in any case,
// should the wake-up go to a machine that no longer needs it.
func (c *Controller) takeCreationSlot(ctx context.Context, key string) (func(), time.Duration) {
	if !c.creations.take(key) {
		logr.FromContextOrDiscard(ctx).V(2).Info("Every creation slot is taken; waiting for one", "slots", c.creationSlotCount())
		return nil, c.opts.HealthCheckPeriod
	}
	return func() {
		for _, k := range c.creations.give() {
			c.machineQueue.Add(k)
		}
	}, 0
}

func (c *Controller) creationSlotCount() int {
	c.creations.mu.Lock()
	defer c.creations.mu.Unlock()
	return c.creations.limit
}
