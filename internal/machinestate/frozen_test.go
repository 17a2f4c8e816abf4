package machinestate

import (
	"context"
	"testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

type gate bool

func (g gate) Frozen(context.Context) bool { return bool(g) }

func TestFrozenReason(t *testing.T) {
	labelled := map[string]string{v1alpha1.FreezeLabelKey: v1alpha1.FreezeLabelValue}
	tests := []struct {
		name   string
		labels map[string]string
		gate   interface{ Frozen(context.Context) bool }
		want   string
	}{
		{name: "no label, no gate"},
		{name: "gate open", gate: gate(false)},
		{name: "another value", labels: map[string]string{v1alpha1.FreezeLabelKey: "yes"}},
		{name: "labelled", labels: labelled, want: "the set is labelled freeze=True"},
		{name: "gate closed", gate: gate(true), want: "the safety controller froze machine creation"},
		{name: "both", labels: labelled, gate: gate(true),
			want: "the set is labelled freeze=True; the safety controller froze machine creation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FrozenReason(context.Background(), "set", tt.labels, tt.gate); got != tt.want {
				t.Errorf("FrozenReason = %q, want %q", got, tt.want)
			}
		})
	}
}
