package machine

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/apitime"
)

// The status a plan computes: phase, last operation, and the event that
// reports a change of them, in MCM's vocabulary.

// event is an event to record on the machine.
type event struct {
	Type, Reason, Message string
}

// transition is one reported change of a machine's status.
type transition struct {
	// Phase to move to, with TimeoutActive; "" leaves both alone.
	Phase         v1alpha1.MachinePhase
	TimeoutActive bool
	// Op is the new last operation.
	Op v1alpha1.LastOperation
	// Reason of the event, Warning its type (else Normal), Message its
	// text ("" means Op's description). No Reason, no event: the steps of
	// the happy path (VM created, node joined) are told by the status and
	// the duration metrics, not by an event each — one API write less per
	// step and machine.
	Reason  string
	Warning bool
	Message string
}

// report applies t to m at now and returns the event that tells of it, or
// nil when the last operation already said the same: a failure that
// repeats is reported once, not at every retry.
func report(m *v1alpha1.Machine, now time.Time, t transition) *event {
	if t.Phase != "" {
		setPhase(m, t.Phase, now)
		m.Status.CurrentStatus.TimeoutActive = t.TimeoutActive
	}
	if !setLastOperation(m, t.Op, now) || t.Reason == "" {
		return nil
	}
	typ := corev1.EventTypeNormal
	if t.Warning {
		typ = corev1.EventTypeWarning
	}
	msg := t.Message
	if msg == "" {
		msg = t.Op.Description
	}
	return &event{Type: typ, Reason: t.Reason, Message: msg}
}

// setPhase sets the phase, and its lastUpdateTime only when it changes.
func setPhase(m *v1alpha1.Machine, phase v1alpha1.MachinePhase, now time.Time) {
	if m.Status.CurrentStatus.Phase == phase {
		return
	}
	m.Status.CurrentStatus.Phase = phase
	m.Status.CurrentStatus.LastUpdateTime = apitime.Of(now)
}

// setLastOperation sets op, stamped with now, unless the last operation
// already says the same; it reports whether it changed anything. The
// description is bounded (boundMessage) before it is compared, so a long
// one that is stored already is not written again.
func setLastOperation(m *v1alpha1.Machine, op v1alpha1.LastOperation, now time.Time) bool {
	op.Description = boundMessage(op.Description, maxStatusMessage)
	cur := m.Status.LastOperation
	if cur.Description == op.Description && cur.State == op.State && cur.Type == op.Type && cur.ErrorCode == op.ErrorCode {
		return false
	}
	op.LastUpdateTime = apitime.Of(now)
	m.Status.LastOperation = op
	return true
}

// creationStart is when the creation timeout started counting: the
// stored creation start, kept between the machine's creation and now (see
// storedTime), else the machine's creation.
func creationStart(m *v1alpha1.Machine, now time.Time) time.Time {
	if t, ok := storedTime(m, CreationStartedAnnotation, m.CreationTimestamp.Time, now); ok {
		return t
	}
	return m.CreationTimestamp.Time
}

func setAnnotation(m *v1alpha1.Machine, key, value string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[key] = value
}

func deleteAnnotation(m *v1alpha1.Machine, key string) {
	delete(m.Annotations, key)
}

func setLabel(m *v1alpha1.Machine, key, value string) {
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[key] = value
}
