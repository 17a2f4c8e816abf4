package manager

import (
	"fmt"
	"sync"

	"k8s.io/client-go/informers"

	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/tolerant"
)

// sharedInformers hands the controller groups that run in this process
// one set of informers: a group that starts while another runs uses the
// informers that group started, and the informers stop when the last group
// stops. Each group having caches of its own, as each of MCM's processes
// has, would keep every machine and node twice in memory for nothing: the
// caches follow the same objects. The controllers remove their event
// handlers when they stop (their Run), so a group that stops leaves
// nothing behind on informers that go on for the other.
type sharedInformers struct {
	// build is held while a group builds its controllers on the set and
	// starts what they asked for: informers take indexes, transforms and
	// handlers one at a time.
	build sync.Mutex

	mu    sync.Mutex
	users int
	set   *informerSet // nil while no group runs
}

// informerSet is one set of informer factories and the channel that
// stops them.
type informerSet struct {
	machines externalversions.SharedInformerFactory
	control  informers.SharedInformerFactory
	target   informers.SharedInformerFactory // nil without a target cluster
	stop     chan struct{}
}

// acquire returns the set that runs, or a new one built from cc's clients
// when none does. Every acquire is followed by a release.
func (s *sharedInformers) acquire(cc ControllerContext, opts tolerant.Options) (*informerSet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil {
		ns := cc.Config.Namespace
		// One stored object that cannot be decoded must not keep every
		// informer of its kind from syncing: it is reported and left out.
		machines, err := tolerant.NewSharedInformerFactory(cc.Machines, ns, 0, opts)
		if err != nil {
			return nil, fmt.Errorf("machine informers: %w", err)
		}
		set := &informerSet{
			machines: machines,
			control:  informers.NewSharedInformerFactoryWithOptions(cc.ControlCore, 0, informers.WithNamespace(ns)),
			stop:     make(chan struct{}),
		}
		if cc.TargetCore != nil {
			set.target = informers.NewSharedInformerFactory(cc.TargetCore, 0)
		}
		s.set = set
	}
	s.users++
	return s.set, nil
}

// release ends one acquire; the last one stops the informers and waits
// until they have stopped.
func (s *sharedInformers) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users--
	if s.users > 0 {
		return
	}
	set := s.set
	s.set = nil
	close(set.stop)
	set.machines.Shutdown()
	set.control.Shutdown()
	if set.target != nil {
		set.target.Shutdown()
	}
}

// start starts the informers asked for since the last start; those
// running go on.
func (set *informerSet) start() {
	set.machines.Start(set.stop)
	set.control.Start(set.stop)
	if set.target != nil {
		set.target.Start(set.stop)
	}
}

// waitForCacheSync waits until every started informer synced or stop is
// closed, and returns whether all synced.
func (set *informerSet) waitForCacheSync(stop <-chan struct{}) bool {
	synced := true
	for _, ok := range set.machines.WaitForCacheSync(stop) {
		synced = synced && ok
	}
	for _, ok := range set.control.WaitForCacheSync(stop) {
		synced = synced && ok
	}
	if set.target != nil {
		for _, ok := range set.target.WaitForCacheSync(stop) {
			synced = synced && ok
		}
	}
	return synced
}
