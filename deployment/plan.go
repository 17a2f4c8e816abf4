package deployment

import (
	"slices"
	"strconv"
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/patch"
)

// phase is what a sync does after the finalizer and ownership writes;
// each sync does one.
type phase int

const (
	// phaseInvalid writes nothing more; the status tells why the
	// deployment cannot work.
	phaseInvalid phase = iota
	// phaseDelete deletes the sets of a deployment being deleted, or,
	// none left, removes its finalizer.
	phaseDelete
	// phaseRollback brings back the template of a revision.
	phaseRollback
	// phaseMark marks the machines the cluster-autoscaler named and
	// nothing else: the marked machines' events sync the deployment again
	// once the cache shows the marks, and only then may their sets shrink,
	// or a set could remove other machines than the named ones.
	phaseMark
	// phaseStep creates and sizes the sets, records the revision and
	// cleans up old sets; the status follows.
	phaseStep
)

// syncPlan is every write of one sync, decided from the scope alone, in
// the order apply makes them: the finalizer; adoptions and releases; then
// the phase's writes. The status is not in it: it is computed after apply,
// from the scope and what apply did (status.go).
type syncPlan struct {
	phase phase
	// d is the deployment as the plan's writes leave it (the autoscaler's
	// annotations written), capped at the ceiling: the step and the status
	// are computed on it.
	d *v1alpha1.MachineDeployment
	// invalid says why the deployment cannot work (phaseInvalid).
	invalid string

	addFinalizer   bool
	adopt, release []*v1alpha1.MachineSet

	// deleteSets are the sets of a deployment being deleted that are not
	// being deleted yet; removeFinalizer lets the deployment go once it
	// has none (phaseDelete).
	deleteSets      []*v1alpha1.MachineSet
	removeFinalizer bool

	// rollback is the outcome of a rollback request, and rolledBack the
	// deployment with the template brought back and the request cleared
	// (phaseRollback).
	rollback   rollbackPlan
	rolledBack *v1alpha1.MachineDeployment

	// marks are the machines the autoscaler named that are not marked yet,
	// and annotations the deployment's annotations once its request is
	// pruned and the scaler's time recorded; nil leaves them as they are.
	marks       []mark
	annotations map[string]string

	// stepPlan are the writes of phaseStep.
	stepPlan
}

// stepPlan is what a sync's step writes to the sets, and what the status
// needs to know of it.
type stepPlan struct {
	// step is the planners' decision for the sets; capped says why the
	// deployment runs fewer machines than asked, and frozen why it adds
	// none.
	step           step
	capped, frozen string
	// create is the new set to create (step.Create), and collisionCount
	// the count the status gets when its name is taken by a set of another
	// template.
	create         *v1alpha1.MachineSet
	collisionCount int32
	// setPatches are the changes to existing sets, one merge patch each.
	setPatches []setPatch
	// revision is the new set's revision, for the deployment's revision
	// annotation ("" leaves it); cleanup the old sets beyond the revision
	// history limit, deleted once the step succeeded.
	revision string
	cleanup  []*v1alpha1.MachineSet
	// inPlace are the machine and node writes of an in-place rollout's
	// step; nil for other steps.
	inPlace *inPlacePlan
}

// mark is an autoscaler mark to write on a machine: priority 1 and
// marked-for-deletion-time At.
type mark struct {
	Machine *v1alpha1.Machine
	At      time.Time
}

// setPatch is the merge patch that makes an existing set what the step
// wants; it carries no resourceVersion guard (patchSet says why).
type setPatch struct {
	Set  *v1alpha1.MachineSet
	Want *v1alpha1.MachineSet
	Data []byte
}

// plan decides every write of one sync from s; ceiling is
// Options.MaxReplicas. It is pure.
func plan(s scope, ceiling int) syncPlan {
	d := s.d
	p := syncPlan{d: d, invalid: s.invalid}
	if p.invalid != "" {
		return p
	}
	p.addFinalizer = d.DeletionTimestamp == nil && !slices.Contains(d.Finalizers, Finalizer)
	p.adopt, p.release = s.adopt, s.release
	switch rev, asked := rollbackRequest(d); {
	case d.DeletionTimestamp != nil:
		p.phase = phaseDelete
		for _, set := range s.all() {
			if set.DeletionTimestamp == nil {
				p.deleteSets = append(p.deleteSets, set)
			}
		}
		p.removeFinalizer = len(s.all()) == 0
	case asked:
		p.phase = phaseRollback
		p.rollback = planRollback(d, s.all(), rev)
		p.rolledBack = rolledBack(d, p.rollback)
	default:
		planMarks(&p, s)
		if len(p.marks) > 0 {
			p.phase = phaseMark
			return p
		}
		capped, capMessage := withinCeiling(p.d, ceiling)
		sp, err := planSets(capped, s)
		if err != nil {
			p.phase, p.invalid = phaseInvalid, err.Error()
			return p
		}
		sp.capped = capMessage
		p.phase, p.d, p.stepPlan = phaseStep, capped, sp
	}
	return p
}

