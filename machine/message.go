package machine

import (
	"fmt"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

// Bounds, in bytes, of the messages the controller stores. Texts from
// outside — a driver's error, a node agent's reason, a node's conditions —
// can be of any size: one of 2 MB would make every status write fail
// (etcd refuses the request) and leave the machine without phase,
// lastOperation or event.
const (
	// maxStatusMessage bounds lastOperation.description and condition
	// messages: room for any real cloud error (AWS's encoded
	// authorization failure messages included) while a status stays far
	// below etcd's request limit.
	maxStatusMessage = 4096
	// maxEventMessage bounds event messages: events.k8s.io/v1 refuses a
	// note over 1024 bytes, and core events are kept as small.
	maxEventMessage = 1024
)

// boundMessage returns s as valid UTF-8 of at most limit bytes: s itself
// when it fits, else its head cut at a character boundary and followed by
// a suffix that says how many bytes were cut, so that a truncated text
// never looks whole. Invalid UTF-8 is replaced (U+FFFD) first, so that what
// is stored reads back the same and is never written again for a
// difference the API server's encoding would erase. Every text from
// outside that reaches a lastOperation, a condition or an event goes
// through it.
func boundMessage(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= limit {
		return s
	}
	// The suffix for the most bytes that can be cut is the longest; with
	// room for it, any shorter one fits too.
	keep := max(limit-len(cutSuffix(len(s))), 0)
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + cutSuffix(len(s)-keep)
}

// cutSuffix says that n bytes of a message were cut.
func cutSuffix(n int) string { return fmt.Sprintf("... [%d bytes truncated]", n) }

// boundedConditions returns copies of a node's conditions, as the
// machine's status holds them: their messages bounded, since whoever
// writes the node's status (the kubelet, a node problem detector) writes
// them.
func boundedConditions(conds []corev1.NodeCondition) []corev1.NodeCondition {
	var out []corev1.NodeCondition
	for _, c := range conds {
		c := *c.DeepCopy()
		c.Message = boundMessage(c.Message, maxStatusMessage)
		out = append(out, c)
	}
	return out
}
