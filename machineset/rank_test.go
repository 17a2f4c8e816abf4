package machineset

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// rkEpoch is the creation time of test machines unless they say otherwise.
var rkEpoch = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

type rkOpt func(*v1alpha1.Machine)

// rkMachine is a Running machine created at rkEpoch, with UID "uid-<name>".
func rkMachine(name string, opts ...rkOpt) *v1alpha1.Machine {
	m := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         "default",
			UID:               types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(rkEpoch),
		},
	}
	m.Status.CurrentStatus.Phase = v1alpha1.MachineRunning
	for _, o := range opts {
		o(m)
	}
	return m
}

// rkAge sets the creation time, minutes after rkEpoch.
func rkAge(minutes int) rkOpt {
	return func(m *v1alpha1.Machine) {
		m.CreationTimestamp = metav1.NewTime(rkEpoch.Add(time.Duration(minutes) * time.Minute))
	}
}

func rkPhase(p v1alpha1.MachinePhase) rkOpt {
	return func(m *v1alpha1.Machine) { m.Status.CurrentStatus.Phase = p }
}

func rkAnnotate(key, value string) rkOpt {
	return func(m *v1alpha1.Machine) {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[key] = value
	}
}

func rkPriority(p string) rkOpt { return rkAnnotate(v1alpha1.MachinePriorityAnnotation, p) }

// rkMarked marks the machine for deletion, minutes after rkEpoch.
func rkMarked(minutes int) rkOpt {
	return rkAnnotate(v1alpha1.MarkedForDeletionTimeAnnotation, rkAt(minutes))
}

// rkCAMarked is what the cluster-autoscaler does to a machine it removes.
func rkCAMarked(minutes int) rkOpt {
	return func(m *v1alpha1.Machine) {
		rkPriority(v1alpha1.MachinePriorityDeleteFirst)(m)
		rkMarked(minutes)(m)
	}
}

func rkDeleting() rkOpt {
	return func(m *v1alpha1.Machine) {
		t := metav1.NewTime(rkEpoch.Add(time.Hour))
		m.DeletionTimestamp = &t
	}
}

func rkUID(uid string) rkOpt {
	return func(m *v1alpha1.Machine) { m.UID = types.UID(uid) }
}

func rkAt(minutes int) string {
	return rkEpoch.Add(time.Duration(minutes) * time.Minute).Format(time.RFC3339)
}

// rkSet is a MachineSet with the given annotations (key, value, key, value...).
func rkSet(kv ...string) *v1alpha1.MachineSet {
	s := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "set", Namespace: "default"}}
	for i := 0; i+1 < len(kv); i += 2 {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[kv[i]] = kv[i+1]
	}
	return s
}

func rkScaledAt(minutes int) *v1alpha1.MachineSet {
	return rkSet(v1alpha1.LastReplicaChangeByScalerAnnotation, rkAt(minutes))
}

func rkNames(ms []*v1alpha1.Machine) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