// planMarks plans the cluster-autoscaler's request in the
// trigger-deletion-by-mcm annotation (planTriggerDeletion): the machines it
// names get priority 1 and their marked-for-deletion-time, and the
// annotation is pruned, in the same write as the scaler's time when the
// plan records one.
func planMarks(p *syncPlan, s scope) {
	if _, asked := s.d.Annotations[v1alpha1.TriggerDeletionByMCMAnnotation]; !asked {
		return // the usual case: no need to index every machine by name
	}
	machines := map[string]*v1alpha1.Machine{}
	for _, ms := range s.machines {
		for _, m := range ms {
			machines[m.Name] = m
		}
	}
	trigger := planTriggerDeletion(s.d, machines, s.now)
	for _, mk := range trigger.Mark {
		p.marks = append(p.marks, mark{Machine: machines[mk.Machine], At: mk.At})
	}
	p.annotations = triggerAnnotations(s.d.Annotations, trigger)
	if p.annotations != nil {
		p.d = s.d.DeepCopy()
		p.d.Annotations = p.annotations
	}
}

// planSets plans the step (planStep) of d, the deployment as the sync's
// earlier writes leave it and capped at the ceiling, and its writes: the
// new set's creation, a patch for each set whose size, bookkeeping
// annotations or in-place template parts differ from what the deployment
// wants, the deployment's revision and, when the step leaves the rollout
// complete, the cleanup of old sets.
func planSets(d *v1alpha1.MachineDeployment, s scope) (stepPlan, error) {
	p := stepPlan{frozen: s.frozen}
	var err error
	if inPlaceRolls(d, s) {
		ip, err := planInPlace(s.inPlaceInput(d), s.frozen != "")
		if err != nil {
			return stepPlan{}, err
		}
		p.step, p.inPlace = ip.step, &ip
		if s.frozen != "" {
			// A machine moved now waits, labelled, in the new set
			// until the freeze ends and the set grows.
			p.step = holdIncreases(p.step, s.observed)
		}
	} else if p.step, err = planStep(d, s.observed, s.frozen != ""); err != nil {
		return stepPlan{}, err
	}
	revision := maxRevision(s.old) + 1
	after := s.observed // the sets as the step leaves them, for the status
	if n := p.step.Create; n != nil {
		if p.create, err = newSetOf(d, *n, revision); err != nil {
			return stepPlan{}, err
		}
		p.collisionCount = 1
		if c := d.Status.CollisionCount; c != nil {
			p.collisionCount = *c + 1
		}
		after.newSet = p.create
	}
	for _, set := range s.all() {
		size, resized := p.step.Replicas[set.Name]
		if !resized {
			size = set.Spec.Replicas
		}
		sized := resized && (size != set.Spec.Replicas || p.step.Scaling)
		want, err := wantedSet(d, set, set == s.newSet, size, sized, revision)
		if err != nil {
			return stepPlan{}, err
		}
		if p.inPlace != nil || set == s.newSet {
			withInPlaceMarks(want, set == s.newSet, set.Spec.Replicas > 0 || s.counts[set.Name].Machines > 0)
		}
		data, err := patch.Diff(setFields, set, want, "")
		if err != nil {
			return stepPlan{}, err
		}
		if data != nil {
			p.setPatches = append(p.setPatches, setPatch{Set: set, Want: want, Data: data})
		}
	}
	p.revision = revisionToRecord(d, after.newSet)
	st, err := nextStatus(d, after, s.selector, p.stall(), s.now, true)
	if err != nil {
		return stepPlan{}, err
	}
	if deploymentComplete(d, st) {
		p.cleanup = setsToDelete(d, after.newSet, after.old, after.counts)
	}
	return p, nil
}

// revisionToRecord is the revision the deployment's revision annotation
// takes from its new set, as Kubernetes and MCM show it; "" when there is
// no new set, the annotation shows it already, or the set's revision is
// not one this controller wrote (the next step rewrites it).
func revisionToRecord(d *v1alpha1.MachineDeployment, newSet *v1alpha1.MachineSet) string {
	if newSet == nil {
		return ""
	}
	rev, ok := newSet.Annotations[v1alpha1.RevisionAnnotation]
	if !ok || d.Annotations[v1alpha1.RevisionAnnotation] == rev {
		return ""
	}
	if _, err := strconv.ParseInt(rev, 10, 64); err != nil {
		return ""
	}
	return rev
}
