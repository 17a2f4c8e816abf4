package machine

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
)

// drainBlockedByAnnotation lists, comma-separated and sorted, the
// PodDisruptionBudgets ("namespace/name") the drain of a machine being
// deleted waits on. It is written together with DrainStateAnnotation, from
// the same drain.State, so that the informer index that syncs the machine
// again on its budgets' updates reads a plain list and never decodes the
// state. Like the state, anyone who may patch the machine can write it: a
// forged list costs a sync, nothing else.
const drainBlockedByAnnotation = "mcmkit.io/drain-blocked-by"

// storedDrainState is the drain state of the machine's last pass; the zero
// State when there is none. The annotation is anyone's to write who may
// patch the machine, so it is checked against the machine's own facts: a
// state that cannot be read, or whose drain would have begun before the
// machine's deletion or after now, is dropped, and distrusted says why.
// Dropping is safe: the drain starts over (the drain engine checks the
// rest of the state the same way).
func storedDrainState(m *v1alpha1.Machine, now time.Time) (_ drain.State, distrusted string) {
	raw := m.Annotations[DrainStateAnnotation]
	if raw == "" {
		return drain.State{}, ""
	}
	var state drain.State
	if err := json.Unmarshal([]byte(raw), &state); err != nil {
		return drain.State{}, fmt.Sprintf("%s cannot be read: %v", DrainStateAnnotation, err)
	}
	if start := state.Start(); !start.IsZero() && m.DeletionTimestamp != nil &&
		(start.Before(m.DeletionTimestamp.Time) || start.After(now)) {
		return drain.State{}, fmt.Sprintf("%s says the drain began at %s, outside the machine's deletion", DrainStateAnnotation, start.UTC().Format(time.RFC3339))
	}
	return state, ""
}

// storeDrainState records on m the drain state of the last pass and the
// budgets it waits on.
func storeDrainState(m *v1alpha1.Machine, state drain.State) {
	raw, err := json.Marshal(state)
	if err != nil {
		return // cannot fail for a drain.State
	}
	setAnnotation(m, DrainStateAnnotation, string(raw))
	if budgets := state.BlockingBudgets(); len(budgets) > 0 {
		setAnnotation(m, drainBlockedByAnnotation, strings.Join(budgets, ","))
	} else {
		deleteAnnotation(m, drainBlockedByAnnotation)
	}
}

// clearDrainState removes the drain's annotations from m: a later drain
// starts afresh.
func clearDrainState(m *v1alpha1.Machine) {
	deleteAnnotation(m, DrainStateAnnotation)
	deleteAnnotation(m, drainBlockedByAnnotation)
}

// machinesByBlockingBudget indexes the machines being deleted by the
// PodDisruptionBudgets their drain waits on (drainBlockedByAnnotation).
func machinesByBlockingBudget(obj any) ([]string, error) {
	m, ok := obj.(*v1alpha1.Machine)
	if !ok || m.DeletionTimestamp == nil || m.Annotations[drainBlockedByAnnotation] == "" {
		return nil, nil
	}
	return strings.Split(m.Annotations[drainBlockedByAnnotation], ","), nil
}
