package bootstraptoken

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// The Secret of a token, in the format of k8s.io/cluster-bootstrap.
const (
	secretType      corev1.SecretType = "bootstrap.kubernetes.io/token"
	secretPrefix                      = "bootstrap-token-"
	idKey                             = "token-id"
	secretKey                         = "token-secret"
	expirationKey                     = "expiration"
	usageAuthKey                      = "usage-bootstrap-authentication"
	usageSigningKey                   = "usage-bootstrap-signing"
	extraGroupsKey                    = "auth-extra-groups"
	descriptionKey                    = "description"
	// groupPrefix starts every extra group a bootstrap token may carry:
	// kube-apiserver's bootstrap token authenticator rejects a token with
	// any other group.
	groupPrefix = "system:bootstrappers:"

	// urlEncodedPlaceholder is url.QueryEscape of
	// v1alpha1.BootstrapTokenPlaceholder, as user data formats that
	// URL-encode their contents (Ignition) carry it.
	urlEncodedPlaceholder = "%3C%3CBOOTSTRAP_TOKEN%3E%3E"

	// machineAnnotation on a token Secret names the machine
	// ("<namespace>/<name>") it was issued for. Token IDs of different
	// machines can be equal (see ids), so the Secret's name does not say
	// whose it is; this does.
	machineAnnotation = "mcmkit.io/machine"

	tokenSecretLength   = 16
	tokenSecretAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
)

// ids returns the token IDs the machine's token may have, in the order
// they are tried; its Secret is bootstrap-token-<id>.
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
func ids(m *v1alpha1.Machine) []string {
	first := mcmID(m.Name)
	sum := sha256.Sum256([]byte(m.Namespace + "/" + m.Name))
	second := hex.EncodeToString(sum[:3])
	if second == first {
		second = hex.EncodeToString(sum[3:6])
	}
	return []string{first, second}
}

// mcmID is MCM's token ID for a machine name (see ids), defined for names
// of any length.
func mcmID(name string) string {
	b := []byte(name)
	id := hex.EncodeToString(b[max(0, len(b)-5):])
	if len(id) < 6 {
		id += strings.Repeat("0", 6-len(id))
	}
	return id[:6]
}

// HasPlaceholder reports whether user data asks for a bootstrap token,
// plainly (v1alpha1.BootstrapTokenPlaceholder) or URL-encoded.
func HasPlaceholder(userData []byte) bool {
	return bytes.Contains(userData, []byte(v1alpha1.BootstrapTokenPlaceholder)) ||
		bytes.Contains(userData, []byte(urlEncodedPlaceholder))
}

// Substitute replaces both forms of the placeholder: the plain one with
// token, the URL-encoded one with token URL-encoded.
func Substitute(userData []byte, token string) []byte {
	s := strings.ReplaceAll(string(userData), v1alpha1.BootstrapTokenPlaceholder, token)
	s = strings.ReplaceAll(s, urlEncodedPlaceholder, url.QueryEscape(token))
	return []byte(s)
}

// ValidateGroup checks an extra group of bootstrap tokens against the rule
// of kube-apiserver's bootstrap token authenticator, which rejects the
// whole token if one group breaks it: "system:bootstrappers:", then up to
// 256 of [a-z0-9:-], ending in a letter or digit.
func ValidateGroup(group string) error {
	rest, ok := strings.CutPrefix(group, groupPrefix)
	valid := ok && rest != "" && len(rest) <= 256 &&
		strings.ContainsRune("abcdefghijklmnopqrstuvwxyz0123456789", rune(rest[len(rest)-1]))
	for _, r := range rest {
		valid = valid && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == ':' || r == '-')
	}
	if !valid {
		return fmt.Errorf("%q is not a bootstrap token group: it must be %q followed by lowercase letters, digits, ':' or '-' (at most 256), ending in a letter or digit", group, groupPrefix)
	}
	return nil
}

// tokenData is the data of m's token: usable to authenticate (as
// system:bootstrap:<id>, in system:bootstrappers and the extra groups) and
// to sign the cluster-info ConfigMap, as MCM's tokens are.
func tokenData(m *v1alpha1.Machine, id, secret string, expiry time.Time, extraGroups []string) map[string][]byte {
	data := map[string][]byte{
		descriptionKey:  fmt.Appendf(nil, "Bootstrap token for machine %q in namespace %q, deleted once the machine has joined the cluster.", m.Name, m.Namespace),
		idKey:           []byte(id),
		secretKey:       []byte(secret),
		expirationKey:   []byte(expiry.UTC().Format(time.RFC3339)),
		usageAuthKey:    []byte("true"),
		usageSigningKey: []byte("true"),
	}
	if len(extraGroups) > 0 {
		data[extraGroupsKey] = []byte(strings.Join(extraGroups, ","))
	}
	return data
}

// owns reports whether s is a bootstrap token issued for m. Ours carry
// machineAnnotation. MCM's carry no mark but their description, which
// names the machine in Go's quoted form ("for machine \"<name>\""); a
// token without our annotation is m's only if its description says so.
// Anything else (a token of another machine, one made by kubeadm or by
// hand, a Secret of another type) is not m's: it is neither handed to m
// nor deleted for m.
func owns(s *corev1.Secret, m *v1alpha1.Machine) bool {
	if s.Type != secretType {
		return false
	}
	if owner, ok := s.Annotations[machineAnnotation]; ok {
		return owner == m.Namespace+"/"+m.Name
	}
	return strings.Contains(string(s.Data[descriptionKey]), "machine "+strconv.Quote(m.Name))
}

// describeOwner says whose s is, for error messages.
func describeOwner(s *corev1.Secret) string {
	if s.Type != secretType {
		return fmt.Sprintf("a Secret of type %q", s.Type)
	}
	if owner, ok := s.Annotations[machineAnnotation]; ok {
		return "machine " + owner
	}
	if d := s.Data[descriptionKey]; len(d) > 0 {
		return fmt.Sprintf("a token described as %q", d)
	}
	return "a token of unknown origin"
}

// problem says why m's token s (of the given ID) cannot be handed out as
// it is, or "" if it can: it must be well-formed, usable for
// authentication and valid until validUntil. A token without an
// expiration never expires.
func problem(s *corev1.Secret, id string, now, validUntil time.Time) string {
	switch {
	case string(s.Data[idKey]) != id:
		return "its token-id does not match its name"
	case !validTokenSecret(string(s.Data[secretKey])):
		return fmt.Sprintf("its token-secret is not %d characters of [0-9a-z]", tokenSecretLength)
	case string(s.Data[usageAuthKey]) != "true":
		return "it is not usable for authentication"
	}
	raw, ok := s.Data[expirationKey]
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
	case expiry.Before(validUntil.Truncate(time.Second)): // RFC 3339 as written has whole seconds
		return "it expires at " + expiry.UTC().Format(time.RFC3339) + ", before the machine's creation timeout ends"
	}
	return ""
}

// tokenOf is the token of s as the user data carries it: "<id>.<secret>".
func tokenOf(s *corev1.Secret) string {
	return string(s.Data[idKey]) + "." + string(s.Data[secretKey])
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
