package machine

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/internal/patch"
)

// Bootstrap tokens, as MCM issues them: when a machine's user data asks for
// one with <<BOOTSTRAP_TOKEN>> and there is a target cluster, the creation
// flow puts a bootstrap.kubernetes.io/token Secret for the machine into the
// target's kube-system and hands "<id>.<secret>" to the driver in the user
// data; the VM's kubelet joins with it. The Secret is deleted once the
// machine has joined, or when the machine is deleted before that.
//
// The Secret's format is Kubernetes' (k8s.io/cluster-bootstrap, which this
// module does not depend on for these few names).
const (
	bootstrapTokenSecretType      corev1.SecretType = "bootstrap.kubernetes.io/token"
	bootstrapTokenSecretPrefix                      = "bootstrap-token-"
	bootstrapTokenIDKey                             = "token-id"
	bootstrapTokenSecretKey                         = "token-secret"
	bootstrapTokenExpirationKey                     = "expiration"
	bootstrapTokenUsageAuthKey                      = "usage-bootstrap-authentication"
	bootstrapTokenUsageSigningKey                   = "usage-bootstrap-signing"
	bootstrapTokenExtraGroupsKey                    = "auth-extra-groups"
	bootstrapTokenDescriptionKey                    = "description"
	// bootstrapGroupPrefix starts every extra group a bootstrap token may
	// carry: kube-apiserver's bootstrap token authenticator rejects a token
	// with any other group.
	bootstrapGroupPrefix = "system:bootstrappers:"

	// urlEncodedBootstrapTokenPlaceholder is url.QueryEscape of
	// v1alpha1.BootstrapTokenPlaceholder, as user data formats that URL-encode
	// their contents (Ignition) carry it.
	urlEncodedBootstrapTokenPlaceholder = "%3C%3CBOOTSTRAP_TOKEN%3E%3E"

	// bootstrapTokenMachineAnnotation on a token Secret names the machine
	// ("<namespace>/<name>") it was issued for. Token IDs of different
	// machines can be equal (see bootstrapTokenIDs), so the Secret's name
	// does not say whose it is; this does.
	bootstrapTokenMachineAnnotation = "mcmkit.io/machine"
	// bootstrapTokenCleanupAnnotation on a Machine records (RFC 3339) that
	// deleting its bootstrap token failed when it joined: each later sync
	// tries again until it succeeds, then removes the annotation.
	bootstrapTokenCleanupAnnotation = "mcmkit.io/bootstrap-token-cleanup"

	// operationIssueBootstrapToken is the failed operation a creation
	// attempt reports when the bootstrap token could not be issued; no
	// driver call was made then.
	operationIssueBootstrapToken driver.Operation = "IssueBootstrapToken"

	tokenSecretLength   = 16
	tokenSecretAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
)

// bootstrapTokenIDs returns the token IDs the machine's token may have, in
// the order they are tried; its Secret is bootstrap-token-<id>.
//
// The first is MCM's: the hex encoding of the last five bytes of the name,
// cut to six characters, so only the 5th-, 4th- and 3rd-last bytes count
// ("pool-abc12" and "pool-abc99" both give 616263). A token MCM created for
// a machine that was still being created when MCM was replaced is thereby
// found and reused. MCM's formula fails on names shorter than five bytes (it
// panics); for those the whole name is encoded and padded with zeros, which
// no MCM token can clash with since MCM never made one for such a name.
//
// Since machines of one MachineSet differ only in a five-character random
// suffix, two machines being created at once share MCM's ID now and then
// (about one pair in 20000). The second ID, from a hash of namespace and
// name, is for the machine that finds the first taken by another machine's
// token; the two IDs of one machine are never equal.
func bootstrapTokenIDs(m *v1alpha1.Machine) []string {
	first := mcmBootstrapTokenID(m.Name)
	sum := sha256.Sum256([]byte(m.Namespace + "/" + m.Name))
	second := hex.EncodeToString(sum[:3])
	if second == first {
		second = hex.EncodeToString(sum[3:6])
	}
	return []string{first, second}
}

// mcmBootstrapTokenID is MCM's token ID for a machine name (see
// bootstrapTokenIDs), defined for names of any length.
func mcmBootstrapTokenID(name string) string {
	b := []byte(name)
	id := hex.EncodeToString(b[max(0, len(b)-5):])
	if len(id) < 6 {
		id += strings.Repeat("0", 6-len(id))
	}
	return id[:6]
}

