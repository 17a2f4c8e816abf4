package inplace_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// mcmMigration rewrites a deployment, with no controller running, as MCM
// v0.62.1 leaves it part-way through an in-place rollout. Citations are to
// the fact sheet on MCM's in-place implementation (mcm-inplace-facts.md,
// itself citing MCM's source) and to MCM's files.
type mcmMigration struct {
	t          *testing.T
	s          *simstack.Stack
	deployment string
	newClass   string
	oldSet     string
}

// startRollout is MCM's first rollout pass after the template changed
// (facts §6 step 1, §3.2 steps 1-4): the deployment at the new class and
// revision 2, MCM's new set at 0, the old set marked, every node of the
// old set a candidate with the PreferNoSchedule taint and the
// autoscaler's annotations, and the machine controller's answer: the node
// condition CandidateForUpdate, copied to the machine (facts §2.2 step 1).
// Whatever our controllers wrote under mcmkit.io/ goes first: MCM does
// not write it.
func (mig *mcmMigration) startRollout(ctx context.Context, machines []v1alpha1.Machine) {
	t := mig.t
	ref := metav1.GetControllerOf(&machines[0])
	if ref == nil {
		t.Fatalf("machine %s has no set", machines[0].Name)
	}
	mig.oldSet = ref.Name
	d := mig.updateDeployment(ctx, func(d *v1alpha1.MachineDeployment) {
		stripOurs(&d.ObjectMeta)
		d.Spec.Template.Spec.Class.Name = mig.newClass
		// MCM persists the revision of the new set on the deployment
		// (facts §6 step 1).
		d.Annotations[v1alpha1.RevisionAnnotation] = "2"
	})
	mig.updateSet(ctx, mig.oldSet, func(set *v1alpha1.MachineSet) {
		stripOurs(&set.ObjectMeta)
		// facts §1.1: scale-up-disabled on old sets
		// (deployment_inplace.go:50), prefer-no-schedule marking the set
		// tainted (deployment_rolling.go:312-315).
		set.Labels[v1alpha1.ScaleUpDisabledLabel] = "true"
		set.Annotations[v1alpha1.PreferNoScheduleAnnotation] = "True"
	})
	mig.createNewSet(ctx, d)
	for _, m := range machines {
		mig.updateMachine(ctx, m.Name, func(m *v1alpha1.Machine) { stripOurs(&m.ObjectMeta) })
		mig.updateNode(ctx, m.Name, func(n *corev1.Node) {
			stripOurs(&n.ObjectMeta)
			// facts §1.1, §1.3: candidate-for-update=true
			// (deployment_inplace.go:83), the autoscaler's pair
			// (autoscaler/types.go:9-15), the PreferNoSchedule taint
			// (deployment_rolling.go:309-390).
			n.Labels[v1alpha1.CandidateForUpdateLabel] = "true"
			n.Annotations[v1alpha1.ScaleDownDisabledAnnotation] = "true"
			n.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] = "true"
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.PreferNoScheduleTaintKey, Value: "True", Effect: corev1.TaintEffectPreferNoSchedule})
		})
		mig.setCondition(ctx, m.Name, v1alpha1.CandidateForUpdate, v1alpha1.CandidateForUpdateMessage)
	}
}

// createNewSet creates the set MCM's getNewMachineSet creates
// (deployment_sync.go:293-333): MCM's name and hash label on the set, its
// selector and its template, owned by the deployment, 0 replicas (Auto
// without surge: NewISNewReplicas, facts §3.2 step 1), revision 2 and
// desired/max-replicas = replicas (InPlaceUpdate has no surge in
// max-replicas, facts §1.1).
func (mig *mcmMigration) createNewSet(ctx context.Context, d *v1alpha1.MachineDeployment) {
	template := *d.Spec.Template.DeepCopy()
	template.Labels = withLabel(template.Labels, v1alpha1.MachineTemplateHashLabelKey, mcmNewHash)
	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels = withLabel(selector.MatchLabels, v1alpha1.MachineTemplateHashLabelKey, mcmNewHash)
	set := &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: mcmNewSet, Namespace: d.Namespace, Labels: template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, v1alpha1.SchemeGroupVersion.WithKind("MachineDeployment"))},
			Annotations: map[string]string{
				v1alpha1.RevisionAnnotation:        "2",
				v1alpha1.DesiredReplicasAnnotation: itoa(d.Spec.Replicas),
				v1alpha1.MaxReplicasAnnotation:     itoa(d.Spec.Replicas),
			},
		},
		Spec: v1alpha1.MachineSetSpec{Replicas: 0, MinReadySeconds: d.Spec.MinReadySeconds, Selector: selector, Template: template},
	}
	if _, err := mig.s.Machines.MachineV1alpha1().MachineSets(d.Namespace).Create(ctx, set, metav1.CreateOptions{}); err != nil {
		mig.t.Fatalf("creating MCM's new set: %v", err)
	}
}

