package machine

import "time"

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
