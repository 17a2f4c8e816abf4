package machine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/internal/patch"
	"github.com/mcmkit/mcm/workqueue"
)

// maxStepsPerSync bounds how many deletion steps one sync runs back to back.
const maxStepsPerSync = 8

// syncDeletion runs the deletion flow of a machine: observe, decide the
// current step (decideDeletion), run it (one function per step), plan the
// outcome (planDeletionWrite), and go on with the next step until one has
// to wait. The outcome is written when a step waits or fails, not after
// every step that is done at once: steps done back to back in one sync
// cost no write until one waits, and a machine whose flow ends in the
// sync costs only the finalizer's removal. Every step's work happens
// before the recorded step (DeletionCondition) moves on and every step can
// be repeated, so after a crash the flow goes on from the last recorded
// step.
func (c *Controller) syncDeletion(ctx context.Context, cached *v1alpha1.Machine) (workqueue.Result, error) {
	if !slices.Contains(cached.Finalizers, v1alpha1.MachineFinalizer) {
		return workqueue.Result{}, nil // not ours (any more)
	}
	logger := logr.FromContextOrDiscard(ctx)
	stored, cl, err := c.prepareNodeForDeletion(ctx, cached)
	if err != nil {
		return workqueue.Result{}, err
	}
	cur := stored // as planned: stored, and the steps done since
	var events []*event
	// store writes the steps done since the last write, and then their
	// events.
	store := func() error {
		written, err := c.writeMachine(ctx, stored, cur)
		if err == nil {
			for _, e := range events {
				c.recordEvent(written, e)
			}
		}
		return err
	}
	for range maxStepsPerSync {
		in, creds := c.observeDeletion(cur, cl)
		d := decideDeletion(in)
		logger.V(2).Info("Deletion step", "step", d.Step, "action", d.Action)
		if d.Action == delRemoveFinalizer {
			// A machine deleted before it joined leaves no bootstrap token
			// behind; a failure keeps the finalizer and is retried.
			if err := c.deleteBootstrapTokens(ctx, cur); err != nil {
				// The steps done so far are stored, so that the retry does
				// not repeat them.
				return workqueue.Result{}, errors.Join(err, store())
			}
			if err := c.removeFinalizer(ctx, stored); err != nil {
				return workqueue.Result{}, err
			}
			for _, e := range events {
				c.recordEvent(cur, e)
			}
			return workqueue.Result{}, nil
		}
		out, stepErr := c.runDeletionStep(ctx, cur, in, d, creds)
		cur = planDeletionWrite(cur, in.Now, d, out)
		events = append(events, out.Event)
		if stepErr != nil || !out.Done {
			if err := store(); err != nil {
				return workqueue.Result{}, errors.Join(stepErr, err)
			}
			return workqueue.Result{RequeueAfter: out.RequeueAfter}, stepErr
		}
		c.failures.reset(workqueue.KeyOf(cur))
	}
	if err := store(); err != nil {
		return workqueue.Result{}, err
	}
	return workqueue.Result{RequeueAfter: time.Second}, nil
}

// deletionClaim is what a machine being deleted may act on: its node
// (from the node label, or looked up when the label is missing) and the
// binding's verdict on it and on the VM.
type deletionClaim struct {
	NodeName string
	Binding  binding
}

