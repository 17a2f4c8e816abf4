package bootstraptoken

import (
	"encoding/hex"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
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

func TestIDs(t *testing.T) {
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
			got := ids(tokenMachine("ns", tc.name))
			if len(got) != 2 || got[0] != tc.wantFirst {
				t.Fatalf("IDs %v, want %q first", got, tc.wantFirst)
			}
			if got[0] == got[1] {
				t.Errorf("both IDs are %q", got[0])
			}
			for _, id := range got {
				if !tokenIDPattern.MatchString(id) {
					t.Errorf("ID %q is not a valid bootstrap token ID", id)
				}
			}
			if again := ids(tokenMachine("ns", tc.name)); !slices.Equal(again, got) {
				t.Errorf("IDs not stable: %v then %v", got, again)
			}
		})
	}
	// Machines whose first IDs collide have different second IDs, and the
	// second depends on the namespace too.
	a, b := ids(tokenMachine("ns", "pool-abc12")), ids(tokenMachine("ns", "pool-abc99"))
	if a[0] != b[0] || a[1] == b[1] {
		t.Errorf("IDs %v and %v: want the same first, different second", a, b)
	}
	if c := ids(tokenMachine("other", "pool-abc12")); c[1] == a[1] {
		t.Errorf("second ID %q does not depend on the namespace", c[1])
	}
}

func TestSubstitute(t *testing.T) {
	if urlEncodedPlaceholder != url.QueryEscape(v1alpha1.BootstrapTokenPlaceholder) {
		t.Fatalf("URL-encoded placeholder %q, want %q", urlEncodedPlaceholder, url.QueryEscape(v1alpha1.BootstrapTokenPlaceholder))
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
			if got := HasPlaceholder([]byte(tc.in)); got != tc.asks {
				t.Errorf("asks for a token: %v, want %v", got, tc.asks)
			}
			if got := string(Substitute([]byte(tc.in), token)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRandomTokenSecret(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		s, err := randomTokenSecret()
		if err != nil {
			t.Fatal(err)
		}
		if !validTokenSecret(s) || !regexp.MustCompile(`\A[0-9a-z]{16}\z`).MatchString(s) {
			t.Fatalf("secret %q is not 16 of [0-9a-z]", s)
		}
		if seen[s] {
			t.Fatalf("secret %q drawn twice", s)
		}
		seen[s] = true
	}
}
