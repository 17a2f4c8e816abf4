package parallel

import (
	"context"
	"sync"
)

// Run calls each of work, at most limit at a time (at least one), and
// returns once all have returned. Its result holds the errors the calls
// returned, in the order of work, without the nils: reports built from it
// do not change with the order the answers came in. It starts no more
// goroutines than min(limit, len(work)), and none that outlive it.
func Run(ctx context.Context, limit int, work []func(context.Context) error) []error {
	if len(work) == 0 {
		return nil
	}
	results := make([]error, len(work))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(max(limit, 1), len(work)) {
		wg.Go(func() {
			for i := range next {
				results[i] = work[i](ctx)
			}
		})
	}
	for i := range work {
		next <- i
	}
	close(next)
	wg.Wait()
	var errs []error
	for _, err := range results {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
