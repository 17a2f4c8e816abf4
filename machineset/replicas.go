package machineset

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/parallel"
	"github.com/mcmkit/mcm/workqueue"
)

// replicaPlan is what one sync does about a set's number of machines.
type replicaPlan struct {
	// Create is how many machines to create.
	Create int
	// Delete are the machines to delete, in ladder order.
	Delete []*v1alpha1.Machine
	// HeldBack is how many machines are missing but not created because
	// the set is frozen.
	HeldBack int
	// HeldBy is the preserved machine a scale-down stopped short of
	// (Options.KeepPreservedOnScaleDown); nil when none did.
	HeldBy *v1alpha1.Machine
	// Active is how many of the set's machines are not being deleted.
	Active int
}

// planReplicas decides the creations and deletions of one sync of set,
// whose machines (the ones it owns, those being deleted included) are
// given, when it wants wanted machines (spec.replicas up to the ceiling,
// wantedReplicas). It is pure.
//
// Machines being deleted do not count: they are on their way out, and a
// replacement is created at once (MCM #1086). The surplus, the machines
// the cluster-autoscaler marked, and Failed machines not preserved are
// deleted in ladder order (planDeletions); a deleted Failed or marked machine is replaced by
// a later sync, once its deletion is seen. At most burst machines are
// created, and at most burst deleted, per sync. A frozen set creates
// nothing; it still deletes. So does a set labelled
// v1alpha1.ScaleUpDisabledLabel (an old set of an in-place rollout). A
// machine labelled v1alpha1.UpdateResultLabel=successful (one an in-place
// rollout moved into the set, beingTransferred) is never deleted by a set
// that is not being deleted, and does not count towards the surplus.
func planReplicas(set *v1alpha1.MachineSet, wanted int, machines []*v1alpha1.Machine, frozen bool, burst int, l ladder) replicaPlan {
	active := countActive(machines)
	if set.DeletionTimestamp != nil {
		// The set is going: all its machines go, in ladder order,
		// preserved or not.
		l.KeepPreserved = false
		del, _ := planDeletions(set, machines, active, burst, l)
		return replicaPlan{Delete: del, Active: active}
	}
	diff := wanted - active
	p := replicaPlan{Active: active}
	// A machine an in-place rollout is moving into this set carries the
	// update-result label until the set's spec.replicas counts it: it is
	// not deleted, and the surplus is counted without it (MCM's delete
	// diff leaves it out the same way).
	deletable := slices.DeleteFunc(slices.Clone(machines), beingTransferred)
	p.Delete, p.HeldBy = planDeletions(set, deletable, -(wanted - countActive(deletable)), burst, l)
	_, scaleUpDisabled := set.Labels[v1alpha1.ScaleUpDisabledLabel]
	switch {
	case diff <= 0 || scaleUpDisabled:
		// An old set of an in-place rollout creates nothing: its machines
		// move to the new set one by one, and each move shrinks it only
		// after the machine left.
	case frozen:
		p.HeldBack = diff
	default:
		p.Create = min(diff, burst)
	}
	return p
}

// beingTransferred tells whether m carries the update-result label with
// the value successful: the deployment controller put it on a machine it
// moved from an old set to this one, and takes it off once the set's
// spec.replicas counts the machine.
func beingTransferred(m *v1alpha1.Machine) bool {
	return m.Labels[v1alpha1.UpdateResultLabel] == v1alpha1.UpdateResultSuccessful
}

// countActive counts the machines not being deleted.
func countActive(machines []*v1alpha1.Machine) int {
	n := 0
	for _, m := range machines {
		if !machinestate.BeingDeleted(m) {
			n++
		}
	}
	return n
}

// wantedReplicas is how many machines the set wants: spec.replicas, but at
// most ceiling. Above it, capped says so, for the set's
// ConditionReplicasCapped and a Warning event: a replicas typo such as
// 2147483647 would otherwise create machines for as long as the cloud
// lets it, at the client's rate, with nothing to show why.
func wantedReplicas(set *v1alpha1.MachineSet, ceiling int) (wanted int, capped string) {
	asked := int(set.Spec.Replicas)
	if asked <= ceiling {
		return asked, ""
	}
	return ceiling, fmt.Sprintf("spec.replicas asks for %d machines, more than the ceiling of %d per machine set; the set keeps %d", asked, ceiling, ceiling)
}

// stillWanted is how many of run's creations set, as it is now, still
// wants: none once it is gone, replaced, being deleted or frozen by its
// label (the safety gate is asked at the next sync).
func (c *Controller) stillWanted(run *creationRun, set *v1alpha1.MachineSet) int {
	if set == nil || set.UID != run.uid || set.DeletionTimestamp != nil ||
		set.Labels[v1alpha1.FreezeLabelKey] == v1alpha1.FreezeLabelValue {
		return 0
	}
	wanted, _ := wantedReplicas(set, c.opts.MaxReplicas)
	return wanted - run.active
}