// prepareNodeForDeletion runs before each deletion sync's steps. It finds
// the machine's node: the node label; when the label is missing, the node
// carrying the machine-name label, else the node the driver's
// GetMachineStatus names. The label is then written if it can be — a
// deletion never waits for it. It judges the machine's claim on the node
// and VM (see bindingOf), asking the driver once when nobody vouched for
// a node that exists: a node that is not the machine's is neither marked,
// drained nor deleted, and a VM that is not is asked for by the
// machine's name. Before the drain, it marks the machine's own node with
// the Terminating condition (reason Unhealthy for a Failed machine,
// ScaleDown otherwise), so that others (the cluster-autoscaler, node
// agents) see why the node goes away.
func (c *Controller) prepareNodeForDeletion(ctx context.Context, m *v1alpha1.Machine) (*v1alpha1.Machine, deletionClaim, error) {
	step := CurrentDeletionStep(m)
	cl := deletionClaim{NodeName: nodeNameOf(m)}
	if c.nodes != nil && cl.NodeName == "" && step != StepRemoveFinalizer {
		if cl.NodeName = c.lookUpNodeName(ctx, m); cl.NodeName != "" {
			m = c.labelNode(ctx, m, cl.NodeName)
		}
	}
	claimant := m
	if nodeNameOf(m) != cl.NodeName {
		claimant = m.DeepCopy()
		setLabel(claimant, v1alpha1.NodeLabelKey, cl.NodeName)
	}
	node, _ := c.cachedNode(cl.NodeName)
	judge := func() binding {
		v, ok := c.vouches.get(m)
		return bindingOf(claimant, node, v, ok, c.rivalsOf(claimant))
	}
	cl.Binding = judge()
	if node != nil && cl.Binding.Kind == bindUnverified {
		if class, secret, err := c.classAndCredentials(m); err == nil {
			if err := c.verify(ctx, claimant, class, secret); err != nil {
				return m, cl, err // the node's fate waits for the driver's word
			}
			cl.Binding = judge()
		}
	}
	if node == nil || !cl.Binding.ownsNode() || (step != StepWaitPreDrainHooks && step != StepDrain) {
		return m, cl, nil
	}
	cond := terminationCondition(m, node, c.opts.Clock.Now())
	if cond == nil {
		return m, cl, nil
	}
	// A strategic merge patch merges conditions by type, so the kubelet's
	// own conditions are neither sent nor overwritten.
	data, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{*cond}}})
	if err == nil {
		_, err = patch.SendStrategic(ctx, c.target.CoreV1().Nodes().Patch, cl.NodeName, data, c.opts.FieldManager, "status")
	}
	if err != nil && !apierrors.IsNotFound(err) {
		// The condition informs; it must not hold up a deletion (a
		// manager without the right to patch node status would never
		// delete anything). Every later sync before the drain is done
		// tries again.
		logr.FromContextOrDiscard(ctx).Error(err, "Cannot set the Terminating condition on the node", "node", cl.NodeName)
	}
	return m, cl, nil
}

// labelNode records the node found for a machine being deleted in its
// node label, so that later syncs need not look it up again. The deletion
// does not depend on it: a name that cannot be a label value is not
// written, and a failed write is logged and tried at the next sync.
func (c *Controller) labelNode(ctx context.Context, m *v1alpha1.Machine, name string) *v1alpha1.Machine {
	logger := logr.FromContextOrDiscard(ctx).WithValues("node", name)
	if problems := validation.IsValidLabelValue(name); len(problems) > 0 {
		logger.Info("Found the node of the machine being deleted; its name cannot be a label value", "problems", problems)
		return m
	}
	labelled := m.DeepCopy()
	setLabel(labelled, v1alpha1.NodeLabelKey, name)
	written, err := c.writeMachine(ctx, m, labelled)
	if err != nil {
		logger.Error(err, "Found the node of the machine being deleted; cannot record it in the machine's node label")
		return m
	}
	logger.Info("Found the node of the machine being deleted")
	return written
}

// classAndCredentials returns the machine's class and its merged secret,
// for driver calls that need credentials, not user data.
func (c *Controller) classAndCredentials(m *v1alpha1.Machine) (*v1alpha1.MachineClass, *corev1.Secret, error) {
	class, err := c.classes.MachineClasses(m.Namespace).Get(m.Spec.Class.Name)
	if err != nil {
		return nil, nil, fmt.Errorf("MachineClass %q not found", m.Spec.Class.Name)
	}
	secret, err := driver.ReadClassSecret(c.secrets, class)
	if err != nil {
		return class, nil, err
	}
	return class, secret, nil
}

