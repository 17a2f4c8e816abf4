package deployment

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// names returns the names of sets, for comparing which sets a function picked.
func names(sets []*v1alpha1.MachineSet) []string {
	var out []string
	for _, s := range sets {
		if s == nil {
			out = append(out, "<nil>")
			continue
		}
		out = append(out, s.Name)
	}
	return out
}

func TestSplitSets(t *testing.T) {
	d := newDeployment(3)
	tests := []struct {
		name    string
		sets    []*v1alpha1.MachineSet
		wantNew string
		wantOld []string
	}{
		{"no sets", nil, "", nil},
		{"only old", []*v1alpha1.MachineSet{newSet("a", 3, 0, withClass("old"))}, "", []string{"a"}},
		{
			"new among old",
			[]*v1alpha1.MachineSet{newSet("a", 3, 0, withClass("old")), newSet("b", 1, 5), newSet("c", 0, 2, withClass("older"))},
			"b", []string{"a", "c"},
		},
		{
			"two with the template: the oldest is new",
			[]*v1alpha1.MachineSet{newSet("late", 1, 9), newSet("early", 1, 1), newSet("x", 1, 0, withClass("old"))},
			"early", []string{"late", "x"},
		},
		{
			"same creation time: by name",
			[]*v1alpha1.MachineSet{newSet("b", 1, 1), newSet("a", 1, 1)},
			"a", []string{"b"},
		},
		{
			"propagated differences still match",
			[]*v1alpha1.MachineSet{newSet("a", 1, 1, func(s *v1alpha1.MachineSet) {
				s.Spec.Template.Spec.NodeTemplateSpec.Labels = map[string]string{"x": "y"}
				s.Spec.Template.Spec.Class.Kind = ""
				s.Spec.Template.Labels[v1alpha1.MachineTemplateHashLabelKey] = "h"
			})},
			"a", nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotNew, gotOld := splitSets(d, tt.sets)
			if got := names([]*v1alpha1.MachineSet{gotNew}); tt.wantNew == "" && gotNew != nil || tt.wantNew != "" && got[0] != tt.wantNew {
				t.Errorf("new set = %v, want %q", got, tt.wantNew)
			}
			if diff := cmp.Diff(tt.wantOld, names(gotOld)); diff != "" {
				t.Errorf("old sets (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFindActiveOrLatest(t *testing.T) {
	tests := []struct {
		name   string
		newSet *v1alpha1.MachineSet
		old    []*v1alpha1.MachineSet
		want   string // "" for nil
	}{
		{"nothing", nil, nil, ""},
		{"no active: the new set", newSet("n", 0, 9), []*v1alpha1.MachineSet{newSet("o", 0, 1)}, "n"},
		{"no active, no new set: the newest old", nil, []*v1alpha1.MachineSet{newSet("o1", 0, 1), newSet("o2", 0, 3), newSet("o0", 0, 0)}, "o2"},
		{"one active old", newSet("n", 0, 9), []*v1alpha1.MachineSet{newSet("o", 2, 1)}, "o"},
		{"one active new", newSet("n", 2, 9), []*v1alpha1.MachineSet{newSet("o", 0, 1)}, "n"},
		{"two active", newSet("n", 1, 9), []*v1alpha1.MachineSet{newSet("o", 2, 1)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := findActiveOrLatest(tt.newSet, tt.old)
			if gotName := names([]*v1alpha1.MachineSet{got})[0]; tt.want == "" && got != nil || tt.want != "" && gotName != tt.want {
				t.Errorf("findActiveOrLatest = %s, want %q", gotName, tt.want)
			}
		})
	}
}

func TestIsSaturated(t *testing.T) {
	d := newDeployment(3)
	tests := []struct {
		name   string
		set    *v1alpha1.MachineSet
		counts machineCounts
		want   bool
	}{
		{"nil", nil, machineCounts{}, false},
		{"saturated", newSet("n", 3, 0, withDesired(3)), counted(3, 3), true},
		{"more available than needed", newSet("n", 3, 0, withDesired(3)), counted(4, 4), true},
		{"not all available", newSet("n", 3, 0, withDesired(3)), counted(3, 2), false},
		{"other size", newSet("n", 2, 0, withDesired(3)), counted(3, 3), false},
		{"sized for other replicas", newSet("n", 3, 0, withDesired(2)), counted(3, 3), false},
		{"no desired annotation", newSet("n", 3, 0), counted(3, 3), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isSaturated(d, tt.set, map[string]machineCounts{"n": tt.counts}); got != tt.want {
				t.Errorf("isSaturated = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestActiveSetsAndSums(t *testing.T) {
	sets := []*v1alpha1.MachineSet{newSet("a", 0, 0), nil, newSet("b", 2, 0), newSet("c", 3, 0)}
	if diff := cmp.Diff([]string{"b", "c"}, names(activeSets(sets))); diff != "" {
		t.Errorf("activeSets (-want +got):\n%s", diff)
	}
	if got := specReplicas(sets); got != 5 {
		t.Errorf("specReplicas = %d, want 5", got)
	}
	if diff := cmp.Diff([]string{"a", "n"}, names(withNew(newSet("n", 0, 0), []*v1alpha1.MachineSet{newSet("a", 0, 0)}))); diff != "" {
		t.Errorf("withNew (-want +got):\n%s", diff)
	}
}
