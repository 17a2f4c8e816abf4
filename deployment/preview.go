package deployment

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// Change is what a change of a MachineDeployment does to its machines.
type Change string

const (
	// ChangeNone reaches no machine: the template is the same revision and
	// its in-place parts are unchanged (a change of replicas alone is
	// Preview.Scale).
	ChangeNone Change = "None"
	// ChangePropagate reaches every machine without replacing one: the
	// node template, machine configuration or class kind changed, and the
	// sets copy them onto their machines, the machine controller onto the
	// nodes.
	ChangePropagate Change = "Propagate"
	// ChangeRoll replaces the machines of the old sets with new ones, in
	// waves bounded by maxSurge and maxUnavailable (RollingUpdate) or all
	// at once (Recreate).
	ChangeRoll Change = "Roll"
	// ChangeInPlace updates the machines of the old sets on their VMs
	// (InPlaceUpdate): a node agent updates each drained node, and the
	// machine moves to the new set.
	ChangeInPlace Change = "InPlace"
)

// Preview is what applying a proposed MachineDeployment would do, decided
// by the rules the controller applies: the template hash's notion of a
// revision (sameTemplate), the in-place parts sets propagate
// (machinestate.SameInPlace), and for a rolling update the rollout planner
// itself (planRolling), stepped through a world whose machines come up at
// once.
type Preview struct {
	// Change is what the template change does.
	Change Change
	// Strategy is the proposed deployment's rollout strategy.
	Strategy v1alpha1.MachineDeploymentStrategyType
	// Machines is how many machines the change replaces (Roll), updates in
	// place (InPlace) or reaches (Propagate).
	Machines int32
	// Waves is how many steps the rollout takes when every step's machines
	// are ready before the next: for a rolling update, the steps of
	// planRolling that create machines; 1 for Recreate; for an in-place
	// update with orchestration Auto, batches of maxUnavailable machines
	// (the controller selects the next machine as soon as one is done, so
	// with updates of equal length they go in such batches). 0 when a
	// person picks the machines (Manual) or nothing rolls.
	Waves int
	// Surge and Unavailable are the rollout's bounds, resolved against the
	// proposed replicas as the controller resolves them.
	Surge, Unavailable int32
	// RollbackTo is the revision whose set becomes the new set again,
	// because the proposed template is that set's; 0 when none.
	RollbackTo int64
	// Scale is the change of spec.replicas, current then proposed; nil
	// when they are equal.
	Scale *[2]int32
	// Paused is true when the proposed deployment is paused: then only
	// the scale happens until it is resumed.
	Paused bool
	// Fields are the paths of the template's fields that differ, e.g.
	// "spec.class.name" or "spec.nodeTemplate.metadata.labels.pool",
	// sorted.
	Fields []string
}

// PreviewChange tells what the controller would do if current, the
// deployment as stored, became proposed. sets are the deployment's
// MachineSets as stored (from a lister or a list); nothing is written and
// nothing is read besides its arguments, so a tool can show it before
// applying a change.
func PreviewChange(current, proposed *v1alpha1.MachineDeployment, sets []*v1alpha1.MachineSet) (Preview, error) {
	cur, prop := &current.Spec.Template, &proposed.Spec.Template
	p := Preview{Strategy: strategyType(proposed), Paused: proposed.Spec.Paused, Fields: templateDiff(cur, prop)}
	if current.Spec.Replicas != proposed.Spec.Replicas {
		p.Scale = &[2]int32{current.Spec.Replicas, proposed.Spec.Replicas}
	}
	var err error
	if p.Strategy == v1alpha1.InPlaceUpdateMachineDeploymentStrategyType {
		p.Surge, p.Unavailable, err = inPlaceBounds(proposed)
	} else {
		p.Surge, p.Unavailable, err = rolloutBounds(proposed)
	}
	if err != nil {
		return Preview{}, fmt.Errorf("the proposed strategy: %w", err)
	}
	var newSet *v1alpha1.MachineSet
	var old []*v1alpha1.MachineSet
	for _, s := range sets {
		if newSet == nil && sameTemplate(&s.Spec.Template, prop) {
			newSet = s
			continue
		}
		old = append(old, s)
	}
	switch {
	case !sameTemplate(cur, prop):
		if newSet != nil {
			p.RollbackTo, _ = revisionOf(newSet)
		}
		err = previewRollout(&p, proposed, newSet, old)
	case !machinestate.SameInPlace(&cur.Spec, &prop.Spec):
		p.Change = ChangePropagate
		for _, s := range sets {
			p.Machines += max(s.Spec.Replicas, 0)
		}
	default:
		p.Change = ChangeNone
	}
	return p, err
}

// previewRollout fills in a rollout to proposed's template: which kind,
// how many machines and how many waves.
func previewRollout(p *Preview, proposed *v1alpha1.MachineDeployment, newSet *v1alpha1.MachineSet, old []*v1alpha1.MachineSet) error {
	replicas := max(proposed.Spec.Replicas, 0)
	p.Machines = replicas
	if newSet != nil {
		p.Machines = max(replicas-min(newSet.Spec.Replicas, replicas), 0)
	}
	switch p.Strategy {
	case v1alpha1.InPlaceUpdateMachineDeploymentStrategyType:
		p.Change = ChangeInPlace
		if !manual(proposed) && p.Machines > 0 {
			p.Waves = int((p.Machines + max(p.Unavailable, 1) - 1) / max(p.Unavailable, 1))
		}
		return nil
	case v1alpha1.RecreateMachineDeploymentStrategyType:
		p.Change = ChangeRoll
		if p.Machines > 0 {
			p.Waves = 1
		}
		return nil
	default:
		p.Change = ChangeRoll
		waves, err := rollingWaves(proposed, newSet, old)
		p.Waves = waves
		return err
	}
}

