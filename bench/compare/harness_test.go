//go:build linux

package compare

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/bench/internal/measure"
)

func TestParseScenarios(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []scenarioSizes
		wantErr string
	}{
		{in: defaultScenario, want: []scenarioSizes{
			{"M", []int{100, 500, 1000}}, {"D", []int{100, 500, 1000}}, {"R", []int{1000}}, {"I", []int{100}}, {"S", []int{1000}}, {"P", []int{1000}}, {"X", []int{10000}},
		}},
		{in: "  D:5   M:1,2 ", want: []scenarioSizes{{"D", []int{5}}, {"M", []int{1, 2}}}},
		{in: "", wantErr: "no scenario"},
		{in: "M", wantErr: "want a scenario and its machine counts"},
		{in: "M:", wantErr: "want a scenario and its machine counts"},
		{in: "Q:10", wantErr: `unknown scenario "Q"`},
		{in: "M:10 M:20", wantErr: "given twice"},
		{in: "M:10,0", wantErr: `"0" is not a positive number`},
		{in: "M:ten", wantErr: `"ten" is not a positive number`},
	} {
		got, err := parseScenarios(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseScenarios(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseScenarios(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(scenarioSizes{})); diff != "" {
			t.Errorf("parseScenarios(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

// TestParseBootModels: MCM_BENCH_BOOT_MODELS's values; jittered takes its
// boot from MCM_BENCH_BOOT_DELAY and MCM_BENCH_BOOT_JITTER.
func TestParseBootModels(t *testing.T) {
	jittered := bootTime{Jitter: 3 * time.Second}
	got, err := parseBootModels(defaultBootModels, jittered)
	want := []bootModel{{Name: bootReady}, {Name: bootJittered, Boot: jittered}}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("parseBootModels(%q): %v (-want +got):\n%s", defaultBootModels, err, diff)
	}
	if got, err := parseBootModels(" jittered , jittered", jittered); err != nil || len(got) != 1 {
		t.Errorf("parseBootModels with a repeat = %v, %v; want jittered once", got, err)
	}
	if _, err := parseBootModels("ready,slow", jittered); err == nil || !strings.Contains(err.Error(), `unknown boot model "slow"`) {
		t.Errorf("parseBootModels with an unknown model: %v", err)
	}
	for boot, want := range map[bootTime]string{{}: "at once", {Delay: time.Minute}: "1m0s", {Jitter: 3 * time.Second}: "0s+0-3s"} {
		if got := boot.String(); got != want {
			t.Errorf("%#v.String() = %q; want %q", boot, got, want)
		}
	}
}

// TestPercentile: nearest rank, whatever the order.
func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		ds   []time.Duration
		p    int
		want time.Duration
	}{
		{nil, 50, 0},
		{ds, 50, 50 * time.Millisecond},
		{ds, 99, 99 * time.Millisecond},
		{ds[:1], 99, 100 * time.Millisecond},
		{[]time.Duration{3, 1, 2}, 50, 2},
		{[]time.Duration{3, 1, 2}, 99, 3},
	} {
		if got := percentile(tc.ds, tc.p); got != tc.want {
			t.Errorf("percentile(%v, %d) = %v; want %v", tc.ds, tc.p, got, tc.want)
		}
	}
}

// TestParseSwitch: MCM_BENCH_BOOTSTRAP_TOKEN's values.
func TestParseSwitch(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "1": true, "true": true} {
		if got, err := parseSwitch(v); err != nil || got != want {
			t.Errorf("parseSwitch(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"yes", "2", "TRUE "} {
		if _, err := parseSwitch(v); err == nil {
			t.Errorf("parseSwitch(%q) accepted", v)
		}
	}
}

// TestParseManagerEnv: MCM_BENCH_MANAGER_ENV's entries.
func TestParseManagerEnv(t *testing.T) {
	got, err := parseManagerEnv(" GOMEMLIMIT=130MiB  GOGC=50 ")
	if diff := cmp.Diff([]string{"GOMEMLIMIT=130MiB", "GOGC=50"}, got); err != nil || diff != "" {
		t.Errorf("parseManagerEnv: %v (-want +got):\n%s", err, diff)
	}
	if got, err := parseManagerEnv(""); err != nil || len(got) != 0 {
		t.Errorf("parseManagerEnv(\"\") = %q, %v; want none", got, err)
	}
	for _, s := range []string{"GOMEMLIMIT", "=130MiB", "GOGC=50 junk"} {
		if _, err := parseManagerEnv(s); err == nil {
			t.Errorf("parseManagerEnv(%q) accepted", s)
		}
	}
}

func TestParseSystems(t *testing.T) {
	got, err := parseSystems("mcm, gardener,mcm")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{systemRef, systemMCM}, got); diff != "" {
		t.Errorf("parseSystems (-want +got):\n%s", diff)
	}
	if _, err := parseSystems("mcm,kubectl"); err == nil || !strings.Contains(err.Error(), `unknown system "kubectl"`) {
		t.Errorf("parseSystems with an unknown system: %v", err)
	}
}

func TestWaves(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(seconds ...float64) []time.Time {
		var out []time.Time
		for _, s := range seconds {
			out = append(out, t0.Add(time.Duration(s*float64(time.Second))))
		}
		return out
	}
	for _, tc := range []struct {
		name           string
		created, ready []time.Time
		wantWaves      int
		wantGap        time.Duration
	}{
		{name: "nothing", wantWaves: 0},
		{name: "one wave, no gap", created: at(0, 0.1, 0.2), ready: at(5, 5.5, 6), wantWaves: 1},
		{
			// Waves at 0, 6.2 and 12.5; the nodes that let them start
			// were Ready at 6 and 11.5.
			name:      "three waves",
			created:   at(12.5, 0, 0.3, 6.2, 6.4, 12.6),
			ready:     at(6, 5, 5.5, 11, 11.5, 17, 17.2),
			wantWaves: 3, wantGap: time.Second,
		},
		{
			// Creations that trickle less than the pause apart are one wave.
			name: "trickle", created: at(0, 2, 4, 6, 8), ready: at(5, 7), wantWaves: 1,
		},
		{
			// A wave before any node was Ready has no gap to measure.
			name: "no ready node before the second wave", created: at(0, 10), wantWaves: 2,
		},
		{
			// A node Ready exactly as the wave starts does not count as
			// before it.
			name: "ready at the wave's start", created: at(0, 10), ready: at(4, 10), wantWaves: 2, wantGap: 6 * time.Second,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waves, gap := waves(tc.created, tc.ready, 2500*time.Millisecond)
			if waves != tc.wantWaves || gap != tc.wantGap {
				t.Errorf("waves = %d, longest gap %v; want %d, %v", waves, gap, tc.wantWaves, tc.wantGap)
			}
		})
	}
}

// TestGenerations: batches and a stream of the same surge take the same
// generations; an overshoot takes fewer with more booting.
func TestGenerations(t *testing.T) {
	at := func(created, ready float64) boot {
		b := boot{created: time.Unix(0, 0).Add(time.Duration(created * float64(time.Second)))}
		if ready >= 0 {
			b.ready = time.Unix(0, 0).Add(time.Duration(ready * float64(time.Second)))
		}
		return b
	}
	for _, tc := range []struct {
		name            string
		boots           []boot
		wantGenerations int
		wantBooting     int
	}{
		{name: "nothing"},
		// Surge 2, four machines: two batches.
		{name: "batches", boots: []boot{at(0, 5), at(0, 5), at(6, 11), at(6, 11)}, wantGenerations: 2, wantBooting: 2},
		// Surge 2 as a stream: each Ready lets one machine start.
		{name: "stream", boots: []boot{at(0, 5), at(0, 7), at(5.1, 10), at(7.1, 12), at(10.1, 15), at(12.1, -1)}, wantGenerations: 3, wantBooting: 2},
		// All four at once: one generation, four booting.
		{name: "overshoot", boots: []boot{at(0, 5), at(0, 5), at(0, 5), at(0, 5)}, wantGenerations: 1, wantBooting: 4},
		// Ready exactly at a creation does not count as before it.
		{name: "ready at the creation", boots: []boot{at(0, 5), at(5, 10)}, wantGenerations: 1, wantBooting: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gens, booting := generations(tc.boots)
			if gens != tc.wantGenerations || booting != tc.wantBooting {
				t.Errorf("generations = %d, at most %d booting; want %d, %d", gens, booting, tc.wantGenerations, tc.wantBooting)
			}
		})
	}
}

