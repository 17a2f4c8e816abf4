package expectations

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// DefaultTTL is how long recorded expectations are trusted when
// Options.TTL is not set. It matches kube-controller-manager: long enough that
// a slow but healthy watch delivers its events first, short enough that a
// missed event only stalls a MachineSet for a few minutes.
const DefaultTTL = 5 * time.Minute

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// TTL is how long expectations are trusted after they were set. Once it
	// has passed, Satisfied reports true even if events are still missing,
	// because an event lost by the watch would otherwise block the owner
	// forever. Zero or negative means DefaultTTL.
	TTL time.Duration

	// Clock supplies the time used to stamp and expire expectations. Nil means
	// the real clock. Tests inject a fake to exercise expiry without sleeping.
	Clock clock.PassiveClock
}

// State classifies the expectations recorded for one key.
type State int

const (
	// StateFulfilled means nothing is outstanding: either no expectations
	// were ever recorded, they were forgotten with Delete, or every expected
	// creation and deletion has been observed or lowered.
	StateFulfilled State = iota
	// StatePending means creations or deletions are outstanding and the TTL
	// has not passed yet; the owner's informer cache cannot be trusted.
	StatePending
	// StateExpired means creations or deletions are still outstanding but
	// the TTL has passed. Satisfied reports true so the owner makes progress;
	// callers may want to log this, as it usually means a missed event.
	StateExpired
)

// String implements fmt.Stringer.
func (s State) String() string {
	switch s {
	case StateFulfilled:
		return "Fulfilled"
	case StatePending:
		return "Pending"
	case StateExpired:
		return "Expired"
	default:
		return "State(?)"
	}
}

// Store records, per owner key, how many creations and which deletions a
// controller has issued but not yet seen through its informer. It is safe for
// concurrent use. Create it with New.
//
// Keys whose expectations are fully observed are dropped, so memory is bounded
// by the number of owners with outstanding work. Expired entries are kept
// (Pending still reports them) until they are replaced, observed, or removed
// with Delete.
type Store[K comparable] struct {
	ttl   time.Duration
	clock clock.PassiveClock

	// One mutex over the whole map: every operation is a few map accesses, so
	// sharding or RWMutex would add complexity without measurable gain.
	mu      sync.Mutex
	entries map[K]*entry
}

// entry holds the outstanding expectations for one key. An entry with nothing
// outstanding is never stored.
type entry struct {
	creations int
	deletions map[types.UID]struct{}
	// setAt is when the expectations were set. Observations do not refresh
	// it: the TTL bounds how long we wait for the whole batch, not for the
	// gap between events.
	setAt time.Time
}

func (e *entry) fulfilled() bool {
	return e.creations <= 0 && len(e.deletions) == 0
}

