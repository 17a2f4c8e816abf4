package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// applyDeploy applies files of reference/deploy and deletes them, in
// reverse order and waiting for each, when the test ends: a namespace
// applied first is gone before a next test (or -count) applies it again.
func applyDeploy(t *testing.T, env *testenv.Env, files ...string) {
	t.Helper()
	t.Cleanup(func() {
		for _, f := range slices.Backward(files) {
			if out, err := env.Kubectl(context.Background(), "delete", "--ignore-not-found", "--timeout=1m", "-f", filepath.Join("deploy", f)); err != nil {
				t.Logf("deleting %s: %v\n%s", f, err, out)
			}
		}
	})
	for _, f := range files {
		if out, err := env.Kubectl(context.Background(), "apply", "-f", filepath.Join("deploy", f)); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
}

// serviceAccountToken creates the ServiceAccount ns/name and returns a
// token of it from the API server's TokenRequest API: what a pod of that
// account has mounted.
func serviceAccountToken(t *testing.T, env *testenv.Env, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	accounts := env.Client().CoreV1().ServiceAccounts(ns)
	if _, err := accounts.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := accounts.CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// TestMetricsSecure runs the binary with --metrics-secure (and
// --profiling) as the ServiceAccount of reference/deploy, impersonated,
// with exactly the RBAC of rbac-control.yaml and the opt-in
// rbac-metrics-auth.yaml, and scrapes it with real ServiceAccount tokens:
// an anonymous scrape and a token the API server does not know are 401, a
// ServiceAccount without the permission is 403, one bound to
// mcm:metrics-reader reads the metrics but not /debug/pprof/; the probes'
// paths stay open, and plain HTTP gets nothing.
func TestMetricsSecure(t *testing.T) {
	t.Parallel()
	// They share the namespace mcm-system and cluster roles. Unlocked by
	// the first cleanup registered, which runs last, after the test's own
	// cleanups removed what it applied.
	deployManifests.Lock()
	t.Cleanup(deployManifests.Unlock)
	env := testenv.Get(t)
	ctx := context.Background()
	const ns, account = "mcm-system", "machine-controller-manager"
	applyDeploy(t, env, "namespace.yaml", "rbac-control.yaml", "rbac-metrics-auth.yaml")
	kubeconfig := impersonating(t, env, ns, account)

	scrapers := env.Namespace(t)
	scraper := serviceAccountToken(t, env, scrapers, "prometheus")
	stranger := serviceAccountToken(t, env, scrapers, "stranger")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mcm:metrics-reader:" + scrapers},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "mcm:metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: scrapers}},
	}
	if _, err := env.Client().RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client().RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	// Scrape only once RBAC has the binding: a refusal is remembered for
	// a while.
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		sar, err := env.Client().AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:serviceaccount:" + scrapers + ":prometheus",
				NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}}, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		return sar.Status.Allowed, "the scraper's binding is not in effect yet"
	})

	in := start(t, binary(t), "secure", "--control-kubeconfig", kubeconfig, "--target-kubeconfig", "none",
		"--namespace", ns, "--driver", "sim", "--metrics-secure", "--profiling", "-v", "1")
	stop := sync.OnceFunc(func() { terminate(t, in) })
	t.Cleanup(stop)
	// The certificate is self-signed and new: nothing can verify it.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the generated certificate
	get := func(path, token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, "https://127.0.0.1:"+strconv.Itoa(in.port)+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	testenv.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		status, body := get("/healthz", "")
		return status == http.StatusOK, fmt.Sprintf("/healthz without a token: %d %q", status, body)
	})
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		status, body := get("/readyz", "")
		return status == http.StatusOK, fmt.Sprintf("/readyz without a token: %d %q", status, body)
	})

	for _, tt := range []struct {
		name, path, token string
		status            int
		body              string // what the answer contains
	}{
		{"anonymous", "/metrics", "", http.StatusUnauthorized, "Unauthorized: a bearer token is required"},
		{"a token nobody issued", "/metrics", "not-a-token", http.StatusUnauthorized, "Unauthorized: the bearer token is not valid"},
		{"a ServiceAccount without the permission", "/metrics", stranger, http.StatusForbidden,
			`Forbidden: user "system:serviceaccount:` + scrapers + `:stranger" may not get /metrics`},
		{"the scraper", "/metrics", scraper, http.StatusOK, "# TYPE mcm_manager_leader gauge"},
		{"the scraper profiling", "/debug/pprof/cmdline", scraper, http.StatusForbidden,
			`Forbidden: user "system:serviceaccount:` + scrapers + `:prometheus" may not get /debug/pprof/cmdline`},
		{"anonymous profiling", "/debug/pprof/cmdline", "", http.StatusUnauthorized, "Unauthorized: a bearer token is required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := get(tt.path, tt.token)
			if status != tt.status || !strings.Contains(body, tt.body) {
				t.Errorf("GET %s: %d %.200q, want %d with %q", tt.path, status, body, tt.status, tt.body)
			}
			if tt.status != http.StatusOK && (strings.Contains(body, "mcm_") || strings.Contains(body, "--metrics-secure")) {
				t.Errorf("GET %s refused, yet answered with the metrics or the command line: %.200q", tt.path, body)
			}
		})
	}
	// The scraper's answer is the whole exposition: the Go collector's
	// metrics and the manager's own.
	if status, body := get("/metrics", scraper); status != http.StatusOK || !strings.Contains(body, "go_goroutines ") || !strings.Contains(body, "mcm_manager_group_running{") {
		t.Errorf("the scraper's /metrics: %d %.300q", status, body)
	}
	// Plain HTTP, as a scraper left at MCM's default would try, gets no
	// metrics.
	if status, body := in.get("/metrics"); status == http.StatusOK || strings.Contains(body, "mcm_") {
		t.Errorf("plain HTTP /metrics: %d %.200q", status, body)
	}

	stop()
	// The reviews were made with the rights of rbac-metrics-auth.yaml.
	if denied := forbiddenLines(in); len(denied) > 0 {
		t.Errorf("the manager hit RBAC denials as %s:\n%s", account, strings.Join(denied, "\n"))
	}
}
