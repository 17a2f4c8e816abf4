package deployment

import (
	"hash/fnv"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/nodebinding"
	"github.com/mcmkit/mcm/workqueue"
)

// readAnnotations are the machine annotations a deployment's sync reads:
// the cluster-autoscaler's marks (priority and marked-for-deletion-time),
// which the sync compares with its request, and the preservation asked
// of the machine, which decides whether a failed machine counts.
var readAnnotations = []string{
	v1alpha1.MachinePriorityAnnotation,
	v1alpha1.MarkedForDeletionTimeAnnotation,
	v1alpha1.PreserveAnnotation,
	v1alpha1.LastAppliedNodePreserveValueAnnotation,
}

// machineChangeMatters tells whether the update of a machine from old to m
// may change what a sync of its deployment, or of its nodes' rollout marks,
// decides or reports: the set it belongs to (owner references), its labels
// (its node, the in-place result), its deletion, its spec (the provider ID
// a failed machine is reported with, the node binding), its current
// status (phase and since when: counts, availability, preservation), the
// autoscaler's and the preservation annotations, its in-place condition,
// and its last operation while that failed or the machine is Failed (the
// failed machines the status lists, the in-place failure's reason).
// Anything else (a refreshed lastOperation time of a healthy machine, the
// Node conditions copied onto it, someone else's annotation,
// managedFields) changes nothing the deployment computes. It is pure;
// deploymentSyncView says what is compared.
func machineChangeMatters(old, m *v1alpha1.Machine) bool {
	return !equality.Semantic.DeepEqual(deploymentSyncView(old), deploymentSyncView(m))
}

// deploymentSyncView is the part of m a deployment's sync reads.
func deploymentSyncView(m *v1alpha1.Machine) v1alpha1.Machine {
	v := v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name: m.Name, Namespace: m.Namespace, UID: m.UID,
			CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
			Labels: m.Labels, OwnerReferences: m.OwnerReferences,
			Annotations: machinestate.PickAnnotations(m.Annotations, readAnnotations),
		},
		Spec: m.Spec,
	}
	v.Status.CurrentStatus = m.Status.CurrentStatus
	switch {
	case m.Status.LastOperation.State == v1alpha1.MachineStateFailed,
		m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed,
		m.Status.CurrentStatus.Phase == v1alpha1.MachineInPlaceUpdateFailed:
		v.Status.LastOperation = m.Status.LastOperation
	}
	for _, c := range m.Status.Conditions {
		if c.Type == v1alpha1.NodeInPlaceUpdate {
			v.Status.Conditions = append(v.Status.Conditions, c)
		}
	}
	return v
}

// queueNodeMarks queues the check of the deployment's nodes' rollout marks
// (ReconcileNodes) when what they are planned from on the machines' side
// changed since the check last queued: see nodeMarksInputs. The nodes'
// side comes by their events (onNodeAdd, onNodeUpdate).
func (c *Controller) queueNodeMarks(s scope) {
	if c.nodeQueue == nil {
		return
	}
	key := workqueue.KeyOf(s.d)
	if c.nodeMarksQueued.First(key, nodeMarksInputs(s.d, s.observed, s.now)) {
		c.nodeQueue.Add(key)
	}
}

// nodeMarksInputs sums up what ReconcileNodes plans a deployment's node
// marks from on the machines' side, as one sync observed it: whether the
// rollout is under way or complete, and for each machine on a node, the
// node, the VM it claims, whether it is in the new set or an old one, and
// whether its preservation holds at now. Machines without a node have no
// marks. The per-machine parts are summed, so the order of the cache's
// lists does not matter. It is pure.
func nodeMarksInputs(d *v1alpha1.MachineDeployment, obs observed, now time.Time) string {
	var sum uint64
	var onNodes, old int
	add := func(m *v1alpha1.Machine, inOld bool) {
		node := m.Labels[v1alpha1.NodeLabelKey]
		if node == "" {
			return
		}
		h := fnv.New64a()
		for _, part := range []string{string(m.UID), m.Name, node, m.Spec.ProviderID,
			strconv.FormatBool(inOld), strconv.FormatBool(machinestate.Preserved(m, now))} {
			_, _ = h.Write([]byte(part))
			_, _ = h.Write([]byte{0})
		}
		sum += h.Sum64()
		onNodes++
	}
	if obs.newSet != nil {
		for _, m := range obs.machines[obs.newSet.Name] {
			add(m, false)
		}
	}
	for _, s := range obs.old {
		old += len(obs.machines[s.Name])
		for _, m := range obs.machines[s.Name] {
			add(m, true)
		}
	}
	rolling := (isRollingUpdate(d) || isInPlaceUpdate(d)) && old > 0
	complete := obs.newSet != nil && old == 0
	return strconv.FormatBool(rolling) + "/" + strconv.FormatBool(complete) + "/" +
		strconv.Itoa(onNodes) + "/" + strconv.FormatUint(sum, 16)
}

// onNodeAdd queues the node marks of the deployment of the machines that
// claim a node that appeared: a check that ran before the cache showed the
// node left it unmarked.
func (c *Controller) onNodeAdd(obj any) {
	if n, ok := obj.(*corev1.Node); ok {
		c.queueNodeMarksOf(n, true, false)
	}
}

// nodeBindingChanged tells whether what a node confirms of a machine's claim
// on it (nodebinding.Confirms) may differ between old and n.
func nodeBindingChanged(old, n *corev1.Node) bool {
	return nodebinding.Owner(old) != nodebinding.Owner(n) || old.Spec.ProviderID != n.Spec.ProviderID
}
