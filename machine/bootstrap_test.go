package machine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

var tokenIDPattern = regexp.MustCompile(`\A[a-z0-9]{6}\z`)

// mcmFormula is MCM's token ID of a machine name of five bytes or more,
// written as MCM writes it, to check that ours agrees.
func mcmFormula(name string) string {
	return hex.EncodeToString([]byte(name)[len(name)-5:])[:6]
}

func tokenMachine(ns, name string) *v1alpha1.Machine {
	return &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func TestBootstrapTokenIDs(t *testing.T) {
	tests := []struct {
		name      string
		wantFirst string
	}{
		// MCM's formula, by hand: the hex of the 5th-, 4th- and 3rd-last bytes.
		{"pool-abc12", "616263"},
		{"pool-abc99", "616263"}, // the last two bytes do not count: same ID as above
		{"pool-xbc12", "786263"},
		{"shoot--dev--worker-z1-5d8f7-bqx2k", mcmFormula("shoot--dev--worker-z1-5d8f7-bqx2k")},
		{"abcde", mcmFormula("abcde")},
		{strings.Repeat("m", 58) + "-9zz4q", mcmFormula(strings.Repeat("m", 58) + "-9zz4q")},
		// Shorter than five bytes, where MCM's formula panics.
		{"abcd", "616263"},
		{"abc", "616263"},
		{"ab", "616200"},
		{"a", "610000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ids := bootstrapTokenIDs(tokenMachine("ns", tc.name))
			if len(ids) != 2 || ids[0] != tc.wantFirst {
				t.Fatalf("IDs %v, want %q first", ids, tc.wantFirst)
			}
			if ids[0] == ids[1] {
				t.Errorf("both IDs are %q", ids[0])
			}
			for _, id := range ids {
				if !tokenIDPattern.MatchString(id) {
					t.Errorf("ID %q is not a valid bootstrap token ID", id)
				}
			}
			if again := bootstrapTokenIDs(tokenMachine("ns", tc.name)); !slices.Equal(again, ids) {
				t.Errorf("IDs not stable: %v then %v", ids, again)
			}
		})
	}
	// Machines whose first IDs collide have different second IDs, and the
	// second depends on the namespace too.
	a, b := bootstrapTokenIDs(tokenMachine("ns", "pool-abc12")), bootstrapTokenIDs(tokenMachine("ns", "pool-abc99"))
	if a[0] != b[0] || a[1] == b[1] {
		t.Errorf("IDs %v and %v: want the same first, different second", a, b)
	}
	if c := bootstrapTokenIDs(tokenMachine("other", "pool-abc12")); c[1] == a[1] {
		t.Errorf("second ID %q does not depend on the namespace", c[1])
	}
}

