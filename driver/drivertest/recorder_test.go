package drivertest

import (
	"context"
	"fmt"
	"runtime"
	"sync"
)

// recorder is a TB that records failures instead of reporting them, so that
// the kit's own tests can run checks against broken drivers and assert
// which checks fail. Like testing.T, Fatalf and Skipf end the goroutine
// that calls them, the context ends before the clean-ups run, and clean-ups
// run last-in first-out.
type recorder struct {
	name   string
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	failed   bool
	skipped  bool
	logs     []string
	cleanups []func()
}

func (r *recorder) Helper()                  {}
func (r *recorder) Name() string             { return r.name }
func (r *recorder) Context() context.Context { return r.ctx }

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *recorder) log(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func (r *recorder) Logf(format string, args ...any) { r.log(format, args...) }

func (r *recorder) Errorf(format string, args ...any) {
	r.log(format, args...)
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.log(format, args...)
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}

// inGoroutine runs f in its own goroutine and waits for it, so that a
// Goexit from Fatalf or Skipf ends f only. A panic counts as a failure.
func (r *recorder) inGoroutine(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				r.Errorf("panic: %v", p)
			}
		}()
		f()
	}()
	<-done
}

// outcome is how one check went.
type outcome struct {
	failed, skipped bool
	logs            []string
}

// runIsolated runs every check against drivers from newDriver, each with
// its own recorder, and returns the outcome per check name.
func runIsolated(newDriver NewDriverFunc, opts Options) map[string]outcome {
	opts = opts.withDefaults()
	out := map[string]outcome{}
	for _, c := range checks {
		ctx, cancel := context.WithCancel(context.Background())
		r := &recorder{name: c.name, ctx: ctx, cancel: cancel}
		r.inGoroutine(func() { runCheck(r, c, newDriver, opts) })
		r.cancel()
		for i := len(r.cleanups) - 1; i >= 0; i-- {
			r.inGoroutine(r.cleanups[i])
		}
		out[c.name] = outcome{failed: r.failed, skipped: r.skipped, logs: r.logs}
	}
	return out
}

// failedChecks returns the names of the checks that failed, in run order.
func failedChecks(results map[string]outcome) []string {
	var failed []string
	for _, name := range CheckNames() {
		if results[name].failed {
			failed = append(failed, name)
		}
	}
	return failed
}
