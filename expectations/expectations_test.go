package expectations

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

const testTTL = time.Minute

// snapshot is everything observable about one key, so a single cmp.Diff
// catches any disagreement between the accessors.
type snapshot struct {
	Creations, Deletions int
	Satisfied, Expired   bool
	State                State
}

func snap[K comparable](s *Store[K], key K) snapshot {
	c, d := s.Pending(key)
	return snapshot{
		Creations: c,
		Deletions: d,
		Satisfied: s.Satisfied(key),
		Expired:   s.Expired(key),
		State:     s.State(key),
	}
}

var (
	fulfilled = snapshot{Satisfied: true, State: StateFulfilled}
)

func pending(c, d int) snapshot {
	return snapshot{Creations: c, Deletions: d, State: StatePending}
}

func expired(c, d int) snapshot {
	return snapshot{Creations: c, Deletions: d, Satisfied: true, Expired: true, State: StateExpired}
}

func TestTransitions(t *testing.T) {
	type env struct {
		s   *Store[string]
		clk *clocktesting.FakePassiveClock
	}
	step := func(e env, d time.Duration) { e.clk.SetTime(e.clk.Now().Add(d)) }

	tests := []struct {
		name    string
		do      func(e env)
		want    snapshot
		wantLen int
	}{
		{
			name: "unknown key is satisfied",
			do:   func(env) {},
			want: fulfilled,
		},
		{
			name:    "expected creations are pending",
			do:      func(e env) { e.s.ExpectCreations("k", 2) },
			want:    pending(2, 0),
			wantLen: 1,
		},
		{
			name: "all creations observed",
			do: func(e env) {
				e.s.ExpectCreations("k", 2)
				e.s.CreationObserved("k")
				e.s.CreationObserved("k")
			},
			want: fulfilled,
		},
		{
			name: "creations never go negative",
			do: func(e env) {
				e.s.ExpectCreations("k", 1)
				e.s.CreationObserved("k")
				e.s.CreationObserved("k")
				e.s.CreationObserved("k")
				// A fresh expectation must not be eaten by the surplus.
				e.s.ExpectCreations("k", 1)
			},
			want:    pending(1, 0),
			wantLen: 1,
		},
		{
			name: "observation before expectation is lost",
			do: func(e env) {
				e.s.CreationObserved("k")
				e.s.ExpectCreations("k", 1)
			},
			want:    pending(1, 0),
			wantLen: 1,
		},
		{
			name: "failed create lowers",
			do: func(e env) {
				e.s.ExpectCreations("k", 3)
				e.s.CreationFailed("k")
			},
			want:    pending(2, 0),
			wantLen: 1,
		},
		{
			name: "lower expectations in batch, clamped",
			do: func(e env) {
				e.s.Set("k", 3, "a", "b")
				e.s.LowerExpectations("k", 5, "a")
			},
			want:    pending(0, 1),
			wantLen: 1,
		},
		{
			name: "negative lower is ignored",
			do: func(e env) {
				e.s.ExpectCreations("k", 2)
				e.s.LowerExpectations("k", -3)
			},
			want:    pending(2, 0),
			wantLen: 1,
		},
		{
			name: "duplicate expected UIDs count once",
			do:   func(e env) { e.s.ExpectDeletions("k", "a", "a", "b") },
			want: pending(0, 2), wantLen: 1,
		},
		{
			name: "graceful then final delete counts once",
			do: func(e env) {
				e.s.ExpectDeletions("k", "a", "b")
				e.s.DeletionObserved("k", "a")
				e.s.DeletionObserved("k", "a")
			},
			want:    pending(0, 1),
			wantLen: 1,
		},
		{
			name: "unknown UID is ignored",
			do: func(e env) {
				e.s.ExpectDeletions("k", "a")
				e.s.DeletionObserved("k", "zzz")
			},
			want:    pending(0, 1),
			wantLen: 1,
		},
		{
			name: "all deletions observed",
			do: func(e env) {
				e.s.ExpectDeletions("k", "a", "b")
				e.s.DeletionObserved("k", "b")
				e.s.DeletionObserved("k", "a")
			},
			want: fulfilled,
		},
		{
			name: "failed delete lowers",
			do: func(e env) {
				e.s.ExpectDeletions("k", "a", "b")
				e.s.DeletionFailed("k", "a")
				e.s.DeletionObserved("k", "a") // late event for it: ignored
			},
			want:    pending(0, 1),
			wantLen: 1,
		},
		{
			name: "observations for another key do not count",
			do: func(e env) {
				e.s.Set("k", 1, "a")
				e.s.CreationObserved("other")
				e.s.DeletionObserved("other", "a")
			},
			want:    pending(1, 1),
			wantLen: 1,
		},
		{
			name: "expecting creations replaces pending deletions",
			do: func(e env) {
				e.s.ExpectDeletions("k", "a", "b")
				e.s.ExpectCreations("k", 1)
				e.s.DeletionObserved("k", "a")
			},
			want:    pending(1, 0),
			wantLen: 1,
		},
		{
			name: "expecting deletions replaces pending creations and UIDs",
			do: func(e env) {
				e.s.ExpectCreations("k", 4)
				e.s.ExpectDeletions("k", "a")
				e.s.ExpectDeletions("k", "b")
				e.s.DeletionObserved("k", "a") // from the replaced set: ignored
			},
			want:    pending(0, 1),
			wantLen: 1,
		},
		{
			name: "expecting nothing clears",
			do: func(e env) {
				e.s.Set("k", 2, "a")
				e.s.ExpectCreations("k", 0)
			},
			want: fulfilled,
		},
		{
			name: "negative expectation clears",
			do: func(e env) {
				e.s.ExpectCreations("k", 2)
				e.s.ExpectCreations("k", -1)
			},
			want: fulfilled,
		},
		{
			name: "exactly at TTL is still pending",
			do: func(e env) {
				e.s.ExpectCreations("k", 1)
				step(e, testTTL)
			},
			want:    pending(1, 0),
			wantLen: 1,
		},
		{
			name: "past TTL is expired but still reported",
			do: func(e env) {
				e.s.Set("k", 1, "a")
				step(e, testTTL+time.Nanosecond)
			},
			want:    expired(1, 1),
			wantLen: 1,
		},
		{
			name: "observations do not refresh the TTL",
			do: func(e env) {
				e.s.ExpectCreations("k", 2)
				step(e, testTTL)
				e.s.CreationObserved("k")
				step(e, time.Second)
			},
			want:    expired(1, 0),
			wantLen: 1,
		},
		{
			name: "expired then observed to completion is fulfilled",
			do: func(e env) {
				e.s.ExpectDeletions("k", "a")
				step(e, 2*testTTL)
				e.s.DeletionObserved("k", "a")
			},
			want: fulfilled,
		},
		{
			name: "setting again restarts the TTL",
			do: func(e env) {
				e.s.ExpectCreations("k", 1)
				step(e, 2*testTTL)
				e.s.ExpectCreations("k", 1)
				step(e, testTTL/2)
			},
			want:    pending(1, 0),
			wantLen: 1,
		},
		{
			name: "clock going backwards does not expire",
			do: func(e env) {
				e.s.ExpectCreations("k", 1)
				step(e, -time.Hour)
			},
			want:    pending(1, 0),
			wantLen: 1,
		},
		{
			name: "delete forgets the key",
			do: func(e env) {
				e.s.Set("k", 2, "a")
				e.s.Delete("k")
			},
			want: fulfilled,
		},
		{
			name: "observations after delete are ignored",
			do: func(e env) {
				e.s.Set("k", 2, "a")
				e.s.Delete("k")
				e.s.CreationObserved("k")
				e.s.DeletionObserved("k", "a")
				e.s.ExpectCreations("k", 1)
			},
			want:    pending(1, 0),
			wantLen: 1,
		},
		{
			name: "delete of unknown key is a no-op",
			do:   func(e env) { e.s.Delete("k") },
			want: fulfilled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(epoch)
			e := env{s: New[string](Options{TTL: testTTL, Clock: clk}), clk: clk}
			tt.do(e)
			if diff := cmp.Diff(tt.want, snap(e.s, "k")); diff != "" {
				t.Errorf("state of key mismatch (-want +got):\n%s", diff)
			}
			if got := e.s.Len(); got != tt.wantLen {
				t.Errorf("Len() = %d, want %d", got, tt.wantLen)
			}
		})
	}
}