// terminationCondition is the Terminating condition to set on the node of
// machine m being deleted, or nil when the node has it already. A machine
// that is not Terminating yet shows why it is deleted: Failed means it is
// replaced as unhealthy; anything else is a scale-down. Once Terminating,
// that is no longer known, and a condition already set is kept.
func terminationCondition(m *v1alpha1.Machine, node *corev1.Node, now time.Time) *corev1.NodeCondition {
	for _, c := range node.Status.Conditions {
		if c.Type == v1alpha1.NodeTerminationCondition && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	cond := &corev1.NodeCondition{
		Type: v1alpha1.NodeTerminationCondition, Status: corev1.ConditionTrue,
		LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
		Reason: v1alpha1.NodeScaleDown, Message: "Machine Controller is scaling down machine",
	}
	if m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed {
		cond.Reason, cond.Message = v1alpha1.NodeUnhealthy, "Machine Controller is terminating failed machine"
	}
	return cond
}

// lookUpNodeName finds the node of a machine whose node label is missing:
// a node carrying the machine-name label, else the node name the driver
// reports for the machine's VM ("" when neither knows one).
func (c *Controller) lookUpNodeName(ctx context.Context, m *v1alpha1.Machine) string {
	sel := labels.SelectorFromSet(labels.Set{v1alpha1.MachineNameLabelKey: m.Name})
	if nodes, err := c.nodes.List(sel); err == nil && len(nodes) == 1 {
		return nodes[0].Name
	}
	// The driver is asked even without a provider ID or creation start:
	// a machine created with its finalizer records its creation start
	// only with the VM's provider ID, so a VM may exist without either.
	class, secret, err := c.classAndCredentials(m)
	if err != nil {
		return ""
	}
	status, err := c.driver.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: byName(m), MachineClass: class, Secret: secret})
	if err != nil || status == nil {
		logr.FromContextOrDiscard(ctx).V(2).Info("Driver does not know the node of the machine being deleted", "error", err)
		return ""
	}
	if status.ProviderID != "" {
		c.vouches.set(m, vouch{ProviderID: status.ProviderID})
	}
	return status.NodeName
}

// credentials are the class and merged secret that DeleteMachine needs.
type credentials struct {
	class  *v1alpha1.MachineClass
	secret *corev1.Secret
}

// observeDeletion collects what deciding a deletion step needs; cl is
// what prepareNodeForDeletion found.
func (c *Controller) observeDeletion(m *v1alpha1.Machine, cl deletionClaim) (deletionInput, credentials) {
	in := deletionInput{
		Now:         c.opts.Clock.Now(),
		Machine:     m,
		Config:      v1alpha1.EffectiveMachineConfiguration(m, &c.opts.Machine),
		HasTarget:   c.target != nil,
		NodeOwned:   cl.Binding.ownsNode(),
		NotOwnedWhy: cmp.Or(cl.Binding.Why, "nobody vouched for it: "+cl.Binding.Kind.String()),
		VMOwned:     cl.Binding.ownsVM(),
	}
	if c.nodes != nil {
		in.NodeName = cl.NodeName
		if n, err := c.nodes.Get(in.NodeName); in.NodeName != "" && err == nil {
			in.Node = n
		}
	}
	if CurrentDeletionStep(m) != StepDeleteVM {
		return in, credentials{} // only DeleteMachine needs them: no secrets merged per drain pass
	}
	class, secret, err := c.classAndCredentials(m)
	if err != nil {
		in.ClassProblem = err.Error()
		return in, credentials{}
	}
	in.ClassFound = true
	return in, credentials{class: class, secret: secret}
}

// runDeletionStep does the work of the decided step.
func (c *Controller) runDeletionStep(ctx context.Context, m *v1alpha1.Machine, in deletionInput, d deletionDecision, creds credentials) (stepOutcome, error) {
	switch d.Action {
	case delAdvance:
		out := stepOutcome{Done: true}
		if d.NotOwned {
			out.Event = &event{Type: corev1.EventTypeWarning, Reason: ReasonNodeNotOwned, Message: d.Description}
		}
		return out, nil
	case delWait:
		return c.waitStep(m, d), nil
	case delDrain:
		return c.drainStep(ctx, m, d, in.NodeName)
	case delDeleteVM:
		return c.deleteVMStep(ctx, m, d, creds)
	case delDeleteNode:
		return c.deleteNodeStep(ctx, d, in.NodeName)
	default:
		return stepOutcome{}, fmt.Errorf("deletion step %s: unknown action %d", d.Step, d.Action)
	}
}

// waitStep waits for hooks, or for input a person must fix.
func (c *Controller) waitStep(m *v1alpha1.Machine, d deletionDecision) stepOutcome {
	if !d.BadInput {
		return stepOutcome{RequeueAfter: d.RequeueAfter}
	}
	return stepOutcome{
		Failed:       true,
		Event:        &event{Type: corev1.EventTypeWarning, Reason: ReasonDeleteFailed, Message: d.Description},
		RequeueAfter: c.opts.retryDelay(retryMedium, c.failures.inc(workqueue.KeyOf(m))),
	}
}

