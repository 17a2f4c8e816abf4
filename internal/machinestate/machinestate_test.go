package machinestate

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/google/go-cmp/cmp"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestAvailable(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	m := func(phase v1alpha1.MachinePhase, since time.Duration, deleting bool) *v1alpha1.Machine {
		mm := &v1alpha1.Machine{}
		mm.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: phase, LastUpdateTime: metav1.NewTime(now.Add(-since))}
		if deleting {
			mm.DeletionTimestamp = &metav1.Time{Time: now}
		}
		return mm
	}
	for _, tc := range []struct {
		name     string
		m        *v1alpha1.Machine
		minReady time.Duration
		want     bool
	}{
		{"running long enough", m(v1alpha1.MachineRunning, time.Hour, false), time.Minute, true},
		{"running, not long enough", m(v1alpha1.MachineRunning, time.Second, false), time.Minute, false},
		{"running, no minReady", m(v1alpha1.MachineRunning, 0, false), 0, true},
		{"available without a target", m(v1alpha1.MachineAvailable, time.Hour, false), time.Minute, true},
		{"being deleted", m(v1alpha1.MachineRunning, time.Hour, true), 0, false},
		{"terminating phase", m(v1alpha1.MachineTerminating, time.Hour, false), 0, false},
		{"pending", m(v1alpha1.MachinePending, time.Hour, false), 0, false},
		{"unknown", m(v1alpha1.MachineUnknown, time.Hour, false), 0, false},
	} {
		if got := Available(tc.m, tc.minReady, now); got != tc.want {
			t.Errorf("%s: Available = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMarkedForDeletionAt(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		annotation map[string]string
		want       time.Time
		ok         bool
	}{
		{name: "no mark"},
		{name: "RFC 3339", annotation: map[string]string{v1alpha1.MarkedForDeletionTimeAnnotation: "2026-01-01T12:00:00Z"}, want: at, ok: true},
		{name: "another zone: the same instant", annotation: map[string]string{v1alpha1.MarkedForDeletionTimeAnnotation: "2026-01-01T13:00:00+01:00"}, want: at, ok: true},
		{name: "unparsable: no mark", annotation: map[string]string{v1alpha1.MarkedForDeletionTimeAnnotation: "yesterday"}},
	} {
		m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotation}}
		got, ok := MarkedForDeletionAt(m)
		if ok != tc.ok || !got.Equal(tc.want) {
			t.Errorf("%s: MarkedForDeletionAt = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// TestMinReady: minReadySeconds delays availability only with the opt-in,
// as MCM never applies it; an unknown value is MCM's behaviour too, and
// says so.
func TestMinReady(t *testing.T) {
	ann := func(v string) map[string]string { return map[string]string{v1alpha1.MinReadySecondsAnnotation: v} }
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		seconds     int32
		want        time.Duration
		wantErr     bool
	}{
		{name: "no annotation: not applied, as in MCM", seconds: 500},
		{name: "empty: not applied", annotations: ann(""), seconds: 500},
		{name: "ignore", annotations: ann(v1alpha1.MinReadySecondsIgnore), seconds: 500},
		{name: "apply", annotations: ann(v1alpha1.MinReadySecondsApply), seconds: 500, want: 500 * time.Second},
		{name: "apply without minReadySeconds", annotations: ann(v1alpha1.MinReadySecondsApply)},
		{name: "apply, negative minReadySeconds: at once", annotations: ann(v1alpha1.MinReadySecondsApply), seconds: -5},
		{name: "unknown value: not applied, and told", annotations: ann("Apply"), seconds: 500, wantErr: true},
		{name: "a typo", annotations: ann("aply"), seconds: 500, wantErr: true},
	} {
		got, err := MinReady(tc.annotations, tc.seconds)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: MinReady = %v, %v; want %v, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestPickAnnotations(t *testing.T) {
	keys := []string{"a", "b"}
	for _, tc := range []struct {
		in, want map[string]string
	}{
		{in: nil, want: nil},
		{in: map[string]string{"c": "1"}, want: nil},
		{in: map[string]string{"a": "", "c": "1"}, want: map[string]string{"a": ""}},
		{in: map[string]string{"a": "1", "b": "2", "c": "3"}, want: map[string]string{"a": "1", "b": "2"}},
	} {
		// cmp tells a nil map from an empty one: none picked is nil.
		if diff := cmp.Diff(tc.want, PickAnnotations(tc.in, keys)); diff != "" {
			t.Errorf("PickAnnotations(%v) (-want +got):\n%s", tc.in, diff)
		}
	}
}
