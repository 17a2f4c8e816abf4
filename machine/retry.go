package machine

import (
	"sync"
	"time"

	"github.com/mcmkit/mcm/driver"
)

// retryClass is how soon a failed machine is tried again.
type retryClass int

const (
	retryNone retryClass = iota
	// retryShort: transient failures (Unavailable, DeadlineExceeded,
	// Aborted, Unknown, Canceled, Uninitialized): Options.ShortRetry.
	retryShort
	// retryMedium: everything else, bad input included: Options.MediumRetry.
	retryMedium
	// retryExhausted: ResourceExhausted: Options.ResourceExhaustedRetry.
	retryExhausted
)

// retryClassOf maps a driver error code to its retry class, as the issue
// and MCM do: Unavailable, DeadlineExceeded, Aborted and Unknown retry
// fast, ResourceExhausted on its own period, the rest medium.
func retryClassOf(code driver.Code) retryClass {
	switch code {
	case driver.OK:
		return retryNone
	case driver.Unavailable, driver.DeadlineExceeded, driver.Aborted, driver.Unknown,
		driver.Canceled, driver.Uninitialized:
		return retryShort
	case driver.ResourceExhausted:
		return retryExhausted
	default:
		return retryMedium
	}
}

// RetryDelay returns the wait before attempt number failures+1 of a
// machine whose last failure had the given driver error code: the code's
// base period (ShortRetry, MediumRetry or ResourceExhaustedRetry), doubled
// for each earlier consecutive failure, at most MaxRetryDelay (but never
// below the base). failures counts the failures so far, at least 1.
func (o *Options) RetryDelay(code driver.Code, failures int) time.Duration {
	return o.retryDelay(retryClassOf(code), failures)
}

func (o *Options) retryDelay(class retryClass, failures int) time.Duration {
	var base time.Duration
	switch class {
	case retryNone:
		return 0
	case retryShort:
		base = o.ShortRetry
	case retryExhausted:
		base = o.ResourceExhaustedRetry
	default:
		base = o.MediumRetry
	}
	limit := max(o.MaxRetryDelay, base)
	d := base
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// failureCounter counts consecutive failures per key, in memory, and
// holds a key's next creation until its backoff has passed (see
// updates.go). After a restart counting starts again, which only shortens
// one wait.
type failureCounter struct {
	mu sync.Mutex
	n  map[string]int
	// until is when a key's failure backoff ends.
	until map[string]time.Time
}

func (f *failureCounter) inc(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	f.n[key]++
	return f.n[key]
}

// hold records that key's backoff ends at until.
func (f *failureCounter) hold(key string, until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.until == nil {
		f.until = map[string]time.Time{}
	}
	f.until[key] = until
}

// held returns how long key's backoff still runs at now; 0 when it has
// passed or there is none.
func (f *failureCounter) held(key string, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return max(f.until[key].Sub(now), 0)
}

// release ends key's backoff now, keeping its count: what the creation is
// made from changed, so it is worth trying again at once, and a failure
// after that still waits longer than the last.
func (f *failureCounter) release(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.until, key)
}

func (f *failureCounter) reset(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.n, key)
	delete(f.until, key)
}
