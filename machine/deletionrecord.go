package machine

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/apitime"
)

// DeletionCondition is the type of the status condition in which the
// controller keeps the deletion flow of a machine being deleted: its
// reason is the current DeletionStep, its lastTransitionTime when the step
// began, and its message the drain parameters in force when the deletion
// began (JSON of the timeout and the bound on refused evictions, e.g.
// {"drainTimeout":"2h0m0s","maxEvictRetries":360}). The flow acts on this
// record only: the status is written by the controller alone (the
// machines/status subresource), whereas anyone who may patch a machine
// writes its annotations and spec, so nobody else can move a step on or
// shorten a drain. A condition, not a field of its own: conditions are
// NodeConditions with a free-form type, which MCM's CRD schemas keep too.
// DeletionStepAnnotation and DeletionStepSinceAnnotation mirror it for
// people and tools and are never read.
const DeletionCondition corev1.NodeConditionType = "mcmkit.io/Deletion"

// ownCondition reports whether a machine condition is the controller's
// own (not one copied from the node).
func ownCondition(c corev1.NodeCondition) bool {
	return strings.HasPrefix(string(c.Type), "mcmkit.io/")
}

// drainParams are the drain parameters of a deletion, frozen when it
// began: a patch of the machine's drainTimeout or maxEvictRetries during
// the deletion does not change them.
type drainParams struct {
	DrainTimeout    metav1.Duration `json:"drainTimeout"`
	MaxEvictRetries int32           `json:"maxEvictRetries"`
}

// drainParamsOf returns the drain parameters of an effective machine
// configuration, which has every field set.
func drainParamsOf(c v1alpha1.MachineConfiguration) drainParams {
	var p drainParams
	if c.MachineDrainTimeout != nil {
		p.DrainTimeout = *c.MachineDrainTimeout
	}
	if c.MaxEvictRetries != nil {
		p.MaxEvictRetries = *c.MaxEvictRetries
	}
	return p
}

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
	i := slices.IndexFunc(m.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == DeletionCondition })
	if i < 0 {
		return deletionRecord{}, false
	}
	c := m.Status.Conditions[i]
	rec := deletionRecord{Step: DeletionStep(c.Reason), Since: c.LastTransitionTime}
	if !slices.Contains(deletionSteps, rec.Step) || json.Unmarshal([]byte(c.Message), &rec.Drain) != nil {
		return deletionRecord{}, false
	}
	return rec, true
}

// setDeletionRecord stores rec in m's DeletionCondition, and its mirror
// in the annotations.
func setDeletionRecord(m *v1alpha1.Machine, rec deletionRecord) {
	msg, err := json.Marshal(rec.Drain)
	if err != nil {
		return // cannot fail for drainParams
	}
	cond := corev1.NodeCondition{
		Type: DeletionCondition, Status: corev1.ConditionTrue, Reason: string(rec.Step), Message: string(msg),
		LastHeartbeatTime: rec.Since, LastTransitionTime: rec.Since,
	}
	if i := slices.IndexFunc(m.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == DeletionCondition }); i >= 0 {
		m.Status.Conditions[i] = cond
	} else {
		m.Status.Conditions = append(m.Status.Conditions, cond)
	}
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
