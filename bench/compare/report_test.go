//go:build linux

package compare

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcmkit/mcm/bench/internal/measure"
)

// result is what one scenario of one system measured.
type result struct {
	Scenario string `json:"scenario"`
	Machines int    `json:"machines"`
	// Boot is how the VMs of the measured phase boot (runSpec.bootLabel).
	Boot   string `json:"boot"`
	System string `json:"system"`
	// Error says why the run failed; the figures are then incomplete.
	Error string `json:"error,omitempty"`

	// Wall is the measured phase: from the load generator's first request
	// until the scenario's end condition held.
	Wall time.Duration `json:"wall"`
	// Writes are the API server's write requests of the measured phase
	// and the settle period after it, the load generator's own
	// subtracted, by verb and resource.
	Writes measure.Requests `json:"writes"`
	// ManagerWrites are the writes of the system's controllers and
	// KubeletWrites those of the simulated kubelet registering Nodes, of
	// the same period, as the proxy between them and the API server
	// counted them; the rest of Writes are the control plane's
	// (kube-controller-manager's node lifecycle and TTL controllers, its
	// events) and the API server's own.
	ManagerWrites measure.Requests `json:"managerWrites"`
	KubeletWrites measure.Requests `json:"kubeletWrites"`
	// AgentWrites are those of the simulated node agent (I's in-place
	// updates: the result labels), counted by the proxy too.
	AgentWrites measure.Requests `json:"agentWrites,omitempty"`
	// Reads are the other requests of the same period (GET, LIST,
	// WATCH), the generator's subtracted, by verb and resource.
	Reads measure.Requests `json:"reads"`
	// GeneratorWrites counts the load generator's own writes, which
	// Writes excludes.
	GeneratorWrites int `json:"generatorWrites"`
	// PeakRSS is the largest sum of the resident set sizes of the
	// system's manager processes (the simulated cloud's left out),
	// sampled every 200 ms over their whole life (setup phases
	// included), in bytes; Processes has each one's own peak (VmHWM),
	// the simulated cloud's too.
	PeakRSS int64 `json:"peakRSS"`
	// CPU is the CPU time the system's manager processes used in the
	// measured phase and the settle period.
	CPU       time.Duration  `json:"cpu"`
	Processes []processUsage `json:"processes"`

	// M and D: from a node first seen Ready to its machine first seen
	// Running, the median and the 99th percentile over the machines
	// (reactionLatency).
	ReadyToRunningP50 time.Duration `json:"readyToRunningP50,omitempty"`
	ReadyToRunningP99 time.Duration `json:"readyToRunningP99,omitempty"`

	// S and P: the machines the scale-down deleted, by which the writes
	// per machine are divided.
	Deleted int `json:"deleted,omitempty"`

	// R only: the waves of machine creations of the rollout and the
	// longest time from a node of the rollout becoming Ready to the next
	// wave starting (see waves).
	Waves      int           `json:"waves,omitempty"`
	LongestGap time.Duration `json:"longestGap,omitempty"`
	// Generations and PeakBooting: see generations.
	Generations int `json:"generations,omitempty"`
	PeakBooting int `json:"peakBooting,omitempty"`

	// I only: the node agent's update delay, the most machines not
	// Running at once, and the VMs created and deleted (the run fails
	// unless both are 0).
	UpdateDelay    time.Duration `json:"updateDelay,omitempty"`
	PeakNotRunning int           `json:"peakNotRunning,omitempty"`
	VMsCreated     int           `json:"vmsCreated,omitempty"`
	VMsDeleted     int           `json:"vmsDeleted,omitempty"`

	// X only: the steady state after all machines run, for Steady: the
	// largest summed RSS in it, the CPU cores used on average and the
	// writes per second.
	Steady      time.Duration `json:"steady,omitempty"`
	SteadyRSS   int64         `json:"steadyRSS,omitempty"`
	SteadyCores float64       `json:"steadyCores,omitempty"`
	// SteadyAllWrites are the writes of the steady period, everyone's,
	// and SteadyManagerWrites the manager's own among them.
	SteadyAllWrites     measure.Requests `json:"steadyAllWrites,omitempty"`
	SteadyManagerWrites measure.Requests `json:"steadyManagerWrites,omitempty"`

	// Events counts the run's events by source and reason (the busiest),
	// to tell the managers' writes from the control plane's: events of
	// the whole run, setup phases included.
	Events []string `json:"events,omitempty"`
}

// processUsage is one process of a system.
type processUsage struct {
	Name    string        `json:"name"`
	PeakRSS int64         `json:"peakRSS"` // VmHWM, bytes
	CPU     time.Duration `json:"cpu"`     // over its whole life
}

// perMachine is what the per-machine figures divide by: the machines
// the scale-downs deleted, N otherwise.
func (r result) perMachine() float64 {
	if r.Deleted > 0 {
		return float64(r.Deleted)
	}
	return float64(r.Machines)
}

func (r result) writesPerMachine() float64 {
	return float64(r.Writes.Total()) / r.perMachine()
}

