package expectations

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
	"pgregory.net/rapid"
)

func TestWrites(t *testing.T) {
	type step struct {
		wrote    string // record a write with this version
		observe  string // ask Observed with this cached version
		advance  time.Duration
		forget   bool
		want     bool // Observed's answer
		wantLen  int
		noAssert bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "nothing written", steps: []step{{observe: "5", want: true}}},
		{name: "cache behind, then caught up", steps: []step{
			{wrote: "10", noAssert: true, wantLen: 1},
			{observe: "9", want: false, wantLen: 1},
			{observe: "10", want: true, wantLen: 0},
			{observe: "9", want: true}, // forgotten once observed
		}},
		{name: "cache past the write", steps: []step{
			{wrote: "10", noAssert: true, wantLen: 1},
			{observe: "12", want: true},
		}},
		{name: "numeric, not lexical", steps: []step{
			{wrote: "9", noAssert: true, wantLen: 1},
			{observe: "10", want: true},
		}},
		{name: "older answer ignored", steps: []step{
			{wrote: "20", noAssert: true, wantLen: 1},
			{wrote: "15", noAssert: true, wantLen: 1},
			{observe: "15", want: false, wantLen: 1},
			{observe: "20", want: true},
		}},
		{name: "opaque versions need equality", steps: []step{
			{wrote: "b7", noAssert: true, wantLen: 1},
			{observe: "c1", want: false, wantLen: 1},
			{observe: "b7", want: true},
		}},
		{name: "expiry releases", steps: []step{
			{wrote: "10", noAssert: true, wantLen: 1},
			{advance: DefaultWriteTTL, observe: "3", want: false, wantLen: 1},
			{advance: time.Millisecond, observe: "3", want: true},
		}},
		{name: "forget", steps: []step{
			{wrote: "10", noAssert: true, wantLen: 1},
			{forget: true, observe: "3", want: true},
		}},
		{name: "an object not cached yet reflects no write", steps: []step{
			{wrote: "10", noAssert: true, wantLen: 1},
			{observe: "", want: false, wantLen: 1},
			{observe: "10", want: true},
		}},
		{name: "empty version records nothing", steps: []step{
			{wrote: "", noAssert: true},
			{observe: "1", want: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
			w := NewWrites[string](Options{Clock: clk})
			for i, s := range tt.steps {
				clk.SetTime(clk.Now().Add(s.advance))
				if s.forget {
					w.Forget("k")
				}
				if s.noAssert {
					w.Wrote("k", s.wrote)
				} else if got := w.Observed("k", s.observe); got != s.want {
					t.Errorf("step %d: Observed(%q) = %v, want %v", i, s.observe, got, s.want)
				}
				if got := w.Len(); got != s.wantLen {
					t.Errorf("step %d: Len() = %d, want %d", i, got, s.wantLen)
				}
			}
		})
	}
}

// writesModel is the reference semantics of Writes for one object whose
// versions come from one server: the last write not yet seen, and when.
type writesModel struct {
	server  int // the object's current version at the server
	cache   int // the version the informer cache holds
	pending int // 0: none
	pendAt  time.Time
	opaque  bool
	ttl     time.Duration
}

func (m *writesModel) rv(n int) string {
	if m.opaque {
		return "v" + strconv.Itoa(n*7919%104729) // not comparable as numbers
	}
	return strconv.Itoa(n)
}

// TestWritesModel drives Writes through random interleavings of our
// writes, writes by others, cache progress, expiry and deletion, and
// checks every answer of Observed against the model: a sync never runs on
// a cache older than its own last write, unless the TTL has passed.
func TestWritesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
		w := NewWrites[string](Options{Clock: clk})
		m := &writesModel{server: 1, cache: 1, opaque: rapid.Bool().Draw(t, "opaque"), ttl: w.TTL()}
		t.Repeat(map[string]func(*rapid.T){
			"ourWrite": func(t *rapid.T) {
				m.server++
				// Answers may arrive late: record the newest only.
				w.Wrote("k", m.rv(m.server))
				if m.opaque || m.pending == 0 || m.server > m.pending {
					m.pending, m.pendAt = m.server, clk.Now()
				}
			},
			"otherWrite": func(t *rapid.T) { m.server++ },
			"cacheCatchesUp": func(t *rapid.T) {
				if m.cache < m.server {
					m.cache += rapid.IntRange(1, m.server-m.cache).Draw(t, "by")
				}
			},
			"time": func(t *rapid.T) {
				clk.SetTime(clk.Now().Add(time.Duration(rapid.IntRange(1, 40).Draw(t, "seconds")) * time.Second))
			},
			"deleted": func(t *rapid.T) {
				w.Forget("k")
				m.pending = 0
			},
			"sync": func(t *rapid.T) {
				got := w.Observed("k", m.rv(m.cache))
				want := true
				if m.pending != 0 && clk.Now().Sub(m.pendAt) <= m.ttl {
					if m.opaque {
						want = m.cache == m.pending
					} else {
						want = m.cache >= m.pending
					}
				}
				if got != want {
					t.Fatalf("Observed(cache=%d) with pending write %d (opaque=%v) = %v, want %v", m.cache, m.pending, m.opaque, got, want)
				}
				if got {
					m.pending = 0
				}
				if diff := cmp.Diff(boolToInt(m.pending != 0), w.Len()); diff != "" {
					t.Fatalf("Len (-model +got):\n%s", diff)
				}
			},
		})
	})
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
