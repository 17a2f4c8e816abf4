package manager

import "testing"

// The default leases are those of MCM's two processes, which name the
// groups: the flags' defaults and the controller table agree.
func TestDefaultLeasesAreTheGroups(t *testing.T) {
	c := DefaultConfig()
	for g, want := range map[Group]string{MachineControllerGroup: DefaultMachineLeaseName, MachineControllerManagerGroup: DefaultLeaseName} {
		if string(g) != want {
			t.Errorf("group %q, default lease %q: want the same name", g, want)
		}
		if got := leaseName(c, g); got != want {
			t.Errorf("leaseName(DefaultConfig(), %q) = %q, want %q", g, got, want)
		}
	}
}
