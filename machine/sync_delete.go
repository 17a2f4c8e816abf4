package machine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/workqueue"
)

const mergePatchType = types.MergePatchType

func patchOptions(fieldManager string) metav1.PatchOptions {
	return metav1.PatchOptions{FieldManager: fieldManager}
}

// maxStepsPerSync bounds how many deletion steps one sync runs back to back.
const maxStepsPerSync = 8

// syncDeletion runs the deletion flow of a machine, one step after the
// other, until a step has to wait. Every step's work happens before the
// step annotation moves on, so after a crash the current step is repeated.
func (c *Controller) syncDeletion(ctx context.Context, cached *v1alpha1.Machine) (workqueue.Result, error) {
	if !slices.Contains(cached.Finalizers, v1alpha1.MachineFinalizer) {
		return workqueue.Result{}, nil // not ours (any more)
	}
	logger := logr.FromContextOrDiscard(ctx)
	key := keyOf(cached)
	cur := cached
	for range maxStepsPerSync {
		in, class, secret := c.observeDeletion(cur)
		d := decideDeletion(in)
		logger.V(2).Info("Deletion step", "step", d.Step, "action", d.Action)
		desired := cur.DeepCopy()
		setPhase(desired, v1alpha1.MachineTerminating, in.Now)
		desired.Status.CurrentStatus.TimeoutActive = false
		if desired.Annotations[DeletionStepAnnotation] != string(d.Step) {
			setAnnotation(desired, DeletionStepAnnotation, string(d.Step))
			setAnnotation(desired, DeletionStepSinceAnnotation, formatTime(in.Now))
		}
		op := v1alpha1.LastOperation{Description: d.Description, State: v1alpha1.MachineStateProcessing, Type: v1alpha1.MachineOperationDelete}

		var (
			res     workqueue.Result
			done    bool // step finished: advance
			stepErr error
			ev      *event
		)
		switch d.Action {
		case delAdvance:
			done = true
		case delWait:
			if d.BadInput {
				op.State = v1alpha1.MachineStateFailed
				ev = &event{Type: corev1.EventTypeWarning, Reason: ReasonDeleteFailed, Message: d.Description}
				res.RequeueAfter = c.opts.retryDelay(retryMedium, c.failures.inc(key))
			} else {
				res.RequeueAfter = d.RequeueAfter
			}
		case delDrain:
			done, res, stepErr, ev = c.drainStep(ctx, cur, desired, d, in.NodeName, &op)
		case delDetachVolumes:
			done, res, stepErr = c.detachStep(ctx, in, d, &op)
		case delDeleteVM:
			start := c.opts.Clock.Now()
			resp, err := c.driver.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: cur, MachineClass: class, Secret: secret})
			switch code := driver.CodeOf(err); code {
			case driver.OK, driver.NotFound:
				done = true
				op.Description = "VM deletion was successful. Initiate node object deletion"
				if resp != nil && resp.LastKnownState != "" {
					desired.Status.LastKnownState = resp.LastKnownState
				}
				c.metrics.delete.WithLabelValues(metricLabels(cur)...).Observe(c.opts.Clock.Since(start).Seconds())
				ev = &event{Type: corev1.EventTypeNormal, Reason: ReasonDeleted, Message: "Deleted VM " + cur.Spec.ProviderID}
			default:
				op.State = v1alpha1.MachineStateFailed
				op.ErrorCode = code.String()
				op.Description = fmt.Sprintf("Cloud provider message - DeleteMachine failed: %v. Initiate VM deletion", err)
				ev = &event{Type: corev1.EventTypeWarning, Reason: ReasonDeleteFailed, Message: op.Description}
				res.RequeueAfter = c.opts.retryDelay(retryClassOf(code), c.failures.inc(key))
			}
		case delDeleteNode:
			stepErr = c.deleteNode(ctx, in.NodeName)
			done = stepErr == nil
		case delRemoveFinalizer:
			desired.Finalizers = slices.DeleteFunc(desired.Finalizers, func(f string) bool { return f == v1alpha1.MachineFinalizer })
			// Write the status first (the object vanishes with the finalizer).
			op.Description = "Machine deletion complete. Removing finalizer"
			status := desired.DeepCopy()
			status.Finalizers = cur.Finalizers
			setLastOperation(status, op, in.Now)
			// writeMachine returns the machine as stored after its writes,
			// so the finalizer patch needs no fresh Get.
			latest, err := c.writeMachine(ctx, cur, status)
			if apierrors.IsNotFound(err) {
				return workqueue.Result{}, nil
			}
			if err != nil {
				return workqueue.Result{}, err
			}
			final := latest.DeepCopy()
			final.Finalizers = desired.Finalizers
			if _, err := c.writeMachine(ctx, latest, final); err != nil && !apierrors.IsNotFound(err) {
				return workqueue.Result{}, err
			}
			c.failures.reset(key)
			logger.Info("Machine deleted")
			return workqueue.Result{}, nil
		}

		if stepErr != nil && op.State != v1alpha1.MachineStateFailed {
			op.State = v1alpha1.MachineStateFailed
			op.Description = fmt.Sprintf("%s failed: %v. Will retry", d.Description, stepErr)
		}
		if done {
			next := d.Step.next()
			setAnnotation(desired, DeletionStepAnnotation, string(next))
			setAnnotation(desired, DeletionStepSinceAnnotation, formatTime(in.Now))
			if d.Step == StepDrain {
				deleteAnnotation(desired, DrainStateAnnotation)
			}
			c.failures.reset(key)
		}
		setLastOperation(desired, op, in.Now)
		written, err := c.writeMachine(ctx, cur, desired)
		if err != nil {
			return workqueue.Result{}, errors.Join(stepErr, err)
		}
		c.recordEvent(written, ev)
		if stepErr != nil {
			return workqueue.Result{}, stepErr
		}
		if !done {
			return res, nil
		}
		cur = written
	}
	return workqueue.Result{RequeueAfter: time.Second}, nil
}

