package machine

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/apitime"
)

// A flow whose course must not follow later writes of the machine's spec
// or annotations keeps what it acts on in a status condition of its own,
// under mcmkit.io/: the deletion (DeletionCondition), the drain of a node
// selected for an in-place update (InPlaceDrainCondition), the drain of a
// preserved Failed machine's node (PreserveDrainCondition). The status is
// written by the controller alone (the machines/status subresource),
// whereas anyone who may patch a machine writes its annotations and spec.
// A record's reason says where the flow is, its lastTransitionTime since
// when, and its message the drain parameters in force when the flow began,
// as JSON of the timeout and the bound on refused evictions (e.g.
// {"drainTimeout":"2h0m0s","maxEvictRetries":360}). A condition, not a
// field of its own: conditions are NodeConditions with a free-form type,
// which MCM's CRD schemas keep too.

// ownCondition reports whether a machine condition is the controller's
// own (not one copied from the node).
func ownCondition(c corev1.NodeCondition) bool {
	return strings.HasPrefix(string(c.Type), "mcmkit.io/")
}

// drainParams are the drain parameters of a flow, frozen when it began: a
// patch of the machine's drainTimeout or maxEvictRetries during the flow
// does not change them.
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

// flowRecord is a flow as the controller recorded it in a condition.
type flowRecord struct {
	Reason string
	Since  metav1.Time
	Drain  drainParams
}

func conditionIndex(m *v1alpha1.Machine, t corev1.NodeConditionType) int {
	return slices.IndexFunc(m.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == t })
}

// flowRecordOf returns the record m keeps in its condition t, and whether
// it has one that can be read.
func flowRecordOf(m *v1alpha1.Machine, t corev1.NodeConditionType) (flowRecord, bool) {
	i := conditionIndex(m, t)
	if i < 0 {
		return flowRecord{}, false
	}
	c := m.Status.Conditions[i]
	rec := flowRecord{Reason: c.Reason, Since: c.LastTransitionTime}
	if json.Unmarshal([]byte(c.Message), &rec.Drain) != nil {
		return flowRecord{}, false
	}
	return rec, true
}

// setFlowRecord stores rec in m's condition t.
func setFlowRecord(m *v1alpha1.Machine, t corev1.NodeConditionType, rec flowRecord) {
	msg, err := json.Marshal(rec.Drain)
	if err != nil {
		return // cannot fail for drainParams
	}
	cond := corev1.NodeCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: rec.Reason, Message: string(msg),
		LastHeartbeatTime: rec.Since, LastTransitionTime: rec.Since,
	}
	if i := conditionIndex(m, t); i >= 0 {
		m.Status.Conditions[i] = cond
	} else {
		m.Status.Conditions = append(m.Status.Conditions, cond)
	}
}

// clearFlowRecord removes m's condition t: the flow ended, and a later
// one records itself afresh.
func clearFlowRecord(m *v1alpha1.Machine, t corev1.NodeConditionType) {
	if i := conditionIndex(m, t); i >= 0 {
		m.Status.Conditions = slices.Delete(m.Status.Conditions, i, i+1)
		if len(m.Status.Conditions) == 0 {
			m.Status.Conditions = nil
		}
	}
}

// drainingReason is the reason of the record of a drain that is not a
// deletion's while it runs.
const drainingReason = "Draining"

// frozenDrain returns the record of the drain (not the deletion's) that
// m keeps in its condition t. A drain without one — it begins now, or an
// older version began it — is recorded now on m, to be written with the
// pass's outcome: begun at start (the caller's rule, never after now),
// with the drain parameters of the machine's configuration c. A record
// whose start lies after now (a leader whose clock ran ahead) counts from
// now, by the one rule for such times (clampTime).
func frozenDrain(m *v1alpha1.Machine, t corev1.NodeConditionType, start func() time.Time, c v1alpha1.MachineConfiguration, now time.Time) flowRecord {
	rec, ok := flowRecordOf(m, t)
	if !ok || rec.Reason != drainingReason {
		rec = flowRecord{Reason: drainingReason, Since: apitime.Of(start()), Drain: drainParamsOf(c)}
	}
	if t, future := clampTime(rec.Since.Time, time.Time{}, now); future {
		rec.Since = apitime.Of(t)
	}
	setFlowRecord(m, t, rec)
	return rec
}

// drainOnceRecorded runs pass, a flow's drain pass, only once the stored
// machine (obs) holds the record p plans for the flow (condition t): the
// sync that begins a flow writes its record and the next one drains. A
// pass sent before the record is stored would act on parameters that a
// patch landing before the record (the write conflicts then) replaces:
// the flow would begin again under the patched, shorter timeout.
func drainOnceRecorded(ctx context.Context, obs observation, p machinePlan, t corev1.NodeConditionType,
	pass func(context.Context, observation, machinePlan) machinePlan) machinePlan {
	if recordStored(obs.Machine, p.Machine, t) {
		return pass(ctx, obs, p)
	}
	// The controller ignores its own status writes (updateQueues), so the
	// next sync is asked for.
	if p.RequeueAfter <= 0 || p.RequeueAfter > recordedDrainDelay {
		p.RequeueAfter = recordedDrainDelay
	}
	return p
}

// recordedDrainDelay is how soon the drain follows its record's write.
const recordedDrainDelay = 10 * time.Millisecond

// recordStored reports whether stored holds the record of flow t that
// planned has: same start and drain parameters.
func recordStored(stored, planned *v1alpha1.Machine, t corev1.NodeConditionType) bool {
	want, ok := flowRecordOf(planned, t)
	if !ok {
		return true
	}
	got, ok := flowRecordOf(stored, t)
	return ok && got.Since.Equal(&want.Since) && got.Drain == want.Drain
}
