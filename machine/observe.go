package machine

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/api/machine/v1alpha1/validation"
	"github.com/mcmkit/mcm/driver"
)

// observe collects what planning a machine needs; it writes nothing. It
// reads the informer caches and the safety gate, and two answers only
// some syncs need: the driver's word on which VM backs the machine
// (GetMachineStatus by the machine's name) when the sync takes
// stepVerify, and the replacement gate's answer when the health timeout
// would mark the machine Failed (a yes holds a slot of the gate, which
// apply settles with Replaced). It returns the merged secret (with
// placeholders substituted) separately, since plans do not need its
// contents, and an error when the driver could not be asked.
func (c *Controller) observe(ctx context.Context, m *v1alpha1.Machine) (observation, *corev1.Secret, error) {
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
	if decide(obs).Step == stepVerify {
		if err := c.verify(ctx, m, obs.Class, secret); err != nil {
			return obs, secret, err
		}
		obs.Vouch, obs.Vouched = c.vouches.get(m)
		logr.FromContextOrDiscard(ctx).V(2).Info("Asked the driver for the machine's VM", "vouched", obs.Vouched)
	}
	if replacementDue(obs) {
		if ok, why := c.gate.MayReplace(ctx, m); !ok {
			obs.ReplacementDenied = why
		}
	}
	return obs, secret, nil
}

// observeCreated observes what planCreation needs after the creation
// flow, for the VM the driver named in out: the time, the node of that
// name (from the cache), and the claims on both. It reads only.
func (c *Controller) observeCreated(obs observation, out createOutcome) observation {
	after := obs
	after.Now = c.opts.Clock.Now()
	after.Node, after.NodeStale = nil, false
	if out.FailedOp != "" || !obs.HasTarget {
		return after
	}
	claimant := obs.Machine.DeepCopy()
	claimant.Spec.ProviderID = out.ProviderID
	setLabel(claimant, v1alpha1.NodeLabelKey, out.NodeName)
	after.Node, after.NodeStale = c.cachedNode(out.NodeName)
	after.Vouch, after.Vouched = c.vouches.get(claimant)
	after.Rivals = c.rivalsOf(claimant)
	return after
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
