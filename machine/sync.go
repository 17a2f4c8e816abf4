package machine

import (
	"context"
	"fmt"
	"slices"
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
		c.writes.Forget(key)
		c.finalized.Delete(key)
		c.failures.reset(key)
		return workqueue.Result{}, nil
	}
	if err != nil {
		return workqueue.Result{}, fmt.Errorf("getting machine %s: %w", key, err)
	}
	if !c.finalized.Satisfied(key) {
		// Gone; the cache does not know yet. Its deletion event, or a new
		// machine of the same name after it, ends the wait.
		return workqueue.Result{}, nil
	}
	if !c.writes.Observed(key, cached.ResourceVersion) {
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
	key := workqueue.KeyOf(cached)
	obs, secret := c.observe(ctx, cached)
	p := planMachine(obs, &c.opts)
	if p.MarkedFailed {
		// Only a machine the plan would replace takes a slot of the gate.
		ok, why := c.gate.MayReplace(ctx, cached)
		if !ok {
			obs.ReplacementDenied = why
			p = planMachine(obs, &c.opts)
		}
	}
	logger := logr.FromContextOrDiscard(ctx)
	logger.V(4).Info("Planned", "plan", p.Kind, "phase", cached.Status.CurrentStatus.Phase)

	if p.Kind == planVerify {
		if err := c.verify(ctx, cached, obs.Class, secret); err != nil {
			return workqueue.Result{}, err // retried with the queue's backoff
		}
		obs.Vouch, obs.Vouched = c.vouches.get(cached)
		p = planMachine(obs, &c.opts)
		logger.V(2).Info("Asked the driver for the machine's VM", "plan", p.Kind)
	}
	c.reportClaim(ctx, cached, p.Claim)

	if p.Kind == planCreate {
		release, wait := c.takeCreationSlot(ctx, key)
		if release == nil {
			return workqueue.Result{RequeueAfter: wait}, nil
		}
		defer release()
		// The finalizer must be stored before a VM can exist; the
		// creation start goes with it. A machine created with the
		// finalizer (by a MachineSet) records its creation start with
		// the VM's provider ID instead, one write fewer: until then its
		// creation timeout counts from its creation timestamp, and its
		// deletion asks the driver for a VM (see lookUpNodeName).
		cur := cached
		if !slices.Contains(cached.Finalizers, v1alpha1.MachineFinalizer) {
			var err error
			if cur, err = c.writeMachine(ctx, cached, p.Machine); err != nil {
				return workqueue.Result{}, err
			}
			obs.Machine = cur
		} else {
			obs.Machine = p.Machine
		}
		out := c.create(ctx, obs.Machine, obs.Class, secret)
		p = planCreateOutcome(obs, out, &c.opts)
		c.reportClaim(ctx, cur, p.Claim)
		if out.FailedOp == "" {
			logger.Info("VM created or adopted", "providerID", out.ProviderID, "node", out.NodeName)
		}
		cached = cur
		if joined, ok, err := c.joinedAtOnce(ctx, cur, obs, p); err != nil {
			return workqueue.Result{}, err
		} else if ok {
			cached, p, obs.Node = joined.cached, joined.plan, joined.node
		}
	}
	if p.Kind == planWaitForClass {
		c.classQueue.Add(classKeyOf(cached))
	}
	written, err := c.writeMachine(ctx, cached, p.Machine)
	if p.MarkedFailed {
		c.gate.Replaced(ctx, cached, err == nil)
	}
	if err != nil {
		return workqueue.Result{}, err
	}
	c.recordEvent(written, p.Event)
	if p.MarkedFailed {
		logger.Info("Machine marked Failed by the health timeout")
	}
	labels := c.metricLabels(written)
	if p.Joined > 0 {
		c.metrics.join.WithLabelValues(labels...).Observe(p.Joined.Seconds())
	}
	// After the join is written, so that a failure never holds it up.
	tokenErr := c.cleanUpBootstrapTokens(ctx, written, p.Joined > 0)
	if p.FailedJoin {
		c.metrics.failedJoins.WithLabelValues(labels...).Inc()
	}
	if p.Node != nil {
		if err := c.patchNode(ctx, obs.Node, p.Node); err != nil {
			return workqueue.Result{}, err
		}
	}
	if p.Retry != retryNone {
		// The worker reports p.Err; the machine's own backoff paces it.
		delay := c.opts.retryDelay(p.Retry, c.failures.inc(key))
		if p.TimeoutIn > 0 {
			delay = min(delay, p.TimeoutIn)
		}
		logger.V(2).Info("Retrying after failure", "after", delay, "description", written.Status.LastOperation.Description)
		return workqueue.Result{RequeueAfter: delay}, p.Err
	}
	if p.Kind != planBadInput {
		c.failures.reset(key)
	}
	if tokenErr != nil {
		return workqueue.Result{}, tokenErr // retried with the queue's backoff
	}
	return workqueue.Result{RequeueAfter: p.RequeueAfter}, nil
}

