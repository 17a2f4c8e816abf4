package metricsauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
)

// How long a review's outcome is reused, and for how many callers. A
// Prometheus scraping every 15 or 30 s with one token then costs a
// TokenReview and a SubjectAccessReview a minute instead of two API calls
// a scrape; in exchange a revoked binding, or a deleted ServiceAccount,
// still reads the metrics for up to a minute (controller-runtime's secure
// metrics keep an authentication for a minute and an allowed access for
// five). A refusal is kept for less, so that a binding just created
// works within seconds, but long enough that a scraper retrying with a
// bad token does not send each attempt to the API server. The cache is
// bounded: a caller making up tokens or paths evicts older entries, which
// costs API calls (limited by the client's --kube-api-qps), never memory.
const (
	reviewAllowedTTL = time.Minute
	reviewRefusedTTL = 10 * time.Second
	reviewCacheSize  = 1024
	// reviewTimeout bounds the two API calls of one request.
	reviewTimeout = 10 * time.Second
)

// openPaths are served to anyone in the secure mode: the kubelet probes
// them without a token, and they tell nothing the API server's own
// /healthz and /readyz, open to everyone, would not.
var openPaths = []string{"/healthz", "/readyz"}

// Reviewer lets a request through only if the API server of the
// control cluster authenticates its bearer token (a TokenReview) and
// authorizes the token's user for the request's verb on its path as a
// non-resource URL (a SubjectAccessReview, "get" on "/metrics"), as
// kube-rbac-proxy and controller-runtime's secure metrics do. Outcomes are
// cached per token, verb and path (the token only as its SHA-256).
type Reviewer struct {
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface
	clock  clock.PassiveClock
	cache  *lru.Cache
}

// NewReviewer returns a Reviewer that asks tokens and access, and keeps
// their outcomes by clk.
func NewReviewer(tokens authenticationclient.TokenReviewInterface, access authorizationclient.SubjectAccessReviewInterface, clk clock.PassiveClock) *Reviewer {
	return &Reviewer{tokens: tokens, access: access, clock: clk, cache: lru.New(reviewCacheSize)}
}

// verdict is the outcome of a review: the status to answer with
// (http.StatusOK to serve the request) and why, for the caller.
type verdict struct {
	status  int
	message string
	user    string
}

type cachedVerdict struct {
	verdict
	expires time.Time
}

// review authenticates token and authorizes its user for verb on path,
// through the cache. An error is an API call that failed: nothing is
// known, nothing is cached.
func (r *Reviewer) review(ctx context.Context, token, verb, path string) (verdict, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:]) + " " + verb + " " + path
	if v, ok := r.cache.Get(key); ok {
		if c := v.(cachedVerdict); r.clock.Now().Before(c.expires) {
			return c.verdict, nil
		}
		r.cache.Remove(key)
	}
	v, err := r.ask(ctx, token, verb, path)
	if err != nil {
		return verdict{}, err
	}
	ttl := reviewRefusedTTL
	if v.status == http.StatusOK {
		ttl = reviewAllowedTTL
	}
	r.cache.Add(key, cachedVerdict{verdict: v, expires: r.clock.Now().Add(ttl)})
	return v, nil
}

// ask makes the two reviews.
func (r *Reviewer) ask(ctx context.Context, token, verb, path string) (verdict, error) {
	tr, err := r.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return verdict{}, fmt.Errorf("TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		// The API server's reason (an expired token, a deleted account) is
		// the caller's to find out there, not to learn here.
		return verdict{status: http.StatusUnauthorized, message: "Unauthorized: the bearer token is not valid"}, nil
	}
	u := tr.Status.User
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := r.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return verdict{}, fmt.Errorf("SubjectAccessReview for %s: %w", u.Username, err)
	}
	if !sar.Status.Allowed {
		return verdict{status: http.StatusForbidden, user: u.Username,
			message: fmt.Sprintf("Forbidden: user %q may not %s %s", u.Username, verb, path)}, nil
	}
	return verdict{status: http.StatusOK, user: u.Username}, nil
}

// Filter serves next to the callers the reviews allow, and /healthz and
// /readyz to everyone. A request without a bearer token is refused
// without an API call. Failed reviews are logged to log.
func (r *Reviewer) Filter(log logr.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if slices.Contains(openPaths, req.URL.Path) {
			next.ServeHTTP(w, req)
			return
		}
		token, ok := bearerToken(req)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="machine-controller-manager"`)
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(req.Method)
		ctx, cancel := context.WithTimeout(req.Context(), reviewTimeout)
		defer cancel()
		v, err := r.review(ctx, token, verb, req.URL.Path)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				log.Error(err, "Cannot review the access to the HTTP server; answering 503", "path", req.URL.Path, "remote", req.RemoteAddr)
			}
			http.Error(w, "Service Unavailable: the access could not be reviewed (see the manager's log)", http.StatusServiceUnavailable)
			return
		}
		if v.status != http.StatusOK {
			log.V(1).Info("Refused a request to the HTTP server", "path", req.URL.Path, "verb", verb, "status", v.status, "user", v.user, "remote", req.RemoteAddr)
			if v.status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="machine-controller-manager"`)
			}
			http.Error(w, v.message, v.status)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header.
func bearerToken(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