// TestTable renders both systems and their ratio, a failed run, and the
// breakdown of the writes by who made them.
func TestTable(t *testing.T) {
	results := []result{
		{
			Scenario: "M", Machines: 100, Boot: "at once", System: systemMCM, Wall: 10 * time.Second,
			ReadyToRunningP50: 2 * time.Second, ReadyToRunningP99: 4 * time.Second,
			Writes:        measure.Requests{"PUT machines": 300, "POST nodes": 100, "PATCH nodes": 100, "POST events": 100},
			ManagerWrites: measure.Requests{"PUT machines": 300},
			KubeletWrites: measure.Requests{"POST nodes": 100},
			PeakRSS:       100 << 20, CPU: 4 * time.Second,
			Processes: []processUsage{{Name: "machine-controller", PeakRSS: 60 << 20, CPU: 3 * time.Second}},
		},
		{
			Scenario: "M", Machines: 100, Boot: "at once", System: systemRef, Wall: 5 * time.Second,
			ReadyToRunningP50: time.Second, ReadyToRunningP99: time.Second,
			Writes:        measure.Requests{"PATCH machines": 150, "POST nodes": 100, "PATCH nodes": 100, "POST events": 50},
			ManagerWrites: measure.Requests{"PATCH machines": 150},
			KubeletWrites: measure.Requests{"POST nodes": 100},
			PeakRSS:       50 << 20, CPU: time.Second,
		},
		{Scenario: "R", Machines: 1000, Boot: "1m0s", System: systemMCM, Error: "timed out after 30m0s waiting for the rollout\nmore detail"},
		{
			Scenario: "R", Machines: 1000, Boot: "1m0s", System: systemRef, Wall: time.Minute, Waves: 10, Generations: 10, PeakBooting: 100, LongestGap: 1500 * time.Millisecond,
			Writes: measure.Requests{"POST machines": 1000},
		},
	}
	got := table(results, []string{systemMCM, systemRef})
	for _, want := range []string{
		"M   100  at once  MCM v0.62.1  10.0 s     600            6.00       3.00   100 MiB  4.0 s Ready→Running p50 2.00 s, p99 4.00 s",
		"M   100  at once          mcm   5.0 s     400            4.00       1.50    50 MiB  1.0 s Ready→Running p50 1.00 s, p99 1.00 s",
		"M   100  at once    mcm / MCM   0.50×   0.67×                      0.50×     0.50×  0.25× Ready→Running p50 0.50×, p99 0.25×",
		"R  1000     1m0s  MCM v0.62.1  failed",
		"R N=1000 (boot 1m0s), MCM v0.62.1 failed: timed out after 30m0s waiting for the rollout\n",
		"0.0 s 10 waves, 10 generations, at most 100 booting, longest gap 1.5 s\n",
		"  the manager's own, 300:\n       300 PUT machines\n",
		"  the control plane's and others, 200:\n       100 PATCH nodes\n       100 POST events\n",
		"machine-controller 60 MiB peak, 3.0 s CPU in its life",
		"    more detail",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "mcm / MCM  failed") || strings.Count(got, "mcm / MCM") != 1 {
		t.Errorf("a ratio against a failed run:\n%s", got)
	}
}

// TestTableScaleDown: a scale-down's writes per machine are per machine
// it deleted.
func TestTableScaleDown(t *testing.T) {
	got := table([]result{{
		Scenario: "P", Machines: 1000, Boot: "0s+0-3s", System: systemRef, Wall: time.Minute, Deleted: 900,
		Writes: measure.Requests{"DELETE machines": 900, "POST pods/eviction": 900}, ManagerWrites: measure.Requests{"DELETE machines": 900, "POST pods/eviction": 900},
	}}, []string{systemRef})
	if want := "P  1000  0s+0-3s     mcm  60.0 s    1800            2.00       2.00     0 MiB  0.0 s 900 of 1000 machines deleted, 1 pod each"; !strings.Contains(got, want) {
		t.Errorf("the table lacks %q:\n%s", want, got)
	}
}