// New returns an empty Store configured by opts.
func New[K comparable](opts Options) *Store[K] {
	s := &Store[K]{
		ttl:     opts.TTL,
		clock:   opts.Clock,
		entries: make(map[K]*entry),
	}
	if s.ttl <= 0 {
		s.ttl = DefaultTTL
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	return s
}

// TTL returns the effective expiry duration.
func (s *Store[K]) TTL() time.Duration { return s.ttl }

// ExpectCreations records that n creations for key are about to be issued.
//
// It replaces whatever was recorded for key (creations and deletions) and
// restarts the TTL, like kube-controller-manager's SetExpectations. The
// controller only sets new expectations once Satisfied reports true, so at
// that point anything still recorded is either nothing or expired leftovers
// that must not keep blocking the owner. n <= 0 clears key.
//
// Call it before issuing the create calls: the informer may deliver the add
// event before the call returns, and an observation that arrives before its
// expectation is lost.
func (s *Store[K]) ExpectCreations(key K, n int) {
	s.set(key, n, nil)
}

// ExpectDeletions records that the objects with the given UIDs are about to
// be deleted on behalf of key. Duplicate UIDs count once.
//
// Like ExpectCreations, it replaces everything recorded for key and restarts
// the TTL; with no UIDs it clears key. Call it before issuing the delete
// calls.
func (s *Store[K]) ExpectDeletions(key K, uids ...types.UID) {
	s.set(key, 0, uids)
}

// Set replaces the expectations for key with creations pending creations and
// the given pending deletions, restarting the TTL. ExpectCreations and
// ExpectDeletions are shorthands for the common one-sided cases.
func (s *Store[K]) Set(key K, creations int, deletions ...types.UID) {
	s.set(key, creations, deletions)
}

func (s *Store[K]) set(key K, creations int, uids []types.UID) {
	e := &entry{creations: max(creations, 0)}
	if len(uids) > 0 {
		e.deletions = make(map[types.UID]struct{}, len(uids))
		for _, uid := range uids {
			e.deletions[uid] = struct{}{}
		}
	}
	// Read the clock outside the lock: a fake clock takes its own lock and
	// the real one may be comparatively slow.
	e.setAt = s.clock.Now()

	s.mu.Lock()
	defer s.mu.Unlock()
	if e.fulfilled() {
		delete(s.entries, key)
		return
	}
	s.entries[key] = e
}

// CreationObserved records that the informer delivered a creation for key.
// The pending count never drops below zero: adds that were not expected (an
// initial list, a machine adopted from elsewhere) are harmless.
func (s *Store[K]) CreationObserved(key K) {
	s.LowerExpectations(key, 1)
}

// CreationFailed records that a create call for key failed, so no event will
// ever arrive for it. Do not call it when the outcome is unknown (e.g. a
// timeout): the object may exist and its event will still come; the TTL covers
// the case where it does not.
func (s *Store[K]) CreationFailed(key K) {
	s.LowerExpectations(key, 1)
}

// DeletionObserved records that the informer showed the object with uid as
// deleted for key. Graceful deletion produces two such signals (an update
// setting deletionTimestamp, then the delete event); only the first one
// counts because the UID is no longer pending afterwards. A UID that is not
// pending is ignored, so callers need not filter events.
func (s *Store[K]) DeletionObserved(key K, uid types.UID) {
	s.LowerExpectations(key, 0, uid)
}

// DeletionFailed records that the delete call for uid failed, so no event
// will confirm it. Call it for NotFound as well: the object is already gone
// and its event may have been seen before the expectation was recorded.
func (s *Store[K]) DeletionFailed(key K, uid types.UID) {
	s.LowerExpectations(key, 0, uid)
}

// LowerExpectations removes creations pending creations (clamped at zero,
// negative values ignored) and the given UIDs from the pending deletions of
// key. It is the batch form of CreationFailed/DeletionFailed, e.g. for
// creations skipped after an earlier failure in a slow-start batch. It never
// records new expectations and leaves the TTL alone.
func (s *Store[K]) LowerExpectations(key K, creations int, uids ...types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	if !ok {
		return
	}
	if creations > 0 {
		e.creations = max(e.creations-creations, 0)
	}
	for _, uid := range uids {
		delete(e.deletions, uid)
	}
	if e.fulfilled() {
		delete(s.entries, key)
	}
}

// Delete forgets key, e.g. when the owning MachineSet is deleted. Later
// observations for key are ignored until new expectations are set.
func (s *Store[K]) Delete(key K) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.entries, key)
}

// Satisfied reports whether the controller may trust its informer cache for
// key and act on it: true when nothing is outstanding or when the outstanding
// expectations have expired. Use State to tell those cases apart.
func (s *Store[K]) Satisfied(key K) bool {
	return s.State(key) != StatePending
}

// Expired reports whether key has outstanding expectations older than the
// TTL, i.e. whether Satisfied is true only because of the safety net.
func (s *Store[K]) Expired(key K) bool {
	return s.State(key) == StateExpired
}

// State classifies the expectations for key. Expectations are expired when
// strictly more than the TTL has passed since they were set.
func (s *Store[K]) State(key K) State {
	s.mu.Lock()
	e, ok := s.entries[key]
	var setAt time.Time
	if ok {
		setAt = e.setAt
	}
	s.mu.Unlock()
	if !ok {
		return StateFulfilled
	}
	if s.clock.Since(setAt) > s.ttl {
		return StateExpired
	}
	return StatePending
}

// Pending returns the outstanding creations and deletions for key, including
// expired ones, for status and debug output.
func (s *Store[K]) Pending(key K) (creations, deletions int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	if !ok {
		return 0, 0
	}
	return e.creations, len(e.deletions)
}

// Len returns the number of keys with outstanding (pending or expired)
// expectations, e.g. for a gauge metric.
func (s *Store[K]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}
