package sim

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestVMNameFitsALabel: whatever the machine's name and however often it
// is recreated, its VM's name is a valid label value and node name.
func TestVMNameFitsALabel(t *testing.T) {
	long := strings.Repeat("a", 62) + "b"
	for _, tc := range []struct {
		machine string
		n       int
		want    string
	}{
		{"m-1", 1, "m-1"},
		{"m-1", 2, "m-1-2"},
		{long, 1, long},
		{long, 2, strings.Repeat("a", 61) + "-2"},
		{strings.Repeat("a", 60) + "-x-y", 12, strings.Repeat("a", 60) + "-12"},
		{strings.Repeat("a", 59) + "--xy", 10, strings.Repeat("a", 59) + "-10"},
		{strings.Repeat("b", 200), 1, strings.Repeat("b", 63)},
	} {
		got := vmName(tc.machine, tc.n)
		if got != tc.want {
			t.Errorf("vmName(%q, %d) = %q, want %q", tc.machine, tc.n, got, tc.want)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("vmName(%q, %d) = %q: %v", tc.machine, tc.n, got, errs)
		}
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("vmName(%q, %d) = %q: %v", tc.machine, tc.n, got, errs)
		}
	}
}