// joinedPlan is a machine stored with its VM's metadata, and the plan of
// its status from there.
type joinedPlan struct {
	cached *v1alpha1.Machine
	plan   machinePlan
	node   *corev1.Node // as observed, nil if not
}

// joinedAtOnce writes the metadata of a VM just created (provider ID,
// node label, priority), and plans the machine's status from there: if
// the node is in the cache by now — with drivers that wait for the node
// to register, it is — and Ready, the machine goes straight to Running
// and the node is synced in the same sync; if not, a first creation
// leaves the status alone for Options.PendingDelay, in which the node's
// arrival takes the machine to Running with one status write instead of
// two. ok is false when it did nothing (no target cluster, or the
// creation failed).
func (c *Controller) joinedAtOnce(ctx context.Context, cur *v1alpha1.Machine, obs observation, created machinePlan) (joinedPlan, bool, error) {
	m := created.Machine
	if c.nodes == nil || created.Retry != retryNone || m.Status.CurrentStatus.Phase != v1alpha1.MachinePending {
		return joinedPlan{}, false, nil
	}
	metaOnly := m.DeepCopy()
	metaOnly.Status = cur.Status
	written, err := c.writeMachine(ctx, cur, metaOnly)
	if err != nil {
		return joinedPlan{}, false, err
	}
	next := written.DeepCopy()
	if cur.Status.CurrentStatus.Phase != "" {
		// A creation after a failed one says Pending at once, so that the
		// failure does not stay on the machine.
		next.Status = m.Status
	}
	out := joinedPlan{cached: written, plan: created}
	out.plan.Machine = next
	node, stale := c.cachedNode(nodeNameOf(next))
	if node != nil || next.Status.CurrentStatus.Phase == "" {
		obs.Now, obs.Machine, obs.Node, obs.NodeStale = c.opts.Clock.Now(), next, node, stale
		obs.Vouch, obs.Vouched = c.vouches.get(next)
		obs.Rivals = c.rivalsOf(next)
		if q := planMachine(obs, &c.opts); q.Kind == planUpdate {
			out.plan, out.node = q, node
		}
	}
	return out, true, nil
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
		if r, ok := c.opts.SafetyGate.(OutageReporter); ok {
			obs.OutageEnded = r.LastOutageEnd()
		}
	}
	obs.Node, obs.NodeStale = c.cachedNode(nodeNameOf(m))
	obs.Vouch, obs.Vouched = c.vouches.get(m)
	obs.Rivals = c.rivalsOf(m)
	b := bindingOf(m, obs.Node, obs.Vouch, obs.Vouched, obs.Rivals)
	var secret *corev1.Secret
	if m.Spec.Class.Name != "" {
		// The class's virtual capacity is synced to the node of every
		// machine; its validity and secrets matter only for driver calls.
		if class, err := c.classes.MachineClasses(m.Namespace).Get(m.Spec.Class.Name); err == nil {
			obs.Class = class
			if needsCreate(m) || b.Kind == bindForeign || b.Kind == bindUnverified {
				obs.ClassErrors = validation.ValidateMachineClass(class)
				secret, obs.SecretReason, obs.SecretProblem = c.resolveSecret(class)
				if secret != nil {
					secret = withPlaceholders(secret, m.Name)
				}
			}
		}
	}
	return obs, secret
}

// cachedNode returns the node of that name from the cache (nil when there
// is none, or no target cluster), and whether the cached copy does not
// show the controller's last write to it yet.
func (c *Controller) cachedNode(name string) (*corev1.Node, bool) {
	if c.nodes == nil || name == "" {
		return nil, false
	}
	n, err := c.nodes.Get(name)
	if err != nil {
		return nil, false
	}
	return n, !c.nodeWrites.Observed(n.Name, n.ResourceVersion)
}

// resolveSecret merges the class's secrets. It returns a problem
// description (and its event reason) when a secret is missing or lacks
// userData.
func (c *Controller) resolveSecret(class *v1alpha1.MachineClass) (*corev1.Secret, string, string) {
	merged, err := driver.ReadClassSecret(c.secrets, class)
	if err != nil {
		return nil, ReasonSecretNotFound, err.Error()
	}
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

// nodeNameOf returns the name of the machine's node from its label.
func nodeNameOf(m *v1alpha1.Machine) string { return m.Labels[v1alpha1.NodeLabelKey] }
