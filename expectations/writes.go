package expectations

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/utils/clock"
)

// DefaultWriteTTL is how long Writes waits for the cache to show a write
// when Options.TTL is not set. A watch normally delivers a write within
// milliseconds; half a minute covers a slow one, and after a lost event the
// object is only held back that long.
const DefaultWriteTTL = 30 * time.Second

// Writes is the read-your-writes half of the package: it remembers, per
// key, the resourceVersion of the controller's last write to an object
// until the informer cache holds that object at least as new. A sync that
// finds the cache older than its own last write waits for the update event
// instead of acting on stale data (and, say, creating a VM a second time
// after its provider ID was stored). It is safe for concurrent use.
//
// Resource versions are opaque strings to clients; Writes compares them as
// numbers only where apimachinery's resourceversion.CompareResourceVersion
// accepts both (every etcd-backed API server), and otherwise only waits for
// the exact version it wrote. Entries expire after the TTL, so a missed
// event (or a later write by someone else under opaque versions) holds an
// object back for at most that long.
type Writes[K comparable] struct {
	ttl   time.Duration
	clock clock.PassiveClock

	mu      sync.Mutex
	entries map[K]write
}

type write struct {
	resourceVersion string
	at              time.Time
}

// NewWrites returns an empty Writes. A zero Options.TTL means
// DefaultWriteTTL.
func NewWrites[K comparable](opts Options) *Writes[K] {
	w := &Writes[K]{ttl: opts.TTL, clock: opts.Clock, entries: map[K]write{}}
	if w.ttl <= 0 {
		w.ttl = DefaultWriteTTL
	}
	if w.clock == nil {
		w.clock = clock.RealClock{}
	}
	return w
}

// Wrote records that the controller wrote the object of key and the API
// server answered with resourceVersion. An older version than the one
// already recorded (two writes whose answers crossed) is ignored; an
// empty one records nothing.
func (w *Writes[K]) Wrote(key K, resourceVersion string) {
	if resourceVersion == "" {
		return
	}
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev, ok := w.entries[key]; ok && newer(prev.resourceVersion, resourceVersion) {
		return
	}
	w.entries[key] = write{resourceVersion: resourceVersion, at: now}
}

// Observed reports whether a cached object of key with resourceVersion
// reflects the controller's last write to it: true when no write is
// pending, when the cached version is at least the written one, or when the
// write is older than the TTL. A pending write that is observed (or
// expired) is forgotten. An empty resourceVersion stands for an object the
// cache does not hold (yet): it reflects no write, so a controller that
// created the object waits for it.
func (w *Writes[K]) Observed(key K, resourceVersion string) bool {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	pending, ok := w.entries[key]
	if !ok {
		return true
	}
	if pending.resourceVersion == resourceVersion || newer(resourceVersion, pending.resourceVersion) ||
		now.Sub(pending.at) > w.ttl {
		delete(w.entries, key)
		return true
	}
	return false
}

// Forget drops what is recorded for key, e.g. when the object is deleted.
func (w *Writes[K]) Forget(key K) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.entries, key)
}

// Len returns the number of keys with a write not yet observed.
func (w *Writes[K]) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.entries)
}

// TTL returns the effective expiry duration.
func (w *Writes[K]) TTL() time.Duration { return w.ttl }

// newer reports whether resource version a is known to be later than b:
// both must be comparable, else nothing is known.
func newer(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c > 0
}