// hasBootstrapTokenPlaceholder reports whether user data asks for a
// bootstrap token, plainly or URL-encoded.
func hasBootstrapTokenPlaceholder(userData []byte) bool {
	return bytes.Contains(userData, []byte(v1alpha1.BootstrapTokenPlaceholder)) ||
		bytes.Contains(userData, []byte(urlEncodedBootstrapTokenPlaceholder))
}

// substituteBootstrapToken replaces both forms of the placeholder: the
// plain one with token, the URL-encoded one with token URL-encoded.
func substituteBootstrapToken(userData []byte, token string) []byte {
	s := strings.ReplaceAll(string(userData), v1alpha1.BootstrapTokenPlaceholder, token)
	s = strings.ReplaceAll(s, urlEncodedBootstrapTokenPlaceholder, url.QueryEscape(token))
	return []byte(s)
}

// withBootstrapToken returns the merged secret with a bootstrap token for m
// in its user data, when the user data asks for one and there is a target
// cluster; otherwise secret itself, and no API call is made. The secret is
// copied before it is changed.
func (c *Controller) withBootstrapToken(ctx context.Context, m *v1alpha1.Machine, secret *corev1.Secret) (*corev1.Secret, error) {
	if c.target == nil || secret == nil || !hasBootstrapTokenPlaceholder(secret.Data[v1alpha1.UserDataKey]) {
		return secret, nil
	}
	token, err := c.issueBootstrapToken(ctx, m)
	if err != nil {
		return nil, err
	}
	out := secret.DeepCopy()
	out.Data[v1alpha1.UserDataKey] = substituteBootstrapToken(out.Data[v1alpha1.UserDataKey], token)
	return out, nil
}

// issueBootstrapToken returns "<id>.<secret>" of m's bootstrap token,
// creating its Secret if there is none. It runs once per creation attempt:
// Create first, and on AlreadyExists a read of the Secret that is there.
//
//   - A token of another machine (or any Secret not issued for m) is
//     never handed out: the next ID is tried. Should the first ID be free
//     again at a later attempt, m gets a second token under it; both are
//     m's and both go when m joins (deleteBootstrapTokens).
//   - A token of m is reused as it is while it is valid until m's creation
//     deadline (creation start plus creation timeout). One that expired,
//     or expires before that deadline (MCM's, from before a switch-over;
//     one issued before the timeout was raised), is renewed in place: a new
//     expiration, the secret kept. Renewing rather than replacing it keeps
//     a VM that already has it in its user data (an earlier attempt whose
//     answer was lost, adopted in this one) able to join, and gives the
//     token to nobody who did not have it before.
func (c *Controller) issueBootstrapToken(ctx context.Context, m *v1alpha1.Machine) (string, error) {
	now := c.opts.Clock.Now()
	timeout := v1alpha1.EffectiveMachineConfiguration(m, &c.opts.Machine).MachineCreationTimeout.Duration
	deadline := creationStart(m).Add(timeout)
	var taken []string
	for _, id := range bootstrapTokenIDs(m) {
		s, created, err := c.getOrCreateBootstrapToken(ctx, m, id, now.Add(timeout))
		if err != nil {
			return "", err
		}
		if created {
			logr.FromContextOrDiscard(ctx).V(1).Info("Created bootstrap token", "secret", metav1.NamespaceSystem+"/"+s.Name)
			return tokenOf(s), nil
		}
		if !ownsBootstrapToken(s, m) {
			taken = append(taken, s.Name+" ("+describeTokenOwner(s)+")")
			continue
		}
		problem := bootstrapTokenProblem(s, id, now, deadline)
		if problem == "" {
			return tokenOf(s), nil
		}
		renewed, err := c.renewBootstrapToken(ctx, m, s, id, now.Add(timeout))
		if err != nil {
			return "", err
		}
		logr.FromContextOrDiscard(ctx).Info("Renewed bootstrap token", "secret", metav1.NamespaceSystem+"/"+s.Name, "reason", problem)
		return tokenOf(renewed), nil
	}
	// Aborted, not ResourceExhausted: the cluster-autoscaler would take the
	// latter for a node group out of capacity. The other machines' tokens
	// go when they join, so a retry soon is likely to succeed.
	return "", driver.Errorf(driver.Aborted, "cannot issue a bootstrap token for machine %s/%s: the Secrets of its token IDs belong to others: %s; retrying",
		m.Namespace, m.Name, strings.Join(taken, ", "))
}

