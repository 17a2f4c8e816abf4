package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
)

// startRollout creates the second class and points the deployment's
// template at it. The class name is part of the template hash, so the
// deployment controller creates a new MachineSet and moves the machines to
// it in waves of maxSurge.
func (d *demo) startRollout(ctx context.Context) error {
	if err := d.createClass(ctx, classV2, "medium"); err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"class":{"name":%q}}}}}`, classV2)
	if _, err := d.machines.MachineV1alpha1().MachineDeployments(d.cfg.Namespace).Patch(ctx, deploymentName,
		types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("pointing machine deployment %s at class %s: %w", deploymentName, classV2, err)
	}
	d.printf("Created MachineClass %s (instanceType medium) and patched MachineDeployment %s to use it: a rolling update.\n\n", classV2, deploymentName)
	return nil
}

// setRow is one MachineSet of the deployment as the rollout line shows it.
type setRow struct {
	name, class string
	replicas    int32
}

// listSets reads the demo's MachineSets from the informer cache, sorted by
// name.
func listSets(lister machinelisters.MachineSetNamespaceLister) ([]setRow, error) {
	list, err := lister.List(labels.Everything()) // the informer selects the demo's sets
	if err != nil {
		return nil, err
	}
	sets := make([]setRow, 0, len(list))
	for _, s := range list {
		sets = append(sets, setRow{name: s.Name, class: s.Spec.Template.Spec.Class.Name, replicas: s.Spec.Replicas})
	}
	slices.SortFunc(sets, func(a, b setRow) int { return strings.Compare(a.name, b.name) })
	return sets, nil
}

// progress is the rollout as the demo's caches show it.
type progress struct {
	old []setRow // sets of another class, by name
	new *setRow  // the set of classV2, once the controller has created it
	// available counts the machines in the done phase that are not being
	// deleted, as the cache shows them now; floorCheck holds every event
	// to floor, which the rollout promises.
	available, floor int
	// complete: the new set has all the replicas, all its machines are in
	// the done phase, the old sets are at 0 and no machine of theirs is left.
	complete bool
}

// rolloutProgress reads the progress from the sets and machines.
func rolloutProgress(sets []setRow, rows []row, done v1alpha1.MachinePhase, replicas int) progress {
	p := progress{floor: replicas - maxUnavailable}
	for i := range sets {
		if sets[i].class == classV2 && p.new == nil {
			p.new = &sets[i]
		} else {
			p.old = append(p.old, sets[i])
		}
	}
	newUp, others := 0, 0
	for _, r := range rows {
		up := r.phase == string(done) && !r.deleting
		if up {
			p.available++
		}
		if up && p.new != nil && r.set == p.new.name {
			newUp++
		} else {
			others++
		}
	}
	oldScaledDown := true
	for _, s := range p.old {
		oldScaledDown = oldScaledDown && s.replicas == 0
	}
	p.complete = p.new != nil && int(p.new.replicas) == replicas && newUp == replicas && others == 0 && oldScaledDown
	return p
}

// String is the rollout line: "old set demo-x 4 → new set demo-y 2,
// available 5 (floor 5)", with each set's spec.replicas.
func (p progress) String() string {
	var b strings.Builder
	switch len(p.old) {
	case 0:
		b.WriteString("old set -")
	case 1:
		fmt.Fprintf(&b, "old set %s %d", p.old[0].name, p.old[0].replicas)
	default:
		b.WriteString("old sets")
		for i, s := range p.old {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %s %d", s.name, s.replicas)
		}
	}
	if p.new == nil {
		b.WriteString(" → new set -")
	} else {
		fmt.Fprintf(&b, " → new set %s %d", p.new.name, p.new.replicas)
	}
	fmt.Fprintf(&b, ", available %d (floor %d)", p.available, p.floor)
	return b.String()
}
