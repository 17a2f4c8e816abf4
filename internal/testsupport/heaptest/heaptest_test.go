package heaptest

import (
	"testing"
)

// BenchmarkRetained: a kept slice of 1 KiB per iteration reports about
// 1024 retained bytes per iteration, and the garbage build makes on the
// way is not counted.
func BenchmarkRetained(b *testing.B) {
	Retained(b, "iteration", func() any {
		kept := make([][]byte, b.N)
		for i := range kept {
			_ = make([]byte, 4096) // garbage
			kept[i] = make([]byte, 1024)
		}
		return kept
	})
}

// TestRetained checks BenchmarkRetained's figure: within 10 % of 1 KiB
// plus the slice header the kept slice holds per iteration.
func TestRetained(t *testing.T) {
	r := testing.Benchmark(BenchmarkRetained)
	got := r.Extra["retained-B/iteration"]
	if want := 1024.0 + 24; got < want*0.9 || got > want*1.1 {
		t.Errorf("retained %.0f B per iteration over %d, want about %.0f", got, r.N, want)
	}
}
