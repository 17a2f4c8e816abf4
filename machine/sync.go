package machine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/api/machine/v1alpha1/validation"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/workqueue"
)

var everything = labels.Everything()

// ReconcileMachine syncs the machine with the given "namespace/name" key:
// observe, plan, apply, status. Run calls it from the machine queue's
// workers; tests and embedders may call it directly.
func (c *Controller) ReconcileMachine(ctx context.Context, key string) (workqueue.Result, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workqueue.Result{}, nil // malformed: retrying cannot help
	}
	cached, err := c.machines.Machines(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.writes.forget(key)
		c.failures.reset(key)
		return workqueue.Result{}, nil
	}
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("getting machine %s: %w", key, err)
	}
	if !c.writes.observed(key, cached.ResourceVersion) {
		// Our last write is not in the cache yet; its event requeues us.
		return workqueue.Result{RequeueAfter: time.Second}, nil
	}
	logger := logr.FromContextOrDiscard(ctx).WithValues("machine", key)
	ctx = logr.NewContext(ctx, logger)
	if cached.DeletionTimestamp != nil {
		return c.syncDeletion(ctx, cached)
	}
	return c.syncMachine(ctx, cached)
}

// syncMachine handles a machine that is not being deleted.
func (c *Controller) syncMachine(ctx context.Context, cached *v1alpha1.Machine) (workqueue.Result, error) {
	key := keyOf(cached)
	unknown := cached.Status.CurrentStatus.Phase == v1alpha1.MachineUnknown
	if unknown {
		// Health-timeout decisions of one controller are serialized so that
		// two workers cannot both take the last replacement slot.
		c.budgetMu.Lock()
		defer c.budgetMu.Unlock()
	}
	obs, secret := c.observe(ctx, cached)
	p := planMachine(obs, &c.opts)
	logger := logr.FromContextOrDiscard(ctx)
	logger.V(4).Info("Planned", "plan", p.Kind, "phase", cached.Status.CurrentStatus.Phase)

	if p.Kind == planCreate {
		// Record the creation start before calling the driver, so the
		// creation timeout survives restarts.
		cur, err := c.writeMachine(ctx, cached, p.Machine)
		if err != nil {
			return workqueue.Result{}, err
		}
		obs.Machine = cur
		out := c.create(ctx, cur, obs.Class, secret)
		p = planCreateOutcome(obs, out, &c.opts)
		if out.FailedOp == "" {
			logger.Info("VM created or adopted", "providerID", out.ProviderID, "node", out.NodeName)
		}
		cached = cur
	}
	if p.Kind == planWaitForClass {
		c.classQueue.Add(cached.Namespace + "/" + cached.Spec.Class.Name)
	}
	written, err := c.writeMachine(ctx, cached, p.Machine)
	if err != nil {
		return workqueue.Result{}, err
	}
	c.recordEvent(written, p.Event)
	if p.MarkedFailed {
		c.noteFailed(obs.Budget.Deployment, key)
		logger.Info("Machine marked Failed by the health timeout")
	}
	labels := metricLabels(written)
	if p.Joined > 0 {
		c.metrics.join.WithLabelValues(labels...).Observe(p.Joined.Seconds())
	}
	if p.FailedJoin {
		c.metrics.failedJoins.WithLabelValues(labels...).Inc()
	}
	if p.Node != nil {
		if err := c.patchNode(ctx, obs.Node, p.Node); err != nil {
			return workqueue.Result{}, err
		}
	}
	if p.Retry != retryNone {
		delay := c.opts.retryDelay(p.Retry, c.failures.inc(key))
		logger.V(2).Info("Retrying after failure", "after", delay, "description", written.Status.LastOperation.Description)
		return workqueue.Result{RequeueAfter: delay}, nil
	}
	if p.Kind != planBadInput {
		c.failures.reset(key)
	}
	return workqueue.Result{RequeueAfter: p.RequeueAfter}, nil
}

// observe collects what planning a machine needs. It returns the merged
// secret (with placeholders substituted) separately, since plans do not
// need its contents.
func (c *Controller) observe(ctx context.Context, m *v1alpha1.Machine) (observation, *corev1.Secret) {
	obs := observation{
		Now:              c.opts.Clock.Now(),
		Machine:          m,
		Config:           v1alpha1.EffectiveMachineConfiguration(m, &c.opts.Machine),
		HasTarget:        c.target != nil,
		ValidationErrors: validation.ValidateMachine(m),
	}
	if c.opts.SafetyGate != nil {
		obs.Frozen = c.opts.SafetyGate.Frozen(ctx)
	}
	var secret *corev1.Secret
	if needsCreate(m) && m.Spec.Class.Name != "" {
		if class, err := c.classes.MachineClasses(m.Namespace).Get(m.Spec.Class.Name); err == nil {
			obs.Class = class
			obs.ClassErrors = validation.ValidateMachineClass(class)
			secret, obs.SecretReason, obs.SecretProblem = c.resolveSecret(class)
			if secret != nil {
				secret = withPlaceholders(secret, m.Name)
			}
		}
	}
	if c.nodes != nil {
		if name := nodeNameOf(m); name != "" {
			if n, err := c.nodes.Get(name); err == nil {
				obs.Node = n
			}
		}
	}
	if m.Status.CurrentStatus.Phase == v1alpha1.MachineUnknown {
		obs.Budget = c.budget(m, obs.Now)
	}
	return obs, secret
}