func TestSubstituteBootstrapToken(t *testing.T) {
	if urlEncodedBootstrapTokenPlaceholder != url.QueryEscape(v1alpha1.BootstrapTokenPlaceholder) {
		t.Fatalf("URL-encoded placeholder %q, want %q", urlEncodedBootstrapTokenPlaceholder, url.QueryEscape(v1alpha1.BootstrapTokenPlaceholder))
	}
	const token = "616263.0123456789abcdef"
	tests := []struct {
		name, in, want string
		asks           bool
	}{
		{"plain", "kubeadm join --token <<BOOTSTRAP_TOKEN>>\n", "kubeadm join --token 616263.0123456789abcdef\n", true},
		{"URL-encoded", `{"source":"data:,%3C%3CBOOTSTRAP_TOKEN%3E%3E"}`, `{"source":"data:,616263.0123456789abcdef"}`, true},
		{"both, twice", "<<BOOTSTRAP_TOKEN>> %3C%3CBOOTSTRAP_TOKEN%3E%3E <<BOOTSTRAP_TOKEN>>", token + " " + token + " " + token, true},
		{"absent", "#!/bin/sh\necho <<MACHINE_NAME>>\n", "#!/bin/sh\necho <<MACHINE_NAME>>\n", false},
		{"lowercase escapes are not the placeholder", "%3c%3cBOOTSTRAP_TOKEN%3e%3e", "%3c%3cBOOTSTRAP_TOKEN%3e%3e", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := hasBootstrapTokenPlaceholder([]byte(tc.in)); got != tc.asks {
				t.Errorf("asks for a token: %v, want %v", got, tc.asks)
			}
			if got := string(substituteBootstrapToken([]byte(tc.in), token)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestValidateBootstrapGroup(t *testing.T) {
	for group, ok := range map[string]bool{
		"system:bootstrappers:worker":                        true,
		"system:bootstrappers:kubeadm:default-node-token":    true,
		"system:bootstrappers:a":                             true,
		"system:bootstrappers:" + strings.Repeat("a", 256):   true,
		"system:bootstrappers:" + strings.Repeat("a", 257):   false,
		"system:bootstrappers:":                              false,
		"system:bootstrappers":                               false,
		"system:bootstrappers:worker-":                       false,
		"system:bootstrappers:Worker":                        false,
		"system:bootstrappers:a,system:bootstrappers:b":      false,
		"system:nodes":                                       false,
		"":                                                   false,
		" system:bootstrappers:worker":                       false,
		"system:bootstrappers:worker:pool_1":                 false,
		"system:bootstrappers:mcm:" + strings.Repeat("9", 9): true,
	} {
		if err := ValidateBootstrapGroup(group); (err == nil) != ok {
			t.Errorf("ValidateBootstrapGroup(%q) = %v, want valid %v", group, err, ok)
		}
	}
	f := newFakeCluster(t)
	inf := f.inf
	inf.Nodes = nil
	_, err := NewController(f.mc, f.core, nil, inf, f.driver,
		Options{BootstrapTokenAuthExtraGroups: []string{"system:bootstrappers:ok", "system:nodes"}})
	if err == nil || !strings.Contains(err.Error(), `BootstrapTokenAuthExtraGroups: "system:nodes" is not a bootstrap token group`) {
		t.Errorf("NewController with a bad group: %v", err)
	}
}

// tokenSecret is a bootstrap token Secret as the API server returns it.
func tokenSecret(id, owner string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: "kube-system", UID: types.UID("uid-" + id), ResourceVersion: "1"},
		Type:       bootstrapTokenSecretType,
		Data:       map[string][]byte{},
	}
	if owner != "" {
		s.Annotations = map[string]string{bootstrapTokenMachineAnnotation: owner}
	}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// mcmToken is the token MCM creates for a machine.
func mcmToken(id, machineName string, expiry time.Time) *corev1.Secret {
	return tokenSecret(id, "", map[string]string{
		"description":                    fmt.Sprintf("A bootstrap token for machine %q generated by MachineControllerManager.", machineName),
		"token-id":                       id,
		"token-secret":                   "mcmmcmmcmmcmmcm0",
		"expiration":                     expiry.Format(time.RFC3339),
		"usage-bootstrap-authentication": "true",
		"usage-bootstrap-signing":        "true",
		"auth-extra-groups":              "",
	})
}

func ownToken(id, owner, secret string, expiry time.Time) *corev1.Secret {
	return tokenSecret(id, owner, map[string]string{
		"token-id": id, "token-secret": secret, "expiration": expiry.Format(time.RFC3339),
		"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
	})
}

// TestIssueBootstrapToken: get-or-create of a machine's token Secret,
// against the Secrets already in kube-system.
func TestIssueBootstrapToken(t *testing.T) {
	m := tokenMachine("ns", "pool-abc12")
	// The creation deadline is t0+19m and half a second; expirations have
	// whole seconds.
	m.Annotations = map[string]string{CreationStartedAnnotation: formatTime(t0.Add(-time.Minute + 500*time.Millisecond))}
	ids := bootstrapTokenIDs(m)
	first, second := ids[0], ids[1]
	fresh := t0.Add(20 * time.Minute) // the default creation timeout from now
	// What a Secret says, in short; Secret is "" for a newly generated one.
	type token struct {
		Name, Owner, Secret, Expiration, Groups string
	}
	summary := func(s *corev1.Secret) token {
		return token{s.Name, s.Annotations[bootstrapTokenMachineAnnotation], string(s.Data["token-secret"]),
			string(s.Data["expiration"]), string(s.Data["auth-extra-groups"])}
	}
	const own = "ns/pool-abc12"
	exp := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	tests := []struct {
		name     string
		existing []runtime.Object
		groups   []string
		// want are the Secrets in kube-system afterwards; the token handed
		// out is that of wantUsed.
		want     []token
		wantUsed string
		wantCode driver.Code // of the error, OK for none
	}{
		{"none yet: created under MCM's ID", nil, nil,
			[]token{{"bootstrap-token-" + first, own, "", exp(fresh), ""}}, first, driver.OK},
		{"extra groups joined with commas", nil, []string{"system:bootstrappers:a", "system:bootstrappers:b"},
			[]token{{"bootstrap-token-" + first, own, "", exp(fresh), "system:bootstrappers:a,system:bootstrappers:b"}}, first, driver.OK},
		{"its own token is reused", []runtime.Object{ownToken(first, own, "0123456789abcdef", t0.Add(19*time.Minute))}, nil,
			[]token{{"bootstrap-token-" + first, own, "0123456789abcdef", exp(t0.Add(19 * time.Minute)), ""}}, first, driver.OK},
		{"MCM's token for it is reused", []runtime.Object{mcmToken(first, "pool-abc12", t0.Add(19*time.Minute))}, nil,
			[]token{{"bootstrap-token-" + first, "", "mcmmcmmcmmcmmcm0", exp(t0.Add(19 * time.Minute)), ""}}, first, driver.OK},
		{"its expired token is renewed, secret kept", []runtime.Object{ownToken(first, own, "0123456789abcdef", t0.Add(-time.Second))}, nil,
			[]token{{"bootstrap-token-" + first, own, "0123456789abcdef", exp(fresh), ""}}, first, driver.OK},
		{"MCM's token ending before the creation deadline is renewed", []runtime.Object{mcmToken(first, "pool-abc12", t0.Add(5*time.Minute))}, nil,
			[]token{{"bootstrap-token-" + first, own, "mcmmcmmcmmcmmcm0", exp(fresh), ""}}, first, driver.OK},
		{"its token with a malformed secret gets a new one", []runtime.Object{ownToken(first, own, "short", t0.Add(time.Hour))}, nil,
			[]token{{"bootstrap-token-" + first, own, "", exp(fresh), ""}}, first, driver.OK},
		{"another machine's token: the second ID", []runtime.Object{ownToken(first, "ns/pool-abc99", "0123456789abcdef", t0.Add(time.Hour))}, nil,
			[]token{{"bootstrap-token-" + first, "ns/pool-abc99", "0123456789abcdef", exp(t0.Add(time.Hour)), ""},
				{"bootstrap-token-" + second, own, "", exp(fresh), ""}}, second, driver.OK},
		{"same name in another namespace: the second ID", []runtime.Object{ownToken(first, "other/pool-abc12", "0123456789abcdef", t0.Add(time.Hour))}, nil,
			[]token{{"bootstrap-token-" + first, "other/pool-abc12", "0123456789abcdef", exp(t0.Add(time.Hour)), ""},
				{"bootstrap-token-" + second, own, "", exp(fresh), ""}}, second, driver.OK},
		{"MCM's token for another machine: the second ID", []runtime.Object{mcmToken(first, "pool-abc99", t0.Add(time.Hour))}, nil,
			[]token{{"bootstrap-token-" + first, "", "mcmmcmmcmmcmmcm0", exp(t0.Add(time.Hour)), ""},
				{"bootstrap-token-" + second, own, "", exp(fresh), ""}}, second, driver.OK},
		{"its own token under the second ID is reused",
			[]runtime.Object{mcmToken(first, "pool-abc99", t0.Add(time.Hour)), ownToken(second, own, "0123456789abcdef", t0.Add(time.Hour))}, nil,
			[]token{{"bootstrap-token-" + first, "", "mcmmcmmcmmcmmcm0", exp(t0.Add(time.Hour)), ""},
				{"bootstrap-token-" + second, own, "0123456789abcdef", exp(t0.Add(time.Hour)), ""}}, second, driver.OK},
		{"both IDs taken: an error, nothing touched",
			[]runtime.Object{ownToken(first, "ns/pool-abc99", "0123456789abcdef", t0.Add(time.Hour)),
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + second, Namespace: "kube-system"}, Type: corev1.SecretTypeOpaque}}, nil,
			[]token{{"bootstrap-token-" + first, "ns/pool-abc99", "0123456789abcdef", exp(t0.Add(time.Hour)), ""},
				{"bootstrap-token-" + second, "", "", "", ""}}, "", driver.Aborted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t)
			o.Clock = clocktesting.NewFakeClock(t0)
			o.BootstrapTokenAuthExtraGroups = tc.groups
			target := k8sfake.NewSimpleClientset(tc.existing...)
			c := &Controller{opts: *o, target: target}
			tok, err := c.issueBootstrapToken(context.Background(), m)
			if code := driver.CodeOf(err); code != tc.wantCode {
				t.Fatalf("error %v (code %v), want code %v", err, code, tc.wantCode)
			}
			list, lerr := target.CoreV1().Secrets("kube-system").List(context.Background(), metav1.ListOptions{})
			if lerr != nil {
				t.Fatal(lerr)
			}
			var got []token
			for _, s := range list.Items {
				got = append(got, summary(&s))
			}
			// Generated secrets are random: check their form, then compare
			// the rest.
			for i := range got {
				if i < len(tc.want) && tc.want[i].Secret == "" && got[i].Secret != "" {
					if !validTokenSecret(got[i].Secret) {
						t.Errorf("generated secret %q is not 16 of [0-9a-z]", got[i].Secret)
					}
					got[i].Secret = ""
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Secrets in kube-system (-want +got):\n%s", diff)
			}
			if tc.wantUsed == "" {
				if tok != "" || !strings.Contains(err.Error(), "bootstrap-token-"+first) || !strings.Contains(err.Error(), "bootstrap-token-"+second) {
					t.Errorf("token %q, error %v: want none, and an error naming both Secrets", tok, err)
				}
				return
			}
			used, err := target.CoreV1().Secrets("kube-system").Get(context.Background(), "bootstrap-token-"+tc.wantUsed, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.wantUsed + "." + string(used.Data["token-secret"]); tok != want {
				t.Errorf("token %q, want %q", tok, want)
			}
		})
	}
}

// TestIssuedBootstrapTokenFields: a new token has every field a kubelet's
// bootstrap needs, in the format of k8s.io/cluster-bootstrap.
func TestIssuedBootstrapTokenFields(t *testing.T) {
	o := testOptions(t)
	o.Clock = clocktesting.NewFakeClock(t0)
	o.BootstrapTokenAuthExtraGroups = []string{"system:bootstrappers:worker"}
	target := k8sfake.NewSimpleClientset()
	c := &Controller{opts: *o, target: target}
	m := tokenMachine("ns", "pool-abc12")
	m.Annotations = map[string]string{v1alpha1.EffectiveCreationTimeoutAnnotation: "7m"}
	tok, err := c.issueBootstrapToken(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	s, err := target.CoreV1().Secrets("kube-system").Get(context.Background(), "bootstrap-token-616263", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret := string(s.Data["token-secret"])
	if !regexp.MustCompile(`\A[0-9a-z]{16}\z`).MatchString(secret) || tok != "616263."+secret {
		t.Errorf("token %q, secret %q", tok, secret)
	}
	got := map[string]string{"type": string(s.Type)}
	for k, v := range s.Data {
		if k != "token-secret" {
			got[k] = string(v)
		}
	}
	maps := map[string]string{
		"type":                           "bootstrap.kubernetes.io/token",
		"token-id":                       "616263",
		"expiration":                     "2026-01-01T12:07:00Z", // the effective creation timeout from now
		"usage-bootstrap-authentication": "true",
		"usage-bootstrap-signing":        "true",
		"auth-extra-groups":              "system:bootstrappers:worker",
		"description":                    `Bootstrap token for machine "pool-abc12" in namespace "ns", deleted once the machine has joined the cluster.`,
	}
	if diff := cmp.Diff(maps, got); diff != "" {
		t.Errorf("token data (-want +got):\n%s", diff)
	}
	if s.Annotations[bootstrapTokenMachineAnnotation] != "ns/pool-abc12" {
		t.Errorf("annotations %v", s.Annotations)
	}
}

// TestWithBootstrapTokenOnlyWhenAsked: without the placeholder, or without
// a target cluster, the secret is passed on as it is and no API call is
// made; with both, the user data of a copy carries the token.
func TestWithBootstrapTokenOnlyWhenAsked(t *testing.T) {
	m := tokenMachine("ns", "pool-abc12")
	secret := func(ud string) *corev1.Secret {
		return &corev1.Secret{Data: map[string][]byte{v1alpha1.UserDataKey: []byte(ud), "apiToken": []byte("t")}}
	}
	o := testOptions(t)
	target := k8sfake.NewSimpleClientset()
	c := &Controller{opts: *o, target: target}
	in := secret("#!/bin/sh\necho <<MACHINE_NAME>> %3C%3CMACHINE_NAME%3E%3E\n")
	out, err := c.withBootstrapToken(context.Background(), m, in)
	if err != nil || out != in || len(target.Actions()) != 0 {
		t.Errorf("without the placeholder: secret changed %v, error %v, API calls %v", out != in, err, target.Actions())
	}
	noTarget := &Controller{opts: *o}
	in = secret("token=<<BOOTSTRAP_TOKEN>>")
	if out, err := noTarget.withBootstrapToken(context.Background(), m, in); err != nil || out != in || string(out.Data[v1alpha1.UserDataKey]) != "token=<<BOOTSTRAP_TOKEN>>" {
		t.Errorf("without a target cluster: user data %q, error %v", out.Data[v1alpha1.UserDataKey], err)
	}
	out, err = c.withBootstrapToken(context.Background(), m, in)
	if err != nil {
		t.Fatal(err)
	}
	if string(in.Data[v1alpha1.UserDataKey]) != "token=<<BOOTSTRAP_TOKEN>>" {
		t.Errorf("the input secret was changed: %q", in.Data[v1alpha1.UserDataKey])
	}
	if !regexp.MustCompile(`\Atoken=616263\.[0-9a-z]{16}\z`).Match(out.Data[v1alpha1.UserDataKey]) || string(out.Data["apiToken"]) != "t" {
		t.Errorf("substituted secret %v", out.Data)
	}
}

// TestDeleteBootstrapTokens: a machine's tokens go under either ID, NotFound
// is success, and other machines' tokens stay.
func TestDeleteBootstrapTokens(t *testing.T) {
	m := tokenMachine("ns", "pool-abc12")
	m.Spec.Class.Name = "c"
	first, second := bootstrapTokenIDs(m)[0], bootstrapTokenIDs(m)[1]
	later := t0.Add(time.Hour)
	tests := []struct {
		name     string
		existing []runtime.Object
		userData string
		want     []string // Secrets left in kube-system
		gets     int      // GETs of Secrets made
	}{
		{"none: NotFound is success", nil, "<<BOOTSTRAP_TOKEN>>", nil, 2},
		{"its own under the first ID", []runtime.Object{ownToken(first, "ns/pool-abc12", "0123456789abcdef", later)}, "<<BOOTSTRAP_TOKEN>>", nil, 2},
		{"MCM's for it", []runtime.Object{mcmToken(first, "pool-abc12", later)}, "%3C%3CBOOTSTRAP_TOKEN%3E%3E", nil, 2},
		{"both of its own", []runtime.Object{ownToken(first, "ns/pool-abc12", "0123456789abcdef", later), ownToken(second, "ns/pool-abc12", "0123456789abcdef", later)},
			"<<BOOTSTRAP_TOKEN>>", nil, 2},
		{"another machine's stays", []runtime.Object{ownToken(first, "ns/pool-abc99", "0123456789abcdef", later), ownToken(second, "ns/pool-abc12", "0123456789abcdef", later)},
			"<<BOOTSTRAP_TOKEN>>", []string{"bootstrap-token-" + first}, 2},
		{"MCM's for another machine stays", []runtime.Object{mcmToken(first, "pool-abc99", later)}, "<<BOOTSTRAP_TOKEN>>", []string{"bootstrap-token-" + first}, 2},
		{"a class without the placeholder: no call", []runtime.Object{ownToken(first, "ns/pool-abc12", "0123456789abcdef", later)}, "#!/bin/sh",
			[]string{"bootstrap-token-" + first}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			target := k8sfake.NewSimpleClientset(tc.existing...)
			c := &Controller{opts: *testOptions(t), target: target}
			c.classes, c.secrets = classListers(t, tc.userData)
			if err := c.deleteBootstrapTokens(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			list, err := target.CoreV1().Secrets("kube-system").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, s := range list.Items {
				left = append(left, s.Name)
			}
			if diff := cmp.Diff(tc.want, left); diff != "" {
				t.Errorf("Secrets left (-want +got):\n%s", diff)
			}
			gets := 0
			for _, a := range target.Actions() {
				if a.GetVerb() == "get" {
					gets++
				}
				if d, ok := a.(k8stesting.DeleteAction); ok {
					if p := d.GetDeleteOptions().Preconditions; p == nil || p.UID == nil || p.ResourceVersion == nil {
						t.Errorf("deletion of %s without UID and resourceVersion preconditions", d.GetName())
					}
				}
			}
			if gets != tc.gets {
				t.Errorf("%d GETs, want %d", gets, tc.gets)
			}
		})
	}

	// A failure is reported, NotFound on delete is not.
	target := k8sfake.NewSimpleClientset(ownToken(first, "ns/pool-abc12", "0123456789abcdef", later))
	c := &Controller{opts: *testOptions(t), target: target}
	c.classes, c.secrets = classListers(t, "<<BOOTSTRAP_TOKEN>>")
	target.PrependReactor("delete", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "bootstrap-token-"+first)
	})
	if err := c.deleteBootstrapTokens(context.Background(), m); err != nil {
		t.Errorf("NotFound on delete: %v", err)
	}
	target.PrependReactor("delete", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "bootstrap-token-"+first, errors.New("no"))
	})
	if err := c.deleteBootstrapTokens(context.Background(), m); !apierrors.IsForbidden(err) {
		t.Errorf("Forbidden on delete: %v", err)
	}
}

