package heaptest

import (
	"runtime"
	"testing"
)

// Retained runs build once, timed, between two measurements of the live
// heap, each after a full collection, keeps what build returns alive
// until the second, and reports the difference per b.N as
// retained-B/<unit>. What the benchmark built before the call is not
// counted; the caller keeps it alive past the call if it must not count
// as freed either.
func Retained(b *testing.B, unit string, build func() any) {
	b.Helper()
	before := heapAllocated()
	b.ResetTimer()
	kept := build()
	b.StopTimer()
	b.ReportMetric(float64(heapAllocated()-before)/float64(b.N), "retained-B/"+unit)
	runtime.KeepAlive(kept)
}

// heapAllocated is the live heap after a full collection.
func heapAllocated() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
