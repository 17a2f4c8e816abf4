package machine

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The controller's own timestamps (CreationStartedAnnotation and the like)
// are RFC 3339 with nanoseconds, in UTC; API times have one-second
// precision.

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseTime(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

func metav1Time(t time.Time) metav1.Time { return metav1.NewTime(t.UTC().Truncate(time.Second)) }
