package deployment

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// trgAt is epoch plus minutes, the time of an entry in these tests.
func trgAt(minutes int) time.Time { return epoch.Add(time.Duration(minutes) * time.Minute) }

// trgStamp is trgAt in RFC 3339, as the autoscaler writes it.
func trgStamp(minutes int) string { return trgAt(minutes).Format(time.RFC3339) }

func trgAnnotate(key, value string) mOpt {
	return func(m *v1alpha1.Machine) {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[key] = value
	}
}

// trgMarked is a machine marked the way planTriggerDeletion marks it.
func trgMarked(at time.Time) mOpt {
	return func(m *v1alpha1.Machine) {
		trgAnnotate(v1alpha1.MachinePriorityAnnotation, v1alpha1.MachinePriorityDeleteFirst)(m)
		trgAnnotate(v1alpha1.MarkedForDeletionTimeAnnotation, at.UTC().Format(time.RFC3339))(m)
	}
}

func trgMachines(ms ...*v1alpha1.Machine) map[string]*v1alpha1.Machine {
	byName := map[string]*v1alpha1.Machine{}
	for _, m := range ms {
		byName[m.Name] = m
	}
	return byName
}

func TestParseTriggerDeletion(t *testing.T) {
	now := trgAt(60)
	tests := []struct {
		name  string
		value string
		now   time.Time
		want  []triggerEntry
	}{
		{"empty", "", now, nil},
		{"only separators and blanks", " , ,, ", now, nil},
		{"plain name gets now", "m1", now, []triggerEntry{{"m1", now}}},
		{"timed", "m1~" + trgStamp(5), now, []triggerEntry{{"m1", trgAt(5)}}},
		{"zone is normalised to UTC", "m1~2026-03-01T11:05:00+01:00", now, []triggerEntry{{"m1", trgAt(5)}}},
		{"fractions of a second are dropped", "m1~2026-03-01T10:05:00.75Z", now, []triggerEntry{{"m1", trgAt(5)}}},
		{"now is kept to the second", "m1", now.Add(300 * time.Millisecond), []triggerEntry{{"m1", now}}},
		{
			"whitespace around names, separators and times; sorted by name",
			" m2 ~ " + trgStamp(7) + " ,\tm1 , ", now,
			[]triggerEntry{{"m1", now}, {"m2", trgAt(7)}},
		},
		{"unparsable time gets now", "m1~yesterday", now, []triggerEntry{{"m1", now}}},
		{"missing time gets now", "m1~", now, []triggerEntry{{"m1", now}}},
		{"entry without a name is ignored", "~" + trgStamp(5) + ",m2~" + trgStamp(6), now, []triggerEntry{{"m2", trgAt(6)}}},
		{
			"a name listed twice keeps its earliest time",
			"m1~" + trgStamp(9) + ",m1~" + trgStamp(3) + ",m1", now,
			[]triggerEntry{{"m1", trgAt(3)}},
		},
		{
			"plain name earlier than a future stamp",
			"m1~" + trgStamp(90) + ",m1", now,
			[]triggerEntry{{"m1", now}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := parseTriggerDeletion(tt.value, tt.now)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseTriggerDeletion(%q) (-want +got):\n%s", tt.value, diff)
			}
		})
	}
}

func TestFormatTriggerDeletion(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	tests := []struct {
		name    string
		entries []triggerEntry
		want    string
	}{
		{"none", nil, ""},
		{"empty", []triggerEntry{}, ""},
		{
			"sorted by name, UTC, whole seconds",
			[]triggerEntry{{"m2", trgAt(7).In(berlin)}, {"m1", trgAt(5).Add(900 * time.Millisecond)}},
			"m1~2026-03-01T10:05:00Z,m2~2026-03-01T10:07:00Z",
		},
		{
			"a name given twice is written once, earliest",
			[]triggerEntry{{"m1", trgAt(9)}, {"m1", trgAt(3)}},
			"m1~2026-03-01T10:03:00Z",
		},
		{"entries without a name are left out", []triggerEntry{{"", trgAt(1)}, {"m1", trgAt(2)}}, "m1~2026-03-01T10:02:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.entries)
			if got := formatTriggerDeletion(tt.entries); got != tt.want {
				t.Errorf("formatTriggerDeletion = %q, want %q", got, tt.want)
			}
			if diff := cmp.Diff(before, tt.entries); diff != "" {
				t.Errorf("formatTriggerDeletion modified its input (-before +after):\n%s", diff)
			}
		})
	}
}