// classListers returns listers holding class "c" of namespace "ns", whose
// secret "s" has the user data.
func classListers(t *testing.T, userData string) (machinelisters.MachineClassLister, corelisters.SecretLister) {
	t.Helper()
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	secrets := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = classes.Add(&v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, SecretRef: &corev1.SecretReference{Name: "s", Namespace: "ns"}})
	_ = secrets.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Data: map[string][]byte{v1alpha1.UserDataKey: []byte(userData)}})
	return machinelisters.NewMachineClassLister(classes), corelisters.NewSecretLister(secrets)
}

// tokenWorld is a controller with a target cluster on fake clientsets,
// with class "c" whose user data asks for a bootstrap token, and a drain
// that is always done at once.
type tokenWorld struct {
	c          *Controller
	mc         *fake.Clientset
	core       *k8sfake.Clientset
	target     *k8sfake.Clientset
	cloud      *sim.Cloud
	events     *record.FakeRecorder
	deleteFail atomic.Bool // deletions of Secrets in the target fail
}

func newTokenWorld(t *testing.T) *tokenWorld {
	t.Helper()
	const ns = "ns"
	cloud, err := sim.New(sim.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns}, Data: map[string][]byte{
		v1alpha1.UserDataKey: []byte("join --token <<BOOTSTRAP_TOKEN>> --node <<MACHINE_NAME>>"), sim.CredentialsKey: []byte("t")}}
	class := &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}, Provider: sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{Zone: "z", InstanceType: "m"}.RawExtension(),
		SecretRef:    &corev1.SecretReference{Name: "s"}}
	w := &tokenWorld{mc: fake.NewSimpleClientset(class), core: k8sfake.NewSimpleClientset(secret), target: k8sfake.NewSimpleClientset(),
		cloud: cloud, events: record.NewFakeRecorder(100)}
	w.target.PrependReactor("delete", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if w.deleteFail.Load() {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, a.(k8stesting.DeleteAction).GetName(), errors.New("RBAC says no"))
		}
		return false, nil, nil
	})
	mf := externalversions.NewSharedInformerFactoryWithOptions(w.mc, 0, externalversions.WithNamespace(ns))
	kf := informers.NewSharedInformerFactoryWithOptions(w.core, 0, informers.WithNamespace(ns))
	tf := informers.NewSharedInformerFactory(w.target, 0)
	w.c, err = NewController(w.mc, w.core, w.target, Informers{
		Machines: mf.Machine().V1alpha1().Machines(),
		Classes:  mf.Machine().V1alpha1().MachineClasses(),
		Secrets:  kf.Core().V1().Secrets(),
		Nodes:    tf.Core().V1().Nodes(),
	}, cloud.Driver(), Options{Recorder: w.events, Drainer: &scriptedDrainer{res: drain.Result{Plan: drain.Plan{Done: true}}},
		BootstrapTokenAuthExtraGroups: []string{"system:bootstrappers:pool"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); mf.Shutdown(); kf.Shutdown(); tf.Shutdown() })
	mf.Start(ctx.Done())
	kf.Start(ctx.Done())
	tf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), w.c.synced()...) {
		t.Fatal("caches did not sync")
	}
	return w
}

