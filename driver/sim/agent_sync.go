// One node's turn of the agent: is it due, which class is it to have,
// update the VM, label the result.

package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

// reconcile is one turn of the node named name: nothing if the agent does
// not serve it or it is not to be updated, a requeue when its update is
// not due yet, else the update and its result.
func (a *Agent) reconcile(ctx context.Context, name string) (workqueue.Result, error) {
	node, err := a.listers.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		a.drop(name)
		return workqueue.Result{}, nil
	}
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("reading node %s from the cache: %w", name, err)
	}
	vm, served := a.servedVM(node)
	trig := triggerOf(node)
	if !served || trig == triggerNone {
		a.drop(name)
		return workqueue.Result{}, nil
	}
	now := a.clock.Now()
	p := a.schedule(name, trig, vm, now)
	if now.Before(p.due) {
		return workqueue.Result{RequeueAfter: p.due.Sub(now)}, nil
	}
	return a.act(ctx, name, p)
}

// servedVM returns the VM of the node if the agent runs on it: the node is
// this agent's kubelet's, its VM is Running and the VM's class enabled
// the agent.
func (a *Agent) servedVM(node *corev1.Node) (VM, bool) {
	if !a.owns(node) || node.Spec.ProviderID == "" {
		return VM{}, false
	}
	vm, ok := a.cloud.VM(node.Spec.ProviderID)
	if !ok || vm.NodeName != node.Name || vm.State != VMRunning || !vm.InPlaceUpdate.enabled() {
		return VM{}, false
	}
	return vm, true
}

// act carries out the node's due update p and labels its result. It reads
// the node from the API server first: the cache may not show the agent's
// own last label yet, and an update of a node that is done already must
// not be made again. After a failure it comes back after the retry delay:
// a failure labelled again with the same reason changes nothing on the
// node, so no event would bring the node back.
func (a *Agent) act(ctx context.Context, name string, p pendingUpdate) (workqueue.Result, error) {
	node, err := a.target.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		a.drop(name)
		return workqueue.Result{}, nil
	}
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("reading node %s: %w", name, err)
	}
	vm, served := a.servedVM(node)
	if !served || triggerOf(node) != p.trigger {
		// Changed since the cache showed it; its update event follows.
		a.drop(name)
		return workqueue.Result{}, nil
	}
	result := p.result
	if result == nil {
		decided, err := a.update(ctx, vm)
		if err != nil {
			return workqueue.Result{}, fmt.Errorf("updating node %s in place: %w", name, err)
		}
		a.decided(name, p, decided)
		result = &decided
	}
	if err := a.label(ctx, node, *result); err != nil {
		return workqueue.Result{}, fmt.Errorf("labelling node %s with its in-place update's result: %w", name, err)
	}
	logger := logr.FromContextOrDiscard(ctx).WithValues("node", name, "machine", vm.MachineName)
	if !result.failed {
		logger.Info("Updated the node in place")
		a.drop(name)
		return workqueue.Result{}, nil
	}
	// The VM as it is now: an after-effect fault may have given it another
	// class's retry delay.
	if now, ok := a.cloud.VM(vm.ProviderID); ok {
		vm = now
	}
	logger.Info("The in-place update of the node failed; trying again later", "reason", result.reason, "retryDelay", vm.InPlaceUpdate.retryDelay())
	a.retryLater(name, vm)
	return workqueue.Result{RequeueAfter: vm.InPlaceUpdate.retryDelay()}, nil
}

// update updates vm to the class its machine is to have, or says why it
// failed. An error is a failure to find out, retried with backoff: the
// machine objects may not be in the cache yet.
func (a *Agent) update(ctx context.Context, vm VM) (updateResult, error) {
	class, err := a.desiredClass(vm)
	if err != nil {
		return updateResult{}, err
	}
	spec, err := a.cloud.classSpec(class)
	if err != nil {
		return failedUpdate(fmt.Sprintf("the MachineClass %s/%s cannot be applied: %v", class.Namespace, class.Name, err)), nil
	}
	fate, err := a.cloud.begin(ctx, OperationInPlaceUpdate, vm.MachineName)
	if err != nil {
		if ctx.Err() != nil {
			return updateResult{}, err
		}
		return failedUpdate(faultMessage(err)), nil
	}
	_, err = a.cloud.updateInPlace(vm.ProviderID, tagsOf(class, spec), spec)
	var refused *updateRefusedError
	switch {
	case errors.As(err, &refused):
		return failedUpdate(refused.reason), nil
	case err != nil:
		return updateResult{}, err
	case fate.err != nil: // an after-effect fault: updated, reported failed
		return failedUpdate(faultMessage(fate.err)), nil
	}
	return updateResult{}, nil
}

