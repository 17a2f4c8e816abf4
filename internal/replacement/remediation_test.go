package replacement

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func states(n int, st machineState) []machineState {
	out := make([]machineState, n)
	for i := range out {
		out[i] = st
	}
	return out
}

func TestAssessRemediation(t *testing.T) {
	tests := []struct {
		name   string
		states []machineState
		max    intstr.IntOrString
		want   Remediation
		block  bool
	}{
		{"one of ten unknown, 40%", append(states(9, running), unknown), intstr.FromString("40%"), Remediation{1, 10, 4}, false},
		{"four of ten, 40%", append(states(6, running), states(4, unknown)...), intstr.FromString("40%"), Remediation{4, 10, 4}, false},
		{"half of ten, 40%", append(states(5, running), states(5, unknown)...), intstr.FromString("40%"), Remediation{5, 10, 4}, true},
		{"failed counts, being deleted does not", []machineState{failed, failed, deleting, deleting, running}, intstr.FromInt32(1), Remediation{2, 5, 1}, true},
		{"a number", append(states(2, running), states(3, unknown)...), intstr.FromInt32(3), Remediation{3, 5, 3}, false},
		{"rounded down", append(states(2, running), unknown), intstr.FromString("50%"), Remediation{1, 3, 1}, false},
		{"zero allows none unhealthy", []machineState{running, unknown}, intstr.FromInt32(0), Remediation{1, 2, 0}, true},
		{"no machines", nil, intstr.FromString("40%"), Remediation{0, 0, 0}, false},
		{"preserved machines are not unhealthy", []machineState{preservedFailed, preservedUnknown, unknown, running}, intstr.FromInt32(1), Remediation{1, 4, 1}, false},
		{"a preservation that ran out counts again", []machineState{expiredFailed, unknown, running}, intstr.FromInt32(1), Remediation{2, 3, 1}, true},
	}
	for _, tc := range tests {
		var ms []*v1alpha1.Machine
		for i, st := range tc.states {
			ms = append(ms, machineIn("pool", i, st))
		}
		got := Assess(ms, tc.max, t0)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
		if got.Blocked() != tc.block {
			t.Errorf("%s: Blocked() = %v, want %v", tc.name, got.Blocked(), tc.block)
		}
	}
}

// TestBudgetShortCircuit: with MaxUnhealthy, half of a deployment going
// Unknown at once (a zone outage) replaces none; one does.
func TestBudgetShortCircuit(t *testing.T) {
	max := intstr.FromString("40%")
	ctx := context.Background()

	inf, ms := fleet(t, append(states(5, running), states(5, unknown)...)...)
	b, err := New(inf.machines, Options{MaxUnhealthy: &max, Max: ptrTo(intstr.FromInt32(10)), MachineSets: inf.sets})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[5:] {
		ok, why := b.MayReplace(ctx, m)
		if ok || !strings.Contains(why, "5 of 10 machines of deployment \"pool\" are unhealthy, more than the 4 allowed") {
			t.Errorf("MayReplace(%s) = %v, %q; want no, saying why", m.Name, ok, why)
		}
	}

	inf, ms = fleet(t, append(states(9, running), unknown)...)
	if b, err = New(inf.machines, Options{MaxUnhealthy: &max, MachineSets: inf.sets}); err != nil {
		t.Fatal(err)
	}
	if ok, why := b.MayReplace(ctx, ms[9]); !ok {
		t.Errorf("one unknown machine of ten held back: %q", why)
	}
	for _, bad := range []intstr.IntOrString{intstr.FromString("x"), intstr.FromInt32(-1), intstr.FromString("-5%")} {
		if _, err := New(inf.machines, Options{MaxUnhealthy: &bad}); err == nil {
			t.Errorf("MaxUnhealthy %s accepted", bad.String())
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestParseMaxUnhealthy(t *testing.T) {
	for in, want := range map[string]*intstr.IntOrString{"": nil, "40%": ptrTo(intstr.FromString("40%")), "3": ptrTo(intstr.FromInt32(3))} {
		got, err := ParseMaxUnhealthy(in)
		if err != nil || !cmp.Equal(got, want) {
			t.Errorf("ParseMaxUnhealthy(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"half", "-1", "-5%", "4x%"} {
		if got, err := ParseMaxUnhealthy(in); err == nil {
			t.Errorf("ParseMaxUnhealthy(%q) = %v, want an error", in, got)
		}
	}
}

// TestRemediationMessageSaysWhatIsGated: the short-circuit gates the
// health timeout only; its message (the condition's, the event's, a held
// machine's lastOperation) says that join timeouts still mark machines
// Failed and that Failed machines are replaced, and never that none is.
func TestRemediationMessageSaysWhatIsGated(t *testing.T) {
	blocked := Remediation{Unhealthy: 3, Total: 6, Limit: 1}.Message(DeploymentNoun("zonal"))
	for _, want := range []string{
		`3 of 6 machines of deployment "zonal" are unhealthy, more than the 1 allowed`,
		"no health timeout marks a machine Failed until at most 1 are",
		"a machine that does not join within its creation timeout is still marked Failed, as in MCM",
		"Failed machines are replaced",
	} {
		if !strings.Contains(blocked, want) {
			t.Errorf("message %q does not say %q", blocked, want)
		}
	}
	allowed := Remediation{Unhealthy: 1, Total: 6, Limit: 1}.Message(DeploymentNoun("zonal"))
	if want := `1 of 6 machines of deployment "zonal" are unhealthy, at most 1 may be for health timeouts to mark machines Failed`; allowed != want {
		t.Errorf("message %q, want %q", allowed, want)
	}
	for _, m := range []string{blocked, allowed} {
		if strings.Contains(m, "none is replaced") || strings.Contains(m, "none of them") {
			t.Errorf("message %q claims no machine is replaced", m)
		}
	}
}
