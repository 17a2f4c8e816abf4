// Package crashtest kills a controller in the middle of its work in tests
// on fake clientsets: a Switch lets the n-th API write of one controller
// incarnation through and fails every later call of that incarnation, as if
// the process died right after the write. Crash tests run incarnation after
// incarnation on the same fake clientsets and check that the world they
// leave is consistent.
//
// # Usage
//
//	ctx, cancel := context.WithCancel(ctx)
//	s := crashtest.New(crashAt, cancel)
//	s.Attach(&client.Fake, &core.Fake)
//	defer s.Detach()
//	... run a controller on client and core with ctx ...
package crashtest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// ErrCrashed is what every call of a dead incarnation returns.
var ErrCrashed = errors.New("crashed")

// Switch kills one incarnation after its n-th API write.
type Switch struct {
	crashAt int32 // 0: never
	cancel  context.CancelFunc
	writes  atomic.Int32
	dead    atomic.Bool

	mu       sync.Mutex
	attached []*k8stesting.Fake
	reactor  *k8stesting.SimpleReactor
}

// New returns a switch that lets crashAt writes (create, update, patch,
// delete) through, then cancels the incarnation's context with cancel and
// fails every later call. crashAt 0 never crashes.
func New(crashAt int32, cancel context.CancelFunc) *Switch {
	s := &Switch{crashAt: crashAt, cancel: cancel}
	s.reactor = &k8stesting.SimpleReactor{Verb: "*", Resource: "*", Reaction: s.react}
	return s
}

// Dead reports whether the incarnation has crashed; fakes of other
// dependencies (a driver) fail their calls once it has.
func (s *Switch) Dead() bool { return s.dead.Load() }

// Writes is how many writes the incarnation made, the fatal one included.
func (s *Switch) Writes() int32 { return s.writes.Load() }

func (s *Switch) react(action k8stesting.Action) (bool, runtime.Object, error) {
	if s.dead.Load() {
		return true, nil, ErrCrashed
	}
	switch action.GetVerb() {
	case "create", "update", "patch", "delete":
		if n := s.writes.Add(1); s.crashAt > 0 && n == s.crashAt {
			s.dead.Store(true)
			s.cancel()
		}
	}
	return false, nil, nil
}

// Attach puts the switch in front of every reaction of the fakes.
func (s *Switch) Attach(fakes ...*k8stesting.Fake) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range fakes {
		f.Lock()
		f.ReactionChain = append([]k8stesting.Reactor{s.reactor}, f.ReactionChain...)
		f.Unlock()
		s.attached = append(s.attached, f)
	}
}

// Detach takes the switch out of the fakes it was attached to, so that the
// next incarnation's calls pass.
func (s *Switch) Detach() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.attached {
		f.Lock()
		f.ReactionChain = slices.DeleteFunc(f.ReactionChain, func(r k8stesting.Reactor) bool { return r == k8stesting.Reactor(s.reactor) })
		f.Unlock()
	}
	s.attached = nil
}