// selectAndDrain is MCM selecting the machine's node (Auto,
// deployment_inplace.go:548) and its machine controller draining it
// (cordon in RunDrain, drain.go:238), then setting the machine
// InPlaceUpdating with lastOperation InPlaceUpdate Processing "Machine <m>
// is undergoing an in-place update", before the node condition becomes
// ReadyForUpdate, the agent's go (facts §1.4, §2.2 step 4, §6 step 3;
// machine_util.go:416-486). The machine's copy of the condition follows.
func (mig *mcmMigration) selectAndDrain(ctx context.Context, name string) {
	mig.updateNode(ctx, name, func(n *corev1.Node) {
		n.Labels[v1alpha1.SelectedForUpdateLabel] = "true"
		n.Spec.Unschedulable = true
	})
	mig.setCondition(ctx, name, v1alpha1.SelectedForUpdate, v1alpha1.SelectedForUpdateMessage)
	mig.updateMachineStatus(ctx, name, func(m *v1alpha1.Machine) {
		now := metav1.Now()
		m.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachineInPlaceUpdating, LastUpdateTime: now}
		m.Status.LastOperation = v1alpha1.LastOperation{
			Description: fmt.Sprintf("Machine %s is undergoing an in-place update", name),
			State:       v1alpha1.MachineStateProcessing, Type: v1alpha1.MachineOperationInPlaceUpdate, LastUpdateTime: now,
		}
	})
	mig.setCondition(ctx, name, v1alpha1.ReadyForUpdate, v1alpha1.ReadyForUpdateMessage)
}

// updateAndTransfer takes the machine through MCM's whole update and its
// transfer, up to just before MCM's next pass cleans its node up (facts
// §6 steps 2-5): selected and drained (selectAndDrain); the agent updates
// the VM and labels the node successful; the machine controller makes the
// machine InPlaceUpdateSuccessful and then Running ("re-joined",
// machine_util.go:971-1005) and the condition UpdateSuccessful, copied to
// the machine; MCM moves it to the new set (one merge patch of its owner
// reference and labels, deployment_inplace.go:396-401, facts §3.4),
// uncordons its node (:408-412) and resizes both sets (old -1, new +1,
// :424 and :279-281).
func (mig *mcmMigration) updateAndTransfer(ctx context.Context, name string) {
	mig.selectAndDrain(ctx, name)
	testenv.Eventually(mig.t, time.Minute, func(ctx context.Context) (bool, string) {
		n := mig.node(ctx, name)
		return n.Labels[v1alpha1.UpdateResultLabel] == v1alpha1.UpdateResultSuccessful,
			fmt.Sprintf("node %s: %s=%q, want the agent's successful", name, v1alpha1.UpdateResultLabel, n.Labels[v1alpha1.UpdateResultLabel])
	})
	mig.updateMachineStatus(ctx, name, func(m *v1alpha1.Machine) {
		now := metav1.Now()
		m.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning, LastUpdateTime: now}
		m.Status.LastOperation = v1alpha1.LastOperation{
			Description: fmt.Sprintf("Machine %s successfully re-joined the cluster", name),
			State:       v1alpha1.MachineStateSuccessful, Type: v1alpha1.MachineOperationHealthCheck, LastUpdateTime: now,
		}
	})
	mig.setCondition(ctx, name, v1alpha1.UpdateSuccessful, v1alpha1.UpdateSuccessfulMessage)
	mig.transfer(ctx, name)
	mig.updateNode(ctx, name, func(n *corev1.Node) { n.Spec.Unschedulable = false })
	mig.resize(ctx, mig.oldSet, -1, 5, 4)
	mig.resize(ctx, mcmNewSet, +1, 1, 1)
}