// getOrCreateBootstrapToken creates the token Secret with the given ID for
// m, or reads the one that is there; created tells which.
func (c *Controller) getOrCreateBootstrapToken(ctx context.Context, m *v1alpha1.Machine, id string, expiry time.Time) (*corev1.Secret, bool, error) {
	secret, err := randomTokenSecret()
	if err != nil {
		return nil, false, driver.Errorf(driver.Internal, "generating a bootstrap token secret: %w", err)
	}
	fresh := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: bootstrapTokenSecretPrefix + id, Namespace: metav1.NamespaceSystem,
			Annotations: map[string]string{bootstrapTokenMachineAnnotation: m.Namespace + "/" + m.Name},
		},
		Type: bootstrapTokenSecretType,
		Data: c.bootstrapTokenData(m, id, secret, expiry),
	}
	secrets := c.target.CoreV1().Secrets(metav1.NamespaceSystem)
	// Twice at most: a Secret deleted between the failed Create and the
	// read (its machine joined) leaves the name free for a second Create.
	for range 2 {
		s, err := secrets.Create(ctx, fresh, metav1.CreateOptions{FieldManager: c.opts.FieldManager})
		if err == nil {
			return s, true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, false, tokenAPIError(err, "creating bootstrap token Secret %s/%s in the target cluster", metav1.NamespaceSystem, fresh.Name)
		}
		s, err = secrets.Get(ctx, fresh.Name, metav1.GetOptions{})
		if err == nil {
			return s, false, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, false, tokenAPIError(err, "reading bootstrap token Secret %s/%s in the target cluster", metav1.NamespaceSystem, fresh.Name)
		}
	}
	return nil, false, driver.Errorf(driver.Aborted, "bootstrap token Secret %s/%s in the target cluster is being created and deleted by others; retrying", metav1.NamespaceSystem, fresh.Name)
}

// renewBootstrapToken rewrites m's token s: a new expiration, the current
// extra groups, the ownership annotation, and the secret kept unless it is
// malformed. The patch is guarded by s's resourceVersion.
func (c *Controller) renewBootstrapToken(ctx context.Context, m *v1alpha1.Machine, s *corev1.Secret, id string, expiry time.Time) (*corev1.Secret, error) {
	secret := string(s.Data[bootstrapTokenSecretKey])
	if !validTokenSecret(secret) {
		var err error
		if secret, err = randomTokenSecret(); err != nil {
			return nil, driver.Errorf(driver.Internal, "generating a bootstrap token secret: %w", err)
		}
	}
	desired := s.DeepCopy()
	if desired.Annotations == nil {
		desired.Annotations = map[string]string{}
	}
	desired.Annotations[bootstrapTokenMachineAnnotation] = m.Namespace + "/" + m.Name
	desired.Data = c.bootstrapTokenData(m, id, secret, expiry)
	fields := func(s *corev1.Secret) patch.Fields {
		return patch.Fields{"metadata": patch.Fields{"annotations": s.Annotations}, "data": s.Data}
	}
	data, err := patch.Diff(fields, s, desired, s.ResourceVersion)
	if err != nil {
		return nil, driver.Errorf(driver.Internal, "renewing bootstrap token Secret %s/%s: %w", metav1.NamespaceSystem, s.Name, err)
	}
	renewed, err := patch.Send(ctx, c.target.CoreV1().Secrets(metav1.NamespaceSystem).Patch, s.Name, data, c.opts.FieldManager)
	if err != nil {
		return nil, tokenAPIError(err, "renewing bootstrap token Secret %s/%s in the target cluster", metav1.NamespaceSystem, s.Name)
	}
	return renewed, nil
}

