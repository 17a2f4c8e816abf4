package deployment

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestSetsToDelete(t *testing.T) {
	limit := func(n int32) mdOpt {
		return func(d *v1alpha1.MachineDeployment) { d.Spec.RevisionHistoryLimit = &n }
	}
	old := func(name, rev string, minutes int, opts ...msOpt) *v1alpha1.MachineSet {
		return newSet(name, 0, minutes, append([]msOpt{withClass(name), withRevision(rev)}, opts...)...)
	}
	tests := []struct {
		name   string
		d      *v1alpha1.MachineDeployment
		newSet *v1alpha1.MachineSet
		old    []*v1alpha1.MachineSet
		counts map[string]machineCounts
		want   []string
	}{
		{
			name: "no limit: keep everything",
			d:    newDeployment(3),
			old:  []*v1alpha1.MachineSet{old("a", "1", 0), old("b", "2", 1)},
		},
		{
			name: "within the limit",
			d:    newDeployment(3, limit(2)),
			old:  []*v1alpha1.MachineSet{old("a", "1", 0), old("b", "2", 1)},
		},
		{
			name: "lowest revisions first, not creation order",
			d:    newDeployment(3, limit(1)),
			old:  []*v1alpha1.MachineSet{old("a", "5", 0), old("b", "2", 1), old("c", "3", 2)},
			want: []string{"b", "c"},
		},
		{
			name: "limit 0 deletes every done old set",
			d:    newDeployment(3, limit(0)),
			old:  []*v1alpha1.MachineSet{old("a", "1", 0), old("b", "2", 1)},
			want: []string{"a", "b"},
		},
		{
			name: "a candidate that is not done is kept, and no newer set goes instead",
			d:    newDeployment(3, limit(1)),
			old: []*v1alpha1.MachineSet{
				old("sized", "1", 0, func(s *v1alpha1.MachineSet) { s.Spec.Replicas = 1 }),
				old("machines", "2", 1),
				old("deleting", "3", 2),
				old("status", "4", 3, func(s *v1alpha1.MachineSet) { s.Status.Replicas = 1 }),
				old("unobserved", "5", 4, func(s *v1alpha1.MachineSet) { s.Generation = 2; s.Status.ObservedGeneration = 1 }),
				old("done", "6", 5),
				old("kept", "7", 6),
			},
			counts: map[string]machineCounts{"machines": counted(1, 1), "deleting": {Deleting: 1}},
			want:   []string{"done"},
		},
		{
			name: "sets already being deleted do not count",
			d:    newDeployment(3, limit(1)),
			old: []*v1alpha1.MachineSet{
				old("a", "1", 0, func(s *v1alpha1.MachineSet) { s.DeletionTimestamp = new(metav1.NewTime(epoch)) }),
				old("b", "2", 1),
			},
		},
		{
			name:   "never the new set",
			d:      newDeployment(3, limit(0)),
			newSet: newSet("n", 0, 9, withRevision("1")),
			old:    []*v1alpha1.MachineSet{newSet("n", 0, 9, withRevision("1")), old("a", "2", 0)},
			want:   []string{"a"},
		},
		{
			name: "unreadable revision counts as the lowest",
			d:    newDeployment(3, limit(1)),
			old:  []*v1alpha1.MachineSet{old("a", "2", 0), old("b", "x", 1)},
			want: []string{"b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := names(setsToDelete(tt.d, tt.newSet, tt.old, tt.counts))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("setsToDelete (-want +got):\n%s", diff)
			}
		})
	}
}
