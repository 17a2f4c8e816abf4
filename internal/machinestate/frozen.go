package machinestate

import (
	"context"
	"strings"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// FrozenReason says why a MachineSet or MachineDeployment (what: "set",
// "deployment"), whose labels are given, adds no machines now, or "": it
// is labelled v1alpha1.FreezeLabelKey=v1alpha1.FreezeLabelValue, or gate
// (nil: never) says the safety controller froze machine creation. Both
// controllers hold creations back, and go on deleting, for the same
// reasons, told in the same words.
func FrozenReason(ctx context.Context, what string, labels map[string]string, gate interface{ Frozen(context.Context) bool }) string {
	var why []string
	if labels[v1alpha1.FreezeLabelKey] == v1alpha1.FreezeLabelValue {
		why = append(why, "the "+what+" is labelled "+v1alpha1.FreezeLabelKey+"="+v1alpha1.FreezeLabelValue)
	}
	if gate != nil && gate.Frozen(ctx) {
		why = append(why, "the safety controller froze machine creation")
	}
	return strings.Join(why, "; ")
}
