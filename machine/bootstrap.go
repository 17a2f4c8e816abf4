package machine

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/machine/internal/bootstraptoken"
)

// Bootstrap tokens, as MCM issues them: when a machine's user data asks for
// one with <<BOOTSTRAP_TOKEN>> and there is a target cluster, the creation
// flow has a token issued for the machine (a bootstrap.kubernetes.io/token
// Secret in the target's kube-system, see package bootstraptoken) and hands
// "<id>.<secret>" to the driver in the user data; the VM's kubelet joins
// with it. The token is revoked once the machine has joined, or when the
// machine is deleted before that.
const (
	// bootstrapTokenCleanupAnnotation on a Machine records (RFC 3339) that
	// deleting its bootstrap token failed when it joined: each later sync
	// tries again until it succeeds, then removes the annotation.
	bootstrapTokenCleanupAnnotation = "mcmkit.io/bootstrap-token-cleanup"

	// operationIssueBootstrapToken is the failed operation a creation
	// attempt reports when the bootstrap token could not be issued; no
	// driver call was made then.
	operationIssueBootstrapToken driver.Operation = "IssueBootstrapToken"
)

// tokenIssuer issues the bootstrap token a machine joins with, and revokes
// it. Its errors are driver errors whose code the creation flow reports
// and retries by.
type tokenIssuer interface {
	// Issue returns the machine's token, "<id>.<secret>": a new one that
	// expires ttl from now, or the machine's own if it is valid until
	// validUntil.
	Issue(ctx context.Context, m *v1alpha1.Machine, ttl time.Duration, validUntil time.Time) (string, error)
	// Revoke deletes the machine's tokens; none is no error.
	Revoke(ctx context.Context, m *v1alpha1.Machine) error
}

// bootstrapTokens is the issuer of the machines' tokens in the target
// cluster, with the controller's field manager, extra groups and clock; nil
// without a target cluster. It holds no state of its own.
func (c *Controller) bootstrapTokens() tokenIssuer {
	if c.target == nil {
		return nil
	}
	return &bootstraptoken.Issuer{Client: c.target, FieldManager: c.opts.FieldManager,
		ExtraGroups: c.opts.BootstrapTokenAuthExtraGroups, Clock: c.opts.Clock}
}

// withBootstrapToken returns the merged secret with a bootstrap token for m
// in its user data, when the user data asks for one and there is a target
// cluster; otherwise secret itself, and no API call is made. The secret is
// copied before it is changed.
func (c *Controller) withBootstrapToken(ctx context.Context, m *v1alpha1.Machine, secret *corev1.Secret) (*corev1.Secret, error) {
	if c.target == nil || secret == nil || !bootstraptoken.HasPlaceholder(secret.Data[v1alpha1.UserDataKey]) {
		return secret, nil
	}
	token, err := c.issueBootstrapToken(ctx, m)
	if err != nil {
		return nil, err
	}
	out := secret.DeepCopy()
	out.Data[v1alpha1.UserDataKey] = bootstraptoken.Substitute(out.Data[v1alpha1.UserDataKey], token)
	return out, nil
}

// issueBootstrapToken returns m's bootstrap token. It runs once per
// creation attempt. A new or renewed token lasts the machine's creation
// timeout; one that is there already is reused while it is valid until the
// machine's creation deadline (creation start plus creation timeout).
func (c *Controller) issueBootstrapToken(ctx context.Context, m *v1alpha1.Machine) (string, error) {
	timeout := v1alpha1.EffectiveMachineConfiguration(m, &c.opts.Machine).MachineCreationTimeout.Duration
	return c.bootstrapTokens().Issue(ctx, m, timeout, creationStart(m, c.opts.Clock.Now()).Add(timeout))
}

// ValidateBootstrapGroup checks an extra group of bootstrap tokens (see
// Options.BootstrapTokenAuthExtraGroups) against the rule of
// kube-apiserver's bootstrap token authenticator, which rejects the whole
// token if one group breaks it: "system:bootstrappers:", then up to 256 of
// [a-z0-9:-], ending in a letter or digit.
func ValidateBootstrapGroup(group string) error {
	return bootstraptoken.ValidateGroup(group)
}

// deleteBootstrapTokens revokes m's bootstrap tokens. Without a target
// cluster, or when m's class does not ask for a token, it makes no API
// call.
func (c *Controller) deleteBootstrapTokens(ctx context.Context, m *v1alpha1.Machine) error {
	if c.target == nil || !c.mayHaveBootstrapToken(m) {
		return nil
	}
	return c.bootstrapTokens().Revoke(ctx, m)
}

// mayHaveBootstrapToken reports whether m may have a bootstrap token: its
// class's user data asks for one, or an earlier deletion is pending. When
// the class or its secret cannot be read, it cannot tell, and says yes.
// A token outlives a class whose user data stopped asking for one after
// the machine's creation only until the token expires.
func (c *Controller) mayHaveBootstrapToken(m *v1alpha1.Machine) bool {
	if _, ok := m.Annotations[bootstrapTokenCleanupAnnotation]; ok || c.classes == nil || c.secrets == nil {
		return true
	}
	class, err := c.classes.MachineClasses(m.Namespace).Get(m.Spec.Class.Name)
	if err != nil {
		return true
	}
	secret, err := driver.ReadClassSecret(c.secrets, class)
	if err != nil {
		return true
	}
	return bootstraptoken.HasPlaceholder(secret.Data[v1alpha1.UserDataKey])
}

// cleanUpBootstrapTokens deletes m's bootstrap tokens once it has joined
// (joined: this sync wrote the transition to Running), after the
// transition is written, so that a failure never holds it up. A failure
// is recorded on the machine (bootstrapTokenCleanupAnnotation), so that the
// syncs after it, which see no join, try again; the error is returned for
// the work queue's backoff. The annotation goes once the tokens are gone.
func (c *Controller) cleanUpBootstrapTokens(ctx context.Context, m *v1alpha1.Machine, joined bool) error {
	_, pending := m.Annotations[bootstrapTokenCleanupAnnotation]
	if !joined && !pending {
		return nil
	}
	err := c.deleteBootstrapTokens(ctx, m)
	if (err != nil) == pending {
		return err // still pending, or done with nothing recorded
	}
	marked := m.DeepCopy()
	if err != nil {
		setAnnotation(marked, bootstrapTokenCleanupAnnotation, formatTime(c.opts.Clock.Now()))
	} else {
		deleteAnnotation(marked, bootstrapTokenCleanupAnnotation)
	}
	if _, werr := c.writeMachine(ctx, m, marked); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}