// resolveSecret merges the class's secrets. It returns a problem
// description (and its event reason) when a secret is missing or lacks
// userData.
func (c *Controller) resolveSecret(class *v1alpha1.MachineClass) (*corev1.Secret, string, string) {
	get := func(ref *corev1.SecretReference) (*corev1.Secret, string) {
		if ref == nil {
			return nil, ""
		}
		ns := secretNamespace(ref, class)
		s, err := c.secrets.Secrets(ns).Get(ref.Name)
		if err != nil {
			return nil, fmt.Sprintf("Secret %s/%s referenced by MachineClass %q not found", ns, ref.Name, class.Name)
		}
		return s, ""
	}
	if class.SecretRef == nil && class.CredentialsSecretRef == nil {
		return nil, ReasonSecretNotFound, fmt.Sprintf("MachineClass %q references no secret", class.Name)
	}
	userData, problem := get(class.SecretRef)
	if problem != "" {
		return nil, ReasonSecretNotFound, problem
	}
	creds, problem := get(class.CredentialsSecretRef)
	if problem != "" {
		return nil, ReasonSecretNotFound, problem
	}
	merged := driver.MergeSecrets(userData, creds)
	if len(merged.Data[v1alpha1.UserDataKey]) == 0 {
		return nil, ReasonSecretInvalid, fmt.Sprintf("Secret data of MachineClass %q has no %s", class.Name, v1alpha1.UserDataKey)
	}
	return merged, "", ""
}

// withPlaceholders substitutes the machine name into the user data of a
// merged secret (which is already a private copy).
func withPlaceholders(s *corev1.Secret, machineName string) *corev1.Secret {
	ud := string(s.Data[v1alpha1.UserDataKey])
	ud = strings.ReplaceAll(ud, v1alpha1.MachineNamePlaceholder, machineName)
	ud = strings.ReplaceAll(ud, "%3C%3CMACHINE_NAME%3E%3E", machineName)
	s.Data[v1alpha1.UserDataKey] = []byte(ud)
	return s
}

// create runs the creation flow: GetMachineStatus first, so that a VM that
// exists (from an earlier attempt whose result was lost) is adopted, never
// created twice; CreateMachine only on NotFound; InitializeMachine when the
// VM needs it.
func (c *Controller) create(ctx context.Context, m *v1alpha1.Machine, class *v1alpha1.MachineClass, secret *corev1.Secret) createOutcome {
	labels := metricLabels(m)
	status, err := c.driver.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: m, MachineClass: class, Secret: secret})
	var out createOutcome
	needInit := false
	switch code := driver.CodeOf(err); code {
	case driver.OK:
		out.ProviderID, out.NodeName, out.Addresses = status.ProviderID, status.NodeName, status.Addresses
	case driver.Uninitialized:
		needInit = true
		if status != nil {
			out.ProviderID, out.NodeName, out.Addresses = status.ProviderID, status.NodeName, status.Addresses
		}
	case driver.NotFound, driver.Unimplemented:
		start := c.opts.Clock.Now()
		resp, err := c.driver.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: m, MachineClass: class, Secret: secret})
		if err != nil {
			return createOutcome{FailedOp: driver.OperationCreateMachine, Err: err}
		}
		c.metrics.create.WithLabelValues(labels...).Observe(c.opts.Clock.Since(start).Seconds())
		out = createOutcome{ProviderID: resp.ProviderID, NodeName: resp.NodeName, Addresses: resp.Addresses, LastKnownState: resp.LastKnownState}
		needInit = true // InitializeMachine is optional: Unimplemented skips it
	default:
		return createOutcome{FailedOp: driver.OperationGetMachineStatus, Err: err}
	}
	if needInit {
		start := c.opts.Clock.Now()
		resp, err := c.driver.InitializeMachine(ctx, &driver.InitializeMachineRequest{Machine: m, MachineClass: class, Secret: secret})
		switch driver.CodeOf(err) {
		case driver.OK:
			c.metrics.initialize.WithLabelValues(labels...).Observe(c.opts.Clock.Since(start).Seconds())
			if resp.ProviderID != "" {
				out.ProviderID = resp.ProviderID
			}
			if resp.NodeName != "" {
				out.NodeName = resp.NodeName
			}
			if len(resp.Addresses) > 0 {
				out.Addresses = resp.Addresses
			}
		case driver.Unimplemented:
		default:
			return createOutcome{FailedOp: driver.OperationInitializeMachine, Err: err}
		}
	}
	switch {
	case out.ProviderID == "":
		return createOutcome{FailedOp: driver.OperationCreateMachine, Err: driver.NewError(driver.Internal, "driver returned no provider ID")}
	case c.target != nil && out.NodeName == "":
		return createOutcome{FailedOp: driver.OperationCreateMachine, Err: driver.NewError(driver.Internal, "driver returned no node name")}
	}
	if c.nodes != nil {
		if n, err := c.nodes.Get(out.NodeName); err == nil {
			if owner := n.Labels[v1alpha1.MachineNameLabelKey]; owner != "" && owner != m.Name {
				// A node of that name belongs to another machine: the new VM
				// would take it over. Delete the VM; the machine is Failed
				// and will be replaced.
				vm := m.DeepCopy()
				vm.Spec.ProviderID = out.ProviderID
				if _, err := c.driver.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: vm, MachineClass: class, Secret: secret}); err != nil {
					return createOutcome{FailedOp: driver.OperationDeleteMachine, Err: err}
				}
				out.StaleNodeOwner = owner
			}
		}
	}
	return out
}

