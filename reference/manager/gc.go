package manager

import (
	"os"
	"runtime/debug"
)

// defaultGCPercent is the garbage collector's target Main sets when the
// environment sets no GOGC. A manager's live heap is almost all informer
// cache, which stays as long as the process; Go's default (100) lets the
// heap grow to twice that before collecting, and that headroom is most of
// the process's memory. At 50 the heap grows to one and a half times the
// cache: in the benchmark's 10 000 machines (bench/README.md, scenario X)
// 151 to 162 MiB at the peak and 135 to 162 MiB steady over four runs,
// against 186 and 178 MiB at 100, for about 9 % more CPU over the run (94 s
// against 86 s); at steady state a manager allocates little, so collecting
// more often costs almost nothing there.
const defaultGCPercent = 50

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