func TestOptionsDefaults(t *testing.T) {
	s := New[string](Options{})
	if got := s.TTL(); got != DefaultTTL {
		t.Errorf("TTL() = %v, want %v", got, DefaultTTL)
	}
	if s.clock == nil {
		t.Fatal("clock not defaulted")
	}
	// With the real clock, fresh expectations are pending, not expired.
	s.ExpectCreations("k", 1)
	if diff := cmp.Diff(pending(1, 0), snap(s, "k")); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}

	if got := New[string](Options{TTL: -time.Second}).TTL(); got != DefaultTTL {
		t.Errorf("negative TTL: TTL() = %v, want %v", got, DefaultTTL)
	}
}

func TestDefaultTTLExpiry(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	s := New[types.UID](Options{Clock: clk})
	s.ExpectCreations("owner", 1)
	clk.Step(DefaultTTL)
	if s.Expired("owner") {
		t.Fatal("expired at exactly DefaultTTL")
	}
	clk.Step(time.Millisecond)
	if !s.Expired("owner") || !s.Satisfied("owner") {
		t.Fatalf("not expired after DefaultTTL: %+v", snap(s, "owner"))
	}
}

func TestStateString(t *testing.T) {
	got := []string{StateFulfilled.String(), StatePending.String(), StateExpired.String(), State(42).String()}
	want := []string{"Fulfilled", "Pending", "Expired", "State(?)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}