// rolloutStatus is the deployment's status as MCM's syncRolloutStatus
// writes it in the state left (facts §3.5 Status, §6 steps 3 and 5):
// updatedReplicas the new set's machines, available those Running, the
// updating one unavailable; Available True (4 >= 6 - 2), Progressing
// MachineSetUpdated, with MCM's texts (deployment_sync.go:655-662,
// deployment_progress.go:60-70). Our conditions (mcmkit.io/) are not MCM's.
func (mig *mcmMigration) rolloutStatus(ctx context.Context, updated, available int32) {
	c := mig.s.Machines.MachineV1alpha1().MachineDeployments(mig.s.NS)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := c.Get(ctx, mig.deployment, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		d.Status = v1alpha1.MachineDeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: d.Spec.Replicas, UpdatedReplicas: updated,
			ReadyReplicas: available, AvailableReplicas: available, UnavailableReplicas: d.Spec.Replicas - available,
			CollisionCount: d.Status.CollisionCount,
			Conditions: []v1alpha1.MachineDeploymentCondition{
				{Type: v1alpha1.MachineDeploymentAvailable, Status: v1alpha1.ConditionTrue, LastUpdateTime: now, LastTransitionTime: now,
					Reason: v1alpha1.MinimumReplicasAvailableReason, Message: "Deployment has minimum availability."},
				{Type: v1alpha1.MachineDeploymentProgressing, Status: v1alpha1.ConditionTrue, LastUpdateTime: now, LastTransitionTime: now,
					Reason: v1alpha1.MachineSetUpdatedReason, Message: fmt.Sprintf("MachineSet %q is progressing.", mcmNewSet)},
			},
		}
		_, err = c.UpdateStatus(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		mig.t.Fatalf("status of deployment %s: %v", mig.deployment, err)
	}
}

// transfer is MCM's merge patch of a machine to the new set: one owner
// reference (the list is replaced: never two owners), the labels of the
// new selector over the old one's and update-result=successful, the UID
// as a precondition; spec untouched (facts §3.4).
func (mig *mcmMigration) transfer(ctx context.Context, name string) {
	c := mig.s.Machines.MachineV1alpha1()
	set, err := c.MachineSets(mig.s.NS).Get(ctx, mcmNewSet, metav1.GetOptions{})
	if err != nil {
		mig.t.Fatal(err)
	}
	m, err := c.Machines(mig.s.NS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		mig.t.Fatal(err)
	}
	labels := withLabel(set.Spec.Selector.MatchLabels, v1alpha1.UpdateResultLabel, v1alpha1.UpdateResultSuccessful)
	patch := map[string]any{"metadata": map[string]any{
		"ownerReferences": []metav1.OwnerReference{*metav1.NewControllerRef(set, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))},
		"labels":          labels,
		"uid":             m.UID,
	}}
	if _, err := c.Machines(mig.s.NS).Patch(ctx, name, types.MergePatchType, mustJSON(mig.t, patch), metav1.PatchOptions{}); err != nil {
		mig.t.Fatalf("moving machine %s to %s as MCM: %v", name, mcmNewSet, err)
	}
}

// resize changes the set's replicas by delta, as MCM's scaleMachineSet,
// and gives its status the counts MCM's set controller then reports.
func (mig *mcmMigration) resize(ctx context.Context, name string, delta, machines, available int32) {
	set := mig.updateSet(ctx, name, func(set *v1alpha1.MachineSet) { set.Spec.Replicas += delta })
	set.Status.Replicas, set.Status.FullyLabeledReplicas = machines, machines
	set.Status.ReadyReplicas, set.Status.AvailableReplicas = available, available
	set.Status.ObservedGeneration = set.Generation
	if _, err := mig.s.Machines.MachineV1alpha1().MachineSets(mig.s.NS).UpdateStatus(ctx, set, metav1.UpdateOptions{}); err != nil {
		mig.t.Fatalf("status of set %s: %v", name, err)
	}
}

// setCondition is the machine controller's write of the node condition
// InPlaceUpdate (always True; the transition time moves with the reason,
// facts §1.2) and of its copy in the machine's conditions.
func (mig *mcmMigration) setCondition(ctx context.Context, name, reason, message string) {
	now := metav1.Now()
	cond := corev1.NodeCondition{Type: v1alpha1.NodeInPlaceUpdate, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		LastTransitionTime: now, LastHeartbeatTime: now}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := mig.node(ctx, name)
		n.Status.Conditions = withCondition(n.Status.Conditions, cond)
		_, err := mig.s.Core.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		mig.t.Fatalf("condition of node %s: %v", name, err)
	}
	mig.updateMachineStatus(ctx, name, func(m *v1alpha1.Machine) { m.Status.Conditions = withCondition(m.Status.Conditions, cond) })
}

func withCondition(conds []corev1.NodeCondition, c corev1.NodeCondition) []corev1.NodeCondition {
	for i := range conds {
		if conds[i].Type == c.Type {
			conds[i] = c
			return conds
		}
	}
	return append(conds, c)
}

func withLabel(labels map[string]string, key, value string) map[string]string {
	out := map[string]string{key: value}
	for k, v := range labels {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// stripOurs removes what our controllers write under mcmkit.io/ (the
// simulated kubelet's sim.mcmkit.io/ keys stay: they are the cloud's).
func stripOurs(meta *metav1.ObjectMeta) {
	for _, m := range []map[string]string{meta.Labels, meta.Annotations} {
		for k := range m {
			if strings.HasPrefix(k, "mcmkit.io/") {
				delete(m, k)
			}
		}
	}
	if meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
}