func failedUpdate(reason string) updateResult { return updateResult{failed: true, reason: reason} }

// faultMessage is the reason an injected fault gives: its message.
func faultMessage(err error) string {
	var de *driver.Error
	if errors.As(err, &de) {
		return de.Message
	}
	return err.Error()
}

// desiredClass is the MachineClass the VM's machine is to have: the class
// of its MachineDeployment's template, where a rollout puts the new
// class; without a deployment, its MachineSet's template's; without a set,
// its own. The machine is the one the VM was created for, in the
// namespace of the VM's class.
func (a *Agent) desiredClass(vm VM) (*v1alpha1.MachineClass, error) {
	ns := vm.Class.Namespace
	m, err := a.listers.machines.Machines(ns).Get(vm.MachineName)
	if err != nil {
		return nil, fmt.Errorf("machine %s/%s: %w", ns, vm.MachineName, err)
	}
	ref := m.Spec.Class
	if owner := metav1.GetControllerOf(m); owner != nil && owner.Kind == "MachineSet" {
		set, err := a.listers.sets.MachineSets(ns).Get(owner.Name)
		if err != nil {
			return nil, fmt.Errorf("MachineSet %s/%s of machine %s: %w", ns, owner.Name, m.Name, err)
		}
		ref = set.Spec.Template.Spec.Class
		if owner := metav1.GetControllerOf(set); owner != nil && owner.Kind == "MachineDeployment" {
			d, err := a.listers.deployments.MachineDeployments(ns).Get(owner.Name)
			if err != nil {
				return nil, fmt.Errorf("MachineDeployment %s/%s of MachineSet %s: %w", ns, owner.Name, set.Name, err)
			}
			ref = d.Spec.Template.Spec.Class
		}
	}
	class, err := a.listers.classes.MachineClasses(ns).Get(ref.Name)
	if err != nil {
		return nil, fmt.Errorf("MachineClass %s/%s of machine %s: %w", ns, ref.Name, m.Name, err)
	}
	return class, nil
}

// resultKeys are the agent's keys on a node: the result label and the
// failure's reason, nothing else.
func resultKeys(n *corev1.Node) patch.Fields {
	return patch.Fields{"metadata": patch.Fields{
		"labels":      patch.Keys(n.Labels, v1alpha1.UpdateResultLabel),
		"annotations": patch.Keys(n.Annotations, v1alpha1.UpdateFailedReasonAnnotation),
	}}
}

// label writes result to the node: update-result=successful without a
// failure reason, or update-result=failed with it. The patch names those
// two keys only and is guarded by the resourceVersion read: a node that
// changed meanwhile (MCM's cleanup removed an earlier result, say) is read
// again rather than labelled from what was read before.
func (a *Agent) label(ctx context.Context, node *corev1.Node, result updateResult) error {
	want := node.DeepCopy()
	want.Labels = maps.Clone(node.Labels)
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	want.Annotations = maps.Clone(node.Annotations)
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	want.Labels[v1alpha1.UpdateResultLabel] = v1alpha1.UpdateResultSuccessful
	delete(want.Annotations, v1alpha1.UpdateFailedReasonAnnotation)
	if result.failed {
		want.Labels[v1alpha1.UpdateResultLabel] = v1alpha1.UpdateResultFailed
		want.Annotations[v1alpha1.UpdateFailedReasonAnnotation] = result.reason
	}
	data, err := patch.Diff(resultKeys, node, want, node.ResourceVersion)
	if err != nil || data == nil {
		return err
	}
	_, err = patch.Send(ctx, a.target.CoreV1().Nodes().Patch, node.Name, data, AgentFieldManager)
	return err
}
