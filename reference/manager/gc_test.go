package manager

import "testing"

func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		percent int
		set     bool
	}{
		{name: "GOGC unset: the manager's default", env: map[string]string{"GOMEMLIMIT": "200MiB"}, percent: defaultGCPercent, set: true},
		{name: "GOGC set: left to the runtime", env: map[string]string{"GOGC": "100"}},
		{name: "GOGC set empty: left to the runtime", env: map[string]string{"GOGC": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			percent, set := gcPercent(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if percent != tc.percent || set != tc.set {
				t.Errorf("gcPercent = %d, %v; want %d, %v", percent, set, tc.percent, tc.set)
			}
		})
	}
}
