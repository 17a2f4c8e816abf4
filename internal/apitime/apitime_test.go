package apitime

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOfRoundTrips: a time made by Of is what the API server gives back
// for it, so a status holding it compares equal after a read; the time it
// was made from would not.
func TestOfRoundTrips(t *testing.T) {
	at := time.Date(2024, 5, 1, 14, 30, 7, 999_999_999, time.FixedZone("UTC+2", 2*60*60))
	got := Of(at)
	if want := time.Date(2024, 5, 1, 12, 30, 7, 0, time.UTC); got.Time != want {
		t.Errorf("Of(%v) = %v, want %v", at, got.Time, want)
	}
	readBack := func(mt metav1.Time) metav1.Time {
		raw, err := mt.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var back metav1.Time
		if err := back.UnmarshalJSON(raw); err != nil {
			t.Fatal(err)
		}
		return back
	}
	if back := readBack(got); !equality.Semantic.DeepEqual(back, got) {
		t.Errorf("Of's time read back as %v, want %v", back, got)
	}
	if raw := metav1.NewTime(at); equality.Semantic.DeepEqual(readBack(raw), raw) {
		t.Errorf("a time with nanoseconds read back equal; the test shows nothing")
	}
}
