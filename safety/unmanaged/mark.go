package unmanaged

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

// notManagedValue is the annotation's value, MCM's.
const notManagedValue = "1"

// nodeFacts is what one manager knows about a node when it decides the
// node's not-managed-by-mcm mark. Every field but Claimed is read from the
// node itself, so every manager on the target sees the same values; Claimed
// is the manager's own (its machines, in its namespace).
type nodeFacts struct {
	// Marked: the node carries the annotation, whoever wrote it.
	Marked bool
	// Adopted: the node carries v1alpha1.NodeFinalizer, which a machine
	// controller — this manager's, another manager's on the same target,
	// or MCM's — adds to the node of a machine it manages, and removes
	// only right before the node is deleted.
	Adopted bool
	// Claimed: a machine of this manager names the node in its "node"
	// label.
	Claimed bool
	// Deleting: the node has a deletion timestamp.
	Deleting bool
	// Registered is the node's creation time.
	Registered time.Time
}

// factsOf reads the facts of n, given whether this manager's machines
// claim it.
func factsOf(n *corev1.Node, claimed bool) nodeFacts {
	_, marked := n.Annotations[v1alpha1.NotManagedByMCMAnnotation]
	return nodeFacts{
		Marked:     marked,
		Adopted:    slices.Contains(n.Finalizers, v1alpha1.NodeFinalizer),
		Claimed:    claimed,
		Deleting:   n.DeletionTimestamp != nil,
		Registered: n.CreationTimestamp.Time,
	}
}

// markChange is the write one check of a node makes.
type markChange int8

const (
	keepMark markChange = iota
	addMark
	removeMark
)

func (c markChange) String() string {
	return [...]string{"keep", "add", "remove"}[c]
}

// decideMark decides the not-managed-by-mcm mark of a node from f: it is
// added to a node no machine controller adopted and none of this
// manager's machines claims, once the node is older than timeout (a
// machine may still be on its way: its label is written after the node
// joins); and removed from a node this manager's machine claims, once a
// machine controller adopted it. For a node that is not old enough yet it
// also returns how long until it is. A node being deleted is left alone.
// It is pure.
//
// Several managers may share a target cluster, each with the machines of
// its own namespace, each seeing the others' nodes as claimed by none of
// its machines. MCM's rule (mark what my machines do not claim, unmark
// what they do) makes them undo each other's writes forever. This rule
// cannot:
//
//   - A manager marks only a node no machine controller adopted: the
//     adoption (the finalizer) is on the node, so a node another manager's
//     machine holds is never marked by this one, whatever its namespace.
//   - A manager removes a mark only from a node its own machine claims and
//     a machine controller adopted: its own node, which no manager would
//     mark again. Marks on any other node — another manager's, MCM's, a
//     person's — are left as they are.
//   - Adding needs the finalizer absent and removing needs it present, a
//     fact every manager reads alike from the node: no two managers ever
//     want opposite writes to a node. With the node's finalizer and claims
//     unchanged, all the managers together write its mark at most once
//     (twice if two race to add it, with the same value), never in a loop.
//
// A node that is nobody's (no finalizer, no machine of any manager claims
// it: joined by hand, or a VM whose machine is gone) is marked by
// whichever manager's check comes first, after the same timeout for
// every manager: they all reach the same verdict from the node alone, so
// the outcome does not depend on which one runs or how many there are,
// and none undoes it until a machine adopts the node. That keeps MCM's
// behaviour for a single manager, which Gardener relies on: nodes without
// a machine are marked, and the mark goes once a machine takes the node.
func decideMark(f nodeFacts, now time.Time, timeout time.Duration) (markChange, time.Duration) {
	switch {
	case f.Deleting:
		return keepMark, 0
	case f.Claimed && f.Adopted && f.Marked:
		return removeMark, 0
	case f.Claimed, f.Adopted, f.Marked:
		// Claimed but not adopted yet: the machine controller's node sync
		// adds the finalizer, and that change brings the node back here.
		return keepMark, 0
	}
	if age := now.Sub(f.Registered); age < timeout {
		return keepMark, timeout - age
	}
	return addMark, 0
}

// markFactsChanged tells whether a node update changed a fact decideMark
// reads from the node: the mark, or the adoption.
func markFactsChanged(old, n *corev1.Node) bool {
	was, is := factsOf(old, false), factsOf(n, false)
	return was.Marked != is.Marked || was.Adopted != is.Adopted
}

// checkNode is one check of a target node's not-managed-by-mcm annotation:
// observe (caches), decide (decideMark), apply.
func (c *Controller) checkNode(ctx context.Context, name string) (workqueue.Result, error) {
	n, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return workqueue.Result{}, nil
	}
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("getting node %s: %w", name, err)
	}
	claimers, err := c.machineIdx.ByIndex(machinestate.ByNodeIndex, name)
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("listing machines of node %s: %w", name, err)
	}
	facts := factsOf(n, len(claimers) > 0)
	change, recheck := decideMark(facts, c.opts.Clock.Now(), c.opts.CreationTimeout)
	var value any
	switch change {
	case keepMark:
		return workqueue.Result{RequeueAfter: recheck}, nil
	case addMark:
		value = notManagedValue
	}
	// A merge patch of one annotation (null removes it): other writers'
	// keys stay, and no guard is needed.
	data, _ := json.Marshal(patch.Fields{"metadata": patch.Fields{"annotations": patch.Fields{v1alpha1.NotManagedByMCMAnnotation: value}}}) // strings and null always encode
	if _, err := patch.Send(ctx, c.target.CoreV1().Nodes().Patch, name, data, c.opts.FieldManager); err != nil {
		if apierrors.IsNotFound(err) {
			return workqueue.Result{}, nil
		}
		return workqueue.Result{}, fmt.Errorf("annotating node %s: %w", name, err)
	}
	log := logr.FromContextOrDiscard(ctx)
	if change == addMark {
		log.Info("No machine claims the node and no machine controller adopted it; marked it not managed", "node", name,
			"registered", n.CreationTimestamp.Time, "creationTimeout", c.opts.CreationTimeout)
	} else {
		log.Info("A machine claims the node; removed its not-managed mark", "node", name)
	}
	return workqueue.Result{}, nil
}