// steadyWritesPerSecond is X's rate of writes in the steady period.
func (r result) steadyWritesPerSecond() float64 {
	if r.Steady <= 0 {
		return 0
	}
	return float64(r.SteadyAllWrites.Total()) / r.Steady.Seconds()
}

func (r result) managerWritesPerMachine() float64 {
	return float64(r.ManagerWrites.Total()) / r.perMachine()
}

// table renders the results: one block per scenario and machine count,
// one row per system and the ratio mcm / MCM when both ran, then the
// writes of each run by verb and resource and the scenario-specific
// figures.
func table(results []result, systems []string) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tN\tboot\tsystem\twall\twrites\twrites/machine\tmanager's\tpeak RSS\tCPU\t extra")
	type key struct {
		scenario string
		n        int
		boot     string
	}
	var keys []key
	bySystem := map[key]map[string]result{}
	for _, r := range results {
		k := key{r.Scenario, r.Machines, r.Boot}
		if bySystem[k] == nil {
			bySystem[k] = map[string]result{}
			keys = append(keys, k)
		}
		bySystem[k][r.System] = r
	}
	var failures []string
	for _, k := range keys {
		for _, system := range systems {
			r, ok := bySystem[k][system]
			if !ok {
				continue
			}
			if r.Error != "" {
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\tfailed\t\t\t\t\t\t\n", k.scenario, k.n, k.boot, systemLabels[system])
				failures = append(failures, fmt.Sprintf("%s N=%d (boot %s), %s failed: %s", k.scenario, k.n, k.boot, systemLabels[system], firstLine(r.Error)))
				continue
			}
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%.1f s\t%d\t%.2f\t%.2f\t%.0f MiB\t%.1f s\t %s\n", k.scenario, k.n, k.boot, systemLabels[system],
				r.Wall.Seconds(), r.Writes.Total(), r.writesPerMachine(), r.managerWritesPerMachine(), mib(r.PeakRSS), r.CPU.Seconds(), extra(r))
		}
		theirs, okT := bySystem[k][systemMCM]
		ours, okO := bySystem[k][systemRef]
		if okT && okO && theirs.Error == "" && ours.Error == "" {
			fmt.Fprintf(w, "%s\t%d\t%s\tmcm / MCM\t%s\t%s\t%s\t%s\t%s\t%s\t %s\n", k.scenario, k.n, k.boot,
				ratio(ours.Wall.Seconds(), theirs.Wall.Seconds()),
				ratio(float64(ours.Writes.Total()), float64(theirs.Writes.Total())), "",
				ratio(float64(ours.ManagerWrites.Total()), float64(theirs.ManagerWrites.Total())),
				ratio(float64(ours.PeakRSS), float64(theirs.PeakRSS)),
				ratio(ours.CPU.Seconds(), theirs.CPU.Seconds()),
				extraRatio(ours, theirs))
		}
	}
	_ = w.Flush()
	for _, f := range failures {
		b.WriteString(f + "\n")
	}

	b.WriteString("\nWrites by who made them, verb and resource, and where the events came from:\n")
	for _, k := range keys {
		for _, system := range systems {
			r, ok := bySystem[k][system]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "\n%s N=%d (boot %s), %s:", k.scenario, k.n, k.boot, systemLabels[system])
			if r.Error != "" {
				fmt.Fprintf(&b, " failed:\n%s\n", indent(r.Error))
				continue
			}
			others := r.Writes.Minus(r.ManagerWrites).Minus(r.KubeletWrites).Minus(r.AgentWrites)
			fmt.Fprintf(&b, " %d writes (the load generator's %d not included), %d reads\n", r.Writes.Total(), r.GeneratorWrites, r.Reads.Total())
			fmt.Fprintf(&b, "  the manager's own, %d:\n%s", r.ManagerWrites.Total(), r.ManagerWrites.Top(len(r.ManagerWrites)))
			fmt.Fprintf(&b, "  the simulated kubelet's (Node registration), %d:\n%s", r.KubeletWrites.Total(), r.KubeletWrites.Top(len(r.KubeletWrites)))
			if len(r.AgentWrites) > 0 {
				fmt.Fprintf(&b, "  the simulated node agent's (update results), %d:\n%s", r.AgentWrites.Total(), r.AgentWrites.Top(len(r.AgentWrites)))
			}
			fmt.Fprintf(&b, "  the control plane's and others, %d:\n%s", others.Total(), others.Top(len(others)))
			var procs []string
			for _, p := range r.Processes {
				procs = append(procs, fmt.Sprintf("%s %.0f MiB peak, %.1f s CPU in its life", p.Name, mib(p.PeakRSS), p.CPU.Seconds()))
			}
			if len(procs) > 0 {
				fmt.Fprintf(&b, "  processes: %s\n", strings.Join(procs, "; "))
			}
			if r.Steady > 0 {
				fmt.Fprintf(&b, "  in the steady period (%v), %d writes, the manager's %d:\n%s", r.Steady.Round(time.Second),
					r.SteadyAllWrites.Total(), r.SteadyManagerWrites.Total(), r.SteadyAllWrites.Top(len(r.SteadyAllWrites)))
			}
			if len(r.Events) > 0 {
				fmt.Fprintf(&b, "  events of the run by source and reason:\n%s\n", indent(strings.Join(r.Events, "\n")))
			}
		}
	}
	return b.String()
}