// observeDeletion collects what deciding a deletion step needs.
func (c *Controller) observeDeletion(m *v1alpha1.Machine) (deletionInput, *v1alpha1.MachineClass, *corev1.Secret) {
	in := deletionInput{
		Now:                     c.opts.Clock.Now(),
		Machine:                 m,
		Config:                  v1alpha1.EffectiveMachineConfiguration(m, &c.opts.Machine),
		HasTarget:               c.target != nil,
		ForceDrainNotReadyAfter: c.opts.ForceDrainNotReadyAfter,
	}
	if c.nodes != nil {
		in.NodeName = nodeNameOf(m)
		if in.NodeName == "" {
			// The VM may have registered before its name was recorded.
			if n, err := c.nodes.Get(m.Name); err == nil && n.Labels[v1alpha1.MachineNameLabelKey] == m.Name {
				in.NodeName, in.Node = n.Name, n
			}
		} else if n, err := c.nodes.Get(in.NodeName); err == nil {
			in.Node = n
		}
	}
	class, err := c.classes.MachineClasses(m.Namespace).Get(m.Spec.Class.Name)
	if err != nil {
		in.ClassProblem = fmt.Sprintf("MachineClass %q not found", m.Spec.Class.Name)
		return in, nil, nil
	}
	secret, _, problem := c.resolveSecret(class)
	if secret == nil && problem != "" && class.SecretRef == nil && class.CredentialsSecretRef == nil {
		in.ClassProblem = problem
		return in, nil, nil
	}
	if secret == nil {
		// Deleting needs credentials, not user data: merge what exists.
		secret = c.mergeExisting(class)
		if secret == nil {
			in.ClassProblem = problem
			return in, nil, nil
		}
	}
	in.ClassFound = true
	return in, class, secret
}

// mergeExisting merges whichever of the class's secrets exist; nil if none.
func (c *Controller) mergeExisting(class *v1alpha1.MachineClass) *corev1.Secret {
	var found []*corev1.Secret
	for _, ref := range []*corev1.SecretReference{class.SecretRef, class.CredentialsSecretRef} {
		if ref == nil {
			found = append(found, nil)
			continue
		}
		s, err := c.secrets.Secrets(secretNamespace(ref, class)).Get(ref.Name)
		if err != nil {
			return nil
		}
		found = append(found, s)
	}
	return driver.MergeSecrets(found[0], found[1])
}

