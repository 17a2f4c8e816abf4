package bootstraptoken

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/internal/patch"
)

// Issuer issues and revokes machines' bootstrap tokens in a target
// cluster. It holds no state: every call reads what is in kube-system.
type Issuer struct {
	// Client is the target cluster's; required.
	Client kubernetes.Interface
	// FieldManager names the writer in the Secrets' managed fields.
	FieldManager string
	// ExtraGroups are the groups, besides system:bootstrappers, the
	// tokens carry (each checked by ValidateGroup beforehand).
	ExtraGroups []string
	// Clock tells the time of issue; nil means the real clock.
	Clock clock.PassiveClock
}

func (is *Issuer) now() time.Time {
	if is.Clock == nil {
		return time.Now()
	}
	return is.Clock.Now()
}

// Issue returns "<id>.<secret>" of m's bootstrap token, creating its
// Secret, to expire ttl from now, if there is none. It is called once per
// creation attempt: Create first, and on AlreadyExists a read of the
// Secret that is there.
//
//   - A token of another machine (or any Secret not issued for m) is
//     never handed out: the next ID is tried. Should the first ID be free
//     again at a later attempt, m gets a second token under it; both are
//     m's and both go when m joins (Revoke).
//   - A token of m is reused as it is while it is valid until validUntil
//     (the machine's creation deadline). One that expired, or expires
//     before then (MCM's, from before a switch-over; one issued before the
//     timeout was raised), is renewed in place: a new expiration, the
//     secret kept. Renewing rather than replacing it keeps a VM that
//     already has it in its user data (an earlier attempt whose answer was
//     lost, adopted in this one) able to join, and gives the token to
//     nobody who did not have it before.
func (is *Issuer) Issue(ctx context.Context, m *v1alpha1.Machine, ttl time.Duration, validUntil time.Time) (string, error) {
	now := is.now()
	var taken []string
	for _, id := range ids(m) {
		s, created, err := is.getOrCreate(ctx, m, id, now.Add(ttl))
		if err != nil {
			return "", err
		}
		if created {
			logr.FromContextOrDiscard(ctx).V(1).Info("Created bootstrap token", "secret", metav1.NamespaceSystem+"/"+s.Name)
			return tokenOf(s), nil
		}
		if !owns(s, m) {
			taken = append(taken, s.Name+" ("+describeOwner(s)+")")
			continue
		}
		why := problem(s, id, now, validUntil)
		if why == "" {
			return tokenOf(s), nil
		}
		renewed, err := is.renew(ctx, m, s, id, now.Add(ttl))
		if err != nil {
			return "", err
		}
		logr.FromContextOrDiscard(ctx).Info("Renewed bootstrap token", "secret", metav1.NamespaceSystem+"/"+s.Name, "reason", why)
		return tokenOf(renewed), nil
	}
	// Aborted, not ResourceExhausted: the cluster-autoscaler would take the
	// latter for a node group out of capacity. The other machines' tokens
	// go when they join, so a retry soon is likely to succeed.
	return "", driver.Errorf(driver.Aborted, "cannot issue a bootstrap token for machine %s/%s: the Secrets of its token IDs belong to others: %s; retrying",
		m.Namespace, m.Name, strings.Join(taken, ", "))
}

// getOrCreate creates the token Secret with the given ID for m, or reads
// the one that is there; created tells which.
func (is *Issuer) getOrCreate(ctx context.Context, m *v1alpha1.Machine, id string, expiry time.Time) (*corev1.Secret, bool, error) {
	secret, err := randomTokenSecret()
	if err != nil {
		return nil, false, driver.Errorf(driver.Internal, "generating a bootstrap token secret: %w", err)
	}
	fresh := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: secretPrefix + id, Namespace: metav1.NamespaceSystem,
			Annotations: map[string]string{machineAnnotation: m.Namespace + "/" + m.Name},
		},
		Type: secretType,
		Data: tokenData(m, id, secret, expiry, is.ExtraGroups),
	}
	secrets := is.Client.CoreV1().Secrets(metav1.NamespaceSystem)
	// Twice at most: a Secret deleted between the failed Create and the
	// read (its machine joined) leaves the name free for a second Create.
	for range 2 {
		s, err := secrets.Create(ctx, fresh, metav1.CreateOptions{FieldManager: is.FieldManager})
		if err == nil {
			return s, true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, false, apiError(err, "creating bootstrap token Secret %s/%s in the target cluster", metav1.NamespaceSystem, fresh.Name)
		}
		s, err = secrets.Get(ctx, fresh.Name, metav1.GetOptions{})
		if err == nil {
			return s, false, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, false, apiError(err, "reading bootstrap token Secret %s/%s in the target cluster", metav1.NamespaceSystem, fresh.Name)
		}
	}
	return nil, false, driver.Errorf(driver.Aborted, "bootstrap token Secret %s/%s in the target cluster is being created and deleted by others; retrying", metav1.NamespaceSystem, fresh.Name)
}

// renew rewrites m's token s: a new expiration, the current extra groups,
// the ownership annotation, and the secret kept unless it is malformed.
// The patch is guarded by s's resourceVersion.
func (is *Issuer) renew(ctx context.Context, m *v1alpha1.Machine, s *corev1.Secret, id string, expiry time.Time) (*corev1.Secret, error) {
	secret := string(s.Data[secretKey])
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
	desired.Annotations[machineAnnotation] = m.Namespace + "/" + m.Name
	desired.Data = tokenData(m, id, secret, expiry, is.ExtraGroups)
	fields := func(s *corev1.Secret) patch.Fields {
		return patch.Fields{"metadata": patch.Fields{"annotations": s.Annotations}, "data": s.Data}
	}
	data, err := patch.Diff(fields, s, desired, s.ResourceVersion)
	if err != nil {
		return nil, driver.Errorf(driver.Internal, "renewing bootstrap token Secret %s/%s: %w", metav1.NamespaceSystem, s.Name, err)
	}
	renewed, err := patch.Send(ctx, is.Client.CoreV1().Secrets(metav1.NamespaceSystem).Patch, s.Name, data, is.FieldManager)
	if err != nil {
		return nil, apiError(err, "renewing bootstrap token Secret %s/%s in the target cluster", metav1.NamespaceSystem, s.Name)
	}
	return renewed, nil
}

// Revoke deletes m's bootstrap tokens (there can be two, one per ID, when
// the first ID was taken at one attempt and free at a later one). A Secret
// that is gone counts as deleted; one that belongs to another machine is
// left alone, and each deletion is guarded by the UID and resourceVersion
// of the Secret whose ownership was checked.
func (is *Issuer) Revoke(ctx context.Context, m *v1alpha1.Machine) error {
	secrets := is.Client.CoreV1().Secrets(metav1.NamespaceSystem)
	var errs []error
	for _, id := range ids(m) {
		name := secretPrefix + id
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading bootstrap token Secret %s/%s in the target cluster: %w", metav1.NamespaceSystem, name, err))
			continue
		}
		if !owns(s, m) {
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

// apiError classifies a failed API call of the token flow by a driver
// code, as status.lastOperation.errorCode shows it and the retry delay
// follows it: PermissionDenied for RBAC (medium), Unavailable for an API
// server out of reach (short), and so on.
func apiError(err error, format string, args ...any) error {
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
