package machinestate

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// TestPreservation: the answers of every preservation rule, for machines
// as the machine and MachineSet controllers see them over a preservation's
// life.
func TestPreservation(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	type answers struct {
		Request          v1alpha1.PreserveValue
		Asked            bool
		Preserved        bool
		PreservedFailed  bool
		KeepFailed       bool
		Candidate        bool
		AutoPreservedTag bool
	}
	machine := func(phase v1alpha1.MachinePhase, own, node string, expiry time.Duration) *v1alpha1.Machine {
		m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
		m.Status.CurrentStatus.Phase = phase
		if own != "-" {
			m.Annotations[v1alpha1.PreserveAnnotation] = own
		}
		if node != "-" {
			m.Annotations[v1alpha1.LastAppliedNodePreserveValueAnnotation] = node
		}
		if expiry != 0 {
			m.Status.CurrentStatus.PreserveExpiryTime = &metav1.Time{Time: now.Add(expiry)}
		}
		return m
	}
	failed, running := v1alpha1.MachineFailed, v1alpha1.MachineRunning
	for _, tc := range []struct {
		name string
		m    *v1alpha1.Machine
		want answers
	}{
		{"Failed, nothing asked: a candidate, deleted", machine(failed, "-", "-", 0), answers{Candidate: true}},
		{"Failed, false: neither kept nor a candidate", machine(failed, "false", "-", 0),
			answers{Request: "false", Asked: true}},
		{"Failed, when-failed not started yet: kept", machine(failed, "when-failed", "-", 0),
			answers{Request: "when-failed", Asked: true, KeepFailed: true}},
		{"Failed, auto-preserved mark not started yet: kept", machine(failed, "auto-preserved", "-", 0),
			answers{Request: "auto-preserved", Asked: true, KeepFailed: true, AutoPreservedTag: true}},
		{"Failed, preserved through its node: kept, not a candidate", machine(failed, "-", "when-failed", time.Hour),
			answers{Request: "when-failed", Asked: true, Preserved: true, PreservedFailed: true, KeepFailed: true}},
		{"the node's value wins over the machine's", machine(failed, "now", "false", 0),
			answers{Request: "false", Asked: true}},
		{"a node value removed (recorded empty): the machine's own applies", machine(failed, "now", "", 0),
			answers{Request: "now", Asked: true, KeepFailed: true}},
		{"Failed, preservation ran out: deleted, never preserved again", machine(failed, "-", "-", -time.Second), answers{}},
		{"Running, preserved now: preserved, not a Failed one", machine(running, "now", "-", time.Hour),
			answers{Request: "now", Asked: true, Preserved: true, KeepFailed: true}},
		{"Running, nothing asked: no candidate", machine(running, "-", "-", 0), answers{}},
		{"unknown value: asked, keeps nothing", machine(failed, "forever", "-", 0), answers{Request: "forever", Asked: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got answers
			got.Request, got.Asked = PreserveRequest(tc.m)
			got.Preserved = Preserved(tc.m, now)
			got.PreservedFailed = PreservedFailed(tc.m, now)
			got.KeepFailed = KeepFailed(tc.m, now)
			got.Candidate = AutoPreserveCandidate(tc.m)
			got.AutoPreservedTag = AutoPreserved(tc.m)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}

	expired := machine(failed, "-", "-", 0)
	expired.Status.CurrentStatus.PreserveExpiryTime = &metav1.Time{Time: now}
	if Preserved(expired, now) || KeepFailed(expired, now) {
		t.Error("a preservation whose expiry is now still holds")
	}
	for _, v := range []v1alpha1.PreserveValue{"now", "when-failed", "auto-preserved", "false"} {
		if !ValidPreserveValue(v) {
			t.Errorf("ValidPreserveValue(%q) = false", v)
		}
	}
	for _, v := range []v1alpha1.PreserveValue{"", "Now", "true", "auto-preserve"} {
		if ValidPreserveValue(v) {
			t.Errorf("ValidPreserveValue(%q) = true", v)
		}
	}
}
