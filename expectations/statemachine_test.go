package expectations

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"pgregory.net/rapid"
)

// modelEntry is the reference semantics, written as plainly as possible and
// deliberately unlike the implementation: it never prunes fulfilled entries
// and keeps every UID ever expected, with a flag for whether it is still
// pending.
type modelEntry struct {
	creations int
	deletions map[types.UID]bool // true while pending
	setAt     time.Time
}

func (e *modelEntry) outstanding() (creations, deletions int) {
	for _, p := range e.deletions {
		if p {
			deletions++
		}
	}
	return e.creations, deletions
}

type model struct {
	ttl     time.Duration
	now     time.Time
	entries map[string]*modelEntry
}

func (m *model) set(key string, creations int, uids []types.UID) {
	e := &modelEntry{creations: max(creations, 0), deletions: map[types.UID]bool{}, setAt: m.now}
	for _, u := range uids {
		e.deletions[u] = true
	}
	m.entries[key] = e
}

func (m *model) lower(key string, creations int, uids []types.UID) {
	e, ok := m.entries[key]
	if !ok {
		return
	}
	if creations > 0 {
		e.creations -= creations
		if e.creations < 0 {
			e.creations = 0
		}
	}
	for _, u := range uids {
		if _, known := e.deletions[u]; known {
			e.deletions[u] = false
		}
	}
}

func (m *model) snapshot(key string) snapshot {
	e, ok := m.entries[key]
	if !ok {
		return fulfilled
	}
	c, d := e.outstanding()
	switch {
	case c == 0 && d == 0:
		return fulfilled
	case m.now.Sub(e.setAt) > m.ttl:
		return expired(c, d)
	default:
		return pending(c, d)
	}
}

func (m *model) satisfied(key string) bool { return m.snapshot(key).Satisfied }

func (m *model) tracked() int {
	n := 0
	for _, e := range m.entries {
		if c, d := e.outstanding(); c > 0 || d > 0 {
			n++
		}
	}
	return n
}

func TestStateMachine(t *testing.T) {
	const ttl = time.Minute
	keys := []string{"ms-a", "ms-b", "ms-c"}
	// A small UID pool makes duplicates, re-expectations and unknown UIDs
	// (drawn but not currently expected) all common.
	uidPool := []types.UID{"u0", "u1", "u2", "u3", "u4", "u5"}
	// Steps concentrate around the TTL boundary, where off-by-one bugs live.
	steps := []time.Duration{0, time.Nanosecond, time.Second, ttl / 3, ttl - time.Nanosecond, ttl, ttl + time.Nanosecond, 3 * ttl}

	genKey := rapid.SampledFrom(keys)
	genUID := rapid.SampledFrom(uidPool)
	genUIDs := rapid.SliceOfN(genUID, 0, 4)
	genCount := rapid.IntRange(-1, 5)

	rapid.Check(t, func(t *rapid.T) {
		clk := clocktesting.NewFakePassiveClock(epoch)
		s := New[string](Options{TTL: ttl, Clock: clk})
		m := &model{ttl: ttl, now: epoch, entries: map[string]*modelEntry{}}

		// expect is shared by the unconditional actions (replace semantics
		// whatever the current state) and the controller-style ones, which
		// only set expectations when the key is satisfied.
		expect := func(t *rapid.T, onlyWhenSatisfied bool, creations int, uids []types.UID) {
			key := genKey.Draw(t, "key")
			if onlyWhenSatisfied && !m.satisfied(key) {
				t.Skip("controller waits while expectations are pending")
			}
			s.Set(key, creations, uids...)
			m.set(key, creations, uids)
		}

		t.Repeat(map[string]func(*rapid.T){
			"ExpectCreations": func(t *rapid.T) {
				n := genCount.Draw(t, "n")
				key := genKey.Draw(t, "key")
				s.ExpectCreations(key, n)
				m.set(key, n, nil)
			},
			"ExpectCreationsWhenSatisfied": func(t *rapid.T) {
				expect(t, true, genCount.Draw(t, "n"), nil)
			},
			"ExpectDeletions": func(t *rapid.T) {
				uids := genUIDs.Draw(t, "uids")
				key := genKey.Draw(t, "key")
				s.ExpectDeletions(key, uids...)
				m.set(key, 0, uids)
			},
			"ExpectDeletionsWhenSatisfied": func(t *rapid.T) {
				expect(t, true, 0, genUIDs.Draw(t, "uids"))
			},
			"Set": func(t *rapid.T) {
				expect(t, false, genCount.Draw(t, "n"), genUIDs.Draw(t, "uids"))
			},
			"CreationObserved": func(t *rapid.T) {
				key := genKey.Draw(t, "key")
				s.CreationObserved(key)
				m.lower(key, 1, nil)
			},
			"CreationFailed": func(t *rapid.T) {
				key := genKey.Draw(t, "key")
				s.CreationFailed(key)
				m.lower(key, 1, nil)
			},
			"LowerExpectations": func(t *rapid.T) {
				key := genKey.Draw(t, "key")
				n := rapid.IntRange(-2, 4).Draw(t, "n")
				uids := genUIDs.Draw(t, "uids")
				s.LowerExpectations(key, n, uids...)
				m.lower(key, n, uids)
			},
			"DeletionObserved": func(t *rapid.T) {
				key := genKey.Draw(t, "key")
				uid := genUID.Draw(t, "uid")
				s.DeletionObserved(key, uid)
				m.lower(key, 0, []types.UID{uid})
			},
			"DeletionObservedGraceful": func(t *rapid.T) {
				// deletionTimestamp update followed by the final delete event;
				// the model lowers once, which is the property under test.
				key := genKey.Draw(t, "key")
				uid := genUID.Draw(t, "uid")
				s.DeletionObserved(key, uid)
				s.DeletionObserved(key, uid)
				m.lower(key, 0, []types.UID{uid})
			},
			"DeletionFailed": func(t *rapid.T) {
				key := genKey.Draw(t, "key")
				uid := genUID.Draw(t, "uid")
				s.DeletionFailed(key, uid)
				m.lower(key, 0, []types.UID{uid})
			},
			"AdvanceClock": func(t *rapid.T) {
				d := rapid.SampledFrom(steps).Draw(t, "d")
				m.now = m.now.Add(d)
				clk.SetTime(m.now)
			},
			"Delete": func(t *rapid.T) {
				key := genKey.Draw(t, "key")
				s.Delete(key)
				delete(m.entries, key)
			},
			"": func(t *rapid.T) {
				for _, key := range keys {
					got := snap(s, key)
					if got.Creations < 0 || got.Deletions < 0 {
						t.Fatalf("%s: negative pending counts %+v", key, got)
					}
					if diff := cmp.Diff(m.snapshot(key), got); diff != "" {
						t.Fatalf("%s: store disagrees with model (-model +store):\n%s", key, diff)
					}
				}
				if got, want := s.Len(), m.tracked(); got != want {
					t.Fatalf("Len() = %d, model tracks %d", got, want)
				}
			},
		})
	})
}

