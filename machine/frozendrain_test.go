package machine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/apitime"
)

// frozenOutcome is what a test of a drain's frozen rules looks at: the
// pass's rules, the record left on the machine, and the start's mirror.
type frozenOutcome struct {
	Rules  drainRules
	Record flowRecord
	Mirror string
}

// TestFrozenDrains: the drain of an in-place update and of a preserved
// Failed machine run under the drain timeout and maxEvictRetries recorded
// in the machine's status when they began. A spec patched mid-drain (1s,
// 1 refusal) leaves the deadline and the bound as recorded; a drain
// without a record (its first pass, or one an older version began)
// records the spec's.
func TestFrozenDrains(t *testing.T) {
	long := drainParams{DrainTimeout: metav1.Duration{Duration: 2 * time.Hour}, MaxEvictRetries: 360}
	short := v1alpha1.MachineConfiguration{MachineDrainTimeout: &metav1.Duration{Duration: time.Second}, MaxEvictRetries: new(int32(1)),
		MachinePreserveTimeout: &metav1.Duration{Duration: 10000 * time.Hour}}
	longCfg := v1alpha1.MachineConfiguration{MachineDrainTimeout: &long.DrainTimeout, MaxEvictRetries: new(long.MaxEvictRetries),
		MachinePreserveTimeout: &metav1.Duration{Duration: testPreserveTimeout}}
	draining := func(since time.Time, d drainParams) flowRecord {
		return flowRecord{Reason: drainingReason, Since: apitime.Of(since), Drain: d}
	}
	selectedAt := t0.Add(-30 * time.Minute)
	selection := &corev1.NodeCondition{Type: v1alpha1.NodeInPlaceUpdate, Status: corev1.ConditionTrue,
		Reason: v1alpha1.SelectedForUpdate, LastTransitionTime: metav1.NewTime(selectedAt)}
	inPlace := func(from time.Time, d drainParams, force string) drainRules {
		return drainRules{Node: "n1", Start: from, Deadline: from.Add(d.DrainTimeout.Duration), MaxEvictRetries: int(d.MaxEvictRetries), ForceReason: force}
	}
	tests := []struct {
		name     string
		preserve bool                          // the preservation's drain, else the in-place update's
		record   *flowRecord                   // stored before the pass
		mirror   string                        // InPlaceDrainStartedAnnotation before the pass
		config   v1alpha1.MachineConfiguration // the machine's configuration now
		want     frozenOutcome
	}{
		{name: "in-place, first pass: records the spec's rules from now", config: longCfg,
			want: frozenOutcome{Rules: inPlace(t0, long, ""), Record: draining(t0, long), Mirror: formatTime(t0)}},
		{name: "in-place, spec shortened mid-drain: the recorded rules hold", config: short,
			record: new(draining(t0.Add(-10*time.Minute), long)), mirror: formatTime(t0.Add(-10 * time.Minute)),
			want: frozenOutcome{Rules: inPlace(t0.Add(-10*time.Minute), long, ""), Record: draining(t0.Add(-10*time.Minute), long),
				Mirror: formatTime(t0.Add(-10 * time.Minute))}},
		{name: "in-place, the mirror rewritten to now: the recorded start holds", config: short,
			record: new(draining(t0.Add(-10*time.Minute), long)), mirror: formatTime(t0),
			want: frozenOutcome{Rules: inPlace(t0.Add(-10*time.Minute), long, ""), Record: draining(t0.Add(-10*time.Minute), long),
				Mirror: formatTime(t0.Add(-10 * time.Minute))}},
		{name: "in-place, begun by an older version: its start, the spec's rules now", config: short,
			mirror: formatTime(t0.Add(-10 * time.Minute)),
			want: frozenOutcome{Rules: inPlace(t0.Add(-10*time.Minute), drainParamsOf(short), "drain timeout 1s exceeded"),
				Record: draining(t0.Add(-10*time.Minute), drainParamsOf(short)), Mirror: formatTime(t0.Add(-10 * time.Minute))}},
		{name: "in-place, a mirror from before the selection counts from the selection", config: longCfg,
			mirror: formatTime(t0.Add(-5 * time.Hour)),
			want:   frozenOutcome{Rules: inPlace(selectedAt, long, ""), Record: draining(selectedAt, long), Mirror: formatTime(selectedAt)}},
		{name: "in-place, a record from before the selection is an earlier drain's", config: longCfg,
			record: new(draining(t0.Add(-5*time.Hour), drainParamsOf(short))),
			want:   frozenOutcome{Rules: inPlace(t0, long, ""), Record: draining(t0, long), Mirror: formatTime(t0)}},
		{name: "in-place, a record in the future counts from now", config: short,
			record: new(draining(t0.Add(time.Hour), long)),
			want:   frozenOutcome{Rules: inPlace(t0, long, ""), Record: draining(t0, long), Mirror: formatTime(t0)}},
		{name: "preserve, first pass: records the spec's rules from the preservation's start", preserve: true, config: longCfg,
			want: frozenOutcome{Rules: inPlace(t0.Add(-time.Hour), long, ""), Record: draining(t0.Add(-time.Hour), long)}},
		{name: "preserve, spec and preserve timeout changed mid-drain: the recorded rules hold", preserve: true, config: short,
			record: new(draining(t0.Add(-time.Hour), long)),
			want:   frozenOutcome{Rules: inPlace(t0.Add(-time.Hour), long, ""), Record: draining(t0.Add(-time.Hour), long)}},
		{name: "preserve, begun by an older version: the spec's rules now", preserve: true, config: short,
			want: frozenOutcome{Rules: inPlace(t0.Add(testPreserveTimeout-time.Hour-10000*time.Hour), drainParamsOf(short), "drain timeout 1s exceeded"),
				Record: draining(t0.Add(testPreserveTimeout-time.Hour-10000*time.Hour), drainParamsOf(short))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Preserved an hour ago for testPreserveTimeout.
			m := preserveMachine(v1alpha1.MachineFailed, map[string]string{v1alpha1.PreserveAnnotation: "now"}, new(t0.Add(testPreserveTimeout-time.Hour)))
			if tc.mirror != "" {
				setAnnotation(m, InPlaceDrainStartedAnnotation, tc.mirror)
			}
			if tc.record != nil {
				cond := InPlaceDrainCondition
				if tc.preserve {
					cond = PreserveDrainCondition
				}
				setFlowRecord(m, cond, *tc.record)
			}
			obs := observation{Now: t0, Machine: m, Config: tc.config}
			var got frozenOutcome
			var ok bool
			if tc.preserve {
				got.Rules = planPreserveDrain(obs, m, "n1", corev1.NodeCondition{}).drainRules
				got.Record, ok = flowRecordOf(m, PreserveDrainCondition)
			} else {
				got.Rules = *planInPlaceDrain(obs, m, "n1", selection)
				got.Record, ok = flowRecordOf(m, InPlaceDrainCondition)
			}
			got.Mirror = m.Annotations[InPlaceDrainStartedAnnotation]
			if !ok {
				t.Fatalf("no record left on the machine: %+v", m.Status.Conditions)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("drain (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDrainRecordsEndWithTheirDrain: the record of an in-place drain goes
// once the drain is done, that of a preservation's drain once the node is
// drained or the preservation ends, so that a later drain records itself
// afresh.
func TestDrainRecordsEndWithTheirDrain(t *testing.T) {
	rec := flowRecord{Reason: drainingReason, Since: apitime.Of(t0), Drain: drainParams{MaxEvictRetries: 3}}
	m := baseMachine()
	setFlowRecord(m, InPlaceDrainCondition, rec)
	setFlowRecord(m, PreserveDrainCondition, rec)
	setFlowRecord(m, DeletionCondition, flowRecord{Reason: string(StepDrain), Since: apitime.Of(t0)})
	clearInPlaceDrain(m)
	if _, ok := flowRecordOf(m, InPlaceDrainCondition); ok {
		t.Errorf("in-place drain record left: %+v", m.Status.Conditions)
	}
	clearPreserveDrain(m)
	if _, ok := flowRecordOf(m, PreserveDrainCondition); ok {
		t.Errorf("preserve drain record left: %+v", m.Status.Conditions)
	}
	if _, ok := deletionRecordOf(m); !ok {
		t.Errorf("the deletion's record went with the others: %+v", m.Status.Conditions)
	}
	clearFlowRecord(m, DeletionCondition)
	if m.Status.Conditions != nil {
		t.Errorf("conditions %+v, want none", m.Status.Conditions)
	}
}
