package deployment

import (
	"cmp"
	"slices"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// setsToDelete returns the old sets to delete so that no more than
// spec.revisionHistoryLimit old sets remain for rollbacks, lowest revision
// first. A nil limit keeps every set, as in MCM.
//
// Only the surplus sets with the lowest revisions are candidates, and of
// those only sets that are done: not being deleted already, sized 0, with
// no machine left (counts; the set's status agreeing) and a status that has
// seen its last spec change. A candidate that is not done is kept for now
// rather than deleting a newer set in its place; it is deleted by a later
// sync once it is done. The new set is never deleted.
func setsToDelete(d *v1alpha1.MachineDeployment, newSet *v1alpha1.MachineSet, old []*v1alpha1.MachineSet, counts map[string]machineCounts) []*v1alpha1.MachineSet {
	limit := d.Spec.RevisionHistoryLimit
	if limit == nil {
		return nil
	}
	var alive []*v1alpha1.MachineSet
	for _, s := range old {
		if s != nil && (newSet == nil || s.Name != newSet.Name) && s.DeletionTimestamp == nil {
			alive = append(alive, s)
		}
	}
	surplus := len(alive) - int(max(*limit, 0))
	if surplus <= 0 {
		return nil
	}
	slices.SortStableFunc(alive, compareRevision)
	var doomed []*v1alpha1.MachineSet
	for _, s := range alive[:surplus] {
		c := counts[s.Name]
		if s.Spec.Replicas == 0 && s.Status.Replicas == 0 && c.Machines == 0 && c.Deleting == 0 &&
			s.Status.ObservedGeneration >= s.Generation {
			doomed = append(doomed, s)
		}
	}
	return doomed
}

// compareRevision orders sets by revision, lowest first, then by age. A set
// whose revision cannot be read counts as revision 0: it is the one nobody
// can roll back to by number.
func compareRevision(a, b *v1alpha1.MachineSet) int {
	ra, _ := revisionOf(a)
	rb, _ := revisionOf(b)
	if c := cmp.Compare(ra, rb); c != 0 {
		return c
	}
	return compareAge(a, b)
}
