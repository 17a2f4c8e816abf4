// Package heaptest measures, in benchmarks, how much heap the objects a
// cache keeps cost: what stays allocated after a full collection, per
// object, which is what a manager's memory grows by per machine.
//
// # Usage
//
//	func BenchmarkKept(b *testing.B) {
//		inputs := makeInputs(b.N)       // not counted: built before
//		kept := make([]any, b.N)        // not counted either
//		heaptest.Retained(b, "object", func() any {
//			for i := range kept {
//				kept[i] = transform(inputs[i])
//			}
//			return kept
//		})
//		runtime.KeepAlive(inputs) // alive until measured, so not counted as freed
//	}
package heaptest
