package drain

import (
	"cmp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// budget is a PodDisruptionBudget prepared for matching, with the
// disruptions this plan has handed out so far.
type budget struct {
	selector labels.Selector
	status   PDBStatus
	current  bool  // the status is of the budget's current generation
	left     int32 // disruptions not yet handed out
	probed   bool  // a probe eviction was handed out while left was 0
}

// allowsNow reports whether the budget's current status still has a
// disruption to hand out in this plan: then a backoff after an earlier 429
// need not be waited out, the budget has changed since.
func (b *budget) allowsNow() bool {
	return b.current && b.left > 0
}

// admit hands out one eviction of a healthy pod the budget selects, if it
// has one left; when its status allows none, it hands out one probe per
// plan so that the API server's answer (and the backoff after a 429)
// decides, not a possibly stale status.
func (b *budget) admit() bool {
	switch {
	case b.left > 0:
		b.left--
		return true
	case b.status.DisruptionsAllowed <= 0 && !b.probed:
		b.probed = true
		return true
	}
	return false
}

// take uses up one of the disruptions the budget has left, if any, for a
// pod that goes without asking the budget.
func (b *budget) take() {
	if b.left > 0 {
		b.left--
	}
}

type budgetIndex struct {
	byNamespace map[string][]*budget
	byName      map[string]*budget
}

func compileBudgets(pdbs []*policyv1.PodDisruptionBudget) *budgetIndex {
	idx := &budgetIndex{byNamespace: map[string][]*budget{}, byName: map[string]*budget{}}
	sorted := slices.Clone(pdbs)
	slices.SortFunc(sorted, func(a, b *policyv1.PodDisruptionBudget) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, pdb := range sorted {
		if pdb == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			sel = labels.Nothing() // the disruption controller cannot use it either
		}
		b := &budget{selector: sel, status: pdbStatus(pdb), left: max(pdb.Status.DisruptionsAllowed, 0),
			current: pdb.Status.ObservedGeneration >= pdb.Generation}
		idx.byNamespace[pdb.Namespace] = append(idx.byNamespace[pdb.Namespace], b)
		idx.byName[b.status.Name] = b
	}
	return idx
}

func (idx *budgetIndex) matching(pod *corev1.Pod) []*budget {
	var out []*budget
	set := labels.Set(pod.Labels)
	for _, b := range idx.byNamespace[pod.Namespace] {
		if b.selector.Matches(set) {
			out = append(out, b)
		}
	}
	return out
}

// misconfigured reports a budget that allows no disruption although every
// pod it expects is healthy and none is being disrupted: it will never allow
// one by itself (minAvailable equal to the replicas, maxUnavailable 0).
func misconfigured(pdb *policyv1.PodDisruptionBudget) bool {
	s := pdb.Status
	return s.ObservedGeneration >= pdb.Generation &&
		s.ExpectedPods > 0 &&
		s.CurrentHealthy >= s.ExpectedPods &&
		len(s.DisruptedPods) == 0 &&
		s.DisruptionsAllowed <= 0
}

func pdbStatus(pdb *policyv1.PodDisruptionBudget) PDBStatus {
	return PDBStatus{
		Name:               pdb.Namespace + "/" + pdb.Name,
		DesiredHealthy:     pdb.Status.DesiredHealthy,
		CurrentHealthy:     pdb.Status.CurrentHealthy,
		ExpectedPods:       pdb.Status.ExpectedPods,
		DisruptionsAllowed: pdb.Status.DisruptionsAllowed,
		Misconfigured:      misconfigured(pdb),
	}
}

// budgetProblem returns why the eviction API would refuse the pod whatever
// its budgets' status: several budgets, or a misconfigured one.
func budgetProblem(in *podInfo, pdbs []PDBStatus) (Cause, string, bool) {
	switch {
	case len(in.budgets) > 1:
		return CauseMultiplePDBs, "selected by several PodDisruptionBudgets (" + pdbNames(pdbs) +
			"); the eviction API refuses such pods", true
	case len(in.budgets) == 1 && in.budgets[0].status.Misconfigured:
		return CauseMisconfiguredPDB, "PodDisruptionBudget " + in.budgets[0].status.String(), true
	}
	return "", "", false
}

// backoffHold returns the cause and reason with which an active backoff
// holds a pod back.
func backoffHold(in *podInfo, key string, b backoffEntry) (Cause, string) {
	c := b.Cause
	switch {
	case c != "":
	case strings.HasPrefix(key, "pdb/"):
		c = CauseDisruptionBudget
	default:
		c = CauseTooManyRequests
	}
	reason := "eviction refused (429); retry after backoff"
	switch {
	case c == CauseNamespaceTerminating:
		reason = "namespace is terminating"
	case len(in.budgets) == 1:
		reason = "blocked by PodDisruptionBudget " + in.budgets[0].status.String()
	}
	return c, reason
}

// backoffKey is the key of the backoff that holds a pod's evictions back:
// its budget's when a single budget decides for a healthy pod, else its
// own.
func backoffKey(d Decision) string {
	if len(d.PDBs) == 1 && d.Healthy {
		return "pdb/" + d.PDBs[0].Name
	}
	return "pod/" + string(d.Pod.UID)
}

// findBackoff returns the backoff of key in st.
func findBackoff(st State, key string) (backoffEntry, bool) {
	for _, b := range st.backoffs {
		if b.Key == key {
			return b, true
		}
	}
	return backoffEntry{}, false
}

func clearBackoff(st *State, key string) {
	for i, b := range st.backoffs {
		if b.Key == key {
			st.backoffs = append(st.backoffs[:i:i], st.backoffs[i+1:]...)
			return
		}
	}
}

// activeBackoff returns the backoff of key if it still holds at now. A
// budget's backoff does not hold while the budget allows a disruption
// again: the pod goes at once, within what the budget allows, and the
// timer remains the fallback for a status that does not change.
func activeBackoff(backoffs map[string]backoffEntry, key string, now time.Time, in *podInfo) (backoffEntry, bool) {
	b, ok := backoffs[key]
	if !ok || !now.Before(b.Until) {
		return b, false
	}
	if strings.HasPrefix(key, "pdb/") && len(in.budgets) == 1 && in.budgets[0].allowsNow() {
		return b, false
	}
	return b, true
}

// blockingBudgets collects the budgets that hold back the decisions.
func blockingBudgets(decisions []Decision) []string {
	var out []string
	for _, d := range decisions {
		if d.Action == ActionBlocked && len(d.PDBs) == 1 &&
			(d.Cause == CauseDisruptionBudget || d.Cause == CauseMisconfiguredPDB) {
			out = append(out, d.PDBs[0].Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
