package machineset

import (
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
)

// readAnnotations are the machine annotations a set's sync reads: the
// deletion ladder's priority and the cluster-autoscaler's
// marked-for-deletion-time, and the preservation asked of the machine
// (its own, and its Node's as the machine controller last applied it).
var readAnnotations = []string{
	v1alpha1.MachinePriorityAnnotation,
	v1alpha1.MarkedForDeletionTimeAnnotation,
	v1alpha1.PreserveAnnotation,
	v1alpha1.LastAppliedNodePreserveValueAnnotation,
}

// machineChangeMatters tells whether the update of a machine from old to m
// may change what a sync of its set decides or reports: its ownership and
// selection (owner references, labels), its place on the deletion ladder
// (phase, priority, creation time, deletion), its preservation, its spec
// (compared with the template's in-place parts, and its provider ID
// reported for a failed machine), its status's current phase (counts,
// availability) and, while its last operation failed or it is Failed, that
// operation (reported in status.failedMachines; the stale-machine metric
// reads its type). Anything else (a refreshed
// lastOperation time of a healthy machine, its Node's conditions, someone
// else's annotation, managedFields) changes nothing the set computes.
// It is pure; setSyncView says what is compared.
func machineChangeMatters(old, m *v1alpha1.Machine) bool {
	return !equality.Semantic.DeepEqual(setSyncView(old), setSyncView(m))
}

// setSyncView is the part of m a set's sync reads.
func setSyncView(m *v1alpha1.Machine) v1alpha1.Machine {
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
	if m.Status.LastOperation.State == v1alpha1.MachineStateFailed || m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed {
		v.Status.LastOperation = m.Status.LastOperation
	}
	return v
}