func TestRankForDeletion(t *testing.T) {
	tests := []struct {
		name     string
		machines []*v1alpha1.Machine
		policy   DeletionPolicy
		want     []string
	}{
		{
			name: "being deleted goes before everything else",
			machines: []*v1alpha1.Machine{
				rkMachine("failed-ca", rkPhase(v1alpha1.MachineFailed), rkCAMarked(0)),
				rkMachine("deleting", rkDeleting(), rkPhase(v1alpha1.MachineTerminating), rkAge(10)),
				// Phase Terminating without a deletionTimestamp: as good as deleted.
				rkMachine("terminating", rkPhase(v1alpha1.MachineTerminating), rkAge(20)),
			},
			policy: DeletionPolicyOldest,
			want:   []string{"deleting", "terminating", "failed-ca"},
		},
		{
			name: "lower priority first, missing and garbage count as 3",
			machines: []*v1alpha1.Machine{
				rkMachine("p5", rkPriority("5")),
				rkMachine("missing", rkAge(1)),
				rkMachine("garbage", rkPriority("high"), rkAge(2)),
				rkMachine("p2", rkPriority("2"), rkPhase(v1alpha1.MachineFailed)),
				rkMachine("p1", rkPriority("1")),
				rkMachine("p0", rkPriority("0")),
			},
			policy: DeletionPolicyOldest,
			want:   []string{"p0", "p1", "p2", "missing", "garbage", "p5"},
		},
		{
			name: "marked before unmarked, older mark first, garbage mark counts as none",
			machines: []*v1alpha1.Machine{
				rkMachine("unmarked", rkPhase(v1alpha1.MachineFailed)),
				// Were its mark read, it would go before unmarked.
				rkMachine("garbage-mark", rkAnnotate(v1alpha1.MarkedForDeletionTimeAnnotation, "yesterday"), rkPhase(v1alpha1.MachineFailed), rkAge(10)),
				rkMachine("marked-late", rkMarked(30)),
				rkMachine("marked-early", rkMarked(5), rkAge(50)),
			},
			policy: DeletionPolicyOldest,
			want:   []string{"marked-early", "marked-late", "unmarked", "garbage-mark"},
		},
		{
			name: "phase order",
			machines: []*v1alpha1.Machine{
				rkMachine("running", rkPhase(v1alpha1.MachineRunning)),
				rkMachine("available", rkPhase(v1alpha1.MachineAvailable)),
				rkMachine("pending", rkPhase(v1alpha1.MachinePending), rkAge(1)),
				rkMachine("no-phase", rkPhase(""), rkAge(2)),
				rkMachine("unknown", rkPhase(v1alpha1.MachineUnknown), rkAge(1)),
				rkMachine("in-place", rkPhase(v1alpha1.MachineInPlaceUpdating), rkAge(2)),
				rkMachine("crashloop", rkPhase(v1alpha1.MachineCrashLoopBackOff)),
				rkMachine("failed", rkPhase(v1alpha1.MachineFailed)),
			},
			policy: DeletionPolicyOldest,
			want:   []string{"failed", "crashloop", "unknown", "in-place", "pending", "no-phase", "available", "running"},
		},
		{
			name: "oldest first",
			machines: []*v1alpha1.Machine{
				rkMachine("mid", rkAge(5)),
				rkMachine("new", rkAge(9)),
				rkMachine("old", rkAge(1)),
			},
			policy: DeletionPolicyOldest,
			want:   []string{"old", "mid", "new"},
		},
		{
			name: "newest first",
			machines: []*v1alpha1.Machine{
				rkMachine("mid", rkAge(5)),
				rkMachine("new", rkAge(9)),
				rkMachine("old", rkAge(1)),
			},
			policy: DeletionPolicyNewest,
			want:   []string{"new", "mid", "old"},
		},
		{
			name: "an unknown policy acts as oldest",
			machines: []*v1alpha1.Machine{
				rkMachine("new", rkAge(9)),
				rkMachine("old", rkAge(1)),
			},
			policy: "Youngest",
			want:   []string{"old", "new"},
		},
		{
			// The order of the UIDs' hashes, written out so that a change
			// of hash, which would reshuffle which machines every Random
			// set deletes after an upgrade, is noticed.
			name: "random orders by a hash of the UID, not by age or name",
			machines: []*v1alpha1.Machine{
				rkMachine("a", rkUID("uid-1"), rkAge(1)),
				rkMachine("b", rkUID("uid-2"), rkAge(2)),
				rkMachine("c", rkUID("uid-3"), rkAge(3)),
				rkMachine("d", rkUID("uid-4"), rkAge(4)),
			},
			policy: DeletionPolicyRandom,
			want:   []string{"d", "b", "c", "a"},
		},
		{
			name: "random still keeps the ladder",
			machines: []*v1alpha1.Machine{
				rkMachine("a", rkUID("uid-1")),
				rkMachine("d-failed", rkUID("uid-4"), rkPhase(v1alpha1.MachineFailed)),
				rkMachine("c", rkUID("uid-3")),
				rkMachine("b-deleting", rkUID("uid-2"), rkDeleting()),
			},
			policy: DeletionPolicyRandom,
			want:   []string{"b-deleting", "d-failed", "c", "a"},
		},
		{
			name: "random without UIDs hashes namespace and name",
			machines: []*v1alpha1.Machine{
				rkMachine("a", rkUID("")),
				rkMachine("b", rkUID("")),
				rkMachine("c", rkUID("")),
				rkMachine("d", rkUID("")),
			},
			policy: DeletionPolicyRandom,
			want:   []string{"b", "a", "c", "d"},
		},
		{
			name: "ties go by name, whatever the input order",
			machines: []*v1alpha1.Machine{
				// UIDs against the names, so that the names decide.
				rkMachine("m-c", rkUID("uid-1")),
				rkMachine("m-a", rkUID("uid-3")),
				rkMachine("m-b", rkUID("uid-2")),
			},
			policy: DeletionPolicyNewest,
			want:   []string{"m-a", "m-b", "m-c"},
		},
		{
			name:     "empty",
			machines: nil,
			policy:   DeletionPolicyOldest,
			want:     []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rkNames(rankForDeletion(tt.machines, ladder{Policy: tt.policy}))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rankForDeletion (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanDeletions(t *testing.T) {
	steady := func() []*v1alpha1.Machine {
		return []*v1alpha1.Machine{
			rkMachine("old", rkAge(1)),
			rkMachine("mid", rkAge(2)),
			rkMachine("new", rkAge(3)),
		}
	}
	tests := []struct {
		name     string
		set      *v1alpha1.MachineSet
		machines []*v1alpha1.Machine
		surplus  int
		limit    int
		policy   DeletionPolicy
		want     []string
	}{
		{
			name:     "no surplus, nothing to delete",
			set:      rkSet(),
			machines: steady(),
			surplus:  0,
			want:     nil,
		},
		{
			name:     "negative surplus (scale-up) deletes nothing",
			set:      rkSet(),
			machines: steady(),
			surplus:  -2,
			want:     nil,
		},
		{
			name:     "surplus takes the head of the ranking",
			set:      rkSet(),
			machines: steady(),
			surplus:  2,
			want:     []string{"old", "mid"},
		},
		{
			name:     "surplus with the newest policy",
			set:      rkSet(),
			machines: steady(),
			surplus:  2,
			policy:   DeletionPolicyNewest,
			want:     []string{"new", "mid"},
		},
		{
			name:     "surplus larger than the set takes all",
			set:      rkSet(),
			machines: steady(),
			surplus:  10,
			want:     []string{"old", "mid", "new"},
		},
		{
			name: "marked machines go even without surplus",
			set:  rkScaledAt(10),
			machines: append(steady(),
				rkMachine("ca", rkCAMarked(5), rkAge(4))),
			surplus: 0,
			want:    []string{"ca"},
		},
		{
			name: "marked at the very time of the scaler change counts",
			set:  rkScaledAt(10),
			machines: append(steady(),
				rkMachine("ca", rkCAMarked(10), rkAge(4))),
			want: []string{"ca"},
		},
		{
			name: "a set without a scaler time takes no marked machine: the decrease has not reached it",
			set:  rkSet(),
			machines: append(steady(),
				rkMachine("ca", rkCAMarked(50), rkAge(4))),
			want: nil,
		},
		{
			name: "a set without a scaler time still takes marked machines first for its surplus",
			set:  rkSet(),
			machines: append(steady(),
				rkMachine("ca", rkCAMarked(50), rkAge(4))),
			surplus: 1,
			want:    []string{"ca"},
		},
		{
			name: "marked after the scaler's last change: not yet",
			set:  rkScaledAt(10),
			machines: append(steady(),
				rkMachine("ca-late", rkCAMarked(11), rkAge(4))),
			want: nil,
		},
		{
			name: "an unparsable scaler time takes no marked machine",
			set:  rkSet(v1alpha1.LastReplicaChangeByScalerAnnotation, "now"),
			machines: append(steady(),
				rkMachine("ca", rkCAMarked(5), rkAge(4))),
			want: nil,
		},
		{
			name: "a mark without priority 1, or an unparsable mark, is not the autoscaler's",
			set:  rkScaledAt(10),
			machines: append(steady(),
				rkMachine("mark-only", rkMarked(5)),
				rkMachine("priority-only", rkPriority("1")),
				rkMachine("priority-garbage-mark", rkPriority("1"), rkAnnotate(v1alpha1.MarkedForDeletionTimeAnnotation, "soon"))),
			want: nil,
		},
		{
			name: "but the late-marked machine is still first for the surplus",
			set:  rkScaledAt(10),
			machines: append(steady(),
				rkMachine("ca-late", rkCAMarked(11), rkAge(4))),
			surplus: 1,
			want:    []string{"ca-late"},
		},
		{
			name: "failed machines go even without surplus",
			set:  rkSet(),
			machines: append(steady(),
				rkMachine("failed", rkPhase(v1alpha1.MachineFailed), rkAge(9))),
			want: []string{"failed"},
		},
		{
			name: "surplus, marked and failed together, in ladder order",
			set:  rkScaledAt(10),
			machines: append(steady(),
				rkMachine("failed", rkPhase(v1alpha1.MachineFailed), rkAge(9)),
				rkMachine("ca", rkCAMarked(5), rkAge(8))),
			surplus: 3,
			// ca and failed are the surplus's first two; old is the third.
			want: []string{"ca", "failed", "old"},
		},
		{
			name: "a marked machine that is also surplus is taken once",
			set:  rkScaledAt(10),
			machines: append(steady(),
				rkMachine("ca", rkCAMarked(5), rkAge(8))),
			surplus: 1,
			want:    []string{"ca"},
		},
		{
			name: "failed machines beyond the surplus are added after it",
			set:  rkSet(),
			machines: append(steady(),
				rkMachine("failed", rkPhase(v1alpha1.MachineFailed), rkAge(9), rkPriority("5"))),
			surplus: 1,
			want:    []string{"old", "failed"},
		},
		{
			name: "the limit keeps the head of the ladder",
			set:  rkScaledAt(10),
			machines: append(steady(),
				rkMachine("failed", rkPhase(v1alpha1.MachineFailed), rkAge(9)),
				rkMachine("ca", rkCAMarked(5), rkAge(8))),
			surplus: 3,
			limit:   2,
			want:    []string{"ca", "failed"},
		},
		{
			name: "a zero or negative limit is no cap",
			set:  rkSet(),
			machines: append(steady(),
				rkMachine("failed", rkPhase(v1alpha1.MachineFailed), rkAge(9))),
			surplus: 3,
			limit:   -1,
			want:    []string{"failed", "old", "mid"},
		},
		{
			name: "machines being deleted are never picked and take no surplus",
			set:  rkScaledAt(10),
			machines: append(steady(),
				rkMachine("deleting", rkDeleting()),
				rkMachine("terminating", rkPhase(v1alpha1.MachineTerminating)),
				rkMachine("deleting-failed", rkPhase(v1alpha1.MachineFailed), rkDeleting()),
				rkMachine("deleting-ca", rkCAMarked(5), rkDeleting())),
			surplus: 1,
			want:    []string{"old"},
		},
		{
			name:     "a nil set has no scaler time",
			set:      nil,
			machines: []*v1alpha1.Machine{rkMachine("ca", rkCAMarked(5))},
			want:     nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy := tt.policy
			if policy == "" {
				policy = DeletionPolicyOldest
			}
			got, _ := planDeletions(tt.set, tt.machines, tt.surplus, tt.limit, ladder{Policy: policy})
			if diff := cmp.Diff(tt.want, rkNames(got), cmpEmptyAsNil); diff != "" {
				t.Errorf("planDeletions (-want +got):\n%s", diff)
			}
		})
	}
}

// cmpEmptyAsNil lets a table say nil for "nothing".
var cmpEmptyAsNil = cmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

func TestPolicyOf(t *testing.T) {
	tests := []struct {
		name    string
		set     *v1alpha1.MachineSet
		def     DeletionPolicy
		want    DeletionPolicy
		wantErr string
	}{
		{name: "absent", set: rkSet(), def: DeletionPolicyNewest, want: DeletionPolicyNewest},
		{name: "nil set", set: nil, def: DeletionPolicyOldest, want: DeletionPolicyOldest},
		{name: "empty value", set: rkSet(DeletionPolicyAnnotation, ""), def: DeletionPolicyRandom, want: DeletionPolicyRandom},
		{name: "oldest", set: rkSet(DeletionPolicyAnnotation, "Oldest"), def: DeletionPolicyNewest, want: DeletionPolicyOldest},
		{name: "newest", set: rkSet(DeletionPolicyAnnotation, "Newest"), def: DeletionPolicyOldest, want: DeletionPolicyNewest},
		{name: "random", set: rkSet(DeletionPolicyAnnotation, "Random"), def: DeletionPolicyOldest, want: DeletionPolicyRandom},
		{
			name: "unknown", set: rkSet(DeletionPolicyAnnotation, "LeastUsed"), def: DeletionPolicyOldest, want: DeletionPolicyOldest,
			wantErr: `annotation mcmkit.io/deletion-policy: unknown deletion policy "LeastUsed" (want Oldest, Newest or Random); using Oldest`,
		},
		{
			name: "values are case-sensitive", set: rkSet(DeletionPolicyAnnotation, "newest"), def: DeletionPolicyOldest, want: DeletionPolicyOldest,
			wantErr: `unknown deletion policy "newest"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := policyOf(tt.set, tt.def)
			if got != tt.want {
				t.Errorf("policyOf = %q, want %q", got, tt.want)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("policyOf error = %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("policyOf error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// rkPolicies are the policies the properties range over.
var rkPolicies = []DeletionPolicy{DeletionPolicyOldest, DeletionPolicyNewest, DeletionPolicyRandom}

// rkGenMachine draws a machine with any combination of what the ranking
// looks at. Creation times and marks come from small ranges so that ties
// are common.
func rkGenMachine(t *rapid.T, i int) *v1alpha1.Machine {
	m := rkMachine(fmt.Sprintf("m%02d", i), rkAge(rapid.IntRange(0, 4).Draw(t, "age")))
	m.Status.CurrentStatus.Phase = rapid.SampledFrom([]v1alpha1.MachinePhase{
		v1alpha1.MachineRunning, v1alpha1.MachineRunning, v1alpha1.MachineRunning,
		v1alpha1.MachinePending, v1alpha1.MachineAvailable, v1alpha1.MachineUnknown, v1alpha1.MachineFailed,
		v1alpha1.MachineCrashLoopBackOff, v1alpha1.MachineTerminating, v1alpha1.MachineInPlaceUpdating,
		v1alpha1.MachineInPlaceUpdateSuccessful, v1alpha1.MachineInPlaceUpdateFailed, "",
	}).Draw(t, "phase")
	if p := rapid.SampledFrom([]string{"", "", "1", "1", "2", "3", "0", "x"}).Draw(t, "priority"); p != "" {
		rkPriority(p)(m)
	}
	switch rapid.IntRange(0, 5).Draw(t, "mark") {
	case 0, 1:
		rkMarked(rapid.IntRange(0, 4).Draw(t, "markedAt"))(m)
	case 2:
		rkAnnotate(v1alpha1.MarkedForDeletionTimeAnnotation, "junk")(m)
	}
	if rapid.IntRange(0, 4).Draw(t, "deleting") == 0 {
		rkDeleting()(m)
	}
	return m
}

func rkGenMachines(t *rapid.T) []*v1alpha1.Machine {
	var ms []*v1alpha1.Machine
	for i := range rapid.IntRange(0, 15).Draw(t, "machines") {
		ms = append(ms, rkGenMachine(t, i))
	}
	return ms
}

func rkGenSet(t *rapid.T) *v1alpha1.MachineSet {
	switch rapid.IntRange(0, 3).Draw(t, "scaler") {
	case 0:
		return rkSet()
	case 1:
		return rkSet(v1alpha1.LastReplicaChangeByScalerAnnotation, "junk")
	default:
		return rkScaledAt(rapid.IntRange(0, 4).Draw(t, "scaledAt"))
	}
}

// rkRung is the spec's ladder position of m, written independently of
// rank.go: deleting, priority, marked, mark time, phase.
func rkRung(m *v1alpha1.Machine) [5]int64 {
	var r [5]int64
	if m.DeletionTimestamp == nil && m.Status.CurrentStatus.Phase != v1alpha1.MachineTerminating {
		r[0] = 1
	}
	r[1] = 3
	switch m.Annotations[v1alpha1.MachinePriorityAnnotation] {
	case "0":
		r[1] = 0
	case "1":
		r[1] = 1
	case "2":
		r[1] = 2
	}
	r[2] = 1
	if s, ok := m.Annotations[v1alpha1.MarkedForDeletionTimeAnnotation]; ok {
		if at, err := time.Parse(time.RFC3339, s); err == nil {
			r[2], r[3] = 0, at.UnixNano()
		}
	}
	switch m.Status.CurrentStatus.Phase {
	case v1alpha1.MachineFailed:
		r[4] = 1
	case v1alpha1.MachineCrashLoopBackOff:
		r[4] = 2
	case v1alpha1.MachinePending, "":
		r[4] = 4
	case v1alpha1.MachineAvailable:
		r[4] = 5
	case v1alpha1.MachineRunning:
		r[4] = 6
	default: // Unknown, and the phases the spec does not name
		r[4] = 3
	}
	return r
}

// rkWantMarked is the spec's "the cluster-autoscaler marked it".
func rkWantMarked(set *v1alpha1.MachineSet, m *v1alpha1.Machine) bool {
	if m.Annotations[v1alpha1.MachinePriorityAnnotation] != "1" {
		return false
	}
	at, err := time.Parse(time.RFC3339, m.Annotations[v1alpha1.MarkedForDeletionTimeAnnotation])
	if err != nil {
		return false
	}
	s, ok := set.Annotations[v1alpha1.LastReplicaChangeByScalerAnnotation]
	if !ok {
		return false
	}
	scaled, err := time.Parse(time.RFC3339, s)
	return err == nil && !at.After(scaled)
}

func rkWantDeleting(m *v1alpha1.Machine) bool {
	return m.DeletionTimestamp != nil || m.Status.CurrentStatus.Phase == v1alpha1.MachineTerminating
}

func rkCopy(ms []*v1alpha1.Machine) []*v1alpha1.Machine {
	if ms == nil {
		return nil
	}
	out := make([]*v1alpha1.Machine, len(ms))
	for i, m := range ms {
		out[i] = m.DeepCopy()
	}
	return out
}

func TestPropertyPlanDeletions(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		set := rkGenSet(t)
		machines := rkGenMachines(t)
		surplus := rapid.IntRange(-3, 18).Draw(t, "surplus")
		limit := rapid.IntRange(-1, 8).Draw(t, "limit")
		policy := rapid.SampledFrom(rkPolicies).Draw(t, "policy")
		before, order := rkCopy(machines), slices.Clone(machines)

		got, _ := planDeletions(set, machines, surplus, limit, ladder{Policy: policy})

		if diff := cmp.Diff(before, machines); diff != "" {
			t.Fatalf("planDeletions modified the machines (-before +after):\n%s", diff)
		}
		if !slices.Equal(order, machines) {
			t.Fatalf("planDeletions reordered its input")
		}

		var marked, failed, alive int
		for _, m := range machines {
			if rkWantDeleting(m) {
				continue
			}
			alive++
			if rkWantMarked(set, m) {
				marked++
			}
			if m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed {
				failed++
			}
		}
		if bound := max(surplus, 0) + marked + failed; len(got) > bound {
			t.Fatalf("picked %d machines, more than surplus %d + marked %d + failed %d", len(got), surplus, marked, failed)
		}
		if limit > 0 && len(got) > limit {
			t.Fatalf("picked %d machines, limit %d", len(got), limit)
		}
		picked := map[*v1alpha1.Machine]bool{}
		for _, m := range got {
			if picked[m] {
				t.Fatalf("picked %s twice", m.Name)
			}
			picked[m] = true
			if !slices.Contains(machines, m) {
				t.Fatalf("picked %s, which is not an input", m.Name)
			}
			if rkWantDeleting(m) {
				t.Fatalf("picked %s, which is already being deleted", m.Name)
			}
		}

		// The result follows the ladder.
		ranking := rankForDeletion(machines, ladder{Policy: policy})
		pos := map[*v1alpha1.Machine]int{}
		for i, m := range ranking {
			pos[m] = i
		}
		for i := 1; i < len(got); i++ {
			if pos[got[i-1]] > pos[got[i]] {
				t.Fatalf("%s picked before %s, against the ranking %v", got[i-1].Name, got[i].Name, rkNames(ranking))
			}
		}

		// Without a cap, everything the rules ask for is there.
		if limit <= 0 {
			if want := min(max(surplus, 0), alive); len(got) < want {
				t.Fatalf("picked %d machines, surplus asks for %d", len(got), want)
			}
			for _, m := range machines {
				if rkWantDeleting(m) {
					continue
				}
				if (rkWantMarked(set, m) || m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed) && !picked[m] {
					t.Fatalf("%s is marked or Failed but was not picked", m.Name)
				}
			}
		}

		// A machine picked for the surplus alone never goes while a
		// non-deleting machine of an earlier rung stays.
		for _, p := range got {
			if rkWantMarked(set, p) || p.Status.CurrentStatus.Phase == v1alpha1.MachineFailed {
				continue
			}
			rp := rkRung(p)
			for _, q := range machines {
				if rkWantDeleting(q) || picked[q] {
					continue
				}
				if rq := rkRung(q); slices.Compare(rq[:], rp[:]) < 0 {
					t.Fatalf("picked %s (rung %v) for the surplus but left %s (rung %v)", p.Name, rp, q.Name, rq)
				}
			}
		}
	})
}

func TestPropertyRankForDeletion(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		machines := rkGenMachines(t)
		before, order := rkCopy(machines), slices.Clone(machines)

		rankings := map[DeletionPolicy][]*v1alpha1.Machine{}
		for _, policy := range rkPolicies {
			got := rankForDeletion(machines, ladder{Policy: policy})
			rankings[policy] = got

			if diff := cmp.Diff(before, machines); diff != "" {
				t.Fatalf("%s: rankForDeletion modified the machines (-before +after):\n%s", policy, diff)
			}
			if !slices.Equal(order, machines) {
				t.Fatalf("%s: rankForDeletion reordered its input", policy)
			}

			// A permutation of the input.
			key := func(a, b *v1alpha1.Machine) int { return strings.Compare(a.Name, b.Name) }
			sortedIn, sortedOut := slices.SortedFunc(slices.Values(machines), key), slices.SortedFunc(slices.Values(got), key)
			if !slices.Equal(sortedIn, sortedOut) {
				t.Fatalf("%s: ranking %v is not a permutation of %v", policy, rkNames(got), rkNames(machines))
			}

			// Deterministic, and independent of the input's order.
			if again := rankForDeletion(machines, ladder{Policy: policy}); !slices.Equal(got, again) {
				t.Fatalf("%s: two calls ranked %v and %v", policy, rkNames(got), rkNames(again))
			}
			shuffled := rapid.Permutation(machines).Draw(t, "shuffled")
			if other := rankForDeletion(shuffled, ladder{Policy: policy}); !slices.Equal(got, other) {
				t.Fatalf("%s: shuffled input ranked %v, not %v", policy, rkNames(other), rkNames(got))
			}

			// The ladder holds, and within a rung the age policies hold.
			for i := 1; i < len(got); i++ {
				a, b := got[i-1], got[i]
				ra, rb := rkRung(a), rkRung(b)
				c := slices.Compare(ra[:], rb[:])
				if c > 0 {
					t.Fatalf("%s: %s (rung %v) ranked before %s (rung %v)", policy, a.Name, ra, b.Name, rb)
				}
				if c != 0 {
					continue
				}
				ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
				switch {
				case policy == DeletionPolicyOldest && ta.After(tb),
					policy == DeletionPolicyNewest && ta.Before(tb):
					t.Fatalf("%s: %s (created %v) ranked before %s (created %v)", policy, a.Name, ta, b.Name, tb)
				case policy != DeletionPolicyRandom && ta.Equal(tb) && a.Name > b.Name:
					t.Fatalf("%s: tie %s ranked before %s", policy, a.Name, b.Name)
				}
			}
		}

		// The policy only orders within a rung: every policy walks the
		// same rungs in the same sequence.
		rungs := func(ms []*v1alpha1.Machine) [][5]int64 {
			out := make([][5]int64, len(ms))
			for i, m := range ms {
				out[i] = rkRung(m)
			}
			return out
		}
		want := rungs(rankings[DeletionPolicyOldest])
		for _, policy := range rkPolicies[1:] {
			if diff := cmp.Diff(want, rungs(rankings[policy])); diff != "" {
				t.Fatalf("rungs of %s differ from Oldest's (-Oldest +%s):\n%s", policy, policy, diff)
			}
		}
	})
}

// TestWarmingUpMachinesGoBeforeAvailableOnes: a Running machine that has
// not been so for minReadySeconds is not available yet, so it goes before
// available machines (older ones included) but after Pending ones.
func TestWarmingUpMachinesGoBeforeAvailableOnes(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	m := func(name string, phase v1alpha1.MachinePhase, created, since time.Duration) *v1alpha1.Machine {
		mm := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-created))}}
		mm.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: phase, LastUpdateTime: metav1.NewTime(now.Add(-since))}
		return mm
	}
	machines := []*v1alpha1.Machine{
		m("old-available", v1alpha1.MachineRunning, time.Hour, time.Hour),
		m("young-warming", v1alpha1.MachineRunning, time.Minute, 10*time.Second),
		m("pending", v1alpha1.MachinePending, 30*time.Second, 30*time.Second),
	}
	got := rkNames(rankForDeletion(machines, ladder{Policy: DeletionPolicyOldest, Now: now, MinReady: time.Minute}))
	if diff := cmp.Diff([]string{"pending", "young-warming", "old-available"}, got); diff != "" {
		t.Errorf("ranking (-want +got):\n%s", diff)
	}
	// Without minReadySeconds both Running machines are available: age decides.
	got = rkNames(rankForDeletion(machines, ladder{Policy: DeletionPolicyOldest, Now: now}))
	if diff := cmp.Diff([]string{"pending", "old-available", "young-warming"}, got); diff != "" {
		t.Errorf("ranking without minReadySeconds (-want +got):\n%s", diff)
	}
}

// TestLadderFollowsTheMinReadyOptIn: as in MCM, a Running machine is
// available however young, so age decides among Running machines; only a
// set that applies minReadySeconds deletes the machines still waiting
// first. An unknown value is MCM's behaviour (the status tells of it).
func TestLadderFollowsTheMinReadyOptIn(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	m := func(name string, created, since time.Duration) *v1alpha1.Machine {
		mm := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-created))}}
		mm.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning, LastUpdateTime: metav1.NewTime(now.Add(-since))}
		return mm
	}
	machines := []*v1alpha1.Machine{
		m("old-available", time.Hour, time.Hour),
		m("young", 2*time.Minute, time.Minute), // Running for 60 of the set's 500 s
	}
	for _, tt := range []struct {
		name       string
		annotation map[string]string
		minReady   time.Duration
		order      []string
	}{
		{"no annotation", nil, 0, []string{"old-available", "young"}},
		{"ignore", map[string]string{v1alpha1.MinReadySecondsAnnotation: v1alpha1.MinReadySecondsIgnore}, 0, []string{"old-available", "young"}},
		{"unknown value", map[string]string{v1alpha1.MinReadySecondsAnnotation: "APPLY"}, 0, []string{"old-available", "young"}},
		{"apply", map[string]string{v1alpha1.MinReadySecondsAnnotation: v1alpha1.MinReadySecondsApply}, 500 * time.Second, []string{"young", "old-available"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set := testSet(1)
			set.Spec.MinReadySeconds = 500
			set.Annotations = tt.annotation
			l := ladderOf(set, DeletionPolicyOldest, now)
			if diff := cmp.Diff(ladder{Policy: DeletionPolicyOldest, Now: now, MinReady: tt.minReady}, l); diff != "" {
				t.Errorf("ladder (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.order, rkNames(rankForDeletion(machines, l))); diff != "" {
				t.Errorf("ranking (-want +got):\n%s", diff)
			}
		})
	}
}
