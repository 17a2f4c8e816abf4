package machine

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/driver"
)

func TestCreationSlots(t *testing.T) {
	// Each step is "take KEY" (want: whether it got a slot) or "give"
	// (want: the keys woken).
	type step struct {
		op   string
		want any
	}
	tests := []struct {
		name  string
		limit int
		steps []step
	}{{
		name:  "waiters are woken oldest first, one per freed slot",
		limit: 2,
		steps: []step{
			{"take a", true}, {"take b", true}, {"take c", false}, {"take d", false}, {"take c", false},
			{"give", []string{"c"}}, {"take c", true}, {"give", []string{"d"}}, {"give", []string{}},
		},
	}, {
		name:  "a woken key that takes no slot leaves it to the next give",
		limit: 1,
		steps: []step{
			{"take a", true}, {"take b", false}, {"take c", false},
			{"give", []string{"b"}}, // b's machine is gone: it never takes the slot
			{"take x", true}, {"give", []string{"c"}},
		},
	}, {
		name:  "a waiter that gets a slot by its own retry is no longer waiting",
		limit: 1,
		steps: []step{{"take a", true}, {"take b", false}, {"give", []string{"b"}}, {"take b", true}, {"give", []string{}}},
	}, {
		name:  "no limit before Run sets one",
		steps: []step{{"take a", true}, {"take b", true}, {"take c", true}, {"give", []string{}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s creationSlots
			s.setLimit(tt.limit)
			for i, st := range tt.steps {
				var got any
				if key, ok := strings.CutPrefix(st.op, "take "); ok {
					got = s.take(key)
				} else {
					got = append([]string{}, s.give()...)
				}
				if diff := cmp.Diff(st.want, got); diff != "" {
					t.Fatalf("step %d (%s) (-want +got):\n%s", i, st.op, diff)
				}
			}
		})
	}
}

// TestCreationSlotsProperty: whatever the order of takes and gives, no
// more than limit slots are held, and a key that was refused is woken
// by a later give unless it took a slot meanwhile.
func TestCreationSlotsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(1, 4).Draw(t, "limit")
		var s creationSlots
		s.setLimit(limit)
		var holders []string
		refused := map[string]bool{}
		keys := []string{"a", "b", "c", "d", "e", "f"}
		t.Repeat(map[string]func(*rapid.T){
			"take": func(t *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(t, "key")
				if slices.Contains(holders, k) {
					t.Skip("a key is synced by one worker at a time: it holds at most one slot")
				}
				if s.take(k) {
					holders = append(holders, k)
					delete(refused, k)
				} else {
					refused[k] = true
					if len(holders) < limit {
						t.Fatalf("refused %s with %d of %d slots held", k, len(holders), limit)
					}
				}
			},
			"give": func(t *rapid.T) {
				if len(holders) == 0 {
					t.Skip("nothing held")
				}
				i := rapid.IntRange(0, len(holders)-1).Draw(t, "holder")
				holders = slices.Delete(holders, i, i+1)
				for _, k := range s.give() {
					if !refused[k] {
						t.Fatalf("woke %s, which was not waiting", k)
					}
					delete(refused, k)
				}
			},
			"": func(t *rapid.T) {
				if len(holders) > limit {
					t.Fatalf("%d slots held, limit %d", len(holders), limit)
				}
				for k := range refused {
					if !slices.Contains(s.waiting, k) {
						t.Fatalf("refused key %s is neither woken nor waiting (waiting %v)", k, s.waiting)
					}
				}
			},
		})
	})
}

func TestCreationLimit(t *testing.T) {
	tests := []struct {
		max, workers int
		want         int
		wantErr      bool
	}{
		{0, 50, 40, false}, {0, 8, 7, false}, {0, 5, 4, false}, {0, 2, 1, false}, {0, 1, 1, false},
		{10, 50, 10, false}, {49, 50, 49, false}, {50, 50, 0, true}, {60, 50, 0, true}, {3, 1, 3, false},
	}
	for _, tt := range tests {
		o := Options{MaxConcurrentCreations: tt.max}
		got, err := o.creationLimit(tt.workers)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("MaxConcurrentCreations %d with %d workers: %d, %v; want %d, error %v", tt.max, tt.workers, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestDriverDeadlineOptions: the controller puts its driver under
// deadlines, uses a *driver.Deadlines it is given as it is, and refuses
// deadlines of its own on top of one, negative deadlines, and more
// creation slots than Run has workers.
func TestDriverDeadlineOptions(t *testing.T) {
	f := newFakeCluster(t)
	shared, err := driver.WithDeadlines(f.driver, driver.Timeouts{CreateMachine: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		d       driver.Driver
		opts    Options
		wantErr string
		want    driver.Timeouts // in effect
	}{
		{name: "defaults", d: f.driver, want: driver.Timeouts{CreateMachine: 10 * time.Minute, InitializeMachine: 10 * time.Minute,
			DeleteMachine: 10 * time.Minute, GetMachineStatus: 2 * time.Minute, ListMachines: 5 * time.Minute, GetVolumeIDs: time.Minute}},
		{name: "own deadlines", d: f.driver, opts: Options{DriverTimeouts: driver.Timeouts{DeleteMachine: time.Hour}},
			want: driver.Timeouts{CreateMachine: 10 * time.Minute, InitializeMachine: 10 * time.Minute,
				DeleteMachine: time.Hour, GetMachineStatus: 2 * time.Minute, ListMachines: 5 * time.Minute, GetVolumeIDs: time.Minute}},
		{name: "shared deadlines", d: shared, want: shared.Timeouts()},
		{name: "deadlines on top of shared ones", d: shared, opts: Options{DriverTimeouts: driver.Timeouts{CreateMachine: time.Hour}},
			wantErr: "DriverTimeouts must be zero"},
		{name: "negative deadline", d: f.driver, opts: Options{DriverTimeouts: driver.Timeouts{GetVolumeIDs: -time.Second}},
			wantErr: "timeout of GetVolumeIDs must not be negative"},
		{name: "negative creation slots", d: f.driver, opts: Options{MaxConcurrentCreations: -1}, wantErr: "MaxConcurrentCreations must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCluster(t)
			c, err := NewController(f.mc, f.core, f.core, f.inf, tt.d, tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			dl, ok := c.driver.(*driver.Deadlines)
			if !ok {
				t.Fatalf("driver %T is not under deadlines", c.driver)
			}
			if tt.d == shared && dl != shared {
				t.Error("a shared *driver.Deadlines was wrapped again")
			}
			if diff := cmp.Diff(tt.want, dl.Timeouts()); diff != "" {
				t.Errorf("deadlines (-want +got):\n%s", diff)
			}
		})
	}
	c, err := NewController(f.mc, f.core, f.core, f.inf, f.driver, Options{MaxConcurrentCreations: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background(), 4); err == nil || !strings.Contains(err.Error(), "must be below the machine workers (4)") {
		t.Errorf("Run with as many creation slots as workers: %v", err)
	}
}
