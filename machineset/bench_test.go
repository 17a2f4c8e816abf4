package machineset_test

import (
	"fmt"
	"testing"
)

// BenchmarkScaleUpWrites scales a set from 0 to n machines with the
// default options and reports the API writes (create, update, patch,
// delete) the controller made per machine created: the machine's create
// plus its share of the finalizer and status writes. Time per operation is
// mostly the fake API server's and the informers'; the writes are the
// figure.
func BenchmarkScaleUpWrites(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		b.Run(fmt.Sprintf("machines=%d", n), func(b *testing.B) {
			var writes, created int
			for b.Loop() {
				w := newCrashWorld(int32(n), 100)
				w.client.ClearActions()
				w.runIncarnation(b, 0, 0, w.converged)
				if !w.converged() {
					b.Fatalf("set did not reach %d machines", n)
				}
				for _, a := range w.client.Actions() {
					switch a.GetVerb() {
					case "create", "update", "patch", "delete":
						writes++
					}
				}
				created += w.created
			}
			b.ReportMetric(float64(writes)/float64(created), "writes/machine")
		})
	}
}
