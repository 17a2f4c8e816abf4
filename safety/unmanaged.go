package safety

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machineindex"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

// notManagedValue is the annotation's value, MCM's.
const notManagedValue = "1"

// unmanagedChange decides the not-managed-by-mcm annotation of node n: it
// is added (+1) to a node no machine claims once the node is older than
// timeout (a machine may still be on its way: its label is written after
// the node joins), and removed (-1) as soon as a machine claims it. It also
// returns, for a node without a machine that is not old enough yet, how
// long until it is. A node being deleted is left alone. It is pure.
func unmanagedChange(n *corev1.Node, claimed bool, now time.Time, timeout time.Duration) (change int, recheck time.Duration) {
	if n.DeletionTimestamp != nil {
		return 0, 0
	}
	_, marked := n.Annotations[v1alpha1.NotManagedByMCMAnnotation]
	switch {
	case claimed && marked:
		return -1, 0
	case claimed || marked:
		return 0, 0
	}
	if age := now.Sub(n.CreationTimestamp.Time); age < timeout {
		return 0, timeout - age
	}
	return +1, 0
}

// checkNode is one check of a target node's not-managed-by-mcm annotation.
func (c *Controller) checkNode(ctx context.Context, name string) (workqueue.Result, error) {
	n, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return workqueue.Result{}, nil
	}
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("getting node %s: %w", name, err)
	}
	claimers, err := c.machineIdx.ByIndex(machineindex.ByNodeIndex, name)
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("listing machines of node %s: %w", name, err)
	}
	change, recheck := unmanagedChange(n, len(claimers) > 0, c.opts.Clock.Now(), c.opts.CreationTimeout)
	var value any
	switch change {
	case 0:
		return workqueue.Result{RequeueAfter: recheck}, nil
	case 1:
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
	if change > 0 {
		logr.FromContextOrDiscard(ctx).Info("No machine claims the node; marked it not managed", "node", name,
			"registered", n.CreationTimestamp.Time, "creationTimeout", c.opts.CreationTimeout)
	}
	return workqueue.Result{}, nil
}
