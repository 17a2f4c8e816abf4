package workqueue

import "sync"

// lanes is the order in which client-go's queue hands keys out: keys marked
// first (Queue.AddFirst) before all others, each lane first in, first out.
// It implements client-go's workqueue.Queue, whose methods client-go calls
// under its own lock; mark comes from outside that lock, so lanes has a lock
// of its own.
//
// client-go holds a key at most once among the keys waiting, so a key is in
// at most one lane, except that a promotion leaves a stale entry behind in
// the ordinary lane, which Pop skips.
type lanes[K comparable] struct {
	mu sync.Mutex
	// marked keys go to the first lane when pushed or touched; the mark is
	// cleared when the key leaves the first lane.
	marked map[K]struct{}
	first  fifo[K]
	rest   fifo[K]
	// inFirst are the keys waiting in the first lane.
	inFirst map[K]struct{}
	// stale counts, per key, the entries of the ordinary lane left behind
	// by promotions; staleTotal is their sum.
	stale      map[K]int
	staleTotal int
}

func newLanes[K comparable]() *lanes[K] {
	return &lanes[K]{marked: map[K]struct{}{}, inFirst: map[K]struct{}{}, stale: map[K]int{}}
}

// mark makes the next push or touch of key put it into the first lane.
func (l *lanes[K]) mark(key K) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.marked[key] = struct{}{}
}

// Push adds a key that is not waiting.
func (l *lanes[K]) Push(key K) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.marked[key]; ok {
		l.first.push(key)
		l.inFirst[key] = struct{}{}
		return
	}
	l.rest.push(key)
}

// Touch is called when a waiting key is added again: a marked key waiting
// in the ordinary lane moves to the first.
func (l *lanes[K]) Touch(key K) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.marked[key]; !ok {
		return
	}
	if _, ok := l.inFirst[key]; ok {
		return
	}
	l.first.push(key)
	l.inFirst[key] = struct{}{}
	l.stale[key]++
	l.staleTotal++
}

// Len counts the waiting keys, stale entries not included.
func (l *lanes[K]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first.len() + l.rest.len() - l.staleTotal
}

// Pop takes the next key: from the first lane while it has one. client-go
// calls it only when Len is positive.
func (l *lanes[K]) Pop() K {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.first.len() > 0 {
		key := l.first.pop()
		delete(l.inFirst, key)
		delete(l.marked, key)
		return key
	}
	for {
		key := l.rest.pop()
		n := l.stale[key]
		if n == 0 {
			// A key marked while it waited here, before its add reached
			// Touch, keeps its mark: that add pushes it again once this
			// reconcile is done, and then into the first lane.
			return key
		}
		if n == 1 {
			delete(l.stale, key)
		} else {
			l.stale[key] = n - 1
		}
		l.staleTotal--
	}
}

// fifo is a slice-backed first-in, first-out list.
type fifo[K any] struct {
	items []K
}

func (f *fifo[K]) push(k K) { f.items = append(f.items, k) }

func (f *fifo[K]) len() int { return len(f.items) }

func (f *fifo[K]) pop() K {
	k := f.items[0]
	var zero K
	f.items[0] = zero // let the key be collected
	f.items = f.items[1:]
	return k
}