// budget computes the replacement budget of m's deployment.
func (c *Controller) budget(m *v1alpha1.Machine, now time.Time) replacementBudget {
	d := m.Labels[v1alpha1.MachineDeploymentNameLabelKey]
	if d == "" {
		return replacementBudget{Max: 1}
	}
	dkey := m.Namespace + "/" + d
	objs, _ := c.machineIdx.ByIndex(indexMachineByDeployment, dkey)
	inFlight := map[string]bool{}
	for _, o := range objs {
		s := o.(*v1alpha1.Machine)
		if s.DeletionTimestamp != nil || s.Status.CurrentStatus.Phase == v1alpha1.MachineFailed {
			inFlight[keyOf(s)] = true
		}
	}
	present := map[string]bool{}
	for _, o := range objs {
		present[keyOf(o)] = true
	}
	for k, at := range c.recentFailed[dkey] {
		if !present[k] || now.Sub(at) > time.Minute {
			delete(c.recentFailed[dkey], k)
			continue
		}
		inFlight[k] = true
	}
	maxN, _ := resolveMaxReplacements(c.opts.MaxReplacements, len(objs)) // validated in complete
	return replacementBudget{Deployment: d, InFlight: len(inFlight), Max: maxN}
}

func (c *Controller) noteFailed(deployment, key string) {
	if deployment == "" {
		return
	}
	ns, _, _ := cache.SplitMetaNamespaceKey(key)
	dkey := ns + "/" + deployment
	if c.recentFailed[dkey] == nil {
		c.recentFailed[dkey] = map[string]time.Time{}
	}
	c.recentFailed[dkey][key] = c.opts.Clock.Now()
}

// nodeNameOf returns the name of the machine's node from its label.
func nodeNameOf(m *v1alpha1.Machine) string { return m.Labels[v1alpha1.NodeLabelKey] }

// patchNode writes the labels, annotations and taints of desired, guarded by
// the node's resourceVersion.
func (c *Controller) patchNode(ctx context.Context, cur, desired *corev1.Node) error {
	pick := func(n *corev1.Node) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"labels": toJSONValue(n.Labels), "annotations": toJSONValue(n.Annotations)},
			"spec":     map[string]any{"taints": toJSONValue(n.Spec.Taints)},
		}
	}
	patch, err := guardedPatch(pick(cur), pick(desired), cur.ResourceVersion)
	if err != nil || patch == nil {
		return err
	}
	if _, err := c.target.CoreV1().Nodes().Patch(ctx, cur.Name, mergePatchType, patch, patchOptions(c.opts.FieldManager)); err != nil {
		return fmt.Errorf("syncing node template to node %s: %w", cur.Name, err)
	}
	logr.FromContextOrDiscard(ctx).V(2).Info("Synced node template to node", "node", cur.Name)
	return nil
}

func (c *Controller) recordEvent(m *v1alpha1.Machine, e *event) {
	if e == nil || c.opts.Recorder == nil {
		return
	}
	c.opts.Recorder.Eventf(m, e.Type, e.Reason, "%s", e.Message)
}

// classSecretRefs returns the "namespace/name" keys of the class's secrets.
func classSecretRefs(cl *v1alpha1.MachineClass) []string {
	var out []string
	for _, ref := range []*corev1.SecretReference{cl.SecretRef, cl.CredentialsSecretRef} {
		if ref == nil || ref.Name == "" {
			continue
		}
		out = append(out, secretNamespace(ref, cl)+"/"+ref.Name)
	}
	return out
}

// secretNamespace is the namespace of a class's secret reference: the
// class's own unless the reference names one.
func secretNamespace(ref *corev1.SecretReference, cl *v1alpha1.MachineClass) string {
	if ref.Namespace != "" {
		return ref.Namespace
	}
	return cl.Namespace
}
