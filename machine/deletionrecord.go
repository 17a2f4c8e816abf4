package machine

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/apitime"
)

// DeletionCondition is the type of the status condition in which the
// controller keeps the deletion flow of a machine being deleted (see
// flowRecord): its reason is the current DeletionStep, its
// lastTransitionTime when the step began, and its message the drain
// parameters in force when the deletion began. The flow acts on this
// record only, so nobody but the controller can move a step on or shorten
// the drain. DeletionStepAnnotation and DeletionStepSinceAnnotation mirror
// it for people and tools and are never read.
const DeletionCondition corev1.NodeConditionType = "mcmkit.io/Deletion"

// deletionRecord is the deletion flow as the controller recorded it in
// the DeletionCondition.
type deletionRecord struct {
	Step  DeletionStep
	Since metav1.Time
	Drain drainParams
}

// deletionRecordOf returns the record of m's deletion flow, and whether m
// has one that can be read. A machine without one (its deletion has not
// been synced yet, or was begun by an older version or by MCM) starts
// at the first step: every step is idempotent.
func deletionRecordOf(m *v1alpha1.Machine) (deletionRecord, bool) {
	rec, ok := flowRecordOf(m, DeletionCondition)
	if !ok || !slices.Contains(deletionSteps, DeletionStep(rec.Reason)) {
		return deletionRecord{}, false
	}
	return deletionRecord{Step: DeletionStep(rec.Reason), Since: rec.Since, Drain: rec.Drain}, true
}

// setDeletionRecord stores rec in m's DeletionCondition, and its mirror
// in the annotations.
func setDeletionRecord(m *v1alpha1.Machine, rec deletionRecord) {
	setFlowRecord(m, DeletionCondition, flowRecord{Reason: string(rec.Step), Since: rec.Since, Drain: rec.Drain})
	setAnnotation(m, DeletionStepAnnotation, string(rec.Step))
	setAnnotation(m, DeletionStepSinceAnnotation, formatTime(rec.Since.Time))
}

// advanceDeletionRecord returns the record of m's deletion flow at step:
// the stored one while the step stays, else one that begins now with the
// drain parameters d froze.
func advanceDeletionRecord(m *v1alpha1.Machine, step DeletionStep, drain drainParams, now time.Time) deletionRecord {
	if rec, ok := deletionRecordOf(m); ok && rec.Step == step {
		return rec
	}
	return deletionRecord{Step: step, Since: apitime.Of(now), Drain: drain}
}
