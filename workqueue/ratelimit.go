package workqueue

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// bucketLimiter is the overall token bucket in front of the per-key backoff:
// it only delays keys when many fail at once, and then keeps their retries
// from hammering the API server or the cloud provider. It runs on the queue's
// clock, so a fake clock steps through it like through every other delay.
//
// Like a reservation on a token bucket, a key that finds the bucket empty is
// given the time at which its token will have accrued; the bucket goes into
// debt, and later keys queue up behind it.
type bucketLimiter[K comparable] struct {
	clock clock.PassiveClock
	qps   float64
	burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newBucketLimiter[K comparable](c clock.PassiveClock, qps, burst int) *bucketLimiter[K] {
	return &bucketLimiter[K]{clock: c, qps: float64(qps), burst: float64(burst), tokens: float64(burst), last: c.Now()}
}

// When takes a token and returns how long the caller must wait for it.
func (b *bucketLimiter[K]) When(K) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(b.burst, b.tokens+elapsed.Seconds()*b.qps)
		b.last = now
	}
	b.tokens--
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.qps * float64(time.Second))
}

// Forget is a no-op: the bucket is shared by all keys.
func (b *bucketLimiter[K]) Forget(K) {}

// NumRequeues is always 0: retries are counted by the per-key limiter.
func (b *bucketLimiter[K]) NumRequeues(K) int { return 0 }
