package machine

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestBoundMessage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		limit int
		want  string
	}{
		{name: "short", in: "quota exceeded", limit: 40, want: "quota exceeded"},
		{name: "exactly the limit", in: strings.Repeat("a", 40), limit: 40, want: strings.Repeat("a", 40)},
		{
			name: "one byte over", in: strings.Repeat("a", 41), limit: 40,
			// 24 bytes of suffix leave 16 for the text; 25 are cut.
			want: strings.Repeat("a", 16) + "... [25 bytes truncated]",
		},
		{
			name: "cut inside a character", in: "ab" + strings.Repeat("é", 30), limit: 30,
			// 24 bytes of suffix for a 62-byte text leave 6: "ab" and
			// two é; the third é would end at byte 8.
			want: "abéé... [56 bytes truncated]",
		},
		{
			name: "cut inside a four-byte character", in: "x" + strings.Repeat("😀", 10), limit: 30,
			// Room for 6 bytes: "x" and one 😀 (5), not the second (9).
			want: "x😀... [36 bytes truncated]",
		},
		{name: "invalid UTF-8 is replaced", in: "bad \xff\xfe byte", limit: 40, want: "bad \uFFFD byte"},
		{name: "limit smaller than the suffix", in: strings.Repeat("a", 100), limit: 5, want: "... [100 bytes truncated]"},
		{name: "2 MB", in: "Cloud provider message - " + strings.Repeat("ü", 1<<20), limit: 60,
			want: "Cloud provider message - üüü... [2097146 bytes truncated]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := boundMessage(tc.in, tc.limit)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("boundMessage (-want +got):\n%s", diff)
			}
			if !utf8.ValidString(got) {
				t.Errorf("%q is not valid UTF-8", got)
			}
			if len(got) > max(tc.limit, len(cutSuffix(len(tc.in)))) {
				t.Errorf("%d bytes, over the limit %d", len(got), tc.limit)
			}
			// What is stored compares equal to the next sync's message.
			if again := boundMessage(got, tc.limit); len(got) <= tc.limit && again != got {
				t.Errorf("a bounded message changes when bounded again: %q", again)
			}
		})
	}
}

// TestOutsideTextsAreBounded: every place a text from outside reaches
// stores it bounded, and a bounded text stored already is not written
// again (the next failure with the same message changes nothing).
func TestOutsideTextsAreBounded(t *testing.T) {
	huge := strings.Repeat("ü", 1<<20)
	now := time.Now()
	m := &v1alpha1.Machine{}
	op := v1alpha1.LastOperation{Description: huge, State: v1alpha1.MachineStateFailed, Type: v1alpha1.MachineOperationCreate}
	changed := setLastOperation(m, op, now)
	again := setLastOperation(m, op, now.Add(time.Second))
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{v1alpha1.CandidateForUpdateLabel: "", v1alpha1.UpdateResultLabel: v1alpha1.UpdateResultFailed},
			Annotations: map[string]string{v1alpha1.UpdateFailedReasonAnnotation: huge},
		},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: "Problem", Message: huge}}},
	}
	_, inPlace, _ := inPlaceStep(node, v1alpha1.SelectedForUpdate)
	events := record.NewFakeRecorder(1)
	(&Controller{opts: Options{Recorder: events}}).recordEvent(m, &event{Type: corev1.EventTypeWarning, Reason: ReasonCreateFailed, Message: huge})
	// cut says whether a text was cut to limit: at most limit bytes, at
	// least limit-1 (ü is two bytes), and saying so.
	cut := func(s string, limit int) bool {
		return len(s) <= limit && len(s) >= limit-1 && strings.HasSuffix(s, " bytes truncated]")
	}
	got := map[string]bool{
		"first failure written": changed, "same failure written again": again,
		"description":        cut(m.Status.LastOperation.Description, maxStatusMessage),
		"node condition":     cut(boundedConditions(node.Status.Conditions)[0].Message, maxStatusMessage),
		"in-place condition": cut(inPlace, maxStatusMessage),
		"event":              cut(strings.TrimPrefix(<-events.Events, "Warning CreateFailed "), maxEventMessage),
	}
	want := map[string]bool{
		"first failure written": true, "same failure written again": false,
		"description": true, "node condition": true, "in-place condition": true, "event": true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bounded texts (-want +got):\n%s", diff)
	}
}
