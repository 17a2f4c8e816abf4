package workqueue

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestBucketLimiter(t *testing.T) {
	tests := []struct {
		name  string
		steps []time.Duration // clock advance before each When
		want  []time.Duration
	}{
		{
			name:  "burst passes, then one token per second",
			steps: []time.Duration{0, 0, 0, 0, 0},
			want:  []time.Duration{0, 0, 0, time.Second, 2 * time.Second},
		},
		{
			name:  "tokens accrue while idle, up to the burst",
			steps: []time.Duration{0, 0, 0, time.Hour, 0, 0, 0},
			want:  []time.Duration{0, 0, 0, 0, 0, 0, time.Second},
		},
		{
			name:  "debt is paid off by waiting",
			steps: []time.Duration{0, 0, 0, 0, 1500 * time.Millisecond, 0},
			want:  []time.Duration{0, 0, 0, time.Second, 500 * time.Millisecond, 1500 * time.Millisecond},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(0, 0))
			b := newBucketLimiter[string](clk, 1, 3)
			var got []time.Duration
			for _, step := range tc.steps {
				clk.Step(step)
				got = append(got, b.When("k"))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("delays (-want +got):\n%s", diff)
			}
		})
	}
}