// bootstrapTokenData is the data of m's token: usable to authenticate (as
// system:bootstrap:<id>, in system:bootstrappers and the extra groups) and
// to sign the cluster-info ConfigMap, as MCM's tokens are.
func (c *Controller) bootstrapTokenData(m *v1alpha1.Machine, id, secret string, expiry time.Time) map[string][]byte {
	data := map[string][]byte{
		bootstrapTokenDescriptionKey:  fmt.Appendf(nil, "Bootstrap token for machine %q in namespace %q, deleted once the machine has joined the cluster.", m.Name, m.Namespace),
		bootstrapTokenIDKey:           []byte(id),
		bootstrapTokenSecretKey:       []byte(secret),
		bootstrapTokenExpirationKey:   []byte(expiry.UTC().Format(time.RFC3339)),
		bootstrapTokenUsageAuthKey:    []byte("true"),
		bootstrapTokenUsageSigningKey: []byte("true"),
	}
	if groups := c.opts.BootstrapTokenAuthExtraGroups; len(groups) > 0 {
		data[bootstrapTokenExtraGroupsKey] = []byte(strings.Join(groups, ","))
	}
	return data
}

// ownsBootstrapToken reports whether s is a bootstrap token issued for m.
// Ours carry bootstrapTokenMachineAnnotation. MCM's carry no mark but their
// description, which names the machine in Go's quoted form ("for machine
// \"<name>\""); a token without our annotation is m's only if its
// description says so. Anything else (a token of another machine, one made
// by kubeadm or by hand, a Secret of another type) is not m's: it is
// neither handed to m nor deleted for m.
func ownsBootstrapToken(s *corev1.Secret, m *v1alpha1.Machine) bool {
	if s.Type != bootstrapTokenSecretType {
		return false
	}
	if owner, ok := s.Annotations[bootstrapTokenMachineAnnotation]; ok {
		return owner == m.Namespace+"/"+m.Name
	}
	return strings.Contains(string(s.Data[bootstrapTokenDescriptionKey]), "machine "+strconv.Quote(m.Name))
}

// describeTokenOwner says whose s is, for error messages.
func describeTokenOwner(s *corev1.Secret) string {
	if s.Type != bootstrapTokenSecretType {
		return fmt.Sprintf("a Secret of type %q", s.Type)
	}
	if owner, ok := s.Annotations[bootstrapTokenMachineAnnotation]; ok {
		return "machine " + owner
	}
	if d := s.Data[bootstrapTokenDescriptionKey]; len(d) > 0 {
		return fmt.Sprintf("a token described as %q", d)
	}
	return "a token of unknown origin"
}

// bootstrapTokenProblem says why m's token s (of the given ID) cannot be
// handed out as it is, or "" if it can: it must be well-formed, usable for
// authentication and valid until deadline. A token without an expiration
// never expires.
func bootstrapTokenProblem(s *corev1.Secret, id string, now, deadline time.Time) string {
	switch {
	case string(s.Data[bootstrapTokenIDKey]) != id:
		return "its token-id does not match its name"
	case !validTokenSecret(string(s.Data[bootstrapTokenSecretKey])):
		return fmt.Sprintf("its token-secret is not %d characters of [0-9a-z]", tokenSecretLength)
	case string(s.Data[bootstrapTokenUsageAuthKey]) != "true":
		return "it is not usable for authentication"
	}
	raw, ok := s.Data[bootstrapTokenExpirationKey]
	if !ok {
		return ""
	}
	// The authenticator treats an unreadable expiration as expired.
	expiry, err := time.Parse(time.RFC3339, string(raw))
	switch {
	case err != nil:
		return fmt.Sprintf("its expiration %q is not RFC 3339", raw)
	case !expiry.After(now):
		return "it expired at " + expiry.UTC().Format(time.RFC3339)
	case expiry.Before(deadline.Truncate(time.Second)): // RFC 3339 as written has whole seconds
		return "it expires at " + expiry.UTC().Format(time.RFC3339) + ", before the machine's creation timeout ends"
	}
	return ""
}

func tokenOf(s *corev1.Secret) string {
	return string(s.Data[bootstrapTokenIDKey]) + "." + string(s.Data[bootstrapTokenSecretKey])
}

func validTokenSecret(s string) bool {
	if len(s) != tokenSecretLength {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune(tokenSecretAlphabet, r) {
			return false
		}
	}
	return true
}

