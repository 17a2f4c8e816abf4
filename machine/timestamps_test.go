package machine

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestClampTime(t *testing.T) {
	floor := t0.Add(-time.Hour)
	type result struct {
		T      time.Time
		Future bool
	}
	tests := []struct {
		name  string
		t     time.Time
		floor time.Time
		want  result
	}{
		{"between floor and now", t0.Add(-time.Minute), floor, result{t0.Add(-time.Minute), false}},
		{"now", t0, floor, result{t0, false}},
		{"before the floor", floor.Add(-time.Second), floor, result{floor, false}},
		{"no floor", floor.Add(-time.Second), time.Time{}, result{floor.Add(-time.Second), false}},
		{"a nanosecond ahead", t0.Add(time.Nanosecond), floor, result{t0, true}},
		{"2099", time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), floor, result{t0, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, future := clampTime(tc.t, tc.floor, t0)
			if diff := cmp.Diff(tc.want, result{got, future}); diff != "" {
				t.Errorf("clampTime (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClampFutureTimes(t *testing.T) {
	future := "2099-01-01T00:00:00Z"
	past := formatTime(t0.Add(-time.Minute))
	tests := []struct {
		name        string
		annotations map[string]string
		want        map[string]string
		// event: the keys the event names; nil for no event.
		event []string
	}{
		{"nothing stored", map[string]string{}, map[string]string{}, nil},
		{"past times stay", map[string]string{CreationStartedAnnotation: past, UnhealthySinceAnnotation: past},
			map[string]string{CreationStartedAnnotation: past, UnhealthySinceAnnotation: past}, nil},
		{"a future creation start is now", map[string]string{CreationStartedAnnotation: future, UnhealthySinceAnnotation: past},
			map[string]string{CreationStartedAnnotation: formatTime(t0), UnhealthySinceAnnotation: past}, []string{CreationStartedAnnotation}},
		{"every future time is now", map[string]string{CreationStartedAnnotation: future, UnhealthySinceAnnotation: future, InPlaceDrainStartedAnnotation: future},
			map[string]string{CreationStartedAnnotation: formatTime(t0), UnhealthySinceAnnotation: formatTime(t0), InPlaceDrainStartedAnnotation: formatTime(t0)},
			[]string{CreationStartedAnnotation, InPlaceDrainStartedAnnotation, UnhealthySinceAnnotation}},
		{"what does not parse is its reader's", map[string]string{UnhealthySinceAnnotation: "tomorrow"}, map[string]string{UnhealthySinceAnnotation: "tomorrow"}, nil},
		{"other keys are not the clamp's", map[string]string{"example.com/at": future}, map[string]string{"example.com/at": future}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := baseMachine()
			m.Annotations = tc.annotations
			e := clampFutureTimes(m, t0)
			if diff := cmp.Diff(tc.want, m.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			if tc.event == nil {
				if e != nil {
					t.Errorf("event %+v, want none", e)
				}
				return
			}
			if e == nil || e.Type != corev1.EventTypeWarning || e.Reason != ReasonFutureTimestamp {
				t.Fatalf("event %+v, want a Warning %s", e, ReasonFutureTimestamp)
			}
			for _, key := range tc.event {
				if !strings.Contains(e.Message, key+"="+future) {
					t.Errorf("event %q does not name %s", e.Message, key)
				}
			}
		})
	}
}

// TestFutureTimestampsDoNotPutTimeoutsOff: a creation start or an
// unhealthy-since in 2099 is stored as now and reported once, and the
// creation and health timeouts then run out as they do for a time
// written now.
func TestFutureTimestampsDoNotPutTimeoutsOff(t *testing.T) {
	o := testOptions(t)
	tests := []struct {
		name    string
		machine func() *v1alpha1.Machine
		node    *corev1.Node
		timeout func(v1alpha1.MachineConfiguration) time.Duration
		want    v1alpha1.MachinePhase
	}{
		{"creation start", func() *v1alpha1.Machine {
			m := withPhase(baseMachine(), "", "p1")
			m.CreationTimestamp.Time = t0
			m.Annotations = map[string]string{CreationStartedAnnotation: "2099-01-01T00:00:00Z"}
			return m
		}, nil, func(c v1alpha1.MachineConfiguration) time.Duration { return c.MachineCreationTimeout.Duration }, v1alpha1.MachineFailed},
		{"unhealthy since", func() *v1alpha1.Machine {
			m := withPhase(baseMachine(), v1alpha1.MachineUnknown, "p1")
			m.Annotations = map[string]string{UnhealthySinceAnnotation: "2099-01-01T00:00:00Z"}
			return m
		}, node(cond(corev1.NodeReady, corev1.ConditionUnknown)),
			func(c v1alpha1.MachineConfiguration) time.Duration { return c.MachineHealthTimeout.Duration }, v1alpha1.MachineFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := obsFor(tc.machine())
			obs.Node = tc.node
			p := planMachine(obs, o)
			if p.Clamped == nil || p.Clamped.Reason != ReasonFutureTimestamp {
				t.Fatalf("not reported: %+v", p.Clamped)
			}
			if ph := p.Machine.Status.CurrentStatus.Phase; ph == tc.want {
				t.Fatalf("phase %q at once", ph)
			}
			// The next syncs start from the machine as written.
			obs.Machine = p.Machine
			obs.Now = t0.Add(tc.timeout(obs.Config) / 2)
			if p := planMachine(obs, o); p.Clamped != nil || p.Machine.Status.CurrentStatus.Phase == tc.want {
				t.Fatalf("half-way: reported again %+v, or phase %q", p.Clamped, p.Machine.Status.CurrentStatus.Phase)
			}
			obs.Now = t0.Add(tc.timeout(obs.Config) + time.Second)
			p = planMachine(obs, o)
			if got := p.Machine.Status.CurrentStatus.Phase; got != tc.want {
				t.Errorf("phase %q after the timeout, want %q (lastOperation %+v)", got, tc.want, p.Machine.Status.LastOperation)
			}
		})
	}
}