func TestPlanTriggerDeletion(t *testing.T) {
	now := trgAt(60)
	// named is a deployment whose autoscaler recorded its last change at
	// minute 30.
	named := func(value string, opts ...mdOpt) *v1alpha1.MachineDeployment {
		return newDeployment(3, append([]mdOpt{withDeploymentAnnotation(v1alpha1.TriggerDeletionByMCMAnnotation, value),
			withDeploymentAnnotation(v1alpha1.LastReplicaChangeByScalerAnnotation, trgStamp(30))}, opts...)...)
	}
	unstamped := func(d *v1alpha1.MachineDeployment) {
		delete(d.Annotations, v1alpha1.LastReplicaChangeByScalerAnnotation)
	}
	nowStamp := now.Format(time.RFC3339)
	alive := func(name string, opts ...mOpt) *v1alpha1.Machine { return newMachine(name, opts...) }
	tests := []struct {
		name     string
		d        *v1alpha1.MachineDeployment
		machines map[string]*v1alpha1.Machine
		want     triggerPlan
	}{
		{"no deployment", nil, nil, triggerPlan{}},
		{"no annotation", newDeployment(3), trgMachines(alive("m1")), triggerPlan{}},
		{
			"plain name: gets now, is written back with it and marked, now is the scaler's time",
			named("m1"), trgMachines(alive("m1"), alive("m2")),
			triggerPlan{
				Annotation: "m1~2026-03-01T11:00:00Z", Changed: true, ScalerTime: nowStamp,
				Mark: []machineMark{{"m1", now}},
			},
		},
		{
			"plain name without a scaler time: stamped, as MCM does",
			named("m1", unstamped), trgMachines(alive("m1")),
			triggerPlan{Annotation: "m1~2026-03-01T11:00:00Z", Changed: true, ScalerTime: nowStamp, Mark: []machineMark{{"m1", now}}},
		},
		{
			"unreadable time: gets now, and now is the scaler's time",
			named("m1~soon"), trgMachines(alive("m1")),
			triggerPlan{Annotation: "m1~2026-03-01T11:00:00Z", Changed: true, ScalerTime: nowStamp, Mark: []machineMark{{"m1", now}}},
		},
		{
			"plain name with the scaler's time already now: not rewritten",
			named("m1", withDeploymentAnnotation(v1alpha1.LastReplicaChangeByScalerAnnotation, nowStamp)), trgMachines(alive("m1")),
			triggerPlan{Annotation: "m1~2026-03-01T11:00:00Z", Changed: true, Mark: []machineMark{{"m1", now}}},
		},
		{
			"timed names without a scaler time: stamped, as MCM does",
			named("m1~"+trgStamp(5), unstamped), trgMachines(alive("m1", trgMarked(trgAt(5)))),
			triggerPlan{Annotation: "m1~" + trgStamp(5), ScalerTime: nowStamp},
		},
		{
			"timed names keep the autoscaler's scaler time",
			named("m1~" + trgStamp(5)), trgMachines(alive("m1")),
			triggerPlan{Annotation: "m1~" + trgStamp(5), Mark: []machineMark{{"m1", trgAt(5)}}},
		},
		{
			"normalised and marked: nothing to write",
			named("m1~" + trgStamp(5)), trgMachines(alive("m1", trgMarked(trgAt(5)))),
			triggerPlan{Annotation: "m1~" + trgStamp(5)},
		},
		{
			"mark in another zone at the same instant counts as marked",
			named("m1~" + trgStamp(5)),
			trgMachines(alive("m1",
				trgAnnotate(v1alpha1.MachinePriorityAnnotation, "1"),
				trgAnnotate(v1alpha1.MarkedForDeletionTimeAnnotation, "2026-03-01T11:05:00+01:00"))),
			triggerPlan{Annotation: "m1~" + trgStamp(5)},
		},
		{
			"marked at another time: re-marked with the named time, not now",
			named("m1~" + trgStamp(5)), trgMachines(alive("m1", trgMarked(trgAt(4)))),
			triggerPlan{Annotation: "m1~" + trgStamp(5), Mark: []machineMark{{"m1", trgAt(5)}}},
		},
		{
			"mark with a fraction of a second is rewritten",
			named("m1~" + trgStamp(5)),
			trgMachines(alive("m1",
				trgAnnotate(v1alpha1.MachinePriorityAnnotation, "1"),
				trgAnnotate(v1alpha1.MarkedForDeletionTimeAnnotation, "2026-03-01T10:05:00.5Z"))),
			triggerPlan{Annotation: "m1~" + trgStamp(5), Mark: []machineMark{{"m1", trgAt(5)}}},
		},
		{
			"time without priority 1 is marked",
			named("m1~" + trgStamp(5)),
			trgMachines(alive("m1", trgMarked(trgAt(5)), trgAnnotate(v1alpha1.MachinePriorityAnnotation, "3"))),
			triggerPlan{Annotation: "m1~" + trgStamp(5), Mark: []machineMark{{"m1", trgAt(5)}}},
		},
		{
			"priority 1 without a readable time is marked",
			named("m1~" + trgStamp(5)),
			trgMachines(alive("m1",
				trgAnnotate(v1alpha1.MachinePriorityAnnotation, "1"),
				trgAnnotate(v1alpha1.MarkedForDeletionTimeAnnotation, "soon"))),
			triggerPlan{Annotation: "m1~" + trgStamp(5), Mark: []machineMark{{"m1", trgAt(5)}}},
		},
		{
			"missing, being deleted, terminating and failed machines are dropped",
			named(strings.Join([]string{
				"gone~" + trgStamp(1), "deleting~" + trgStamp(2), "terminating~" + trgStamp(3),
				"failed~" + trgStamp(4), "ok~" + trgStamp(5), "nil~" + trgStamp(6),
			}, ",")),
			map[string]*v1alpha1.Machine{
				"deleting":    alive("deleting", deleting()),
				"terminating": alive("terminating", inPhase(v1alpha1.MachineTerminating)),
				"failed":      alive("failed", inPhase(v1alpha1.MachineFailed)),
				"ok":          alive("ok", inPhase(v1alpha1.MachinePending)),
				"nil":         nil,
			},
			triggerPlan{Annotation: "ok~" + trgStamp(5), Changed: true, Mark: []machineMark{{"ok", trgAt(5)}}},
		},
		{
			"nothing left: the annotation is removed",
			named("gone~" + trgStamp(1)), trgMachines(alive("m1")),
			triggerPlan{Changed: true},
		},
		{
			"empty stored value is removed",
			named(""), trgMachines(alive("m1")),
			triggerPlan{Changed: true},
		},
		{
			"empty stored value without a scaler time is not stamped",
			named("", unstamped), trgMachines(alive("m1")),
			triggerPlan{Changed: true},
		},
		{
			"same entries in another order are rewritten, marked machines are not",
			named("m2~" + trgStamp(6) + ", m1~" + trgStamp(5)),
			trgMachines(alive("m1", trgMarked(trgAt(5))), alive("m2", trgMarked(trgAt(6)))),
			triggerPlan{Annotation: "m1~" + trgStamp(5) + ",m2~" + trgStamp(6), Changed: true},
		},
		{
			"marks are sorted by name and keep their own times",
			named("b~" + trgStamp(2) + ",a,c~" + trgStamp(1)),
			trgMachines(alive("a"), alive("b"), alive("c")),
			triggerPlan{
				Annotation: "a~" + now.Format(time.RFC3339) + ",b~" + trgStamp(2) + ",c~" + trgStamp(1), Changed: true,
				ScalerTime: nowStamp, Mark: []machineMark{{"a", now}, {"b", trgAt(2)}, {"c", trgAt(1)}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, planTriggerDeletion(tt.d, tt.machines, now)); diff != "" {
				t.Errorf("planTriggerDeletion (-want +got):\n%s", diff)
			}
		})
	}
}

