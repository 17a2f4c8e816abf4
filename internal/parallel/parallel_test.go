package parallel

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRunBoundsAndOrders: Run keeps at most limit calls in flight, reaches
// that many when there is work for them, and returns the failures in the
// order of work whatever order they finished in.
func TestRunBoundsAndOrders(t *testing.T) {
	for _, tc := range []struct{ limit, calls, wantPeak int }{
		{limit: 4, calls: 10, wantPeak: 4},
		{limit: 16, calls: 3, wantPeak: 3},
		{limit: 0, calls: 3, wantPeak: 1},
	} {
		t.Run(fmt.Sprintf("limit %d, %d calls", tc.limit, tc.calls), func(t *testing.T) {
			var inFlight, peak atomic.Int32
			var work []func(context.Context) error
			for i := range tc.calls {
				work = append(work, func(context.Context) error {
					n := inFlight.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					// Later calls finish first, so the answers come back out of order.
					time.Sleep(time.Duration(tc.calls-i) * 5 * time.Millisecond)
					inFlight.Add(-1)
					if i%2 == 1 {
						return fmt.Errorf("call %d", i)
					}
					return nil
				})
			}
			errs := Run(context.Background(), tc.limit, work)
			if got := int(peak.Load()); got != tc.wantPeak {
				t.Errorf("at most %d calls in flight, want %d", got, tc.wantPeak)
			}
			var got, want []string
			for _, err := range errs {
				got = append(got, err.Error())
			}
			for i := 1; i < tc.calls; i += 2 {
				want = append(want, fmt.Sprintf("call %d", i))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunNothing(t *testing.T) {
	if errs := Run(context.Background(), 4, nil); errs != nil {
		t.Errorf("Run of no work = %v, want nil", errs)
	}
}

func ExampleRun() {
	var done atomic.Int32
	work := []func(context.Context) error{
		func(context.Context) error { done.Add(1); return nil },
		func(context.Context) error { done.Add(1); return errors.New("node b: conflict") },
		func(context.Context) error { done.Add(1); return nil },
	}
	errs := Run(context.Background(), 2, work)
	fmt.Println(done.Load(), "calls;", errors.Join(errs...))
	// Output: 3 calls; node b: conflict
}