func (w *tokenWorld) machine(t *testing.T, name string) *v1alpha1.Machine {
	t.Helper()
	obj, err := w.mc.Tracker().Get(v1alpha1.SchemeGroupVersion.WithResource("machines"), "ns", name)
	if err != nil {
		return nil
	}
	return obj.(*v1alpha1.Machine)
}

func (w *tokenWorld) reconcile(name string) func() error {
	return func() error { _, err := w.c.ReconcileMachine(context.Background(), "ns/"+name); return err }
}

// tokens returns the bootstrap token Secrets in the target's kube-system.
func (w *tokenWorld) tokens(t *testing.T) []corev1.Secret {
	t.Helper()
	list, err := w.target.CoreV1().Secrets("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// createUnjoined creates machine name and syncs it until its VM exists,
// its node not registered.
func (w *tokenWorld) createUnjoined(t *testing.T, name string) *v1alpha1.Machine {
	t.Helper()
	ctx := context.Background()
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "c"}}}
	if _, err := w.mc.MachineV1alpha1().Machines("ns").Create(ctx, m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "class finalizer", func() error { _, err := w.c.ReconcileMachineClass(ctx, "ns/c"); return err }, func() bool {
		cl, err := w.mc.MachineV1alpha1().MachineClasses("ns").Get(ctx, "c", metav1.GetOptions{})
		return err == nil && slices.Contains(cl.Finalizers, v1alpha1.MachineFinalizer)
	})
	// Its status waits for the node (Options.PendingDelay); the provider
	// ID says the VM was created.
	eventually(t, "machine's VM created", w.reconcile(name), func() bool {
		got := w.machine(t, name)
		return got != nil && got.Spec.ProviderID != ""
	})
	return w.machine(t, name)
}

