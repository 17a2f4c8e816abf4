// Package dedup keeps a controller from telling the same thing again and
// again: an event about a standing situation (a frozen set holding back
// machines) is recorded when the situation starts or changes, not at every
// sync. A controller uses a status condition for this where it owns one;
// this is for situations another controller owns the condition of.
//
// The memory is the process's: after a restart a standing situation is
// told once more, which is what an operator reading events expects.
//
// # Usage
//
//	var told dedup.Messages
//	if told.First(key, msg) {
//		recorder.Eventf(obj, corev1.EventTypeWarning, reason, "%s", msg)
//	}
//	// when the situation ends:
//	told.Forget(key)
package dedup

import "sync"

// Messages remembers the last message told per key. The zero value is
// ready to use; it is safe for concurrent use.
type Messages struct {
	mu   sync.Mutex
	last map[string]string
}

// First reports whether msg is new for key (not the last one told for it)
// and remembers it.
func (m *Messages) First(key, msg string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[string]string{}
	}
	if prev, ok := m.last[key]; ok && prev == msg {
		return false
	}
	m.last[key] = msg
	return true
}

// Forget drops what was told for key: the next message is new again.
func (m *Messages) Forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, key)
}
