package machine

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// The controller's own timestamps (CreationStartedAnnotation and the like)
// are RFC 3339 with nanoseconds, in UTC; API times (apitime.Of) have
// one-second precision.

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseTime(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// timestampAnnotations are the annotations in which the controller keeps
// the times it reads back to run a timeout or a drain: when the creation
// started (creation timeout), when the machine turned unhealthy (health
// timeout), when an in-place drain began (its drain timeout).
var timestampAnnotations = []string{CreationStartedAnnotation, UnhealthySinceAnnotation, InPlaceDrainStartedAnnotation}

// storedTime reads the controller's timestamp in annotation key of m, and
// whether there is one that parses. The annotations are anyone's to write
// who may patch the machine, and a leader's clock may run ahead of the
// next leader's, so the time is kept within what the controller can vouch
// for: never before floor (the creation start never precedes the
// machine's creation; zero for no floor) nor after now (see clampTime).
func storedTime(m *v1alpha1.Machine, key string, floor, now time.Time) (t time.Time, ok bool) {
	t, ok = parseTime(m.Annotations[key])
	if !ok {
		return time.Time{}, false
	}
	t, _ = clampTime(t, floor, now)
	return t, true
}

// clampTime is the one rule for a time the controller reads back from its
// own annotations: a time before floor is floor,
// and a time after now is now — a timestamp in the future would put a
// timeout off for as long as it stays ahead. future reports the latter,
// which the caller stores and reports (clampFutureTimes).
func clampTime(t, floor, now time.Time) (_ time.Time, future bool) {
	switch {
	case t.After(now):
		return now, true
	case t.Before(floor):
		return floor, false
	}
	return t, false
}

// clampFutureTimes rewrites every timestamp annotation of m that lies in
// the future to now, and returns the Warning event that reports it (nil
// when none did). Stored, the clamped time is no longer in the future: the
// event and its log line come once, and the timeouts count from now, as
// for a machine whose time was written now.
func clampFutureTimes(m *v1alpha1.Machine, now time.Time) *event {
	var clamped []string
	for _, key := range timestampAnnotations {
		t, ok := parseTime(m.Annotations[key])
		if !ok {
			continue
		}
		if _, future := clampTime(t, time.Time{}, now); future {
			clamped = append(clamped, fmt.Sprintf("%s=%s", key, m.Annotations[key]))
			setAnnotation(m, key, formatTime(now))
		}
	}
	if len(clamped) == 0 {
		return nil
	}
	slices.Sort(clamped)
	return &event{Type: corev1.EventTypeWarning, Reason: ReasonFutureTimestamp,
		Message: fmt.Sprintf("Timestamps in the future set to now (%s): %s", formatTime(now), strings.Join(clamped, ", "))}
}
