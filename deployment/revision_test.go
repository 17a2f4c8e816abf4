package deployment

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestRevisionOf(t *testing.T) {
	tests := []struct {
		name    string
		set     *v1alpha1.MachineSet
		want    int64
		wantErr bool
	}{
		{"none", newSet("s", 0, 0), 0, false},
		{"set", newSet("s", 0, 0, withRevision("7")), 7, false},
		{"garbage", newSet("s", 0, 0, withRevision("seven")), 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := revisionOf(tt.set)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("revisionOf = %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestMaxRevision(t *testing.T) {
	sets := []*v1alpha1.MachineSet{
		newSet("a", 0, 0, withRevision("3")),
		newSet("b", 0, 0, withRevision("x")),
		newSet("c", 0, 0, withRevision("11")),
		newSet("d", 0, 0),
	}
	if got := maxRevision(sets); got != 11 {
		t.Errorf("maxRevision = %d, want 11", got)
	}
	if got := maxRevision(nil); got != 0 {
		t.Errorf("maxRevision(nil) = %d, want 0", got)
	}
}

func TestSkipCopy(t *testing.T) {
	skipped := []string{
		corev1.LastAppliedConfigAnnotation,
		"deployment.kubernetes.io/revision",
		"deployment.kubernetes.io/revision-history",
		"deployment.kubernetes.io/desired-replicas",
		"deployment.kubernetes.io/max-replicas",
		"deployment.machine.sapcloud.io/prefer-no-schedule",
		"safety.machine.sapcloud.io/unfreeze",
		"node.machine.sapcloud.io/trigger-deletion-by-mcm",
		appsv1.DeprecatedRollbackTo,
	}
	for _, k := range skipped {
		if !skipCopy(k) {
			t.Errorf("%s is copied to sets", k)
		}
	}
	copied := []string{
		v1alpha1.LastReplicaChangeByScalerAnnotation,
		v1alpha1.EffectiveCreationTimeoutAnnotation,
		"example.com/owner",
	}
	for _, k := range copied {
		if skipCopy(k) {
			t.Errorf("%s is not copied to sets", k)
		}
	}
}

func TestNewSetAnnotations(t *testing.T) {
	d := newDeployment(3, withRolling("2", "0"),
		withDeploymentAnnotation("team", "infra"),
		withDeploymentAnnotation(v1alpha1.RevisionAnnotation, "4"),
		withDeploymentAnnotation(corev1.LastAppliedConfigAnnotation, "{}"),
		withDeploymentAnnotation(v1alpha1.TriggerDeletionByMCMAnnotation, "m1"),
	)
	tests := []struct {
		name        string
		current     map[string]string
		newRevision int64
		creating    bool
		want        map[string]string
	}{
		{
			name:        "created",
			newRevision: 5,
			creating:    true,
			want: map[string]string{
				"team":                             "infra",
				v1alpha1.RevisionAnnotation:        "5",
				v1alpha1.DesiredReplicasAnnotation: "3",
				v1alpha1.MaxReplicasAnnotation:     "5",
			},
		},
		{
			name:        "existing set behind: revision moves, history kept",
			current:     map[string]string{v1alpha1.RevisionAnnotation: "2", v1alpha1.RevisionHistoryAnnotation: "1", "own": "x"},
			newRevision: 5,
			want: map[string]string{
				"team":                             "infra",
				"own":                              "x",
				v1alpha1.RevisionAnnotation:        "5",
				v1alpha1.RevisionHistoryAnnotation: "1,2",
			},
		},
		{
			name:        "existing set without revision gets one, no history",
			current:     map[string]string{},
			newRevision: 1,
			want:        map[string]string{"team": "infra", v1alpha1.RevisionAnnotation: "1"},
		},
		{
			name:        "existing set ahead keeps its revision",
			current:     map[string]string{v1alpha1.RevisionAnnotation: "9", "team": "old"},
			newRevision: 5,
			want:        map[string]string{"team": "infra", v1alpha1.RevisionAnnotation: "9"},
		},
		{
			name:        "unreadable revision is replaced, not kept",
			current:     map[string]string{v1alpha1.RevisionAnnotation: "nine"},
			newRevision: 5,
			want:        map[string]string{"team": "infra", v1alpha1.RevisionAnnotation: "5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before map[string]string
			if tt.current != nil {
				before = map[string]string{}
				for k, v := range tt.current {
					before[k] = v
				}
			}
			got, err := newSetAnnotations(d, tt.current, tt.newRevision, tt.creating)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("newSetAnnotations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.current); diff != "" {
				t.Errorf("current annotations modified (-before +after):\n%s", diff)
			}
		})
	}
}

func TestNewSetAnnotationsInvalidSurge(t *testing.T) {
	if _, err := newSetAnnotations(newDeployment(3, withRolling("x", "0")), nil, 1, true); err == nil {
		t.Error("want an error when creating with an unreadable maxSurge")
	}
	if _, err := newSetAnnotations(newDeployment(3, withRolling("x", "0")), nil, 1, false); err != nil {
		t.Errorf("an existing set needs no replica annotations: %v", err)
	}
}

func TestAppendRevisionHistory(t *testing.T) {
	if got := appendRevisionHistory("", "3"); got != "3" {
		t.Errorf("first entry = %q", got)
	}
	if got := appendRevisionHistory("1,2", "3"); got != "1,2,3" {
		t.Errorf("appended = %q", got)
	}
	var entries []string
	for i := range 1000 {
		entries = append(entries, strconv.Itoa(i))
	}
	got := appendRevisionHistory(strings.Join(entries, ","), "1000")
	if len(got) > maxRevisionHistoryChars {
		t.Errorf("history of %d characters, at most %d", len(got), maxRevisionHistoryChars)
	}
	if !strings.HasSuffix(got, ",999,1000") || strings.HasPrefix(got, "0,") {
		t.Errorf("oldest entries must go first: %q...", got[:20])
	}
}

func TestReplicaAnnotations(t *testing.T) {
	got, err := replicaAnnotations(newDeployment(10, withRolling("25%", "0")))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{v1alpha1.DesiredReplicasAnnotation: "10", v1alpha1.MaxReplicasAnnotation: "13"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replicaAnnotations (-want +got):\n%s", diff)
	}
	got, err = replicaAnnotations(newDeployment(4, withRecreate()))
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]string{v1alpha1.DesiredReplicasAnnotation: "4", v1alpha1.MaxReplicasAnnotation: "4"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replicaAnnotations, recreate (-want +got):\n%s", diff)
	}
}

func TestReplicaAnnotationReaders(t *testing.T) {
	tests := []struct {
		value  string
		want   int32
		wantOK bool
	}{
		{"3", 3, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"x", 0, false},
		{"99999999999", 0, false},
	}
	for _, tt := range tests {
		s := newSet("s", 0, 0, withSetAnnotation(v1alpha1.DesiredReplicasAnnotation, tt.value), withSetAnnotation(v1alpha1.MaxReplicasAnnotation, tt.value))
		for name, read := range map[string]func(*v1alpha1.MachineSet) (int32, bool){"desired": desiredReplicasOf, "max": maxReplicasOf} {
			if got, ok := read(s); got != tt.want || ok != tt.wantOK {
				t.Errorf("%s(%q) = %d, %v; want %d, %v", name, tt.value, got, ok, tt.want, tt.wantOK)
			}
		}
	}
	if _, ok := desiredReplicasOf(newSet("s", 0, 0)); ok {
		t.Error("missing annotation reported as present")
	}
}

func TestCopiedAnnotations(t *testing.T) {
	d := newDeployment(1, withDeploymentAnnotation("a", "1"), withDeploymentAnnotation(v1alpha1.UnfreezeAnnotation, "true"))
	if diff := cmp.Diff(map[string]string{"a": "1"}, copiedAnnotations(d)); diff != "" {
		t.Errorf("copiedAnnotations (-want +got):\n%s", diff)
	}
}