// trgApply writes plan the way the controller does, on copies.
func trgApply(d *v1alpha1.MachineDeployment, machines map[string]*v1alpha1.Machine, plan triggerPlan) (*v1alpha1.MachineDeployment, map[string]*v1alpha1.Machine) {
	d = d.DeepCopy()
	if want := triggerAnnotations(d.Annotations, plan); want != nil {
		d.Annotations = want
	}
	applied := map[string]*v1alpha1.Machine{}
	for name, m := range machines {
		applied[name] = m.DeepCopy()
	}
	for _, mk := range plan.Mark {
		trgMarked(mk.At)(applied[mk.Machine])
	}
	return d, applied
}

// trgPool are the machine names the properties draw from; "stranger" is
// never a machine of the deployment.
var trgPool = []string{"m0", "m1", "m2", "m3", "m4", "stranger"}

// trgGenStamp draws the time part of an entry: a readable time in some
// zone, possibly with a fraction of a second, or garbage.
func trgGenStamp(t *rapid.T, label string) string {
	at := epoch.Add(time.Duration(rapid.IntRange(-3600, 3600).Draw(t, label+"Seconds")) * time.Second)
	switch rapid.IntRange(0, 3).Draw(t, label+"Form") {
	case 0:
		return at.UTC().Format(time.RFC3339)
	case 1:
		return at.In(time.FixedZone("", 3600*rapid.IntRange(-12, 12).Draw(t, label+"Zone"))).Format(time.RFC3339)
	case 2:
		return at.Add(time.Duration(rapid.IntRange(1, 999).Draw(t, label+"Millis")) * time.Millisecond).UTC().Format(time.RFC3339Nano)
	default:
		return rapid.SampledFrom([]string{"", "soon", "2026-13-01T00:00:00Z"}).Draw(t, label+"Garbage")
	}
}

