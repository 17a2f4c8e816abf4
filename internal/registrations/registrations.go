// Package registrations keeps the event handlers a controller adds to the
// informers it is given, so that the controller can tell when they have
// seen each informer's initial list and remove them all when it stops.
// Informers outlive the controllers that use them — a manager that shares
// one set of informers between controllers that start and stop at
// different times, such as the groups of a manager that holds their
// leases one at a time — and a handler left behind would keep a stopped
// controller, and its memory, alive and called for every event.
//
// # Usage
//
//	var handlers registrations.Set
//	if err := handlers.Add(machines.Informer(), handlerFuncs); err != nil { ... }
//	// in Run:
//	defer handlers.RemoveAll(logger)
//	if !workqueue.WaitForCaches(ctx, handlers.Synced()...) { return nil }
package registrations

import (
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/cache"
)

// Set is the handlers one controller added. The zero value is empty and
// ready to use; it is safe for concurrent use.
type Set struct {
	mu   sync.Mutex
	regs []registration
}

type registration struct {
	informer cache.SharedIndexInformer
	handle   cache.ResourceEventHandlerRegistration
}

// Add adds h to informer and keeps its registration.
func (s *Set) Add(informer cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
	handle, err := informer.AddEventHandler(h)
	if err != nil {
		return fmt.Errorf("adding event handler: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.regs = append(s.regs, registration{informer: informer, handle: handle})
	return nil
}

// Synced returns, for each handler added, whether it has been delivered
// its informer's initial list: the condition to wait for before the
// first sync, also when the informer had synced long before the handler
// was added.
func (s *Set) Synced() []cache.InformerSynced {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]cache.InformerSynced, len(s.regs))
	for i, r := range s.regs {
		out[i] = r.handle.HasSynced
	}
	return out
}

// RemoveAll removes every handler added, and forgets them. An informer
// refuses only a registration that is not its own, which would be a bug:
// log says so.
func (s *Set) RemoveAll(log logr.Logger) {
	s.mu.Lock()
	regs := s.regs
	s.regs = nil
	s.mu.Unlock()
	for _, r := range regs {
		if err := r.informer.RemoveEventHandler(r.handle); err != nil {
			log.Error(err, "Removing an event handler failed")
		}
	}
}
