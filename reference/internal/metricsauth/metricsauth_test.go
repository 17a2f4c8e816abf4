package metricsauth

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeAPI answers TokenReviews and SubjectAccessReviews as an API server
// would for a few users, and records what it was asked.
type fakeAPI struct {
	mu sync.Mutex
	// users by token; access by user: the paths each may get.
	users  map[string]authenticationv1.UserInfo
	access map[string][]string
	// fail makes every review fail, as an unreachable API server.
	fail     bool
	tokens   []string
	accesses []authorizationv1.SubjectAccessReviewSpec
}

func (f *fakeAPI) reviewer(clk *clocktesting.FakeClock) *Reviewer {
	client := k8sfake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		tr := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.fail {
			return true, nil, errors.New("connection refused")
		}
		f.tokens = append(f.tokens, tr.Spec.Token)
		if u, ok := f.users[tr.Spec.Token]; ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u}
		} else {
			tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	client.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.accesses = append(f.accesses, sar.Spec)
		for _, p := range f.access[sar.Spec.User] {
			if a := sar.Spec.NonResourceAttributes; a != nil && a.Verb == "get" && a.Path == p {
				sar.Status.Allowed = true
			}
		}
		return true, sar, nil
	})
	return NewReviewer(client.AuthenticationV1().TokenReviews(), client.AuthorizationV1().SubjectAccessReviews(), clk)
}

func (f *fakeAPI) calls() (tokens, accesses int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tokens), len(f.accesses)
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{
		users: map[string]authenticationv1.UserInfo{
			"scraper-token": {Username: "system:serviceaccount:monitoring:prometheus", UID: "u-1",
				Groups: []string{"system:serviceaccounts", "system:authenticated"},
				Extra:  map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}}},
			"stranger-token": {Username: "system:serviceaccount:default:stranger", Groups: []string{"system:authenticated"}},
		},
		access: map[string][]string{"system:serviceaccount:monitoring:prometheus": {"/metrics"}},
	}
}

// served is what the handler behind the filter answers.
const served = "mcm_manager_leader 1\n"

func request(t *testing.T, h http.Handler, method, path, authorization string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

func behindFilter(rv *Reviewer) http.Handler {
	return rv.Filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, served) }))
}

func TestAccessReviewFilter(t *testing.T) {
	tests := []struct {
		name          string
		method, path  string
		authorization string
		fail          bool
		wantStatus    int
		wantBody      string
		wantCalls     [2]int // TokenReviews, SubjectAccessReviews
	}{
		{"probe without a token", "GET", "/healthz", "", false, 200, served, [2]int{}},
		{"readiness without a token", "GET", "/readyz", "", false, 200, served, [2]int{}},
		{"anonymous scrape", "GET", "/metrics", "", false, 401, "Unauthorized: a bearer token is required\n", [2]int{}},
		{"not a bearer token", "GET", "/metrics", "Basic c2NyYXBlcjpwdw==", false, 401, "Unauthorized: a bearer token is required\n", [2]int{}},
		{"empty bearer token", "GET", "/metrics", "Bearer ", false, 401, "Unauthorized: a bearer token is required\n", [2]int{}},
		{"invalid token", "GET", "/metrics", "Bearer forged", false, 401, "Unauthorized: the bearer token is not valid\n", [2]int{1, 0}},
		{"valid token without the permission", "GET", "/metrics", "Bearer stranger-token", false, 403,
			"Forbidden: user \"system:serviceaccount:default:stranger\" may not get /metrics\n", [2]int{1, 1}},
		{"authorized token", "GET", "/metrics", "Bearer scraper-token", false, 200, served, [2]int{1, 1}},
		{"authorized token, lower-case scheme", "GET", "/metrics", "bearer scraper-token", false, 200, served, [2]int{1, 1}},
		{"authorized for /metrics, not for pprof", "GET", "/debug/pprof/profile", "Bearer scraper-token", false, 403,
			"Forbidden: user \"system:serviceaccount:monitoring:prometheus\" may not get /debug/pprof/profile\n", [2]int{1, 1}},
		{"authorized for get, not for post", "POST", "/metrics", "Bearer scraper-token", false, 403,
			"Forbidden: user \"system:serviceaccount:monitoring:prometheus\" may not post /metrics\n", [2]int{1, 1}},
		{"a path that only looks open", "GET", "/healthz/../metrics", "", false, 401, "Unauthorized: a bearer token is required\n", [2]int{}},
		{"API server out of reach", "GET", "/metrics", "Bearer scraper-token", true, 503,
			"Service Unavailable: the access could not be reviewed (see the manager's log)\n", [2]int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI()
			api.fail = tt.fail
			h := behindFilter(api.reviewer(clocktesting.NewFakeClock(time.Now())))
			status, body := request(t, h, tt.method, tt.path, tt.authorization)
			if status != tt.wantStatus || body != tt.wantBody {
				t.Errorf("%s %s: %d %q, want %d %q", tt.method, tt.path, status, body, tt.wantStatus, tt.wantBody)
			}
			if tokens, accesses := api.calls(); [2]int{tokens, accesses} != tt.wantCalls {
				t.Errorf("API calls: %d TokenReviews, %d SubjectAccessReviews; want %v", tokens, accesses, tt.wantCalls)
			}
		})
	}
}