// trgGenValue draws an annotation value as autoscalers and people write
// them: timed and plain names, duplicates, blanks and empty entries.
func trgGenValue(t *rapid.T) string {
	var parts []string
	for i := range rapid.IntRange(0, 6).Draw(t, "entries") {
		label := fmt.Sprintf("entry%d", i)
		pad := rapid.SampledFrom([]string{"", " ", "\t"}).Draw(t, label+"Pad")
		switch rapid.IntRange(0, 3).Draw(t, label+"Kind") {
		case 0:
			parts = append(parts, pad)
		case 1:
			parts = append(parts, pad+rapid.SampledFrom(trgPool).Draw(t, label+"Name")+pad)
		default:
			parts = append(parts, pad+rapid.SampledFrom(trgPool).Draw(t, label+"Name")+pad+"~"+pad+trgGenStamp(t, label))
		}
	}
	return strings.Join(parts, ",")
}

// trgGenMachines draws the deployment's machines: each name of the pool but
// the stranger is missing, alive, failed or on its way out, and may carry
// marks already.
func trgGenMachines(t *rapid.T) map[string]*v1alpha1.Machine {
	machines := map[string]*v1alpha1.Machine{}
	for _, name := range trgPool[:len(trgPool)-1] {
		var opts []mOpt
		switch rapid.IntRange(0, 4).Draw(t, name+"State") {
		case 0:
			continue
		case 1:
			opts = append(opts, inPhase(v1alpha1.MachineFailed))
		case 2:
			opts = append(opts, deleting())
		case 3:
			opts = append(opts, inPhase(v1alpha1.MachineTerminating))
		}
		if rapid.Bool().Draw(t, name+"Marked") {
			opts = append(opts, trgMarked(epoch.Add(time.Duration(rapid.IntRange(-2, 2).Draw(t, name+"MarkedAt"))*time.Minute)))
		}
		machines[name] = newMachine(name, opts...)
	}
	return machines
}

func TestPlanTriggerDeletionProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		value := trgGenValue(t)
		d := newDeployment(3)
		if rapid.Bool().Draw(t, "stamped") {
			withDeploymentAnnotation(v1alpha1.LastReplicaChangeByScalerAnnotation, trgGenStamp(t, "scaler"))(d)
		}
		if rapid.Bool().Draw(t, "annotated") {
			withDeploymentAnnotation(v1alpha1.TriggerDeletionByMCMAnnotation, value)(d)
		}
		machines := trgGenMachines(t)
		now := epoch.Add(time.Duration(rapid.IntRange(0, 7200*1000).Draw(t, "nowMillis")) * time.Millisecond)
		plan := planTriggerDeletion(d, machines, now)

		named := map[string]time.Time{}
		entries := func(value string) []triggerEntry {
			e, _ := parseTriggerDeletion(value, now)
			return e
		}
		for _, e := range entries(d.Annotations[v1alpha1.TriggerDeletionByMCMAnnotation]) {
			named[e.Machine] = e.At
		}
		kept := map[string]time.Time{}
		for _, e := range entries(plan.Annotation) {
			kept[e.Machine] = e.At
			m := machines[e.Machine]
			if m == nil || machinestate.BeingDeleted(m) || m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed {
				t.Fatalf("annotation %q names %s, which is missing, being deleted or failed", plan.Annotation, e.Machine)
			}
			if at, ok := named[e.Machine]; !ok || !at.Equal(e.At) {
				t.Fatalf("annotation keeps %s at %v, the input named it at %v (named: %t)", e.Machine, e.At, at, ok)
			}
		}
		for name, m := range machines {
			if _, ok := named[name]; ok && !machinestate.BeingDeleted(m) && m.Status.CurrentStatus.Phase != v1alpha1.MachineFailed {
				if _, ok := kept[name]; !ok {
					t.Fatalf("annotation %q lost %s, which is alive", plan.Annotation, name)
				}
			}
		}
		for _, mk := range plan.Mark {
			if at, ok := kept[mk.Machine]; !ok || !at.Equal(mk.At) {
				t.Fatalf("mark %s at %v is not in the annotation %q", mk.Machine, mk.At, plan.Annotation)
			}
		}
		if got := formatTriggerDeletion(entries(plan.Annotation)); got != plan.Annotation {
			t.Fatalf("format(parse(%q)) = %q", plan.Annotation, got)
		}

		stored := d.Annotations[v1alpha1.TriggerDeletionByMCMAnnotation]
		_, untimed := parseTriggerDeletion(stored, now)
		storedStamp, nowStamp := d.Annotations[v1alpha1.LastReplicaChangeByScalerAnnotation], triggerTime(now).Format(time.RFC3339)
		wantStamp := untimed || (stored != "" && storedStamp == "")
		stampedNow := plan.ScalerTime == nowStamp || (plan.ScalerTime == "" && storedStamp == nowStamp)
		if (wantStamp && !stampedNow) || (!wantStamp && plan.ScalerTime != "") {
			t.Fatalf("scaler time %q for %q (stored time %q): want the time of the sync %t", plan.ScalerTime, stored, storedStamp, wantStamp)
		}
		if plan.ScalerTime != "" {
			for _, mk := range plan.Mark {
				if at, _ := time.Parse(time.RFC3339, plan.ScalerTime); named[mk.Machine].Equal(triggerTime(now)) && !mk.At.Equal(at) {
					t.Fatalf("an untimed entry %s is marked at %v, not at the scaler time %s", mk.Machine, mk.At, plan.ScalerTime)
				}
			}
		}

		d2, machines2 := trgApply(d, machines, plan)
		later := now.Add(time.Duration(rapid.IntRange(0, 3600).Draw(t, "laterSeconds")) * time.Second)
		again := planTriggerDeletion(d2, machines2, later)
		if diff := cmp.Diff(triggerPlan{Annotation: plan.Annotation}, again); diff != "" {
			t.Fatalf("planning again after applying is not a no-op (-want +got):\n%s", diff)
		}
	})
}

func TestTriggerDeletionRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var entries []triggerEntry
		earliest := map[string]time.Time{}
		for i := range rapid.IntRange(0, 6).Draw(t, "entries") {
			name := rapid.SampledFrom(trgPool).Draw(t, fmt.Sprintf("name%d", i))
			at := epoch.Add(time.Duration(rapid.Int64Range(-1e13, 1e13).Draw(t, fmt.Sprintf("nanos%d", i)))).
				In(time.FixedZone("", 3600*rapid.IntRange(-12, 12).Draw(t, fmt.Sprintf("zone%d", i))))
			entries = append(entries, triggerEntry{name, at})
			if prev, ok := earliest[name]; !ok || at.Before(prev) {
				earliest[name] = at
			}
		}
		formatted := formatTriggerDeletion(entries)
		parsed, untimed := parseTriggerDeletion(formatted, epoch)
		if untimed {
			t.Fatalf("parse(format(%v)) says an entry had no readable time", entries)
		}
		if len(parsed) != len(earliest) {
			t.Fatalf("parse(format(%v)) = %v: %d entries, want %d", entries, parsed, len(parsed), len(earliest))
		}
		for i, e := range parsed {
			if i > 0 && parsed[i-1].Machine >= e.Machine {
				t.Fatalf("parse(%q) is not sorted by name: %v", formatted, parsed)
			}
			if want := triggerTime(earliest[e.Machine]); !e.At.Equal(want) || e.At.Location() != time.UTC {
				t.Fatalf("parse(format) gives %s at %v, want %v UTC", e.Machine, e.At, want)
			}
		}
		if again := formatTriggerDeletion(parsed); again != formatted {
			t.Fatalf("format(parse(%q)) = %q", formatted, again)
		}
	})
}