// randomTokenSecret returns tokenSecretLength characters of
// tokenSecretAlphabet from crypto/rand, each equally likely.
func randomTokenSecret() (string, error) {
	// Bytes at or above the largest multiple of the alphabet's size are
	// dropped, so that the modulo does not favour the first characters.
	const limit = 256 / len(tokenSecretAlphabet) * len(tokenSecretAlphabet)
	out := make([]byte, 0, tokenSecretLength)
	buf := make([]byte, 2*tokenSecretLength)
	for len(out) < tokenSecretLength {
		if _, err := rand.Read(buf); err != nil {
			return "", err
		}
		for _, b := range buf {
			if int(b) < limit && len(out) < tokenSecretLength {
				out = append(out, tokenSecretAlphabet[int(b)%len(tokenSecretAlphabet)])
			}
		}
	}
	return string(out), nil
}

// ValidateBootstrapGroup checks an extra group of bootstrap tokens (see
// Options.BootstrapTokenAuthExtraGroups) against
// the rule of kube-apiserver's bootstrap token authenticator, which rejects
// the whole token if one group breaks it: "system:bootstrappers:", then up
// to 256 of [a-z0-9:-], ending in a letter or digit.
func ValidateBootstrapGroup(group string) error {
	rest, ok := strings.CutPrefix(group, bootstrapGroupPrefix)
	valid := ok && rest != "" && len(rest) <= 256 &&
		strings.ContainsRune("abcdefghijklmnopqrstuvwxyz0123456789", rune(rest[len(rest)-1]))
	for _, r := range rest {
		valid = valid && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == ':' || r == '-')
	}
	if !valid {
		return fmt.Errorf("%q is not a bootstrap token group: it must be %q followed by lowercase letters, digits, ':' or '-' (at most 256), ending in a letter or digit", group, bootstrapGroupPrefix)
	}
	return nil
}

// deleteBootstrapTokens deletes m's bootstrap tokens (there can be two, one
// per ID, when the first ID was taken at one attempt and free at a later
// one). A Secret that is gone counts as deleted; one that belongs to
// another machine is left alone, and each deletion is guarded by the UID and
// resourceVersion of the Secret whose ownership was checked. Without a
// target cluster, or when m's class does not ask for a token, it makes no
// API call.
func (c *Controller) deleteBootstrapTokens(ctx context.Context, m *v1alpha1.Machine) error {
	if c.target == nil || !c.mayHaveBootstrapToken(m) {
		return nil
	}
	secrets := c.target.CoreV1().Secrets(metav1.NamespaceSystem)
	var errs []error
	for _, id := range bootstrapTokenIDs(m) {
		name := bootstrapTokenSecretPrefix + id
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading bootstrap token Secret %s/%s in the target cluster: %w", metav1.NamespaceSystem, name, err))
			continue
		}
		if !ownsBootstrapToken(s, m) {
			continue
		}
		err = secrets.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID, ResourceVersion: &s.ResourceVersion}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting bootstrap token Secret %s/%s in the target cluster: %w", metav1.NamespaceSystem, name, err))
			continue
		}
		logr.FromContextOrDiscard(ctx).V(1).Info("Deleted bootstrap token", "secret", metav1.NamespaceSystem+"/"+name)
	}
	return errors.Join(errs...)
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
	return hasBootstrapTokenPlaceholder(secret.Data[v1alpha1.UserDataKey])
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

// tokenAPIError classifies a failed API call of the token flow by a driver
// code, as status.lastOperation.errorCode shows it and the retry delay
// follows it: PermissionDenied for RBAC (medium), Unavailable for an API
// server out of reach (short), and so on.
func tokenAPIError(err error, format string, args ...any) error {
	code := driver.Unknown
	switch {
	case errors.Is(err, context.Canceled):
		code = driver.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = driver.DeadlineExceeded
	case apierrors.IsForbidden(err):
		code = driver.PermissionDenied
	case apierrors.IsUnauthorized(err):
		code = driver.Unauthenticated
	case apierrors.IsConflict(err):
		code = driver.Aborted
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		code = driver.InvalidArgument
	case apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsTooManyRequests(err), utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err),
		utilnet.IsProbableEOF(err):
		code = driver.Unavailable
	}
	return driver.Errorf(code, format+": %w", append(args, err)...)
}
