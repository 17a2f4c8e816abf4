package manager

import (
	"os"
	"runtime/debug"
)

// defaultGCPercent is the garbage collector's target Main sets when the
// environment sets no GOGC. A manager's live heap is almost all informer
// cache, which stays as long as the process; Go's default (100) lets the
// heap grow to twice that before collecting, and that headroom is most of
// the process's memory. At 40 the heap grows to 1.4 times the cache. In
// the benchmark's 10 000 machines (bench/README.md, scenario X), three
// runs at 40 peaked at 137, 138 and 137 MiB, four at 50 at 146 to 152 MiB
// (131 to 152 steady), with the same CPU for runs of the same length (95.1
// and 96.5 s at 40 against 98.7 s at 50, over 221 to 226 s): little of
// what the manager allocates outlives a sync, and at steady state it
// allocates almost nothing, so collecting more often costs almost nothing.
const defaultGCPercent = 40

// gcPercent returns the target Main sets, and false when the environment
// sets GOGC: the runtime follows that already.
func gcPercent(lookupEnv func(string) (string, bool)) (int, bool) {
	if _, set := lookupEnv("GOGC"); set {
		return 0, false
	}
	return defaultGCPercent, true
}

// setGCPercent applies gcPercent to the process.
func setGCPercent() {
	if percent, ok := gcPercent(os.LookupEnv); ok {
		debug.SetGCPercent(percent)
	}
}
