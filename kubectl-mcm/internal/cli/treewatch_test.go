package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDrawFrame: on a terminal every frame clears the screen first;
// elsewhere a frame is printed only when it changed, as a new block.
func TestDrawFrame(t *testing.T) {
	for _, tc := range []struct {
		name     string
		terminal bool
		frames   []string
		want     string
	}{
		{"terminal", true, []string{"a\n", "a\n", "b\n"}, clearScreen + "a\n" + clearScreen + "a\n" + clearScreen + "b\n"},
		{"pipe", false, []string{"a\n", "a\n", "b\n", "b\n"}, "a\n\nb\n"},
	} {
		var b strings.Builder
		last := ""
		for _, f := range tc.frames {
			if err := drawFrame(&b, tc.terminal, f, last); err != nil {
				t.Fatal(err)
			}
			last = f
		}
		if diff := cmp.Diff(tc.want, b.String()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