// The SubjectAccessReview asks for the token's user exactly as the
// TokenReview named it, for the request's verb and path.
func TestAccessReviewAsksForTheTokensUser(t *testing.T) {
	api := newFakeAPI()
	h := behindFilter(api.reviewer(clocktesting.NewFakeClock(time.Now())))
	if status, _ := request(t, h, "GET", "/metrics", "Bearer scraper-token"); status != 200 {
		t.Fatalf("status %d", status)
	}
	want := []authorizationv1.SubjectAccessReviewSpec{{
		User: "system:serviceaccount:monitoring:prometheus", UID: "u-1", Groups: []string{"system:serviceaccounts", "system:authenticated"},
		Extra:                 map[string]authorizationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}}
	if diff := cmp.Diff(want, api.accesses); diff != "" {
		t.Errorf("SubjectAccessReviews (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"scraper-token"}, api.tokens); diff != "" {
		t.Errorf("TokenReviews (-want +got):\n%s", diff)
	}
}

// A scrape every 5 s costs two API calls a minute, not two a scrape; a
// refusal is asked again after 10 s; a failed review is not remembered.
func TestAccessReviewCache(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	api := newFakeAPI()
	h := behindFilter(api.reviewer(clk))
	scrape := func(token string) int {
		status, _ := request(t, h, "GET", "/metrics", "Bearer "+token)
		return status
	}
	want := func(tokens, accesses int) {
		t.Helper()
		if gotT, gotA := api.calls(); gotT != tokens || gotA != accesses {
			t.Errorf("API calls: %d TokenReviews, %d SubjectAccessReviews; want %d and %d", gotT, gotA, tokens, accesses)
		}
	}

	// Twelve scrapes in 55 s: one review of each kind.
	for range 12 {
		if s := scrape("scraper-token"); s != 200 {
			t.Fatalf("status %d", s)
		}
		clk.Step(5 * time.Second)
	}
	want(1, 1)
	// At 60 s the outcome has expired: reviewed again.
	if s := scrape("scraper-token"); s != 200 {
		t.Fatalf("status %d", s)
	}
	want(2, 2)
	// Another path is another question.
	if s, _ := request(t, h, "GET", "/debug/pprof/", "Bearer scraper-token"); s != 403 {
		t.Fatalf("pprof: status %d", s)
	}
	want(3, 3)

	// A refusal is remembered for 10 s.
	for range 3 {
		if s := scrape("stranger-token"); s != 403 {
			t.Fatalf("status %d", s)
		}
		clk.Step(3 * time.Second)
	}
	want(4, 4)
	clk.Step(time.Second) // 10 s after the refusal
	if s := scrape("stranger-token"); s != 403 {
		t.Fatalf("status %d", s)
	}
	want(5, 5)
	// So is an invalid token.
	scrape("forged")
	scrape("forged")
	want(6, 5)

	// A binding made after a refusal is seen once the refusal expires.
	api.mu.Lock()
	api.access["system:serviceaccount:default:stranger"] = []string{"/metrics"}
	api.mu.Unlock()
	clk.Step(reviewRefusedTTL)
	if s := scrape("stranger-token"); s != 200 {
		t.Fatalf("after the binding: status %d", s)
	}
	want(7, 6)

	// While the API server is out of reach, nothing new is let in and
	// nothing is remembered; once it answers, the token is reviewed.
	api.mu.Lock()
	api.fail = true
	api.mu.Unlock()
	if s := scrape("other-token"); s != 503 {
		t.Fatalf("during the outage: status %d", s)
	}
	api.mu.Lock()
	api.fail = false
	api.users["other-token"] = api.users["scraper-token"]
	api.mu.Unlock()
	if s := scrape("other-token"); s != 200 {
		t.Fatalf("after the outage: status %d", s)
	}
	want(8, 7)
}

// However many tokens callers make up, the cache holds at most
// reviewCacheSize outcomes.
func TestAccessReviewCacheBounded(t *testing.T) {
	api := newFakeAPI()
	rv := api.reviewer(clocktesting.NewFakeClock(time.Now()))
	h := behindFilter(rv)
	for i := range 3 * reviewCacheSize {
		if s, _ := request(t, h, "GET", "/metrics", fmt.Sprintf("Bearer forged-%d", i)); s != 401 {
			t.Fatalf("status %d", s)
		}
	}
	if n := rv.cache.Len(); n != reviewCacheSize {
		t.Errorf("cache holds %d outcomes, want %d", n, reviewCacheSize)
	}
}