// extra is the scenario's own figures: R's waves and longest gap, I's
// update delay, unavailability and VMs, X's steady state.
func extra(r result) string {
	switch r.Scenario {
	case "I":
		return inPlaceExtra(r)
	case "R":
		return fmt.Sprintf("%d waves, %d generations, at most %d booting, longest gap %.1f s", r.Waves, r.Generations, r.PeakBooting, r.LongestGap.Seconds())
	case "X":
		return fmt.Sprintf("steady: %.0f MiB, %.2f cores, %.1f writes/s", mib(r.SteadyRSS), r.SteadyCores, r.steadyWritesPerSecond())
	case "M", "D":
		return fmt.Sprintf("Ready→Running p50 %.2f s, p99 %.2f s", r.ReadyToRunningP50.Seconds(), r.ReadyToRunningP99.Seconds())
	case "S", "P":
		return scaleDownExtra(r)
	}
	return ""
}

func extraRatio(ours, theirs result) string {
	switch ours.Scenario {
	case "X":
		return fmt.Sprintf("steady: RSS %s, CPU %s", ratio(float64(ours.SteadyRSS), float64(theirs.SteadyRSS)), ratio(ours.SteadyCores, theirs.SteadyCores))
	case "M", "D":
		return fmt.Sprintf("Ready→Running p50 %s, p99 %s", ratio(ours.ReadyToRunningP50.Seconds(), theirs.ReadyToRunningP50.Seconds()), ratio(ours.ReadyToRunningP99.Seconds(), theirs.ReadyToRunningP99.Seconds()))
	}
	return ""
}

func ratio(ours, theirs float64) string {
	if theirs == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", ours/theirs)
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = "    " + lines[i]
	}
	return strings.Join(lines, "\n")
}

// waves groups the creations of a rollout's new machines into waves and
// measures how promptly each wave followed the nodes that became Ready
// before it. A wave is a run of creations in which no two consecutive ones
// are more than pause apart: the creations a controller makes when
// machines became available, told apart by the boot delay that passes
// before the next machines can become available. The gap of a wave is the
// time from the last node of the rollout that became Ready before the
// wave's first creation to that creation: how long the controllers took
// to act on a node that let the rollout go on. The first wave has none.
func waves(created, ready []time.Time, pause time.Duration) (count int, longestGap time.Duration) {
	created = slices.Clone(created)
	slices.SortFunc(created, func(a, b time.Time) int { return a.Compare(b) })
	ready = slices.Clone(ready)
	slices.SortFunc(ready, func(a, b time.Time) int { return a.Compare(b) })
	for i, c := range created {
		if i > 0 && c.Sub(created[i-1]) <= pause {
			continue
		}
		count++
		if count == 1 {
			continue
		}
		// The last Ready strictly before c.
		j, _ := slices.BinarySearchFunc(ready, c, func(a, b time.Time) int { return a.Compare(b) })
		if j == 0 {
			continue
		}
		longestGap = max(longestGap, c.Sub(ready[j-1]))
	}
	return count, longestGap
}

// generations measures a rollout by its boots rather than by pauses
// between creations. A machine's generation is one more than the highest
// generation among the rollout's machines whose node was Ready before the
// machine was created (1 for those created before any was): how many boots
// had to follow one another before it could start. The rollout's
// generations are the highest of them, and peakBooting the most machines
// created and not yet Ready at any time. A rollout that never has more
// than maxSurge booting takes at least ceil(N / maxSurge) generations:
// exactly that in batches of equal boots, one wave a generation; more
// when it streams, each Ready node at once letting the next machine start
// (then no pause separates waves), and boot times vary, as the machines
// that happen to boot fast make a longer chain in the same time. Fewer
// generations with more than maxSurge booting is an overshoot.
func generations(boots []boot) (count, peakBooting int) {
	boots = slices.Clone(boots)
	slices.SortFunc(boots, func(a, b boot) int { return a.created.Compare(b.created) })
	gen := make([]int, len(boots))
	for i, b := range boots {
		gen[i] = 1
		for j, prev := range boots[:i] {
			if !prev.ready.IsZero() && prev.ready.Before(b.created) {
				gen[i] = max(gen[i], gen[j]+1)
			}
		}
		count = max(count, gen[i])
	}
	// Booting: +1 at creation, -1 at Ready; at equal times Ready first.
	type change struct {
		at    time.Time
		delta int
	}
	var changes []change
	for _, b := range boots {
		changes = append(changes, change{b.created, 1})
		if !b.ready.IsZero() {
			changes = append(changes, change{b.ready, -1})
		}
	}
	slices.SortFunc(changes, func(a, b change) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta
	})
	booting := 0
	for _, c := range changes {
		booting += c.delta
		peakBooting = max(peakBooting, booting)
	}
	return count, peakBooting
}