// TestConcurrent hammers one shared key and several private keys from many
// goroutines; -race checks the locking, the final assertions check that no
// update was lost.
func TestConcurrent(t *testing.T) {
	const (
		workers = 8
		perWork = 200
	)
	clk := clocktesting.NewFakeClock(epoch)
	s := New[string](Options{TTL: time.Hour, Clock: clk})

	var uids []types.UID
	for w := range workers {
		for i := range perWork {
			uids = append(uids, types.UID(fmt.Sprintf("w%d-%d", w, i)))
		}
	}
	s.Set("shared", workers*perWork, uids...)

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			own := fmt.Sprintf("own-%d", w)
			for i := range perWork {
				s.CreationObserved("shared")
				uid := types.UID(fmt.Sprintf("w%d-%d", w, i))
				// Graceful delete: two signals for the same UID.
				s.DeletionObserved("shared", uid)
				s.DeletionObserved("shared", uid)

				// A private controller-style cycle, interleaved with the
				// shared traffic.
				if !s.Satisfied(own) {
					t.Errorf("%s unexpectedly unsatisfied", own)
					return
				}
				s.ExpectCreations(own, 2)
				s.CreationObserved(own)
				s.CreationFailed(own)
				s.ExpectDeletions(own, uid, "other")
				s.DeletionFailed(own, "other")
				s.DeletionObserved(own, uid)
			}
		})
	}
	// Readers racing with the writers.
	for range 2 {
		wg.Go(func() {
			for range perWork {
				c, d := s.Pending("shared")
				if c < 0 || d < 0 {
					t.Errorf("negative pending: %d, %d", c, d)
					return
				}
				_ = s.State("shared")
				_ = s.Satisfied("shared")
				_ = s.Len()
			}
		})
	}
	// The clock moves too (expiry is evaluated concurrently with it), but
	// stays well inside the TTL so the final state is deterministic.
	wg.Go(func() {
		for range perWork {
			clk.Step(time.Millisecond)
		}
	})
	wg.Wait()

	if diff := cmp.Diff(fulfilled, snap(s, "shared")); diff != "" {
		t.Errorf("shared key not fulfilled (-want +got):\n%s", diff)
	}
	if got := s.Len(); got != 0 {
		t.Errorf("Len() = %d after all expectations were met, want 0", got)
	}
}
