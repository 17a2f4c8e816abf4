package machine

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// Which events sync a machine, and when a failed creation may run again.
//
// A machine is synced on every change of it but the controller's own
// status writes: its labels, annotations (hooks, preserve), finalizers,
// deletion timestamp and spec are others' to change, and status written
// by anyone else is corrected. The sync that wrote a status planned it in
// full and asked for its own requeue, so the write's event brings nothing
// new; syncing on it would run a failed creation again at once, whatever
// its backoff (MCM skips every update that leaves the generation alone).
// A sync that found the cache older than its own last write (see
// expectations.Writes) waits for that write's event, which then syncs the
// machine.
//
// Events are not the only way in: a node, a class or a creation slot may
// queue a machine too, and a sync that waited for its write asks again
// soon. A failed creation's backoff is therefore also kept by the sync
// (failureCounter.held): the creation flow runs again only once it has
// passed, or once the machine's spec, its class or its secret changed.

// ownWrite is what the controller knows of a machine's new version.
type ownWrite struct {
	// Status: the version is the controller's own status write.
	Status bool
	// Awaited: a sync found the cache older than that write and waits for
	// it.
	Awaited bool
}

// updateQueues decides whether an update of a machine from old to m
// queues it: always, unless the update is the controller's own status
// write that no sync waits for and that changed nothing but the status
// (and the resourceVersion and managed fields any write moves). It is
// pure.
func updateQueues(old, m *v1alpha1.Machine, own ownWrite) bool {
	return !own.Status || own.Awaited || !onlyStatusChanged(old, m)
}

// onlyStatusChanged reports whether old and m differ in nothing but their
// status, resourceVersion and managed fields.
func onlyStatusChanged(old, m *v1alpha1.Machine) bool {
	a, b := *old, *m // shallow: only these copies' own fields are cleared
	for _, x := range []*v1alpha1.Machine{&a, &b} {
		x.Status = v1alpha1.MachineStatus{}
		x.ResourceVersion, x.ManagedFields = "", nil
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

// inputsChanged reports whether an update of a machine changed what its
// creation is made from (its spec: the generation moved), so that a failed
// creation is tried again at once rather than after its backoff.
func inputsChanged(old, m *v1alpha1.Machine) bool {
	return old == nil || old.Generation != m.Generation
}

// classChanged reports whether a class event changes what the machines
// of the class are created from: it came or went, or its generation moved
// (a finalizer the controller adds does not move it).
func classChanged(old, cl *v1alpha1.MachineClass) bool {
	return old == nil || old.Generation != cl.Generation
}

// secretChanged reports whether a secret event changes what machines are
// created with: it came or went, or its data changed (a finalizer does
// not).
func secretChanged(old, s *corev1.Secret) bool {
	return old == nil || old.Type != s.Type || !apiequality.Semantic.DeepEqual(old.Data, s.Data)
}

// statusWrites remembers, per machine key, the resourceVersion of the
// controller's last status write until the machine's update event for it
// is handled (take), and whether a sync waits for that event (await).
// An entry whose event never comes as such (a relist joins it with later
// writes) is replaced by the next status write, or dropped with the
// machine.
type statusWrites struct {
	mu sync.Mutex
	m  map[string]statusWrite
}

type statusWrite struct {
	resourceVersion string
	awaited         bool
}

// wrote records a status write of key answered with resourceVersion.
func (s *statusWrites) wrote(key, resourceVersion string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]statusWrite{}
	}
	s.m[key] = statusWrite{resourceVersion: resourceVersion}
}

// await marks key's status write, if its event has not come yet, as
// waited for by a sync.
func (s *statusWrites) await(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.m[key]; ok {
		w.awaited = true
		s.m[key] = w
	}
}

// take tells whether resourceVersion of key is the controller's status
// write, and forgets the write if it is: its event is being handled.
func (s *statusWrites) take(key, resourceVersion string) ownWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.m[key]
	if !ok || w.resourceVersion != resourceVersion {
		return ownWrite{}
	}
	delete(s.m, key)
	return ownWrite{Status: true, Awaited: w.awaited}
}

// forget drops what is recorded for key.
func (s *statusWrites) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}