// drainStep runs one non-blocking drain pass.
func (c *Controller) drainStep(ctx context.Context, m *v1alpha1.Machine, d deletionDecision, node string) (stepOutcome, error) {
	state, distrusted := storedDrainState(m, c.opts.Clock.Now())
	// The deadline and the bound on refusals come from the machine's own
	// facts (deletion timestamp, the drain timeout and maxEvictRetries
	// recorded when the deletion began, force label), never from the
	// stored state, which anyone who may patch the machine can write.
	// MCM also caps the retries at drainTimeout / 20s; the deadline does
	// that here.
	state.SetDeadline(d.DrainDeadline)
	state.SetMaxEvictRetries(d.MaxEvictRetries)
	res, err := c.drainer.Pass(ctx, node, state)
	if errors.Is(err, drain.ErrNodeNotFound) {
		return stepOutcome{Done: true, Description: "Node is gone; nothing to drain. Initiate VM deletion"}, nil
	}
	if err != nil {
		msg := fmt.Sprintf("Drain failed due to - %v. Will retry in next sync. Initiate node drain", err)
		return stepOutcome{
			Failed: true, Description: msg, DrainState: &res.State,
			Event: &event{Type: corev1.EventTypeWarning, Reason: ReasonDrainFailed, Message: msg},
		}, fmt.Errorf("draining node %s: %w", node, err)
	}
	if !res.Done {
		desc := "Draining node: " + res.Message
		if res.ForceReason != "" {
			desc = "Force-draining node (" + res.ForceReason + "): " + res.Message
		}
		wait := res.NextCheck.Sub(c.opts.Clock.Now())
		out := stepOutcome{Description: desc, DrainState: &res.State, RequeueAfter: max(wait, 100*time.Millisecond)}
		if why := stateReset(distrusted, res.Events); why != "" {
			out.Event = &event{Type: corev1.EventTypeWarning, Reason: ReasonDrainStateReset,
				Message: "Drain restarted: the stored drain state cannot be trusted (" + why + ")"}
		}
		if pods := evictRetriesExhausted(res.Events); len(pods) > 0 {
			out.Event = &event{Type: corev1.EventTypeWarning, Reason: ReasonEvictRetriesExhausted,
				Message: fmt.Sprintf("Deleted without eviction after %d refusals by PodDisruptionBudgets (maxEvictRetries): %s", d.MaxEvictRetries, strings.Join(pods, ", "))}
		}
		return out, nil
	}
	if !res.State.Start().IsZero() {
		c.metrics.drain.WithLabelValues(c.metricLabels(m)...).Observe(c.opts.Clock.Since(res.State.Start()).Seconds())
	}
	desc := "Drain successful. Initiate VM deletion"
	if d.Force || res.ForceReason != "" {
		desc = "Force Drain successful. Initiate VM deletion"
	}
	return stepOutcome{Done: true, Description: desc,
		Event: &event{Type: corev1.EventTypeNormal, Reason: ReasonDrained, Message: "Drained node " + node}}, nil
}

// stateReset says why the drain started over from the stored state: the
// machine's own check of it, else the drain engine's; "" when it did not.
func stateReset(distrusted string, events []drain.Event) string {
	if distrusted != "" {
		return distrusted
	}
	for _, e := range events {
		if e.Type == drain.EventStateReset {
			return e.Message
		}
	}
	return ""
}

// evictRetriesExhausted names the pods the drain deleted because budgets
// refused their eviction maxEvictRetries times.
func evictRetriesExhausted(events []drain.Event) []string {
	var pods []string
	for _, e := range events {
		if e.Type == drain.EventEvictRetriesExhausted {
			pods = append(pods, e.Pod.Namespace+"/"+e.Pod.Name)
		}
	}
	return pods
}