// rollingWaves steps planRolling through a world in which deleting a
// machine is quick and booting one is slow, as in a cloud: the controller
// plans again after each step, old machines go at once and new ones stay
// unavailable, until no step changes anything; then the new machines
// become available, and the next wave starts. It counts the waves that
// created machines. The sets are copied; a set's machines are taken to be
// its spec.replicas, all available.
func rollingWaves(d *v1alpha1.MachineDeployment, newSet *v1alpha1.MachineSet, old []*v1alpha1.MachineSet) (int, error) {
	w := &previewWorld{counts: map[string]machineCounts{}}
	for _, s := range old {
		c := s.DeepCopy()
		w.old = append(w.old, c)
		w.counts[c.Name] = allAvailable(c.Spec.Replicas)
	}
	if newSet != nil {
		w.next = newSet.DeepCopy()
		w.counts[w.next.Name] = allAvailable(w.next.Spec.Replicas)
	}
	waves := 0
	// A wave creates at least one machine or the rollout is stuck, so
	// there are at most replicas waves; the bound only stops a planner that
	// stops progressing.
	for range max(d.Spec.Replicas, 0) + 2 {
		created, changed, err := w.wave(d)
		if err != nil {
			return 0, err
		}
		if created {
			waves++
		}
		w.boot()
		if previewDone(d, w.next, w.old) {
			return waves, nil
		}
		if !changed {
			break
		}
	}
	return waves, fmt.Errorf("the rollout would stop with the new set at %d of %d machines: maxSurge and maxUnavailable allow no step",
		setReplicas(w.next), d.Spec.Replicas)
}

// previewWorld is the sets of a deployment whose rollout PreviewChange
// steps through, and their machines.
type previewWorld struct {
	next   *v1alpha1.MachineSet
	old    []*v1alpha1.MachineSet
	counts map[string]machineCounts
}

// wave plans and applies steps while the new set's new machines boot,
// until a step changes nothing. It tells whether the wave created
// machines and whether it changed anything.
func (w *previewWorld) wave(d *v1alpha1.MachineDeployment) (created, changed bool, err error) {
	for range 2*len(w.old) + 4 {
		plan, err := planRolling(d, w.next, w.old, w.counts)
		if err != nil {
			return false, false, err
		}
		step := false
		if plan.New != nil {
			if w.next == nil {
				w.next = &v1alpha1.MachineSet{}
				w.next.Name = "\x00new" // a name no stored set has
				step = true
			}
			c := w.counts[w.next.Name]
			if grow := *plan.New - w.next.Spec.Replicas; grow > 0 {
				created = true
				c.Machines += grow
			}
			step = step || *plan.New != w.next.Spec.Replicas
			w.next.Spec.Replicas = *plan.New
			c.Machines = min(c.Machines, max(*plan.New, 0))
			c.Ready = min(c.Ready, c.Machines)
			c.Available = min(c.Available, c.Machines)
			w.counts[w.next.Name] = c
		}
		for _, s := range w.old {
			if size, ok := plan.Old[s.Name]; ok && size != s.Spec.Replicas {
				s.Spec.Replicas = size
				w.counts[s.Name] = allAvailable(size)
				step = true
			}
		}
		if !step {
			return created, changed, nil
		}
		changed = true
	}
	return created, changed, nil
}

// boot makes the new set's machines available.
func (w *previewWorld) boot() {
	if w.next != nil {
		c := w.counts[w.next.Name]
		w.counts[w.next.Name] = allAvailable(c.Machines)
	}
}

// allAvailable counts n machines, all Running and available.
func allAvailable(n int32) machineCounts {
	n = max(n, 0)
	return machineCounts{Machines: n, Ready: n, Available: n}
}

// previewDone tells whether the rollout is over: the new set at replicas
// and no old set with machines.
func previewDone(d *v1alpha1.MachineDeployment, next *v1alpha1.MachineSet, old []*v1alpha1.MachineSet) bool {
	return setReplicas(next) == max(d.Spec.Replicas, 0) && len(activeSets(old)) == 0
}

func setReplicas(s *v1alpha1.MachineSet) int32 {
	if s == nil {
		return 0
	}
	return s.Spec.Replicas
}

// templateDiff lists the JSON paths at which two templates differ, down to
// the leaves (a map's key is a path element, a list is compared whole).
func templateDiff(a, b *v1alpha1.MachineTemplateSpec) []string {
	var out []string
	diffJSON("", asJSON(a), asJSON(b), &out)
	sort.Strings(out)
	return out
}

func asJSON(t *v1alpha1.MachineTemplateSpec) any {
	var v any
	// Every field of a template encodes, and what encodes decodes (see
	// canonicalJSON).
	b, _ := json.Marshal(t)
	_ = json.Unmarshal(b, &v)
	return v
}

func diffJSON(path string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	// An absent map and one with keys differ at each key.
	if a == nil && bok {
		am, aok = map[string]any{}, true
	}
	if b == nil && aok {
		bm, bok = map[string]any{}, true
	}
	if !aok || !bok {
		if !reflect.DeepEqual(a, b) {
			*out = append(*out, path)
		}
		return
	}
	keys := map[string]bool{}
	for k := range am {
		keys[k] = true
	}
	for k := range bm {
		keys[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		diffJSON(strings.TrimPrefix(path+"."+k, "."), am[k], bm[k], out)
	}
}