// limitCreations lowers the creation run under way for the set obj, if
// any, to what the set now wants (informer handlers).
func (c *Controller) limitCreations(obj any) {
	set, ok := obj.(*v1alpha1.MachineSet)
	if !ok {
		return
	}
	if run := c.creating.get(workqueue.KeyOf(set)); run != nil {
		run.lower(c.stillWanted(run, set))
	}
}

// applied is what applyReplicas did.
type applied struct {
	Created, Deleted int
	// New are the machines created, as the API server answered; Gone the
	// UIDs of those deleted. The status counts both as the sync left
	// them, so that the sync's own creations and deletions need no status
	// write of their own when their events come.
	New  []*v1alpha1.Machine
	Gone map[types.UID]bool
	// CreateFailure and DeleteFailure describe the creations and the
	// deletions that failed; "" when none did.
	CreateFailure, DeleteFailure string
}

// applyReplicas issues the replica plan: deletions first, all at once,
// then creations in slow-start batches. Expectations are recorded before
// the requests, so that events that beat the answers are counted.
func (c *Controller) applyReplicas(ctx context.Context, key string, set *v1alpha1.MachineSet, plan replicaPlan) applied {
	uids := make([]types.UID, 0, len(plan.Delete))
	for _, m := range plan.Delete {
		uids = append(uids, m.UID)
	}
	c.exp.Set(key, plan.Create, uids...)
	var done applied
	done.Gone, done.DeleteFailure = c.deleteMachines(ctx, key, set, plan.Delete)
	done.Deleted = len(done.Gone)
	if plan.Create > 0 {
		run := newCreationRun(set, plan.Active, plan.Create)
		c.creating.start(key, run)
		// An update the cache got since this sync read the set has no
		// run to lower yet: look once more.
		if current, err := c.sets.MachineSets(set.Namespace).Get(set.Name); err == nil {
			run.lower(c.stillWanted(run, current))
		}
		var mu sync.Mutex
		t := c.slowStart(ctx, run, func(ctx context.Context) error {
			m, err := c.createMachine(ctx, set)
			if err == nil {
				mu.Lock()
				done.New = append(done.New, m)
				mu.Unlock()
			}
			return err
		})
		c.creating.end(key, run)
		done.Created = t.Created
		// The failed, canceled and skipped creations will never be seen;
		// those canceled after they may have been sent may be.
		if unseen := plan.Create - t.Created - t.Unknown; unseen > 0 {
			c.exp.LowerExpectations(key, unseen)
		}
		if t.Canceled > 0 {
			c.event(set, corev1.EventTypeNormal, ReasonCreateCanceled,
				fmt.Sprintf("Canceled %d machine creation(s) not yet sent: %v", t.Canceled, errScaledDown))
		}
		if t.Err != nil {
			done.CreateFailure = fmt.Sprintf("created %d of %d machines: %v", t.Created, plan.Create, t.Err)
			c.event(set, corev1.EventTypeWarning, ReasonCreateFailed, done.CreateFailure)
		}
	}
	return done
}

// deleteMachines deletes the machines in parallel, one request each, as
// the ReplicaSet controller does: a deletion is not a bet on a template
// that may be broken, so it needs no slow start, and the plan holds at
// most BurstReplicas machines, which bounds the requests in flight as the
// creations' largest batch is bounded. Issued one after the other, a
// rolling update's scale-down of a hundred machines took seconds, and the
// rollout waited for it. It returns how many were deleted, and the
// failures other than a machine that is gone or was replaced already, in
// the order of the machines' names ("" if none): the plan's order follows
// the deletion ladder, which may change between syncs, and a message that
// changed only its order would be a status write.
func (c *Controller) deleteMachines(ctx context.Context, key string, set *v1alpha1.MachineSet, machines []*v1alpha1.Machine) (deleted map[types.UID]bool, failure string) {
	var mu sync.Mutex
	deleted = map[types.UID]bool{}
	work := make([]func(context.Context) error, 0, len(machines))
	for _, m := range machines {
		work = append(work, func(ctx context.Context) error {
			uid := m.UID
			err := c.client.MachineV1alpha1().Machines(m.Namespace).Delete(ctx, m.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			if err != nil {
				c.exp.DeletionFailed(key, uid)
			}
			switch {
			case err == nil:
				mu.Lock()
				deleted[uid] = true
				mu.Unlock()
				c.event(set, corev1.EventTypeNormal, ReasonDeleted, "Deleted machine "+m.Name)
				if isStale(m) {
					c.metrics.staleMachines.Inc()
				}
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				return nil // gone (or replaced) already
			default:
				err = fmt.Errorf("deleting machine %s: %w", m.Name, err)
				c.event(set, corev1.EventTypeWarning, ReasonDeleteFailed, err.Error())
				return err
			}
			return nil
		})
	}
	var failures []string
	for _, err := range parallel.Run(ctx, len(work), work) {
		failures = append(failures, err.Error())
	}
	slices.Sort(failures)
	return deleted, strings.Join(failures, "; ")
}