// drainStep runs one drain pass and records its state on desired.
func (c *Controller) drainStep(ctx context.Context, cur, desired *v1alpha1.Machine, d deletionDecision, node string, op *v1alpha1.LastOperation) (bool, workqueue.Result, error, *event) {
	var state drain.State
	if raw := cur.Annotations[DrainStateAnnotation]; raw != "" {
		// A lost or unreadable state is safe: the drain starts over.
		_ = json.Unmarshal([]byte(raw), &state)
	}
	if state.Deadline.IsZero() || d.DrainDeadline.Before(state.Deadline) {
		state.Deadline = d.DrainDeadline
	}
	res, err := c.drainer.Pass(ctx, node, state)
	if errors.Is(err, drain.ErrNodeNotFound) {
		op.Description = "Node is gone; nothing to drain. Initiate VM deletion"
		return true, workqueue.Result{}, nil, nil
	}
	if raw, mErr := json.Marshal(res.State); mErr == nil {
		setAnnotation(desired, DrainStateAnnotation, string(raw))
	}
	if err != nil {
		op.State = v1alpha1.MachineStateFailed
		op.Description = fmt.Sprintf("Drain failed due to - %v. Will retry in next sync. Initiate node drain", err)
		return false, workqueue.Result{}, fmt.Errorf("draining node %s: %w", node, err),
			&event{Type: corev1.EventTypeWarning, Reason: ReasonDrainFailed, Message: op.Description}
	}
	if !res.Done {
		op.Description = "Draining node: " + res.Message
		wait := res.NextCheck.Sub(c.opts.Clock.Now())
		return false, workqueue.Result{RequeueAfter: max(wait, 100*time.Millisecond)}, nil, nil
	}
	if !res.State.Start.IsZero() {
		c.metrics.drain.WithLabelValues(metricLabels(cur)...).Observe(c.opts.Clock.Since(res.State.Start).Seconds())
	}
	op.Description = "Drain successful. Initiate VM deletion"
	if d.Force {
		op.Description = "Force Drain successful. Delete Volume Attachments"
	}
	return true, workqueue.Result{}, nil, &event{Type: corev1.EventTypeNormal, Reason: ReasonDrained, Message: "Drained node " + node}
}

// detachStep waits for (or, on the force path, deletes) the node's
// VolumeAttachments.
func (c *Controller) detachStep(ctx context.Context, in deletionInput, d deletionDecision, op *v1alpha1.LastOperation) (bool, workqueue.Result, error) {
	list, err := c.target.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, workqueue.Result{}, fmt.Errorf("listing volume attachments: %w", err)
	}
	var left []string
	for _, va := range list.Items {
		if va.Spec.NodeName != in.NodeName {
			continue
		}
		left = append(left, va.Name)
		if d.Force && va.DeletionTimestamp == nil {
			err := c.target.StorageV1().VolumeAttachments().Delete(ctx, va.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return false, workqueue.Result{}, fmt.Errorf("deleting volume attachment %s: %w", va.Name, err)
			}
		}
	}
	if len(left) == 0 {
		op.Description = "Volume attachments are gone. Initiate VM deletion"
		return true, workqueue.Result{}, nil
	}
	since, ok := parseTime(in.Machine.Annotations[DeletionStepSinceAnnotation])
	if ok && in.Machine.Annotations[DeletionStepAnnotation] == string(StepWaitVolumeDetach) &&
		in.Now.Sub(since) > c.opts.PVDetachTimeout {
		op.Description = fmt.Sprintf("Volume attachments %v still present after %v; continuing. Initiate VM deletion", left, c.opts.PVDetachTimeout)
		return true, workqueue.Result{}, nil
	}
	op.Description = fmt.Sprintf("%s: waiting for %d volume attachment(s)", d.Description, len(left))
	return false, workqueue.Result{RequeueAfter: 2 * time.Second}, nil
}

// deleteNode removes the node finalizer and deletes the node.
func (c *Controller) deleteNode(ctx context.Context, name string) error {
	nodes := c.target.CoreV1().Nodes()
	n, err := nodes.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting node %s: %w", name, err)
	}
	if i := slices.Index(n.Finalizers, v1alpha1.NodeFinalizer); i >= 0 {
		fin := slices.Delete(slices.Clone(n.Finalizers), i, i+1)
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": fin, "resourceVersion": n.ResourceVersion}})
		if _, err := nodes.Patch(ctx, name, mergePatchType, patch, patchOptions(c.opts.FieldManager)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing finalizer of node %s: %w", name, err)
		}
	}
	err = nodes.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting node %s: %w", name, err)
	}
	logr.FromContextOrDiscard(ctx).Info("Deleted node", "node", name)
	return nil
}
