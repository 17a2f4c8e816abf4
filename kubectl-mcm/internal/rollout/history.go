package rollout

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// ChangeCauseAnnotation is where kubectl records why a revision was made
// (kubectl annotate ... kubernetes.io/change-cause=...); the deployment
// controller copies the deployment's annotations to its new set.
const ChangeCauseAnnotation = "kubernetes.io/change-cause"

// Revision is one revision of a deployment: the set holding its template.
type Revision struct {
	Revision    int64  `json:"revision"`
	ChangeCause string `json:"changeCause,omitempty"`
	MachineSet  string `json:"machineSet"`
	// Replicas the set is sized for: the current revision's are the
	// deployment's once the rollout is done.
	Replicas int32 `json:"replicas"`
	// Template is the revision's machine template.
	Template v1alpha1.MachineTemplateSpec `json:"template"`
}

// History lists the revisions of d from the sets it controls (their
// revision annotations), oldest first. sets may hold others' sets; they
// are left out.
func History(d *v1alpha1.MachineDeployment, sets []*v1alpha1.MachineSet) []Revision {
	var out []Revision
	for _, s := range sets {
		ref := metav1.GetControllerOf(s)
		if ref == nil || ref.UID != d.UID {
			continue
		}
		rev, err := strconv.ParseInt(s.Annotations[v1alpha1.RevisionAnnotation], 10, 64)
		if err != nil {
			continue // not a revision yet: the controller has not annotated the set
		}
		out = append(out, Revision{Revision: rev, ChangeCause: s.Annotations[ChangeCauseAnnotation], MachineSet: s.Name,
			Replicas: s.Spec.Replicas, Template: s.Spec.Template})
	}
	slices.SortFunc(out, func(a, b Revision) int { return cmp.Compare(a.Revision, b.Revision) })
	return out
}

// Find returns revision n of history; 0 means the one before the latest,
// as kubectl rollout undo takes it.
func Find(history []Revision, n int64) (Revision, error) {
	if n == 0 {
		if len(history) < 2 {
			return Revision{}, fmt.Errorf("no previous revision to roll back to: the history has %d revision(s)", len(history))
		}
		return history[len(history)-2], nil
	}
	for _, r := range history {
		if r.Revision == n {
			return r, nil
		}
	}
	return Revision{}, fmt.Errorf("unable to find specified revision %d in history", n)
}

// PrintHistory writes history as kubectl rollout history does.
func PrintHistory(w io.Writer, kindName string, history []Revision) error {
	if len(history) == 0 {
		_, err := fmt.Fprintf(w, "No rollout history found in %s\n", kindName)
		return err
	}
	fmt.Fprintf(w, "%s\n", kindName)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tMACHINESET\tCHANGE-CAUSE")
	for _, r := range history {
		fmt.Fprintf(tw, "%d\t%s\t%s\n", r.Revision, r.MachineSet, cmp.Or(r.ChangeCause, "<none>"))
	}
	return tw.Flush()
}

// Owned keeps the sets d controls.
func Owned(d *v1alpha1.MachineDeployment, sets []*v1alpha1.MachineSet) []*v1alpha1.MachineSet {
	var out []*v1alpha1.MachineSet
	for _, s := range sets {
		if ref := metav1.GetControllerOf(s); ref != nil && ref.UID == d.UID {
			out = append(out, s)
		}
	}
	return out
}