// TestBootstrapTokenLifecycle: the token is issued before the VM is
// created, reaches the driver in the user data, and is deleted when the
// machine joins; a failed deletion does not keep the machine from Running
// and is retried until it succeeds.
func TestBootstrapTokenLifecycle(t *testing.T) {
	w := newTokenWorld(t)
	m := w.createUnjoined(t, "pool-abc12")
	tokens := w.tokens(t)
	if len(tokens) != 1 || tokens[0].Name != "bootstrap-token-"+mcmFormula(m.Name) ||
		tokens[0].Annotations[bootstrapTokenMachineAnnotation] != "ns/pool-abc12" ||
		string(tokens[0].Data["auth-extra-groups"]) != "system:bootstrappers:pool" {
		t.Fatalf("tokens in kube-system: %+v", tokens)
	}
	vm, ok := w.cloud.VM(m.Spec.ProviderID)
	if !ok {
		t.Fatalf("no VM %s", m.Spec.ProviderID)
	}
	want := fmt.Sprintf("join --token %s.%s --node pool-abc12", tokens[0].Data["token-id"], tokens[0].Data["token-secret"])
	if string(vm.UserData) != want {
		t.Errorf("VM user data %q, want %q", vm.UserData, want)
	}

	// The node registers and is Ready; deleting the token is denied.
	w.deleteFail.Store(true)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.Labels[v1alpha1.NodeLabelKey]},
		Spec:   corev1.NodeSpec{ProviderID: m.Spec.ProviderID},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if _, err := w.target.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	eventually(t, "machine Running, token cleanup pending", func() error {
		lastErr = w.reconcile(m.Name)()
		return nil
	}, func() bool {
		got := w.machine(t, m.Name)
		_, pending := got.Annotations[bootstrapTokenCleanupAnnotation]
		return got.Status.CurrentStatus.Phase == v1alpha1.MachineRunning && pending
	})
	if !apierrors.IsForbidden(lastErr) || len(w.tokens(t)) != 1 {
		t.Errorf("sync error %v, %d tokens: want the denial reported and the token still there", lastErr, len(w.tokens(t)))
	}
	// Retried by later syncs, which see no join: once allowed, the token
	// and the mark go.
	w.deleteFail.Store(false)
	eventually(t, "token deleted, mark removed", w.reconcile(m.Name), func() bool {
		_, pending := w.machine(t, m.Name).Annotations[bootstrapTokenCleanupAnnotation]
		return !pending && len(w.tokens(t)) == 0
	})
	if got := w.machine(t, m.Name); got.Status.CurrentStatus.Phase != v1alpha1.MachineRunning {
		t.Errorf("phase %s after the cleanup", got.Status.CurrentStatus.Phase)
	}
	// A synced machine with nothing pending makes no more token calls
	// (once the cache shows it: the fake clientsets keep no
	// resourceVersions for the controller to wait on).
	eventually(t, "cache without the mark", func() error { return nil }, func() bool {
		cached, err := w.c.machines.Machines("ns").Get(m.Name)
		if err != nil {
			return false
		}
		_, pending := cached.Annotations[bootstrapTokenCleanupAnnotation]
		return cached.Status.CurrentStatus.Phase == v1alpha1.MachineRunning && !pending
	})
	before := len(w.target.Actions())

	for range 3 {
		if err := w.reconcile(m.Name)(); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range w.target.Actions()[before:] {
		if a.GetResource().Resource == "secrets" {
			t.Errorf("a settled machine's sync called %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// TestBootstrapTokenGoesWithMachine: a machine deleted before it joined
// leaves no token; another machine's token that shares its first ID stays;
// a denied deletion keeps the machine's finalizer until it succeeds.
func TestBootstrapTokenGoesWithMachine(t *testing.T) {
	w := newTokenWorld(t)
	other := ownToken(mcmFormula("pool-abc12"), "ns/pool-abc99", "0123456789abcdef", time.Now().Add(time.Hour))
	if _, err := w.target.CoreV1().Secrets("kube-system").Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m := w.createUnjoined(t, "pool-abc12")
	if n := len(w.tokens(t)); n != 2 {
		t.Fatalf("%d tokens, want the other machine's and one under the second ID", n)
	}
	vm, _ := w.cloud.VM(m.Spec.ProviderID)
	if strings.Contains(string(vm.UserData), "0123456789abcdef") {
		t.Fatalf("the machine got the other machine's token: %q", vm.UserData)
	}

	w.deleteFail.Store(true)
	del := m.DeepCopy()
	del.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if err := w.mc.Tracker().Update(v1alpha1.SchemeGroupVersion.WithResource("machines"), del, "ns"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deletion at its last step", w.reconcile(m.Name), func() bool {
		return w.machine(t, m.Name).Annotations[DeletionStepAnnotation] == string(StepRemoveFinalizer)
	})
	for range 3 {
		if err := w.reconcile(m.Name)(); !apierrors.IsForbidden(err) {
			t.Fatalf("sync with the token deletion denied: %v", err)
		}
	}
	if !slices.Contains(w.machine(t, m.Name).Finalizers, v1alpha1.MachineFinalizer) {
		t.Fatal("finalizer removed while the token could not be deleted")
	}
	w.deleteFail.Store(false)
	eventually(t, "finalizer removed", w.reconcile(m.Name), func() bool {
		return !slices.Contains(w.machine(t, m.Name).Finalizers, v1alpha1.MachineFinalizer)
	})
	tokens := w.tokens(t)
	if len(tokens) != 1 || tokens[0].Name != other.Name {
		t.Errorf("tokens left %v, want only the other machine's %s", tokens, other.Name)
	}
}

// TestBootstrapTokenFailureIsACreateFailure: a token that cannot be issued
// (RBAC) is a failed creation: CrashLoopBackOff, errorCode
// PermissionDenied, a description and an event that say so, no driver
// call, and retries that back off.
func TestBootstrapTokenFailureIsACreateFailure(t *testing.T) {
	w := newTokenWorld(t)
	w.target.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errors.New(`User "mcm" cannot create resource "secrets" in API group "" in the namespace "kube-system"`))
	})
	ctx := context.Background()
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "pool-abc12", Namespace: "ns"},
		Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "c"}}}
	if _, err := w.mc.MachineV1alpha1().Machines("ns").Create(ctx, m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "class finalizer", func() error { _, err := w.c.ReconcileMachineClass(ctx, "ns/c"); return err }, func() bool {
		cl, err := w.mc.MachineV1alpha1().MachineClasses("ns").Get(ctx, "c", metav1.GetOptions{})
		return err == nil && slices.Contains(cl.Finalizers, v1alpha1.MachineFinalizer)
	})
	var delays []time.Duration
	var lastErr error
	eventually(t, "two failed attempts", func() error {
		res, err := w.c.ReconcileMachine(ctx, "ns/pool-abc12")
		if err != nil {
			delays, lastErr = append(delays, res.RequeueAfter), err
		}
		return nil
	}, func() bool { return len(delays) >= 2 })
	if driver.CodeOf(lastErr) != driver.PermissionDenied {
		t.Errorf("sync error %v, want PermissionDenied", lastErr)
	}
	if diff := cmp.Diff([]time.Duration{DefaultMediumRetry, 2 * DefaultMediumRetry}, delays[:2]); diff != "" {
		t.Errorf("retry delays (-want +got):\n%s", diff)
	}
	got := w.machine(t, "pool-abc12")
	op := got.Status.LastOperation
	if got.Status.CurrentStatus.Phase != v1alpha1.MachineCrashLoopBackOff || op.State != v1alpha1.MachineStateFailed ||
		op.Type != v1alpha1.MachineOperationCreate || op.ErrorCode != "PermissionDenied" ||
		!strings.Contains(op.Description, "Issuing the bootstrap token in the target cluster failed") ||
		!strings.Contains(op.Description, "creating bootstrap token Secret kube-system/bootstrap-token-616263 in the target cluster") ||
		!strings.Contains(op.Description, "cannot create resource") {
		t.Errorf("status %+v", got.Status)
	}
	for _, op := range driver.Operations() {
		if n := w.cloud.Calls(op); n != 0 {
			t.Errorf("driver %s called %d times without a token", op, n)
		}
	}
	select {
	case e := <-w.events.Events:
		if !strings.HasPrefix(e, "Warning CreateFailed ") || !strings.Contains(e, "bootstrap token") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no event")
	}
}
