package machinestate

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