// deleteVMStep calls the driver's DeleteMachine: for the VM the
// machine's provider ID names when that is its own, else for the
// machine's VM by its name. A failure is reported by the worker and
// retried after the driver code's delay.
func (c *Controller) deleteVMStep(ctx context.Context, m *v1alpha1.Machine, d deletionDecision, creds credentials) (stepOutcome, error) {
	req := m
	if d.ByName {
		req = byName(m)
	}
	resp, err := c.driver.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: req, MachineClass: creds.class, Secret: creds.secret})
	switch code := driver.CodeOf(err); {
	case code == driver.InvalidArgument && m.Spec.ProviderID == "":
		// The machine never recorded a VM, and the driver refuses its
		// class, as it refused every creation from it: no VM can exist,
		// and the class must not hold the deletion up. (A VM created by
		// an attempt whose result was lost before the class turned
		// invalid is an orphan; the safety controller's orphan
		// collection deletes it.)
		msg := fmt.Sprintf("Skipping VM deletion: the machine never recorded a VM, and the driver refuses its class: %v. Initiate node object deletion", err)
		return stepOutcome{Done: true, Description: msg,
			Event: &event{Type: corev1.EventTypeWarning, Reason: ReasonDeleteFailed, Message: msg}}, nil
	case code == driver.OK || code == driver.NotFound:
		c.metrics.delete.WithLabelValues(c.metricLabels(m)...).Observe(c.opts.Clock.Since(m.DeletionTimestamp.Time).Seconds())
		vm := cmp.Or(req.Spec.ProviderID, "of machine "+m.Name)
		out := stepOutcome{Done: true, Description: "VM deletion was successful. Initiate node object deletion",
			Event: &event{Type: corev1.EventTypeNormal, Reason: ReasonDeleted, Message: "Deleted VM " + vm}}
		if resp != nil {
			out.LastKnownState = resp.LastKnownState
		}
		return storableState(out), nil
	default:
		msg := fmt.Sprintf("Cloud provider message - DeleteMachine failed: %v. Initiate VM deletion", err)
		return stepOutcome{
			Failed: true, ErrorCode: code.String(), Description: msg,
			Event:        &event{Type: corev1.EventTypeWarning, Reason: ReasonDeleteFailed, Message: msg},
			RequeueAfter: c.opts.retryDelay(retryClassOf(code), c.failures.inc(workqueue.KeyOf(m))),
		}, fmt.Errorf("deleting VM %s: %w", m.Spec.ProviderID, err)
	}
}

// deleteNodeStep removes the node finalizer and deletes the node.
func (c *Controller) deleteNodeStep(ctx context.Context, d deletionDecision, name string) (stepOutcome, error) {
	n, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return stepOutcome{Done: true}, nil
	}
	if err != nil {
		return failedStep(d, err), fmt.Errorf("getting node %s: %w", name, err)
	}
	nodes := c.target.CoreV1().Nodes()
	if slices.Contains(n.Finalizers, v1alpha1.NodeFinalizer) {
		// A strategic merge patch removes just this finalizer, however the
		// node changed since the cache saw it (the drain's cordon, the
		// Terminating condition, the control plane's taints): no conflict
		// to retry.
		_, err = patch.SendStrategic(ctx, nodes.Patch, name, patch.RemoveFinalizerStrategic(v1alpha1.NodeFinalizer), c.opts.FieldManager)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return failedStep(d, err), fmt.Errorf("removing finalizer of node %s: %w", name, err)
	}
	err = nodes.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return failedStep(d, err), fmt.Errorf("deleting node %s: %w", name, err)
	}
	logr.FromContextOrDiscard(ctx).Info("Deleted node", "node", name)
	return stepOutcome{Done: true}, nil
}

// failedStep reports a step that failed with err; the worker retries it.
func failedStep(d deletionDecision, err error) stepOutcome {
	return stepOutcome{Failed: true, Description: fmt.Sprintf("%s failed: %v. Will retry", d.Description, err)}
}

// removeFinalizer ends the deletion. The finalizer goes in a write of its
// own, guarded by the machine as stored: the object vanishes with it, so
// a last status would be read by nobody.
func (c *Controller) removeFinalizer(ctx context.Context, m *v1alpha1.Machine) error {
	data, err := patch.Finalizer(m.Finalizers, v1alpha1.MachineFinalizer, false, m.ResourceVersion)
	if err != nil || data == nil {
		return err
	}
	key := workqueue.KeyOf(m)
	// Until the cache drops the machine, a sync queued meanwhile (its
	// node's deletion queues one) must not run the flow again on the copy
	// that still has the finalizer. The answer to the write that deleted
	// the object may carry the version the cache already has, so the
	// read-your-writes check cannot tell. Expected before the write, as
	// its deletion event may come before the write returns.
	c.finalized.ExpectDeletions(key, m.UID)
	_, err = patch.Send(ctx, c.control.MachineV1alpha1().Machines(m.Namespace).Patch, m.Name, data, c.opts.FieldManager)
	if err != nil {
		c.finalized.DeletionFailed(key, m.UID) // still there, or gone before: no event to wait for
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing finalizer of machine %s: %w", key, err)
		}
	}
	c.failures.reset(key)
	logr.FromContextOrDiscard(ctx).Info("Machine deleted")
	return nil
}
